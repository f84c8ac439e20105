// Indexing and data-movement ops that the manipulation family lacks:
// element gathers and scatters, one_hot, nonzero, unique, trilu, pad, tile,
// arange, eye, reverse_sequence, col2im and a slice whose bounds are
// tensors. Unless an op says otherwise, index operands are integer tensors
// whose negative entries count from the end of their dim.
#include <algorithm>

#include "ir/ops/common.h"

namespace relax {
namespace {

using namespace ops;

// Errors unless `value` is one of `allowed`.
void require_one_of(const std::string& op, const std::string& attr, const std::string& value,
                    std::initializer_list<const char*> allowed) {
  for (const char* a : allowed)
    if (value == a) return;
  std::string list;
  for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
  fail(op, ": ", attr, " must be one of ", list, ", got '", value, "'");
}

// Errors when two dims are provably different.
void require_same_dim(const std::string& op, const SymExpr& a, const SymExpr& b, const std::string& what,
                      const Analyzer& ana) {
  if (ana.can_prove_not_equal(a, b)) fail(op, ": ", what, ": ", a, " and ", b, " differ");
}

StructInfo infer_gather_elements(const CallNode& call, const InferContext&) {
  int64_t axis = attrs_of(call).get_int("axis");
  const std::string& op = op_name(call);
  TensorInfo x = tensor_arg(call, 0), idx = tensor_arg(call, 1);
  require_integer(op, idx.dtype, "the indices", false);
  int ndim = x.unknown_rank() ? idx.ndim : x.ndim;
  if (!x.unknown_rank() && !idx.unknown_rank() && x.ndim != idx.ndim)
    fail(op, ": the indices have rank ", idx.ndim, " but the data has rank ", x.ndim);
  if (ndim >= 0) normalize_axis(op, axis, ndim);
  return make_tensor(x.dtype, ndim, idx.shape);
}

StructInfo infer_gather_nd(const CallNode& call, const InferContext& ctx) {
  int64_t b = attrs_of(call).get_int("batch_dims");
  const std::string& op = op_name(call);
  TensorInfo x = tensor_arg(call, 0), idx = tensor_arg(call, 1);
  require_integer(op, idx.dtype, "the indices", false);
  if (b < 0) fail(op, ": batch_dims ", b, " is negative");
  if (x.unknown_rank() || !idx.shape) return tensor_si_ndim(x.dtype, -1);
  if (idx.ndim < 1) fail(op, ": the indices must have rank >= 1");
  const SymExpr& last = idx.shape->back();
  if (!last.is_const()) return tensor_si_ndim(x.dtype, -1);
  int64_t m = last.const_value();
  if (b >= std::min<int64_t>(x.ndim, idx.ndim)) fail(op, ": batch_dims ", b, " must be below both ranks");
  if (m < 1 || b + m > x.ndim)
    fail(op, ": index tuples of length ", m, " do not fit rank ", x.ndim, " after ", b, " batch dims");
  int ndim = idx.ndim - 1 + x.ndim - int(m) - int(b);
  if (!x.shape) return tensor_si_ndim(x.dtype, ndim);
  for (int64_t i = 0; i < b; ++i) require_same_dim(op, (*x.shape)[i], (*idx.shape)[i], cat("batch dim ", i), ctx.ana);
  Dims out(idx.shape->begin(), idx.shape->end() - 1);
  out.insert(out.end(), x.shape->begin() + b + m, x.shape->end());
  return tensor_si(x.dtype, std::move(out));
}

// Scatters leave the data's struct info as it is.
// A scatter's data, indices and updates (argument 0, 1, 2), with its
// reduction, the indices' dtype and the updates' checked.
struct ScatterArgs {
  TensorInfo x, idx, upd;
};
ScatterArgs scatter_args(const CallNode& call) {
  const std::string& op = op_name(call);
  require_one_of(op, "reduction", attrs_of(call).get_string("reduction"), {"none", "add", "mul", "max", "min"});
  ScatterArgs a{tensor_arg(call, 0), tensor_arg(call, 1), tensor_arg(call, 2)};
  require_integer(op, a.idx.dtype, "the indices", false);
  common_dtype(op, a.x.dtype, a.upd.dtype);
  return a;
}

StructInfo infer_scatter_elements(const CallNode& call, const InferContext& ctx) {
  Attrs attrs = attrs_of(call);
  const std::string& op = op_name(call);
  auto [x, idx, upd] = scatter_args(call);
  for (const TensorInfo* t : {&idx, &upd})
    if (!x.unknown_rank() && !t->unknown_rank() && t->ndim != x.ndim)
      fail(op, ": indices and updates must have the data's rank ", x.ndim, ", got ", t->ndim);
  if (!x.unknown_rank()) normalize_axis(op, attrs.get_int("axis"), x.ndim);
  if (idx.shape && upd.shape && idx.ndim == upd.ndim)
    for (int i = 0; i < idx.ndim; ++i)
      require_same_dim(op, (*idx.shape)[i], (*upd.shape)[i], cat("dim ", i, " of indices and updates"), ctx.ana);
  return make_tensor(x);
}

StructInfo infer_scatter_nd(const CallNode& call, const InferContext& ctx) {
  const std::string& op = op_name(call);
  auto [x, idx, upd] = scatter_args(call);
  if (!x.shape || !idx.shape || idx.ndim < 1 || !idx.shape->back().is_const()) return make_tensor(x);
  int64_t m = idx.shape->back().const_value();
  if (m > x.ndim) fail(op, ": index tuples of length ", m, " exceed the data's rank ", x.ndim);
  // updates.shape == indices.shape[:-1] + data.shape[m:]
  Dims want(idx.shape->begin(), idx.shape->end() - 1);
  want.insert(want.end(), x.shape->begin() + m, x.shape->end());
  if (!upd.unknown_rank() && upd.ndim != int(want.size()))
    fail(op, ": updates have rank ", upd.ndim, ", expected ", want.size());
  if (upd.shape)
    for (size_t i = 0; i < want.size(); ++i)
      require_same_dim(op, (*upd.shape)[i], want[i], cat("dim ", i, " of the updates"), ctx.ana);
  return make_tensor(x);
}

// A shape argument that must hold exactly `n` values (n < 0: any number).
ShapeInfo sized_shape_arg(const CallNode& call, size_t i, int n, const std::string& what) {
  ShapeInfo s = shape_arg(call, i);
  if (n >= 0 && s.ndim >= 0 && s.ndim != n) fail(op_name(call), ": ", what, " needs ", n, " values, got ", s.ndim);
  return s;
}

StructInfo infer_one_hot(const CallNode& call, const InferContext& ctx) {
  int64_t axis = attrs_of(call).get_int("axis");
  const std::string& op = op_name(call);
  TensorInfo idx = tensor_arg(call, 0), values = tensor_arg(call, 1);
  ShapeInfo depth = sized_shape_arg(call, 2, 1, "depth");
  if (!values.unknown_rank() && values.ndim != 1) fail(op, ": values must be [off, on], a rank-1 tensor");
  if (values.shape) require_same_dim(op, (*values.shape)[0], 2, "the length of values", ctx.ana);
  if (depth.values) check_dims_nonnegative(op, *depth.values, ctx.ana);
  if (idx.unknown_rank()) return tensor_si_ndim(values.dtype, -1);
  int ax = normalize_axis(op, axis, idx.ndim + 1);
  if (!idx.shape || !depth.values) return tensor_si_ndim(values.dtype, idx.ndim + 1);
  Dims out = *idx.shape;
  out.insert(out.begin() + ax, (*depth.values)[0]);
  return tensor_si(values.dtype, std::move(out));
}

StructInfo infer_nonzero(const CallNode& call, const InferContext&) {
  attrs_of(call);
  tensor_arg(call, 0);
  return tensor_si_ndim(DataType::i64(), 2);
}

StructInfo infer_unique(const CallNode& call, const InferContext&) {
  int64_t axis = attrs_of(call).get_int("axis");
  const std::string& op = op_name(call);
  TensorInfo x = tensor_arg(call, 0);
  StructInfo vec = tensor_si_ndim(DataType::i64(), 1);
  StructInfo inverse = vec;
  if (!x.unknown_rank()) {
    if (x.ndim == 0) fail(op, ": needs a tensor of rank >= 1");
    int ax = normalize_axis(op, axis, x.ndim);
    if (x.shape) inverse = tensor_si(DataType::i64(), {(*x.shape)[ax]});
  }
  return tuple_si({tensor_si_ndim(x.dtype, x.ndim), vec, inverse, vec});
}

StructInfo infer_trilu(const CallNode& call, const InferContext&) {
  attrs_of(call);
  const std::string& op = op_name(call);
  TensorInfo x = tensor_arg(call, 0), k = tensor_arg(call, 1, true);
  require_integer(op, k.dtype, "k", false);
  if (k.ndim > 0) fail(op, ": k must be a scalar, got rank ", k.ndim);
  if (!x.unknown_rank() && x.ndim < 2) fail(op, ": needs a tensor of rank >= 2, got ", x.ndim);
  return make_tensor(x);
}

StructInfo infer_pad(const CallNode& call, const InferContext& ctx) {
  Attrs attrs = attrs_of(call);
  const std::string& op = op_name(call);
  require_one_of(op, "mode", attrs.get_string("mode"), {"constant", "reflect", "edge", "wrap"});
  TensorInfo x = tensor_arg(call, 0), value = tensor_arg(call, 2, true);
  if (value.ndim > 0) fail(op, ": the pad value must be a scalar, got rank ", value.ndim);
  common_dtype(op, x.dtype, value.dtype);
  ShapeInfo pads = shape_arg(call, 1);
  if (pads.ndim >= 0 && pads.ndim % 2) fail(op, ": pads needs an even number of values, got ", pads.ndim);
  int ndim = x.unknown_rank() ? (pads.ndim < 0 ? -1 : pads.ndim / 2) : x.ndim;
  if (ndim >= 0 && pads.ndim >= 0 && pads.ndim != 2 * ndim)
    fail(op, ": pads needs ", 2 * ndim, " values for rank ", ndim, ", got ", pads.ndim);
  if (!x.shape || !pads.values) return tensor_si_ndim(x.dtype, ndim);
  Dims out;
  for (int i = 0; i < ndim; ++i)
    out.push_back(ctx.ana.simplify((*x.shape)[i] + (*pads.values)[i] + (*pads.values)[i + ndim]));
  for (int i = 0; i < ndim; ++i)
    if (ctx.ana.prove_less(out[i], 0) == Tri::Yes) fail(op, ": the pads make dim ", i, " negative (", out[i], ")");
  return tensor_si(x.dtype, std::move(out));
}

StructInfo infer_tile(const CallNode& call, const InferContext& ctx) {
  attrs_of(call);
  const std::string& op = op_name(call);
  TensorInfo x = tensor_arg(call, 0);
  ShapeInfo reps = sized_shape_arg(call, 1, x.ndim, "repeats");
  if (reps.values) check_dims_nonnegative(op, *reps.values, ctx.ana);
  int ndim = x.unknown_rank() ? reps.ndim : x.ndim;
  if (!x.shape || !reps.values) return tensor_si_ndim(x.dtype, ndim);
  Dims out;
  for (int i = 0; i < ndim; ++i) out.push_back(ctx.ana.simplify((*x.shape)[i] * (*reps.values)[i]));
  return tensor_si(x.dtype, std::move(out));
}

StructInfo infer_arange(const CallNode& call, const InferContext& ctx) {
  attrs_of(call);
  const std::string& op = op_name(call);
  ShapeInfo len = sized_shape_arg(call, 0, 1, "the shape");
  TensorInfo start = tensor_arg(call, 1, true), delta = tensor_arg(call, 2, true);
  if (start.ndim > 0 || delta.ndim > 0) fail(op, ": start and delta must be scalars");
  DataType dtype = common_dtype(op, start.dtype, delta.dtype);
  if (!len.values) return tensor_si_ndim(dtype, 1);
  check_dims_nonnegative(op, *len.values, ctx.ana);
  return tensor_si(dtype, *len.values);
}

StructInfo infer_eye(const CallNode& call, const InferContext& ctx) {
  DataType dtype = attrs_of(call).get_dtype("dtype");
  const std::string& op = op_name(call);
  ShapeInfo s = sized_shape_arg(call, 0, 2, "the shape");
  if (!s.values) return tensor_si_ndim(dtype, 2);
  check_dims_nonnegative(op, *s.values, ctx.ana);
  return tensor_si(dtype, *s.values);
}

StructInfo infer_reverse_sequence(const CallNode& call, const InferContext& ctx) {
  Attrs attrs = attrs_of(call);
  const std::string& op = op_name(call);
  TensorInfo x = tensor_arg(call, 0), lens = tensor_arg(call, 1);
  require_integer(op, lens.dtype, "the sequence lengths", false);
  if (!lens.unknown_rank() && lens.ndim != 1) fail(op, ": the sequence lengths must have rank 1");
  if (x.unknown_rank()) return make_tensor(x);
  if (x.ndim < 2) fail(op, ": needs a tensor of rank >= 2, got ", x.ndim);
  int b = normalize_axis(op, attrs.get_int("batch_axis"), x.ndim);
  int t = normalize_axis(op, attrs.get_int("time_axis"), x.ndim);
  if (b == t) fail(op, ": batch_axis and time_axis are both ", b);
  if (x.shape && lens.shape) require_same_dim(op, (*x.shape)[b], (*lens.shape)[0], "batch size and lengths", ctx.ana);
  return make_tensor(x);
}

StructInfo infer_col2im(const CallNode& call, const InferContext& ctx) {
  attrs_of(call);
  const std::string& op = op_name(call);
  TensorInfo x = tensor_arg(call, 0);
  ShapeInfo image = shape_arg(call, 1), block = shape_arg(call, 2);
  if (!x.unknown_rank() && x.ndim != 3) fail(op, ": the input must be (N, C * prod(block), L), got rank ", x.ndim);
  if (image.ndim >= 0 && block.ndim >= 0 && image.ndim != block.ndim)
    fail(op, ": image_shape has ", image.ndim, " values but block_shape ", block.ndim);
  int k = image.ndim >= 0 ? image.ndim : block.ndim;
  if (k < 0) return tensor_si_ndim(x.dtype, -1);
  if (!x.shape || !image.values || !block.values) return tensor_si_ndim(x.dtype, k + 2);
  SymExpr cols = (*x.shape)[1], per = ctx.ana.simplify(product(*block.values));
  Tri divisible = ctx.ana.prove_divisible(cols, per);
  if (divisible == Tri::No) fail(op, ": dim 1 (", cols, ") is not a multiple of the block size ", per);
  if (divisible == Tri::Unknown) return tensor_si_ndim(x.dtype, k + 2);
  Dims out{(*x.shape)[0], ctx.ana.simplify(floordiv(cols, per))};
  out.insert(out.end(), image.values->begin(), image.values->end());
  return tensor_si(x.dtype, std::move(out));
}

StructInfo infer_dynamic_strided_slice(const CallNode& call, const InferContext&) {
  attrs_of(call);
  const std::string& op = op_name(call);
  TensorInfo x = tensor_arg(call, 0);
  for (size_t i = 1; i < 5; ++i) {
    TensorInfo t = tensor_arg(call, i);
    require_integer(op, t.dtype, cat("argument ", i), false);
    if (!t.unknown_rank() && t.ndim != 1) fail(op, ": argument ", i, " must have rank 1, got ", t.ndim);
  }
  return tensor_si_ndim(x.dtype, x.ndim);
}

}  // namespace

void register_index_ops(OpRegistry& reg) {
  using T = AttrType;
  reg.add("gather_elements")
      .doc(
          "gather_elements(x, indices, axis=a): out[i] = x[i with its axis-a coordinate replaced by "
          "indices[i]]; the result has the indices' shape and x's rank.")
      .args(2)
      .attr("axis", T::Int, int64_t(0))
      .infer(infer_gather_elements);
  reg.add("gather_nd")
      .doc(
          "gather_nd(x, indices, batch_dims=b): the last dim of indices (m) holds index tuples into x's dims "
          "b..b+m-1; the first b dims of x and indices are matched batch dims. The result's shape is "
          "indices.shape[:-1] + x.shape[b+m:].")
      .args(2)
      .attr("batch_dims", T::Int, int64_t(0))
      .infer(infer_gather_nd);
  reg.add("scatter_elements")
      .doc(
          "scatter_elements(x, indices, updates, axis=a, reduction=r): a copy of x where, for each position "
          "i of indices, the element at i with its axis-a coordinate replaced by indices[i] becomes "
          "updates[i] (r = none) or is combined with it by add, mul, max or min, in index order.")
      .args(3)
      .attr("axis", T::Int, int64_t(0))
      .attr("reduction", T::String, std::string("none"))
      .infer(infer_scatter_elements);
  reg.add("scatter_nd")
      .doc(
          "scatter_nd(x, indices, updates, reduction=r): a copy of x where the slice x[indices[j]] (an index "
          "tuple of length m = indices.shape[-1]) becomes updates[j] (r = none) or is combined with it by "
          "add, mul, max or min; updates.shape == indices.shape[:-1] + x.shape[m:].")
      .args(3)
      .attr("reduction", T::String, std::string("none"))
      .infer(infer_scatter_nd);
  reg.add("one_hot")
      .doc(
          "one_hot(indices, values, depth, axis=a): a new dim of size depth (a one-value shape) inserted at "
          "axis a; the element is values[1] where its coordinate on that dim equals the index (negative "
          "indices count from depth), else values[0] (also for indices out of [-depth, depth)).")
      .args(3)
      .attr("axis", T::Int, int64_t(-1))
      .infer(infer_one_hot);
  reg.add("nonzero")
      .doc(
          "nonzero(x): the coordinates of x's non-zero elements in row-major order as an i64 tensor of "
          "shape (rank(x), count); the count is known only at run time.")
      .args(1)
      .infer(infer_nonzero);
  reg.add("unique")
      .doc(
          "unique(x, axis=a, sorted=s): the distinct slices of x along axis a (sorted ascending when s, "
          "else in order of first occurrence) as a tuple (values, first indices, inverse indices, "
          "counts); the last three are i64 vectors. The number of distinct slices is known only at run "
          "time.")
      .args(1)
      .attr("axis", T::Int, int64_t(0))
      .attr("sorted", T::Bool, true)
      .infer(infer_unique);
  reg.add("trilu")
      .doc(
          "trilu(x, k, upper=u): x with the elements below (upper) or above (lower) the k-th diagonal of the "
          "last two dims set to 0; element (i, j) is kept when j - i >= k (upper) or j - i <= k (lower). k "
          "is an integer scalar.")
      .args(2)
      .attr("upper", T::Bool, true)
      .infer(infer_trilu);
  reg.add("pad")
      .doc(
          "pad(x, pads, value, mode=m): pads is a shape value (b_0..b_{r-1}, e_0..e_{r-1}) adding b_i "
          "elements before and e_i after dim i (negative: removing them). New elements are value "
          "(constant), x's mirror image without the edge (reflect), the edge element (edge) or the "
          "wrapped-around elements (wrap).")
      .args(3)
      .attr("mode", T::String, std::string("constant"))
      .infer(infer_pad);
  reg.add("tile")
      .doc("tile(x, repeats): x repeated repeats[i] times along dim i; repeats is a shape value of x's rank.")
      .args(2)
      .infer(infer_tile);
  reg.add("arange")
      .doc(
          "arange(shape, start, delta): a rank-1 tensor of the one-value shape (n,) whose element i is "
          "start + i * delta, of start's dtype.")
      .args(3)
      .infer(infer_arange);
  reg.add("eye")
      .doc("eye(shape, k=k, dtype=D): a matrix of the two-value shape, 1 where column - row == k, else 0.")
      .args(1)
      .attr("k", T::Int, int64_t(0))
      .attr("dtype", T::DType)
      .infer(infer_eye);
  reg.add("reverse_sequence")
      .doc(
          "reverse_sequence(x, lengths, batch_axis=b, time_axis=t): for each batch element i along dim b, "
          "the first lengths[i] elements along dim t in reverse order; the rest unchanged.")
      .args(2)
      .attr("batch_axis", T::Int, int64_t(1))
      .attr("time_axis", T::Int, int64_t(0))
      .infer(infer_reverse_sequence);
  reg.add("col2im")
      .doc(
          "col2im(x, image_shape, block_shape, dilations, pads, strides): the inverse of im2col: x is (N, C "
          "* prod(block), L) holding the sliding blocks of a (N, C, *image_shape) image; overlapping "
          "elements are summed. pads are (begins..., ends...); empty lists mean 1s and 0s.")
      .args(3)
      .attr("dilations", T::Ints, std::vector<int64_t>{})
      .attr("pads", T::Ints, std::vector<int64_t>{})
      .attr("strides", T::Ints, std::vector<int64_t>{})
      .infer(infer_col2im);
  reg.add("dynamic_strided_slice")
      .doc(
          "dynamic_strided_slice(x, begin, end, axes, strides): ONNX Slice with run-time bounds (rank-1 "
          "integer tensors of one length): along axes[j] (negative: from the end) keeps begin[j], "
          "begin[j]+strides[j], ... before end[j]; negative begin/end count from the dim's end and are "
          "clamped to it as in numpy. The dims are known only at run time.")
      .args(5)
      .infer(infer_dynamic_strided_slice);
}

}  // namespace relax
