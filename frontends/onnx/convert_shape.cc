// ONNX converters: the shape family: Constant, Shape, Size, Reshape,
// Flatten, Transpose, Squeeze, Unsqueeze, Concat, Split, Slice. Indexing,
// padding, generators and data-dependent ops are in convert_tensor.cc.
//
// Three regimes, tried in this order by every converter:
//   1. The values are known at import time (`sym`): shape computations such
//      as Shape -> Gather -> Concat -> Reshape fold into symbolic values and
//      symbolic output shapes, no op emitted for them.
//   2. The tensor path: graph ops whose struct info the op rules deduce,
//      with shape operands passed as shape values (make_shape).
//   3. A shape operand known only at run time: the op gets it through
//      tensor_to_shape, its result has a known rank only, and a match_cast
//      gives its dims fresh symbolic variables (data-dependent shapes).
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "frontends/onnx/onnx_proto.h"
#include "frontends/onnx/shape_util.h"

namespace relax::onnx_fe {
namespace {

using namespace shape;

// ---- Constant, Shape, Size ---------------------------------------------------------

Value tensor_value(HostTensor t) {
  Value v;
  v.data = std::make_shared<const HostTensor>(std::move(t));
  return v;
}

std::vector<Value> convert_constant(Context& ctx) {
  if (auto t = ctx.attr_tensor("value")) return {tensor_value(std::move(*t))};
  if (ctx.has_attr("sparse_value")) ctx.unsupported("sparse_value");
  if (ctx.has_attr("value_int"))
    return {tensor_value(HostTensor::from_ints(DataType::i64(), {}, {ctx.attr_int("value_int")}))};
  if (ctx.has_attr("value_ints")) {
    Ints v = ctx.attr_ints("value_ints");
    return {tensor_value(HostTensor::from_ints(DataType::i64(), {int64_t(v.size())}, v))};
  }
  if (ctx.has_attr("value_float"))
    return {tensor_value(HostTensor::from_floats(DataType::f32(), {}, {ctx.attr_float("value_float")}))};
  if (ctx.has_attr("value_floats")) {
    std::vector<float> f = ctx.attr_floats("value_floats");
    return {tensor_value(HostTensor::from_floats(DataType::f32(), {int64_t(f.size())}, {f.begin(), f.end()}))};
  }
  if (ctx.has_attr("value_string") || ctx.has_attr("value_strings")) ctx.unsupported("string constants");
  ctx.fail("Constant needs a value attribute");
}

// [start, end) of ONNX Shape (opset 15) clamped to [0, ndim].
std::pair<int, int> shape_range(Context& ctx, int ndim) {
  auto clamp = [ndim](int64_t v) { return int(std::clamp<int64_t>(v < 0 ? v + ndim : v, 0, ndim)); };
  return {clamp(ctx.attr_int("start", 0)), clamp(ctx.attr_int("end", ndim))};
}

std::vector<Value> convert_shape(Context& ctx) {
  if (ctx.ndim(0) < 0) {
    if (ctx.has_attr("start") || ctx.has_attr("end")) ctx.unsupported("start/end on an input of unknown rank");
    Expr s = ctx.emit_op("shape_of", {ctx.expr(0)});
    return {expr_value(ctx.emit_op("shape_to_tensor", {s}))};
  }
  Ranked x = ranked(ctx, 0);
  auto [b, e] = shape_range(ctx, x.ndim());
  if (e < b) e = b;
  return {sym_value(Dims(x.dims.begin() + b, x.dims.begin() + e))};
}

std::vector<Value> convert_size(Context& ctx) {
  if (ctx.ndim(0) < 0) {
    Expr s = ctx.emit_op("shape_to_tensor", {ctx.emit_op("shape_of", {ctx.expr(0)})});
    return {expr_value(ctx.emit_op("prod", {s}))};
  }
  Ranked x = ranked(ctx, 0);
  SymExpr n = 1;
  for (const SymExpr& d : x.dims) n = n * d;
  return {sym_value({ctx.ana().simplify(n)}, true)};
}

// ---- Reshape, Flatten, Transpose, Squeeze, Unsqueeze ---------------------------------

// ONNX Reshape's target with 0 (copy the input dim, unless allowzero) and -1
// (inferred) resolved symbolically.
Dims resolve_reshape(Context& ctx, const Dims& in, Dims target, bool allowzero) {
  int inferred = -1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i].is_const(0) && !allowzero) {
      if (i >= in.size()) ctx.fail("shape entry ", i, " is 0 but the input has rank ", in.size());
      target[i] = in[i];
    } else if (target[i].is_const(-1)) {
      if (inferred >= 0) ctx.fail("more than one -1 in the target shape");
      inferred = int(i);
    } else if (target[i].is_const() && target[i].const_value() < 0) {
      ctx.fail("invalid target dim ", target[i]);
    }
  }
  if (inferred < 0) return target;
  const Analyzer& ana = ctx.ana();
  Dims others = target;
  others.erase(others.begin() + inferred);
  SymExpr total = ana.simplify(product(in)), known = ana.simplify(product(others));
  if (known.is_const(0)) ctx.fail("cannot infer a -1 dim next to a zero-sized dim");
  if (ana.prove_divisible(total, known) == Tri::No)
    ctx.fail("cannot reshape ", total, " elements with ", known, " per -1");
  target[inferred] = ana.simplify(floordiv(total, known));
  return target;
}

