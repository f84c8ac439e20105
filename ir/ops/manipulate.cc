// Shape manipulation: reshape, permute_dims, concat, split, strided_slice,
// squeeze, expand_dims, broadcast_to, take, shape_of and the constant
// tensors full / zeros / ones. None of them computes on the elements'
// values, only moves, selects or repeats them.
#include <algorithm>

#include "ir/ops/common.h"

namespace relax {
namespace {

using namespace ops;

StructInfo infer_reshape(const CallNode& call, const InferContext& ctx) {
  attrs_of(call);
  const std::string& op = op_name(call);
  TensorInfo x = tensor_arg(call, 0);
  ShapeInfo s = shape_arg(call, 1);
  if (!s.values) return tensor_si_ndim(x.dtype, s.ndim);
  check_dims_nonnegative(op, *s.values, ctx.ana);
  if (x.shape) {
    SymExpr from = ctx.ana.simplify(product(*x.shape)), to = ctx.ana.simplify(product(*s.values));
    if (ctx.ana.can_prove_not_equal(from, to)) fail(op, ": cannot reshape ", from, " elements into ", to);
  }
  return tensor_si(x.dtype, *s.values);
}

StructInfo infer_permute_dims(const CallNode& call, const InferContext&) {
  std::vector<int64_t> axes = attrs_of(call).get_ints("axes");
  const std::string& op = op_name(call);
  TensorInfo x = tensor_arg(call, 0);
  if (x.unknown_rank()) return tensor_si_ndim(x.dtype, axes.empty() ? -1 : int(axes.size()));
  if (!axes.empty() && int(axes.size()) != x.ndim)
    fail(op, ": ", axes.size(), " axes given for a tensor of rank ", x.ndim);
  std::vector<int> perm;
  if (axes.empty()) {
    for (int i = x.ndim - 1; i >= 0; --i) perm.push_back(i);
  } else {
    perm = normalize_axes(op, axes, x.ndim);  // n distinct axes of n: a permutation
  }
  if (!x.shape) return tensor_si_ndim(x.dtype, x.ndim);
  Dims out;
  for (int p : perm) out.push_back((*x.shape)[p]);
  return tensor_si(x.dtype, std::move(out));
}

StructInfo infer_concat(const CallNode& call, const InferContext& ctx) {
  int64_t axis = attrs_of(call).get_int("axis");
  const std::string& op = op_name(call);
  std::vector<StructInfo> fields = tuple_arg(call, 0);
  if (fields.empty()) fail(op, ": needs at least one tensor");
  std::vector<TensorInfo> ts;
  for (size_t i = 0; i < fields.size(); ++i) ts.push_back(tensor_info(op, fields[i], cat("input ", i), false));

  // The dtype is known only when every input's is; two known ones must agree.
  DataType dtype, known_dtype;
  bool any_void = false;
  int ndim = -1;
  bool all_shapes = true;
  for (size_t i = 0; i < ts.size(); ++i) {
    const TensorInfo& t = ts[i];
    if (t.dtype.is_void()) {
      any_void = true;
    } else if (known_dtype.is_void()) {
      known_dtype = t.dtype;
    } else if (t.dtype != known_dtype) {
      fail(op, ": dtypes ", known_dtype, " and ", t.dtype, " differ (input ", i, ")");
    }
    if (!t.unknown_rank()) {
      if (ndim >= 0 && t.ndim != ndim) fail(op, ": input ", i, " has rank ", t.ndim, ", expected ", ndim);
      ndim = t.ndim;
    }
    all_shapes = all_shapes && t.shape.has_value();
  }
  if (!any_void) dtype = known_dtype;
  if (ndim < 0) return tensor_si_ndim(dtype, -1);
  int ax = normalize_axis(op, axis, ndim);
  if (!all_shapes) return tensor_si_ndim(dtype, ndim);

  Dims out = *ts[0].shape;
  SymExpr total = 0;
  bool known = true;
  for (size_t i = 0; i < ts.size(); ++i) {
    const Dims& d = *ts[i].shape;
    total = total + d[ax];
    for (int j = 0; j < ndim; ++j) {
      if (j == ax || d[j] == out[j] || ctx.ana.can_prove_equal(d[j], out[j])) continue;
      if (ctx.ana.can_prove_not_equal(d[j], out[j]))
        fail(op, ": dim ", j, " of input ", i, " is ", d[j], " but input 0 has ", out[j]);
      known = false;
    }
  }
  if (!known) return tensor_si_ndim(dtype, ndim);
  out[ax] = ctx.ana.simplify(total);
  return tensor_si(dtype, std::move(out));
}

StructInfo infer_split(const CallNode& call, const InferContext& ctx) {
  Attrs attrs = attrs_of(call);
  const std::string& op = op_name(call);
  int64_t sections = attrs.get_int("sections");
  std::vector<int64_t> indices = attrs.get_ints("indices");
  if (sections < 0) fail(op, ": sections must be positive, got ", sections);
  if (sections > 0 && !indices.empty()) fail(op, ": give sections or indices, not both");
  for (int64_t i : indices)
    if (i < 0) fail(op, ": index ", i, " is negative");
  TensorInfo x = tensor_arg(call, 0);
  size_t n = sections > 0 ? size_t(sections) : indices.size() + 1;
  auto uniform = [&](int ndim) { return tuple_si(std::vector<StructInfo>(n, tensor_si_ndim(x.dtype, ndim))); };
  if (x.unknown_rank()) return uniform(-1);
  int ax = normalize_axis(op, attrs.get_int("axis"), x.ndim);
  if (!x.shape) return uniform(x.ndim);

  SymExpr dim = (*x.shape)[ax];
  std::vector<SymExpr> parts;
  if (sections > 0) {
    Tri divisible = ctx.ana.prove_divisible(dim, sections);
    if (divisible == Tri::No)
      fail(op, ": dim ", dim, " at axis ", ax, " does not split into ", sections, " equal sections");
    if (divisible == Tri::Unknown) return uniform(x.ndim);
    parts.assign(n, ctx.ana.simplify(floordiv(dim, SymExpr(sections))));
  } else {
    SymExpr prev = 0;
    indices.push_back(-1);  // the last part runs to the end
    for (int64_t i : indices) {
      SymExpr stop = i < 0 ? dim : min(SymExpr(i), dim);
      parts.push_back(ctx.ana.simplify(max(SymExpr(0), stop - min(prev, dim))));
      prev = SymExpr(i);
    }
  }
  std::vector<StructInfo> fields;
  for (const SymExpr& p : parts) {
    Dims d = *x.shape;
    d[ax] = p;
    fields.push_back(tensor_si(x.dtype, std::move(d)));
  }
  return tuple_si(std::move(fields));
}

StructInfo infer_strided_slice(const CallNode& call, const InferContext& ctx) {
  Attrs attrs = attrs_of(call);
  const std::string& op = op_name(call);
  std::vector<int64_t> axes = attrs.get_ints("axes"), strides = attrs.get_ints("strides");
  std::vector<SymExpr> begin = get_syms(attrs, "begin"), end = get_syms(attrs, "end");
  if (begin.size() != axes.size() || end.size() != axes.size() || (!strides.empty() && strides.size() != axes.size()))
    fail(op, ": axes, begin, end and strides must have the same length, got ", axes.size(), ", ", begin.size(), ", ",
         end.size(), " and ", strides.size());
  if (strides.empty()) strides.assign(axes.size(), 1);
  for (int64_t s : strides)
    if (s == 0) fail(op, ": stride 0");
  TensorInfo x = tensor_arg(call, 0);
  if (x.unknown_rank()) return tensor_si_ndim(x.dtype, -1);
  std::vector<int> norm = normalize_axes(op, axes, x.ndim);
  if (!x.shape) return tensor_si_ndim(x.dtype, x.ndim);

  const Analyzer& ana = ctx.ana;
  Dims out = *x.shape;
  for (size_t i = 0; i < norm.size(); ++i) {
    int ax = norm[i];
    SymExpr d = out[ax], b = begin[i], e = end[i];
    int64_t s = strides[i];
    if (ana.prove_less(b, 0) == Tri::Yes) fail(op, ": begin ", b, " at axis ", ax, " is negative");
    SymExpr len;
    if (s > 0) {
      // Elements b, b+s, ... below e, with both clamped to [0, d].
      if (ana.prove_less(e, 0) == Tri::Yes) fail(op, ": end ", e, " at axis ", ax, " is negative");
      len = floordiv(min(e, d) - min(b, d) + (s - 1), SymExpr(s));
    } else {
      // Elements b, b-|s|, ... above e, with b clamped to d-1 and e in [-1, d-1].
      if (ana.prove_less(e, -1) == Tri::Yes) fail(op, ": end ", e, " at axis ", ax, " is below -1");
      len = floordiv(min(b, d - 1) - min(e, d - 1) + (-s - 1), SymExpr(-s));
    }
    out[ax] = ana.simplify(max(SymExpr(0), len));
  }
  return tensor_si(x.dtype, std::move(out));
}

StructInfo infer_squeeze(const CallNode& call, const InferContext& ctx) {
  std::vector<int64_t> axes = attrs_of(call).get_ints("axis");
  const std::string& op = op_name(call);
  TensorInfo x = tensor_arg(call, 0);
  if (x.unknown_rank()) return tensor_si_ndim(x.dtype, -1);
  std::vector<bool> drop(x.ndim, false);
  if (axes.empty()) {
    // Every dim that is 1; if some dim might or might not be 1, the rank is unknown.
    if (!x.shape) return tensor_si_ndim(x.dtype, -1);
    for (int i = 0; i < x.ndim; ++i) {
      const SymExpr& d = (*x.shape)[i];
      if (ctx.ana.can_prove_equal(d, 1)) {
        drop[i] = true;
      } else if (!ctx.ana.can_prove_not_equal(d, 1)) {
        return tensor_si_ndim(x.dtype, -1);
      }
    }
  } else {
    std::vector<int> norm = normalize_axes(op, axes, x.ndim);
    if (!x.shape) return tensor_si_ndim(x.dtype, x.ndim - int(norm.size()));
    for (int ax : norm) {
      const SymExpr& d = (*x.shape)[ax];
      if (ctx.ana.can_prove_not_equal(d, 1)) fail(op, ": dim ", ax, " is ", d, ", not 1");
      drop[ax] = true;
    }
  }
  Dims out;
  for (int i = 0; i < x.ndim; ++i)
    if (!drop[i]) out.push_back((*x.shape)[i]);
  return tensor_si(x.dtype, std::move(out));
}

StructInfo infer_expand_dims(const CallNode& call, const InferContext&) {
  std::vector<int64_t> axes = attrs_of(call).get_ints("axis");
  const std::string& op = op_name(call);
  TensorInfo x = tensor_arg(call, 0);
  if (x.unknown_rank()) return tensor_si_ndim(x.dtype, -1);
  int ndim = x.ndim + int(axes.size());
  std::vector<int> norm = normalize_axes(op, axes, ndim);
  if (!x.shape) return tensor_si_ndim(x.dtype, ndim);
  Dims out(ndim);
  for (int ax : norm) out[ax] = 1;
  size_t next = 0;
  for (SymExpr& d : out)
    if (!d.defined()) d = (*x.shape)[next++];
  return tensor_si(x.dtype, std::move(out));
}

StructInfo infer_broadcast_to(const CallNode& call, const InferContext& ctx) {
  attrs_of(call);
  const std::string& op = op_name(call);
  TensorInfo x = tensor_arg(call, 0);
  ShapeInfo s = shape_arg(call, 1);
  if (!x.unknown_rank() && s.ndim >= 0 && x.ndim > s.ndim)
    fail(op, ": cannot broadcast a rank-", x.ndim, " tensor to rank ", s.ndim);
  if (!s.values) return tensor_si_ndim(x.dtype, s.ndim);
  const Dims& to = *s.values;
  check_dims_nonnegative(op, to, ctx.ana);
  if (x.shape) {
    for (int i = 0; i < x.ndim; ++i) {
      int j = i + s.ndim - x.ndim;
      const SymExpr &from = (*x.shape)[i], &target = to[j];
      if (from == target || from.is_const(1)) continue;
      if (ctx.ana.can_prove_not_equal(from, target) && ctx.ana.can_prove_not_equal(from, 1))
        fail(op, ": cannot broadcast dim ", from, " to ", target, " at axis ", j);
    }
  }
  return tensor_si(x.dtype, to);
}

StructInfo infer_take(const CallNode& call, const InferContext&) {
  int64_t axis = attrs_of(call).get_int("axis");
  const std::string& op = op_name(call);
  TensorInfo x = tensor_arg(call, 0), idx = tensor_arg(call, 1, true);
  require_integer(op, idx.dtype, "the indices", false);
  if (x.unknown_rank() || idx.unknown_rank()) return tensor_si_ndim(x.dtype, -1);
  int ax = normalize_axis(op, axis, x.ndim);
  int ndim = x.ndim - 1 + idx.ndim;
  if (!x.shape || !idx.shape) return tensor_si_ndim(x.dtype, ndim);
  const Dims& xs = *x.shape;
  Dims out(xs.begin(), xs.begin() + ax);
  out.insert(out.end(), idx.shape->begin(), idx.shape->end());
  out.insert(out.end(), xs.begin() + ax + 1, xs.end());
  return tensor_si(x.dtype, std::move(out));
}

StructInfo infer_shape_of(const CallNode& call, const InferContext&) {
  attrs_of(call);
  TensorInfo x = tensor_arg(call, 0);
  if (x.shape) return shape_si(*x.shape);
  return shape_si_ndim(x.ndim);
}

StructInfo constant_tensor(const std::string& op, const ShapeInfo& s, DataType dtype, const Analyzer& ana) {
  if (!s.values) return tensor_si_ndim(dtype, s.ndim);
  check_dims_nonnegative(op, *s.values, ana);
  return tensor_si(dtype, *s.values);
}

StructInfo infer_full(const CallNode& call, const InferContext& ctx) {
  DataType dtype = attrs_of(call).get_dtype("dtype");
  const std::string& op = op_name(call);
  ShapeInfo s = shape_arg(call, 0);
  TensorInfo fill = tensor_arg(call, 1, true);
  if (fill.ndim > 0) fail(op, ": fill_value must be a scalar, got a rank-", fill.ndim, " tensor");
  if (dtype.is_void()) dtype = fill.dtype;
  return constant_tensor(op, s, dtype, ctx.ana);
}

StructInfo infer_zeros_ones(const CallNode& call, const InferContext& ctx) {
  DataType dtype = attrs_of(call).get_dtype("dtype");
  return constant_tensor(op_name(call), shape_arg(call, 0), dtype, ctx.ana);
}

StructInfo infer_shape_to_tensor(const CallNode& call, const InferContext&) {
  DataType dtype = attrs_of(call).get_dtype("dtype");
  ShapeInfo s = shape_arg(call, 0);
  if (s.ndim < 0) return tensor_si_ndim(dtype, 1);
  return tensor_si(dtype, {SymExpr(int64_t(s.ndim))});
}

StructInfo infer_tensor_to_shape(const CallNode& call, const InferContext&) {
  attrs_of(call);
  const std::string& op = op_name(call);
  TensorInfo t = tensor_arg(call, 0);
  require_integer(op, t.dtype, "the input", false);
  if (!t.unknown_rank() && t.ndim != 1) fail(op, ": needs a rank-1 tensor, got rank ", t.ndim);
  if (t.shape && (*t.shape)[0].is_const()) return shape_si_ndim(int((*t.shape)[0].const_value()));
  return shape_si_ndim(-1);
}
}  // namespace

void register_manipulate_ops(OpRegistry& reg) {
  using T = AttrType;
  reg.add("reshape")
      .doc(
          "reshape(x, shape): x's elements in row-major order laid out in the given shape; the element "
          "counts must agree. No dim is special (-1 and 0 are resolved by the frontend).")
      .args(2)
      .infer(infer_reshape);
  reg.add("permute_dims")
      .doc(
          "permute_dims(x, axes=[...]): result dim i is x's dim axes[i]; no axes reverses the dims (a "
          "matrix transpose for rank 2).")
      .args(1)
      .attr("axes", T::Ints, std::vector<int64_t>{})
      .infer(infer_permute_dims);
  reg.add("concat")
      .doc(
          "concat((x0, x1, ...), axis=a): the tensors joined along axis a; every other dim must agree and "
          "the joined dim is the sum.")
      .args(1)
      .attr("axis", T::Int, int64_t(0))
      .infer(infer_concat);
  reg.add("split")
      .doc(
          "split(x, sections=n | indices=[...], axis=a): a tuple of slices of x along axis a: n equal parts "
          "(the dim must divide), or the parts between consecutive indices (clamped to the dim, numpy "
          "style). Neither given: one part, x itself.")
      .args(1)
      .attr("sections", T::Int, int64_t(0))
      .attr("indices", T::Ints, std::vector<int64_t>{})
      .attr("axis", T::Int, int64_t(0))
      .infer(infer_split);
  reg.add("strided_slice")
      .doc(
          "strided_slice(x, axes, begin, end, strides): along each listed axis keeps the elements begin, "
          "begin+stride, ... up to (excluding) end, clamped to the dim as in numpy. begin and end are "
          "non-negative (the frontend normalises them; end may be -1 with a negative stride to run through "
          "element 0); strides default to 1.")
      .args(1)
      .attr("axes", T::Ints)
      .attr("begin", T::Syms)
      .attr("end", T::Syms)
      .attr("strides", T::Ints, std::vector<int64_t>{})
      .infer(infer_strided_slice);
  reg.add("squeeze")
      .doc("squeeze(x, axis=[...]): x without the listed unit dims; no axes removes every dim of size 1.")
      .args(1)
      .attr("axis", T::Ints, std::vector<int64_t>{})
      .infer(infer_squeeze);
  reg.add("expand_dims")
      .doc(
          "expand_dims(x, axis=[...]): x with a unit dim inserted at each listed axis (axes index the "
          "result).")
      .args(1)
      .attr("axis", T::Ints)
      .infer(infer_expand_dims);
  reg.add("broadcast_to")
      .doc(
          "broadcast_to(x, shape): x repeated along unit or missing leading dims to the given shape "
          "(numpy broadcasting).")
      .args(2)
      .infer(infer_broadcast_to);
  reg.add("take")
      .doc(
          "take(x, indices, axis=a): gathers along axis a; the result's shape is x.shape[:a] + "
          "indices.shape + x.shape[a+1:]. Indices are integers in [-dim, dim), negative ones counting from the "
          "end; one outside fails the run, naming the node (relax.kernel_status).")
      .args(2)
      .attr("axis", T::Int, int64_t(0))
      .infer(infer_take);
  reg.add("shape_of")
      .doc("shape_of(x): the shape of tensor x as a shape value.")
      .args(1)
      .lowering(OpLowering::VM)
      .infer(infer_shape_of);
  reg.add("full")
      .doc(
          "full(shape, fill_value, dtype=D): a tensor of the given shape with every element fill_value (a "
          "scalar), converted to D; D defaults to fill_value's dtype.")
      .args(2)
      .attr("dtype", T::DType, DataType::void_())
      .infer(infer_full);
  reg.add("zeros")
      .doc("zeros(shape, dtype=D): a tensor of the given shape and dtype filled with 0.")
      .args(1)
      .attr("dtype", T::DType)
      .infer(infer_zeros_ones);
  reg.add("ones")
      .doc("ones(shape, dtype=D): a tensor of the given shape and dtype filled with 1.")
      .args(1)
      .attr("dtype", T::DType)
      .infer(infer_zeros_ones);
  reg.add("shape_to_tensor")
      .doc("shape_to_tensor(shape, dtype=i64): the shape's values as a rank-1 tensor of the given integer dtype.")
      .args(1)
      .attr("dtype", T::DType, DataType::i64())
      .lowering(OpLowering::VM)
      .infer(infer_shape_to_tensor);
  reg.add("tensor_to_shape")
      .doc(
          "tensor_to_shape(t): the elements of a rank-1 integer tensor as a shape value (its rank is t's "
          "length when known; its values are known only at run time).")
      .args(1)
      .lowering(OpLowering::VM)
      .infer(infer_tensor_to_shape);
}

}  // namespace relax