// The run-time counterpart: 0 and -1 resolved with elementwise ops on the
// shape tensor `s` (rank 1, length k).
Expr resolve_reshape_runtime(Context& ctx, const Dims& in, Expr s, int64_t k, bool allowzero) {
  DataType i64 = DataType::i64();
  if (!allowzero) {
    Dims first(in.begin(), in.begin() + std::min<size_t>(in.size(), size_t(k)));
    while (int64_t(first.size()) < k) first.push_back(0);
    Expr zero = ctx.emit_op("equal", {s, ctx.scalar(i64, 0)});
    s = ctx.emit_op("where", {zero, dims_tensor(ctx, first), s});
  }
  Expr minus = ctx.emit_op("equal", {s, ctx.scalar(i64, -1)});
  Expr known = ctx.emit_op("prod", {ctx.emit_op("where", {minus, ctx.scalar(i64, 1), s})});
  Expr inferred = ctx.emit_op("floor_divide", {make_prim_int(ctx.ana().simplify(product(in))), known});
  return ctx.emit_op("where", {minus, inferred, s});
}

std::vector<Value> convert_reshape(Context& ctx) {
  bool allowzero = ctx.attr_int("allowzero", 0) != 0;
  std::optional<Dims> target;
  if (ctx.has_attr("shape")) {
    target.emplace();
    for (int64_t v : ctx.attr_ints("shape")) target->push_back(v);
  } else {
    target = ctx.sym_values(1);
  }
  // A symbolic tensor reshaped to a constant shape stays symbolic (the
  // pads of torch's F.pad go through pairs and back).
  if (auto v = ctx.sym_tensor(0); v && target && all_const(*target) && (ctx.input(0).sym || target->size() <= 1)) {
    Dims out = resolve_reshape(ctx, Dims(v->shape.begin(), v->shape.end()), *target, allowzero);
    SymTensor t{{}, v->elems, v->dtype};
    int64_t n = 1;
    for (const SymExpr& d : out) {
      if (!d.is_const()) return {expr_value(ctx.emit_op("reshape", {ctx.expr(0), make_shape(out)}))};
      t.shape.push_back(d.const_value());
      n *= d.const_value();
    }
    if (n != int64_t(v->elems.size())) ctx.fail("cannot reshape ", v->elems.size(), " elements to ", out.size(), " dims");
    return {sym_tensor_value(std::move(t))};
  }
  Ranked x = ranked(ctx, 0);
  if (target) {
    Dims out = resolve_reshape(ctx, x.dims, *target, allowzero);
    return {expr_value(ctx.emit_op("reshape", {x.expr(ctx), make_shape(out)}))};
  }
  auto k = const_length(ctx, 1);
  if (!k) ctx.unsupported("a target shape of unknown length");
  Expr s = resolve_reshape_runtime(ctx, x.dims, as_i64(ctx, ctx.expr(1)), *k, allowzero);
  Expr r = ctx.emit_op("reshape", {x.expr(ctx), ctx.emit_op("tensor_to_shape", {s})});
  return {expr_value(settle(ctx, r))};
}

std::vector<Value> convert_flatten(Context& ctx) {
  Ranked x = ranked(ctx, 0);
  int64_t axis = ctx.attr_int("axis", 1);
  if (axis < -x.ndim() || axis > x.ndim()) ctx.fail("axis ", axis, " is out of range for rank ", x.ndim());
  if (axis < 0) axis += x.ndim();
  Dims outer(x.dims.begin(), x.dims.begin() + axis), inner(x.dims.begin() + axis, x.dims.end());
  Dims out{ctx.ana().simplify(product(outer)), ctx.ana().simplify(product(inner))};
  return {expr_value(ctx.emit_op("reshape", {x.expr(ctx), make_shape(out)}))};
}

std::vector<Value> convert_transpose(Context& ctx) {
  Ints perm = ctx.attr_ints("perm");
  if (ctx.sym_values(0) && ctx.ndim(0) == 1) return {ctx.input(0)};  // a vector: unchanged
  // A symbolic matrix (F.pad's pairs) transposed at import time.
  if (auto v = ctx.sym_tensor(0); v && ctx.input(0).sym && v->shape.size() >= 2) {
    size_t r = v->shape.size();
    if (perm.empty())
      for (size_t k = r; k-- > 0;) perm.push_back(int64_t(k));
    if (perm.size() != r) ctx.fail("perm has ", perm.size(), " entries for rank ", r);
    SymTensor t{{}, {}, v->dtype};
    for (int64_t p : perm) t.shape.push_back(v->shape[size_t(axis_of(ctx, p, int(r)))]);
    std::vector<int64_t> idx(r, 0), stride(r, 1);
    for (size_t k = r - 1; k-- > 0;) stride[k] = stride[k + 1] * v->shape[k + 1];
    for (size_t flat = 0; flat < v->elems.size(); ++flat) {
      int64_t at = 0;  // the element of t at `idx` comes from v at idx permuted back
      for (size_t k = 0; k < r; ++k) at += idx[k] * stride[size_t(axis_of(ctx, perm[k], int(r)))];
      t.elems.push_back(v->elems[size_t(at)]);
      for (size_t k = r; k-- > 0;) {
        if (++idx[k] < t.shape[k]) break;
        idx[k] = 0;
      }
    }
    return {sym_tensor_value(std::move(t))};
  }
  return {expr_value(ctx.emit_op("permute_dims", {ctx.expr(0)}, one("axes", perm)))};
}

// An i64 vector of length n that is 1 at `axes` and 0 elsewhere.
Expr axes_mask(Context& ctx, Expr axes, int64_t n, int64_t k) {
  DataType i64 = DataType::i64();
  Expr zeros = ctx.emit_op("zeros", {make_shape({n})}, one("dtype", i64));
  Expr ones = ctx.emit_op("ones", {make_shape({k})}, one("dtype", i64));
  return ctx.emit_op("scatter_elements", {zeros, axes, ones});
}

// The positions where `mask` is 0, a vector of known length `count`.
Expr zero_positions(Context& ctx, Expr mask, int64_t count) {
  Expr zero = ctx.emit_op("equal", {mask, ctx.scalar(DataType::i64(), 0)});
  Expr nz = settle(ctx, ctx.emit_op("nonzero", {zero}), {1, count});
  return ctx.emit_op("reshape", {nz, make_shape({count})});
}

// Squeeze / Unsqueeze with axes known only at run time: the new shape is
// computed with index ops and applied with reshape; the rank is known.
Expr squeeze_runtime(Context& ctx, const Ranked& x, bool unsqueeze) {
  auto k = const_length(ctx, 1);
  if (!k) ctx.unsupported("axes of unknown length");
  int64_t r = x.ndim(), n = unsqueeze ? r + *k : r;
  Expr mask = axes_mask(ctx, runtime_axes(ctx, 1, n), n, *k);
  Expr kept = zero_positions(ctx, mask, unsqueeze ? r : r - *k);
  Expr dims = dims_tensor(ctx, x.dims), shape;
  if (unsqueeze) {
    Expr ones = ctx.emit_op("ones", {make_shape({n})}, one("dtype", DataType::i64()));
    shape = ctx.emit_op("scatter_elements", {ones, kept, dims});
  } else {
    shape = ctx.emit_op("take", {dims, kept});
  }
  return settle(ctx, ctx.emit_op("reshape", {x.expr(ctx), ctx.emit_op("tensor_to_shape", {shape})}));
}

std::vector<Value> convert_squeeze(Context& ctx) {
  bool runtime = ctx.opset() >= 13 && ctx.has_input(1) && !ctx.const_ints(1);
  if (runtime) return {expr_value(squeeze_runtime(ctx, ranked(ctx, 0), false))};
  std::optional<Ints> axes = attr_or_input_ints(ctx, "axes", 1, "squeeze axes");
  if (auto v = ctx.sym_values(0); v && ctx.ndim(0) == 1 && v->size() == 1) {
    bool all = !axes || axes->empty();
    if (all || (axes->size() == 1 && ((*axes)[0] == 0 || (*axes)[0] == -1))) return {sym_value(*v, true, ctx.dtype(0))};
  }
  if (!axes || axes->empty()) {
    // Every unit dim. A symbolic dim is taken to be other than 1 (as ONNX's
    // exporters mean it); without that assumption the rank would be unknown.
    Ranked x = ranked(ctx, 0);
    axes.emplace();
    for (int i = 0; i < x.ndim(); ++i)
      if (ctx.ana().can_prove_equal(x.dims[i], 1)) axes->push_back(i);
    if (axes->empty()) return {expr_value(x.expr(ctx))};
    return {expr_value(ctx.emit_op("squeeze", {x.expr(ctx)}, one("axis", *axes)))};
  }
  return {expr_value(ctx.emit_op("squeeze", {ctx.expr(0)}, one("axis", *axes)))};
}

std::vector<Value> convert_unsqueeze(Context& ctx) {
  bool runtime = ctx.opset() >= 13 && ctx.has_input(1) && !ctx.const_ints(1);
  if (runtime) return {expr_value(squeeze_runtime(ctx, ranked(ctx, 0), true))};
  std::optional<Ints> axes = attr_or_input_ints(ctx, "axes", 1, "unsqueeze axes");
  if (!axes) ctx.fail("Unsqueeze needs axes");
  if (auto v = ctx.sym_values(0); v && ctx.ndim(0) == 0 && axes->size() == 1 && ((*axes)[0] == 0 || (*axes)[0] == -1))
    return {sym_value(*v, false, ctx.dtype(0))};
  return {expr_value(ctx.emit_op("expand_dims", {ctx.expr(0)}, one("axis", *axes)))};
}

// ---- Concat, Split -------------------------------------------------------------------------------

// The dims of a concat whose parts' other dims are not provably equal (a
// resize's (h // 4) * 2 beside a skip's h // 2): each taken from the parts
// (a constant where one has it, else the first part's), the axis their sum.
// The match_cast that gives them checks them at run time, as the concat
// itself would have to. Empty when some part's dims are unknown.
Dims assumed_concat_dims(Context& ctx, int64_t axis) {
  std::vector<Dims> parts;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    auto s = ctx.shape(i);
    if (!s || (!parts.empty() && s->size() != parts[0].size())) return {};
    parts.push_back(*s);
  }
  if (parts.empty() || parts[0].empty()) return {};
  int ax = axis_of(ctx, axis, int(parts[0].size()));
  Dims want = parts[0];
  want[size_t(ax)] = 0;
  for (const Dims& p : parts) {
    want[size_t(ax)] = want[size_t(ax)] + p[size_t(ax)];
    for (size_t d = 0; d < p.size(); ++d)
      if (int(d) != ax && p[d].is_const() && !want[d].is_const()) want[d] = p[d];
  }
  want[size_t(ax)] = ctx.ana().simplify(want[size_t(ax)]);
  return want;
}

std::vector<Value> convert_concat(Context& ctx) {
  int64_t axis = ctx.attr_int("axis", 1);
  // Rank-1 symbolic vectors concatenate at import time.
  Dims joined;
  bool sym = true;
  for (size_t i = 0; i < ctx.num_inputs() && sym; ++i) {
    auto v = ctx.sym_values(i);
    sym = v && ctx.ndim(i) == 1;
    if (sym) joined.insert(joined.end(), v->begin(), v->end());
  }
  if (sym && ctx.num_inputs() > 0) return {sym_value(joined, false, ctx.dtype(0))};
  std::vector<Expr> parts;
  for (size_t i = 0; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i)) parts.push_back(ctx.expr(i));
  Expr r = ctx.emit_op("concat", {make_tuple(parts)}, one("axis", axis));
  return {expr_value(settle(ctx, r, assumed_concat_dims(ctx, axis)))};
}

// The sizes of Split's parts along a dim of size `d`: given (attribute or
// input) or equal (uneven last part from opset 18).
Dims split_sizes(Context& ctx, const SymExpr& d, size_t n) {
  if (ctx.has_attr("split")) {
    Dims s;
    for (int64_t v : ctx.attr_ints("split")) s.push_back(v);
    return s;
  }
  if (ctx.has_input(1)) {
    auto v = ctx.sym_values(1);
    if (!v) return {};  // known only at run time
    return *v;
  }
  if (ctx.has_attr("num_outputs")) n = size_t(ctx.attr_int("num_outputs"));
  if (n == 0) ctx.fail("Split needs outputs");
  const Analyzer& ana = ctx.ana();
  SymExpr chunk = ana.simplify(floordiv(d + int64_t(n - 1), int64_t(n)));
  Dims s(n, chunk);
  s.back() = ana.simplify(d - chunk * int64_t(n - 1));
  return s;
}

// Split with run-time sizes: each part is a dynamic slice.
std::vector<Value> split_runtime(Context& ctx, const Ranked& x, int ax) {
  Expr sizes = as_i64(ctx, ctx.expr(1));
  Expr axes = i64_const(ctx, {ax}), steps = i64_const(ctx, {1});
  Attrs keep = one("axis", Ints{0});
  keep.set("keepdims", true);
  std::vector<Value> out;
  for (size_t j = 0; j < ctx.num_outputs(); ++j) {
    Attrs range;
    range.set("axes", Ints{0});
    range.set("begin", Dims{0});
    range.set("end", Dims{int64_t(j)});
    Expr before = ctx.emit_op("strided_slice", {sizes}, range);
    Expr begin = ctx.emit_op("sum", {before}, keep);
    range.set("begin", Dims{int64_t(j)});
    range.set("end", Dims{int64_t(j + 1)});
    Expr end = ctx.emit_op("add", {begin, ctx.emit_op("strided_slice", {sizes}, range)});
    Expr part = ctx.emit_op("dynamic_strided_slice", {x.expr(ctx), begin, end, axes, steps});
    Dims want = x.dims;
    want[ax] = SymExpr();
    out.push_back(expr_value(settle(ctx, part, want)));
  }
  return out;
}

std::vector<Value> convert_split(Context& ctx) {
  int64_t axis = ctx.attr_int("axis", 0);
  size_t n = ctx.num_outputs();
  // A symbolic vector splits at import time.
  if (auto v = ctx.sym_values(0); v && ctx.ndim(0) == 1) {
    Dims sizes = split_sizes(ctx, SymExpr(int64_t(v->size())), n);
    if (!sizes.empty() && all_const(sizes)) {
      std::vector<Value> out;
      size_t at = 0;
      for (const SymExpr& s : sizes) {
        size_t len = size_t(std::max<int64_t>(0, s.const_value()));
        if (at + len > v->size()) ctx.fail("split sizes exceed the length ", v->size());
        out.push_back(sym_value(Dims(v->begin() + at, v->begin() + at + len), false, ctx.dtype(0)));
        at += len;
      }
      return out;
    }
  }
  Ranked x = ranked(ctx, 0);
  int ax = axis_of(ctx, axis, x.ndim());
  Dims sizes = split_sizes(ctx, x.dims[ax], n);
  if (sizes.empty()) return split_runtime(ctx, x, ax);
  if (sizes.size() != n) ctx.fail(sizes.size(), " split sizes for ", n, " outputs");
  std::vector<Value> out;
  if (all_const(sizes)) {
    Ints indices;
    int64_t at = 0;
    for (size_t j = 0; j + 1 < n; ++j) indices.push_back(at += sizes[j].const_value());
    Attrs a = one("indices", indices);
    a.set("axis", int64_t(ax));
    Expr t = ctx.emit_op("split", {x.expr(ctx)}, a);
    for (size_t j = 0; j < n; ++j) out.push_back(expr_value(ctx.emit(make_tuple_get_item(t, int(j)))));
    return out;
  }
  // Symbolic sizes: one strided_slice per part.
  SymExpr at = 0;
  for (size_t j = 0; j < n; ++j) {
    Attrs a = one("axes", Ints{ax});
    a.set("begin", Dims{ctx.ana().simplify(at)});
    at = at + sizes[j];
    a.set("end", Dims{ctx.ana().simplify(at)});
    out.push_back(expr_value(ctx.emit_op("strided_slice", {x.expr(ctx)}, a)));
  }
  return out;
}

// ---- Slice ---------------------------------------------------------------------------------------------------

// Ends this large mean "to the end" (INT_MAX, INT64_MAX, ...).
constexpr int64_t kHuge = int64_t(1) << 31;

// ONNX Slice bounds of one axis normalized to strided_slice's: begin in
// [0, d] (step > 0) or [0, d-1] (step < 0); end in [0, d] or [-1, d-1].
// nullopt when the sign of a symbolic bound cannot be decided.
// With `assume_negative`, a bound provably <= 0 counts from the end (x[-s:]
// with s a length: wrong only when s is 0, which the caller checks at run time).
std::optional<SymExpr> slice_bound(const Analyzer& ana, const SymExpr& v, const SymExpr& d, int64_t step, bool is_end,
                                   bool assume_negative = false) {
  // The clamp range: [lo, hi].
  SymExpr lo = step > 0 ? SymExpr(0) : SymExpr(is_end ? -1 : 0);
  SymExpr hi = step > 0 ? d : d - 1;
  auto clamp = [&](const SymExpr& e) { return ana.simplify(max(lo, min(e, hi))); };
  if (v.is_const()) {
    int64_t c = v.const_value();
    if (c >= kHuge) return ana.simplify(max(lo, hi));
    if (c <= -kHuge) return lo;
    return clamp(c < 0 ? d + c : v);
  }
  if (ana.prove_less_equal(0, v) == Tri::Yes) return clamp(v);
  if (ana.prove_less(v, 0) == Tri::Yes) return clamp(d + v);
  if (assume_negative && ana.prove_less_equal(v, 0) == Tri::Yes) return clamp(d + v);
  return std::nullopt;
}

// Slice's operands: from attributes before opset 10, inputs after.
struct SliceArgs {
  std::optional<Dims> starts, ends;
  std::optional<Ints> axes, steps;
  bool runtime = false;  // some operand is known only at run time
};

SliceArgs slice_args(Context& ctx) {
  SliceArgs a;
  auto syms = [](const Ints& v) { return Dims(v.begin(), v.end()); };
  if (ctx.opset() < 10) {
    a.starts = syms(ctx.attr_ints("starts"));
    a.ends = syms(ctx.attr_ints("ends"));
    if (ctx.has_attr("axes")) a.axes = ctx.attr_ints("axes");
    return a;
  }
  a.starts = ctx.sym_values(1);
  a.ends = ctx.sym_values(2);
  if (ctx.has_input(3)) a.axes = ctx.const_ints(3);
  if (ctx.has_input(4)) a.steps = ctx.const_ints(4);
  a.runtime = !a.starts || !a.ends || (ctx.has_input(3) && !a.axes) || (ctx.has_input(4) && !a.steps);
  return a;
}

// Slicing a symbolic vector with constant bounds, as numpy would.
std::optional<Value> slice_sym_vector(Context& ctx, const SliceArgs& a) {
  auto v = ctx.sym_tensor(0);
  if (!v || v->shape.empty() || a.runtime || !all_const(*a.starts) || !all_const(*a.ends)) return std::nullopt;
  size_t r = v->shape.size();
  if (r > 1 && !ctx.input(0).sym) return std::nullopt;  // constant data of rank 2 or more: the op's job
  if (r == 1 && !ctx.sym_values(0)) return std::nullopt;
  size_t k = a.starts->size();
  if (a.ends->size() != k || (a.axes && a.axes->size() != k) || (a.steps && a.steps->size() != k)) return std::nullopt;
  // The kept indices along each axis.
  std::vector<std::vector<int64_t>> keep(r);
  for (size_t d = 0; d < r; ++d)
    for (int64_t i = 0; i < v->shape[d]; ++i) keep[d].push_back(i);
  for (size_t j = 0; j < k; ++j) {
    int ax = axis_of(ctx, a.axes ? (*a.axes)[j] : int64_t(j), int(r));
    int64_t step = a.steps ? (*a.steps)[j] : 1, n = v->shape[size_t(ax)];
    if (step == 0) ctx.fail("slice step 0");
    auto norm = [&](int64_t c, bool is_end) {
      int64_t lo = step > 0 ? 0 : (is_end ? -1 : 0), hi = step > 0 ? n : n - 1;
      if (c < 0) c = std::max<int64_t>(c, -kHuge) + n;
      return std::clamp(std::min(c, kHuge), lo, hi);
    };
    int64_t b = norm((*a.starts)[j].const_value(), false), e = norm((*a.ends)[j].const_value(), true);
    keep[size_t(ax)].clear();
    for (int64_t i = b; step > 0 ? i < e : i > e; i += step) keep[size_t(ax)].push_back(i);
  }
  SymTensor t{{}, {}, v->dtype};
  for (const auto& kd : keep) t.shape.push_back(int64_t(kd.size()));
  std::vector<int64_t> stride(r, 1);
  for (size_t d = r - 1; d-- > 0;) stride[d] = stride[d + 1] * v->shape[d + 1];
  std::vector<size_t> idx(r, 0);
  bool empty = std::any_of(keep.begin(), keep.end(), [](const auto& kd) { return kd.empty(); });
  while (!empty) {
    int64_t at = 0;
    for (size_t d = 0; d < r; ++d) at += keep[d][idx[d]] * stride[d];
    t.elems.push_back(v->elems[size_t(at)]);
    size_t d = r;
    while (d-- > 0) {
      if (++idx[d] < keep[d].size()) break;
      idx[d] = 0;
    }
    if (d == size_t(-1)) break;
  }
  return sym_tensor_value(std::move(t));
}

// `expected`: the result's dims where the caller knows them under an
// assumption; the match_cast that binds the result checks them at run time.
std::vector<Value> slice_runtime(Context& ctx, const Ranked& x, const SliceArgs& a, const Dims* expected = nullptr) {
  std::optional<int64_t> len = a.starts ? std::optional<int64_t>(a.starts->size()) : const_length(ctx, 1);
  Expr starts = a.starts ? dims_tensor(ctx, *a.starts) : as_i64(ctx, ctx.expr(1));
  Expr ends = a.ends ? dims_tensor(ctx, *a.ends) : as_i64(ctx, ctx.expr(2));
  auto iota = [&]() {
    if (!len) ctx.unsupported("slice bounds of unknown length");
    Ints all;
    for (int64_t i = 0; i < *len; ++i) all.push_back(i);
    return all;
  };
  bool default_axes = !a.axes && (ctx.opset() < 10 || !ctx.has_input(3));
  Expr axes = a.axes ? i64_const(ctx, *a.axes) : default_axes ? i64_const(ctx, iota()) : as_i64(ctx, ctx.expr(3));
  Expr steps;
  if (a.steps) {
    steps = i64_const(ctx, *a.steps);
  } else if (ctx.opset() >= 10 && ctx.has_input(4)) {
    steps = as_i64(ctx, ctx.expr(4));
  } else {
    steps = i64_const(ctx, Ints(iota().size(), 1));
  }
  Expr r = ctx.emit_op("dynamic_strided_slice", {x.expr(ctx), starts, ends, axes, steps});
  // Dims off the sliced axes keep their size when the axes are known.
  Dims want(x.ndim());
  if (a.axes || default_axes) {
    want = x.dims;
    for (int64_t i : a.axes ? *a.axes : iota()) want[axis_of(ctx, i, x.ndim())] = SymExpr();
  }
  if (expected) want = *expected;
  return {expr_value(settle(ctx, r, want))};
}

// The result's dims of a slice whose symbolic bounds are only provably <= 0
// (x[-s:] for a length s), read as counting from the end; null when some
// bound's sign stays unknown or a step is not 1.
std::unique_ptr<Dims> assumed_dims(Context& ctx, const Ranked& x, const SliceArgs& a, const Ints& axes,
                                   const Ints& steps) {
  auto dims = std::make_unique<Dims>(x.dims);
  for (size_t i = 0; i < axes.size(); ++i) {
    int ax = axis_of(ctx, axes[i], x.ndim());
    if (steps[i] != 1) return nullptr;
    auto b = slice_bound(ctx.ana(), (*a.starts)[i], x.dims[ax], 1, false, true);
    auto e = slice_bound(ctx.ana(), (*a.ends)[i], x.dims[ax], 1, true, true);
    if (!b || !e) return nullptr;
    (*dims)[size_t(ax)] = ctx.ana().simplify(max(*e - *b, 0));
  }
  return dims;
}

std::vector<Value> convert_slice(Context& ctx) {
  SliceArgs a = slice_args(ctx);
  if (auto v = slice_sym_vector(ctx, a)) return {*v};
  Ranked x = ranked(ctx, 0);
  if (a.runtime) return slice_runtime(ctx, x, a);
  size_t k = a.starts->size();
  if (a.ends->size() != k) ctx.fail("starts and ends differ in length");
  Ints axes = a.axes.value_or(Ints());
  if (!a.axes)
    for (size_t i = 0; i < k; ++i) axes.push_back(int64_t(i));
  Ints steps = a.steps.value_or(Ints(k, 1));
  if (axes.size() != k || steps.size() != k) ctx.fail("starts, ends, axes and steps differ in length");
  Ints norm_axes;
  Dims begin, end;
  for (size_t i = 0; i < k; ++i) {
    int ax = axis_of(ctx, axes[i], x.ndim());
    if (steps[i] == 0) ctx.fail("slice step 0");
    auto b = slice_bound(ctx.ana(), (*a.starts)[i], x.dims[ax], steps[i], false);
    auto e = slice_bound(ctx.ana(), (*a.ends)[i], x.dims[ax], steps[i], true);
    if (!b || !e) return slice_runtime(ctx, x, a, assumed_dims(ctx, x, a, axes, steps).get());
    norm_axes.push_back(ax);
    begin.push_back(*b);
    end.push_back(*e);
  }
  Attrs attrs = one("axes", norm_axes);
  attrs.set("begin", begin);
  attrs.set("end", end);
  attrs.set("strides", steps);
  return {expr_value(ctx.emit_op("strided_slice", {x.expr(ctx)}, attrs))};
}

}  // namespace

void register_shape_converters(ConverterRegistry& r) {
  struct Entry {
    const char* op;
    int min_opset;
    std::vector<Value> (*fn)(Context&);
  };
  static const Entry kTable[] = {
      {"Constant", 1, convert_constant}, {"Shape", 1, convert_shape},         {"Size", 1, convert_size},
      {"Reshape", 1, convert_reshape},   {"Flatten", 1, convert_flatten},     {"Transpose", 1, convert_transpose},
      {"Squeeze", 1, convert_squeeze},   {"Unsqueeze", 1, convert_unsqueeze}, {"Concat", 1, convert_concat},
      {"Split", 1, convert_split},       {"Slice", 1, convert_slice},
  };
  for (const Entry& e : kTable) r.add(e.op, e.min_opset, e.fn);
}

}  // namespace relax::onnx_fe
