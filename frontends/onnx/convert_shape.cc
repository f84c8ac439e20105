// ONNX converters: the shape family (tensor manipulation, indexing,
// constant-shaped generators).
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

#include "frontends/onnx/context.h"
#include "frontends/onnx/onnx_proto.h"

namespace relax::onnx_fe {
namespace {

using Dims = std::vector<SymExpr>;
using Ints = std::vector<int64_t>;

// ---- Small helpers ------------------------------------------------------------------

Attrs one(const std::string& name, AttrValue v) {
  Attrs a;
  a.set(name, std::move(v));
  return a;
}

// Input i as a tensor with known dims; when only its rank is known it is
// match_cast to fresh dims. Unknown rank is unsupported. The expression is
// materialized only when asked for (Shape needs only the dims).
struct Ranked {
  size_t index;
  Expr cast;  // the match_cast input, when there was one
  DataType dtype;
  Dims dims;
  int ndim() const { return int(dims.size()); }
  Expr expr(Context& ctx) const { return cast ? cast : ctx.expr(index); }
};

Ranked ranked(Context& ctx, size_t i) {
  int ndim = ctx.ndim(i);
  if (ndim < 0) ctx.unsupported(cat("input ", i, " of unknown rank"));
  DataType dtype = ctx.dtype(i);
  if (auto s = ctx.shape(i)) return Ranked{i, nullptr, dtype, *s};
  Dims dims;
  for (int d = 0; d < ndim; ++d) dims.push_back(ctx.fresh_sym("d"));
  return Ranked{i, ctx.emit_match_cast(ctx.expr(i), tensor_si(dtype, dims)), dtype, dims};
}

// Gives a tensor whose dims are known only at run time the dims `want`
// (undefined entries become fresh variables); unchanged when its dims are
// already known.
Expr settle(Context& ctx, Expr e, Dims want = {}) {
  const auto* t = as<TensorSI>(sinfo_of(e));
  if (!t || t->shape || t->ndim < 0) return e;
  want.resize(t->ndim);
  for (SymExpr& d : want)
    if (!d.defined()) d = ctx.fresh_sym("n");
  return ctx.emit_match_cast(e, tensor_si(t->dtype, want));
}

// Normalizes an axis of a rank-`ndim` tensor, failing when out of range.
int axis_of(Context& ctx, int64_t axis, int ndim) {
  if (axis < -ndim || axis >= ndim) ctx.fail("axis ", axis, " is out of range for rank ", ndim);
  return int(axis < 0 ? axis + ndim : axis);
}

// Integer constants from attribute `attr` (older opsets) or input `i`.
// nullopt when neither is given; an input known only at run time is
// unsupported (`what` names it).
std::optional<Ints> attr_or_input_ints(Context& ctx, const std::string& attr, size_t i, const std::string& what) {
  if (ctx.has_attr(attr)) return ctx.attr_ints(attr);
  if (!ctx.has_input(i)) return std::nullopt;
  auto v = ctx.const_ints(i);
  if (!v) ctx.unsupported(what + " known only at run time");
  return v;
}

// A rank-1 i64 tensor of the input `i` (converted when it has another
// integer dtype).
Expr as_i64(Context& ctx, Expr e) {
  const auto* t = as<TensorSI>(sinfo_of(e));
  if (t && t->dtype == DataType::i64()) return e;
  return ctx.emit_op("astype", {e}, one("dtype", DataType::i64()));
}

Expr i64_const(Context& ctx, const Ints& v) {
  return ctx.constant(HostTensor::from_ints(DataType::i64(), {int64_t(v.size())}, v));
}

// A shape value as a rank-1 i64 tensor.
Expr dims_tensor(Context& ctx, const Dims& d) { return ctx.emit_op("shape_to_tensor", {make_shape(d)}); }

// A shape operand: the values when known symbolically, else the run-time
// tensor converted by tensor_to_shape.
Expr shape_operand(Context& ctx, size_t i, const std::optional<Dims>& values) {
  if (values) return make_shape(*values);
  return ctx.emit_op("tensor_to_shape", {as_i64(ctx, ctx.expr(i))});
}

// The length of a rank-1 input when known as a constant.
std::optional<int64_t> const_length(Context& ctx, size_t i) {
  auto s = ctx.shape(i);
  if (!s || s->size() != 1 || !(*s)[0].is_const()) return std::nullopt;
  return (*s)[0].const_value();
}

// Whether every element is a constant.
bool all_const(const Dims& v) {
  return std::all_of(v.begin(), v.end(), [](const SymExpr& e) { return e.is_const(); });
}

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

SymExpr product(const Dims& d) {
  SymExpr p = 1;
  for (const SymExpr& e : d) p = p * e;
  return p;
}

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
  // A symbolic vector reshaped to rank 0 or 1 stays symbolic.
  if (auto v = ctx.sym_values(0); v && target && all_const(*target) && target->size() <= 1) {
    Dims out = resolve_reshape(ctx, {SymExpr(int64_t(v->size()))}, *target, allowzero);
    if (out.empty() && v->size() == 1) return {sym_value(*v, true, ctx.dtype(0))};
    if (out.size() == 1 && out[0].is_const(int64_t(v->size()))) return {sym_value(*v, false, ctx.dtype(0))};
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
  return {expr_value(ctx.emit_op("permute_dims", {ctx.expr(0)}, one("axes", perm)))};
}

// Axes known only at run time, normalized against rank `r`: where(a < 0, a + r, a).
Expr runtime_axes(Context& ctx, size_t i, int64_t r) {
  DataType i64 = DataType::i64();
  Expr axes = as_i64(ctx, ctx.expr(i));
  Expr negative = ctx.emit_op("less", {axes, ctx.scalar(i64, 0)});
  return ctx.emit_op("where", {negative, ctx.emit_op("add", {axes, ctx.scalar(i64, double(r))}), axes});
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
  return {expr_value(ctx.emit_op("concat", {make_tuple(parts)}, one("axis", axis)))};
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
std::optional<SymExpr> slice_bound(const Analyzer& ana, const SymExpr& v, const SymExpr& d, int64_t step, bool is_end) {
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
  auto v = ctx.sym_values(0);
  if (!v || ctx.ndim(0) != 1 || a.runtime || a.starts->size() != 1 || !all_const(*a.starts) || !all_const(*a.ends))
    return std::nullopt;
  if (a.axes && (a.axes->size() != 1 || ((*a.axes)[0] != 0 && (*a.axes)[0] != -1))) return std::nullopt;
  int64_t step = a.steps ? (*a.steps)[0] : 1, n = int64_t(v->size());
  if (step == 0) ctx.fail("slice step 0");
  auto norm = [&](int64_t c, bool is_end) {
    int64_t lo = step > 0 ? 0 : (is_end ? -1 : 0), hi = step > 0 ? n : n - 1;
    if (c < 0) c = std::max<int64_t>(c, -kHuge) + n;
    return std::clamp(std::min(c, kHuge), lo, hi);
  };
  int64_t b = norm((*a.starts)[0].const_value(), false), e = norm((*a.ends)[0].const_value(), true);
  Dims out;
  for (int64_t i = b; step > 0 ? i < e : i > e; i += step) out.push_back((*v)[i]);
  return sym_value(out, false, ctx.dtype(0));
}

std::vector<Value> slice_runtime(Context& ctx, const Ranked& x, const SliceArgs& a) {
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
  return {expr_value(settle(ctx, r, want))};
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
    if (!b || !e) return slice_runtime(ctx, x, a);
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

// ---- Gathers and scatters -----------------------------------------------------------------------------

// Gather on a symbolic vector with constant indices (rank 0 or 1).
std::optional<Value> gather_sym(Context& ctx) {
  auto v = ctx.sym_values(0);
  auto idx = ctx.const_ints(1);
  int rank = ctx.ndim(1);
  int64_t axis = ctx.attr_int("axis", 0);
  if (!v || !idx || ctx.ndim(0) != 1 || rank > 1 || (axis != 0 && axis != -1)) return std::nullopt;
  Dims out;
  int64_t n = int64_t(v->size());
  for (int64_t i : *idx) {
    if (i < -n || i >= n) ctx.fail("index ", i, " is out of range for length ", n);
    out.push_back((*v)[i < 0 ? i + n : i]);
  }
  return sym_value(out, rank == 0, ctx.dtype(0));
}

// Negative indices made non-negative for take: folded when constant, else
// where(i < 0, i + dim, i).
Expr nonnegative_indices(Context& ctx, size_t i, const SymExpr& dim) {
  if (auto idx = ctx.const_ints(i)) {
    bool negative = std::any_of(idx->begin(), idx->end(), [](int64_t v) { return v < 0; });
    if (!negative) return ctx.expr(i);
    if (dim.is_const()) {
      for (int64_t& v : *idx)
        if (v < 0) v += dim.const_value();
      auto s = ctx.shape(i);
      Ints shape;
      for (const SymExpr& d : *s) shape.push_back(d.const_value());
      return ctx.constant(HostTensor::from_ints(ctx.dtype(i), shape, *idx));
    }
  }
  Expr idx = ctx.expr(i);
  DataType dtype = ctx.dtype(i);
  Expr negative = ctx.emit_op("less", {idx, ctx.scalar(dtype, 0)});
  Expr wrapped = ctx.emit_op("add", {idx, make_prim_int(dim, dtype)});
  return ctx.emit_op("where", {negative, wrapped, idx});
}

std::vector<Value> convert_gather(Context& ctx) {
  if (auto v = gather_sym(ctx)) return {*v};
  Ranked x = ranked(ctx, 0);
  int ax = axis_of(ctx, ctx.attr_int("axis", 0), x.ndim());
  Expr idx = nonnegative_indices(ctx, 1, x.dims[ax]);
  return {expr_value(ctx.emit_op("take", {x.expr(ctx), idx}, one("axis", int64_t(ax))))};
}

std::vector<Value> convert_gather_elements(Context& ctx) {
  Attrs a = one("axis", ctx.attr_int("axis", 0));
  return {expr_value(ctx.emit_op("gather_elements", {ctx.expr(0), ctx.expr(1)}, a))};
}

std::vector<Value> convert_gather_nd(Context& ctx) {
  Attrs a = one("batch_dims", ctx.attr_int("batch_dims", 0));
  return {expr_value(ctx.emit_op("gather_nd", {ctx.expr(0), ctx.expr(1)}, a))};
}

std::vector<Value> convert_scatter_elements(Context& ctx) {
  Attrs a = one("axis", ctx.attr_int("axis", 0));
  a.set("reduction", ctx.attr_string("reduction", "none"));
  return {expr_value(ctx.emit_op("scatter_elements", {ctx.expr(0), ctx.expr(1), ctx.expr(2)}, a))};
}

std::vector<Value> convert_scatter_nd(Context& ctx) {
  Attrs a = one("reduction", ctx.attr_string("reduction", "none"));
  return {expr_value(ctx.emit_op("scatter_nd", {ctx.expr(0), ctx.expr(1), ctx.expr(2)}, a))};
}

// ---- Expand, Tile, Pad ----------------------------------------------------------------------------------------

// Numpy broadcasting of x's dims with Expand's target (whose undefined
// entries are known only at run time); an undefined entry where the result
// depends on values unknown at import time.
Dims expand_dims(Context& ctx, const Dims& x, const Dims& to) {
  size_t r = std::max(x.size(), to.size());
  Dims out(r);
  const Analyzer& ana = ctx.ana();
  for (size_t i = 0; i < r; ++i) {
    SymExpr a = i + x.size() >= r ? x[i + x.size() - r] : SymExpr(1);
    SymExpr b = i + to.size() >= r ? to[i + to.size() - r] : SymExpr(1);
    if (!b.defined()) {
      // A target dim known only at run time: it is 1 or a unless a may be 1.
      if (ana.can_prove_not_equal(a, 1)) out[i] = a;
      continue;
    }
    if (b.is_const(1) || a == b || ana.can_prove_equal(a, b)) {
      out[i] = a;
    } else if (a.is_const(1)) {
      out[i] = b;
    } else if (ana.can_prove_not_equal(b, 1) && ana.can_prove_not_equal(a, 1)) {
      ctx.fail("cannot broadcast dim ", a, " to ", b);
    } else if (ana.can_prove_not_equal(a, 1)) {
      out[i] = a;  // b must be 1 or a
    } else if (ana.can_prove_not_equal(b, 1)) {
      out[i] = b;  // a must be 1
    }
  }
  return out;
}

// The broadcast shape at run time: where(s == 1, x's dims, s), both padded
// with leading 1s to the result's rank.
Expr expand_shape_runtime(Context& ctx, const Dims& x, Expr s, int64_t k) {
  size_t r = std::max<size_t>(x.size(), size_t(k));
  if (size_t(k) < r) s = ctx.emit_op("concat", {make_tuple({i64_const(ctx, Ints(r - k, 1)), s})});
  Dims xp(r - x.size(), SymExpr(1));
  xp.insert(xp.end(), x.begin(), x.end());
  Expr unit = ctx.emit_op("equal", {s, ctx.scalar(DataType::i64(), 1)});
  return ctx.emit_op("where", {unit, dims_tensor(ctx, xp), s});
}

std::vector<Value> convert_expand(Context& ctx) {
  Ranked x = ranked(ctx, 0);
  auto to = ctx.sym_values(1);
  if (to) {
    Dims out = expand_dims(ctx, x.dims, *to);
    if (std::all_of(out.begin(), out.end(), [](const SymExpr& d) { return d.defined(); }))
      return {expr_value(ctx.emit_op("broadcast_to", {x.expr(ctx), make_shape(out)}))};
  }
  auto k = const_length(ctx, 1);
  if (!k) ctx.unsupported("an expand shape of unknown length");
  Expr s = expand_shape_runtime(ctx, x.dims, as_i64(ctx, ctx.expr(1)), *k);
  Expr r = ctx.emit_op("broadcast_to", {x.expr(ctx), ctx.emit_op("tensor_to_shape", {s})});
  return {expr_value(settle(ctx, r, expand_dims(ctx, x.dims, to.value_or(Dims(*k)))))};
}

std::vector<Value> convert_tile(Context& ctx) {
  Ranked x = ranked(ctx, 0);
  auto reps = ctx.sym_values(1);
  Expr r = ctx.emit_op("tile", {x.expr(ctx), shape_operand(ctx, 1, reps)});
  return {expr_value(settle(ctx, r))};
}

// The pad value as a scalar of x's dtype (0 when absent).
Expr pad_value(Context& ctx, const Ranked& x) {
  if (ctx.opset() < 11) return ctx.scalar(x.dtype, ctx.attr_float("value", 0));
  if (!ctx.has_input(2)) return ctx.scalar(x.dtype, 0);
  Expr v = ctx.expr(2);
  if (ctx.ndim(2) == 1) v = ctx.emit_op("reshape", {v, make_shape({})});
  return v;
}

// Pads known at import time: (begins, ends) over every axis.
std::optional<Dims> full_pads(Context& ctx, const Ranked& x, const std::optional<Ints>& axes) {
  std::optional<Dims> p;
  if (ctx.opset() < 11) {
    Ints v = ctx.has_attr("pads") ? ctx.attr_ints("pads") : ctx.attr_ints("paddings");
    p = Dims(v.begin(), v.end());
  } else {
    p = ctx.sym_values(1);
  }
  if (!p || !axes) return p;
  size_t k = axes->size(), r = size_t(x.ndim());
  if (p->size() != 2 * k) ctx.fail(p->size(), " pads for ", k, " axes");
  Dims full(2 * r, SymExpr(0));
  for (size_t j = 0; j < k; ++j) {
    int ax = axis_of(ctx, (*axes)[j], int(r));
    full[ax] = (*p)[j];
    full[ax + r] = (*p)[j + k];
  }
  return full;
}

// Run-time pads over the listed axes (known or run-time) spread over every
// axis: scatter_elements(zeros(2r), [axes, axes + r], pads).
Expr pads_runtime(Context& ctx, const Ranked& x) {
  Expr p = as_i64(ctx, ctx.expr(1));
  if (!ctx.has_input(3)) return p;
  DataType i64 = DataType::i64();
  int64_t r = x.ndim();
  Expr axes = runtime_axes(ctx, 3, r);
  Expr ends = ctx.emit_op("add", {axes, ctx.scalar(i64, double(r))});
  Expr where = ctx.emit_op("concat", {make_tuple({axes, ends})});
  Expr zeros = ctx.emit_op("zeros", {make_shape({2 * r})}, one("dtype", i64));
  return ctx.emit_op("scatter_elements", {zeros, where, p});
}

std::vector<Value> convert_pad(Context& ctx) {
  Ranked x = ranked(ctx, 0);
  std::string mode = ctx.attr_string("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    ctx.unsupported("pad mode '" + mode + "'");
  std::optional<Ints> axes;
  if (ctx.opset() >= 18 && ctx.has_input(3)) axes = ctx.const_ints(3);
  bool runtime_axes = ctx.opset() >= 18 && ctx.has_input(3) && !axes;
  std::optional<Dims> pads = runtime_axes ? std::nullopt : full_pads(ctx, x, axes);
  Expr value = pad_value(ctx, x);
  Expr shape = pads ? make_shape(*pads) : ctx.emit_op("tensor_to_shape", {pads_runtime(ctx, x)});
  Expr r = ctx.emit_op("pad", {x.expr(ctx), shape, value}, one("mode", mode));
  return {expr_value(settle(ctx, r))};
}

// ---- Generators: ConstantOfShape, Range, EyeLike, OneHot ------------------------------------------

std::vector<Value> convert_constant_of_shape(Context& ctx) {
  HostTensor fill = ctx.attr_tensor("value").value_or(HostTensor::from_floats(DataType::f32(), {1}, {0.0}));
  if (fill.numel() != 1) ctx.fail("value must hold one element");
  auto shape = ctx.sym_values(0);
  // Small integer vectors stay symbolic (shape arithmetic uses them).
  if (shape && all_const(*shape) && shape->size() <= 1 && fill.dtype.is_integer()) {
    int64_t n = shape->empty() ? 1 : (*shape)[0].const_value();
    if (n <= 64) return {sym_value(Dims(size_t(n), SymExpr(*fill.int_at(0))), shape->empty(), fill.dtype)};
  }
  fill.shape = {};
  Expr f = ctx.constant(std::move(fill));
  Expr r = ctx.emit_op("full", {shape_operand(ctx, 0, shape), f});
  return {expr_value(settle(ctx, r))};
}

// The number of elements of Range: max(ceil((limit - start) / delta), 0).
std::optional<SymExpr> range_length(Context& ctx) {
  auto s = ctx.sym_values(0), l = ctx.sym_values(1), d = ctx.sym_values(2);
  if (s && l && d && (*d)[0].is_const()) {
    int64_t step = (*d)[0].const_value();
    if (step == 0) ctx.fail("Range delta is 0");
    SymExpr span = step > 0 ? (*l)[0] - (*s)[0] : (*s)[0] - (*l)[0];
    int64_t st = std::abs(step);
    return ctx.ana().simplify(max(SymExpr(0), floordiv(span + (st - 1), SymExpr(st))));
  }
  auto fs = ctx.const_floats(0), fl = ctx.const_floats(1), fd = ctx.const_floats(2);
  if (fs && fl && fd && !fs->empty() && !fl->empty() && !fd->empty()) {
    if ((*fd)[0] == 0) ctx.fail("Range delta is 0");
    return SymExpr(std::max<int64_t>(0, int64_t(std::ceil(((*fl)[0] - (*fs)[0]) / (*fd)[0]))));
  }
  return std::nullopt;
}

std::vector<Value> convert_range(Context& ctx) {
  auto len = range_length(ctx);
  auto s = ctx.sym_values(0), d = ctx.sym_values(2);
  // Small integer ranges with known values stay symbolic.
  if (len && len->is_const() && len->const_value() <= 64 && s && d && (*d)[0].is_const()) {
    Dims out;
    for (int64_t i = 0; i < len->const_value(); ++i) out.push_back(ctx.ana().simplify((*s)[0] + (*d)[0] * i));
    return {sym_value(out, false, ctx.dtype(0))};
  }
  Expr start = ctx.expr(0), delta = ctx.expr(2);
  Expr shape;
  if (len) {
    shape = make_shape({*len});
  } else {
    DataType f64 = DataType::f(64);
    Expr span = ctx.emit_op("astype", {ctx.emit_op("subtract", {ctx.expr(1), start})}, one("dtype", f64));
    Expr steps =
        ctx.emit_op("ceil", {ctx.emit_op("divide", {span, ctx.emit_op("astype", {delta}, one("dtype", f64))})});
    Expr n =
        ctx.emit_op("astype", {ctx.emit_op("maximum", {steps, ctx.scalar(f64, 0)})}, one("dtype", DataType::i64()));
    shape = ctx.emit_op("tensor_to_shape", {ctx.emit_op("reshape", {n, make_shape({1})})});
  }
  return {expr_value(settle(ctx, ctx.emit_op("arange", {shape, start, delta})))};
}

std::vector<Value> convert_eye_like(Context& ctx) {
  Ranked x = ranked(ctx, 0);
  if (x.ndim() != 2) ctx.fail("EyeLike needs a rank-2 input, got rank ", x.ndim());
  DataType dtype = x.dtype;
  if (ctx.has_attr("dtype")) {
    auto d = dtype_of(int(ctx.attr_int("dtype")));
    if (!d) ctx.unsupported("dtype " + onnx_type_name(int(ctx.attr_int("dtype"))));
    dtype = *d;
  }
  Attrs a = one("k", ctx.attr_int("k", 0));
  a.set("dtype", dtype);
  return {expr_value(ctx.emit_op("eye", {make_shape(x.dims)}, a))};
}

std::vector<Value> convert_one_hot(Context& ctx) {
  std::optional<Dims> depth = ctx.sym_values(1);
  if (!depth) {
    if (auto f = ctx.const_floats(1); f && f->size() == 1) depth = Dims{SymExpr(int64_t((*f)[0]))};
  }
  Expr shape;
  if (depth) {
    if (depth->size() != 1) ctx.fail("depth must hold one value");
    shape = make_shape(*depth);
  } else {
    Expr d = ctx.emit_op("astype", {ctx.expr(1)}, one("dtype", DataType::i64()));
    shape = ctx.emit_op("tensor_to_shape", {ctx.emit_op("reshape", {d, make_shape({1})})});
  }
  Expr r = ctx.emit_op("one_hot", {ctx.expr(0), ctx.expr(2), shape}, one("axis", ctx.attr_int("axis", -1)));
  return {expr_value(settle(ctx, r))};
}

// ---- Data-dependent: NonZero, Compress, Unique ---------------------------------------------------------

std::vector<Value> convert_nonzero(Context& ctx) {
  int rank = ctx.ndim(0);
  Expr r = ctx.emit_op("nonzero", {ctx.expr(0)});
  Dims want(2);
  if (rank >= 0) want[0] = int64_t(rank);
  return {expr_value(settle(ctx, r, want))};
}

// Compress = take(x, nonzero(cond)); x flattened when no axis is given.
std::vector<Value> convert_compress(Context& ctx) {
  Ranked x = ranked(ctx, 0);
  Expr data = x.expr(ctx);
  int64_t ax = 0;
  if (ctx.has_attr("axis")) {
    ax = axis_of(ctx, ctx.attr_int("axis"), x.ndim());
  } else {
    data = ctx.emit_op("reshape", {data, make_shape({ctx.ana().simplify(product(x.dims))})});
  }
  SymExpr n = ctx.fresh_sym("n");
  Expr nz = settle(ctx, ctx.emit_op("nonzero", {ctx.expr(1)}), {1, n});
  Expr idx = ctx.emit_op("reshape", {nz, make_shape({n})});
  return {expr_value(ctx.emit_op("take", {data, idx}, one("axis", ax)))};
}

std::vector<Value> convert_unique(Context& ctx) {
  Ranked x = ranked(ctx, 0);
  Expr data = x.expr(ctx);
  Dims dims = x.dims;
  int ax = 0;
  if (ctx.has_attr("axis")) {
    ax = axis_of(ctx, ctx.attr_int("axis"), x.ndim());
  } else {
    dims = {ctx.ana().simplify(product(x.dims))};
    data = ctx.emit_op("reshape", {data, make_shape(dims)});
  }
  Attrs a = one("axis", int64_t(ax));
  a.set("sorted", ctx.attr_int("sorted", 1) != 0);
  Expr t = ctx.emit_op("unique", {data}, a);
  SymExpr u = ctx.fresh_sym("u");
  Dims ydims = dims;
  ydims[ax] = u;
  std::vector<Dims> want{ydims, {u}, {dims[ax]}, {u}};
  std::vector<Value> out;
  for (size_t i = 0; i < 4 && i < ctx.num_outputs(); ++i) {
    out.push_back(expr_value(settle(ctx, ctx.emit(make_tuple_get_item(t, int(i))), want[i])));
  }
  return out;
}

// ---- Trilu, ReverseSequence, DepthToSpace, SpaceToDepth, CenterCropPad, Col2Im -------------

std::vector<Value> convert_trilu(Context& ctx) {
  Expr k = ctx.has_input(1) ? ctx.expr(1) : ctx.scalar(DataType::i64(), 0);
  if (ctx.has_input(1) && ctx.ndim(1) == 1) k = ctx.emit_op("reshape", {k, make_shape({})});
  return {expr_value(ctx.emit_op("trilu", {ctx.expr(0), k}, one("upper", ctx.attr_int("upper", 1) != 0)))};
}

std::vector<Value> convert_reverse_sequence(Context& ctx) {
  Attrs a = one("batch_axis", ctx.attr_int("batch_axis", 1));
  a.set("time_axis", ctx.attr_int("time_axis", 0));
  return {expr_value(ctx.emit_op("reverse_sequence", {ctx.expr(0), ctx.expr(1)}, a))};
}

// reshape -> permute_dims -> reshape, the shapes computed symbolically.
Expr reshuffle(Context& ctx, Expr x, const Dims& split, const Ints& perm, const Dims& out) {
  const Analyzer& ana = ctx.ana();
  Dims s;
  for (const SymExpr& d : split) s.push_back(ana.simplify(d));
  Expr r = ctx.emit_op("reshape", {x, make_shape(s)});
  Expr t = ctx.emit_op("permute_dims", {r}, one("axes", perm));
  Dims o;
  for (const SymExpr& d : out) o.push_back(ana.simplify(d));
  return ctx.emit_op("reshape", {t, make_shape(o)});
}

std::vector<Value> convert_depth_to_space(Context& ctx) {
  Ranked x = ranked(ctx, 0);
  if (x.ndim() != 4) ctx.fail("needs a rank-4 input, got rank ", x.ndim());
  int64_t bs = ctx.attr_int("blocksize");
  if (bs <= 0) ctx.fail("blocksize must be positive");
  const Dims& d = x.dims;
  SymExpr c = floordiv(d[1], SymExpr(bs * bs));
  Dims out{d[0], c, d[2] * bs, d[3] * bs};
  if (ctx.attr_string("mode", "DCR") == "CRD")
    return {expr_value(reshuffle(ctx, x.expr(ctx), {d[0], c, bs, bs, d[2], d[3]}, {0, 1, 4, 2, 5, 3}, out))};
  return {expr_value(reshuffle(ctx, x.expr(ctx), {d[0], bs, bs, c, d[2], d[3]}, {0, 3, 4, 1, 5, 2}, out))};
}

std::vector<Value> convert_space_to_depth(Context& ctx) {
  Ranked x = ranked(ctx, 0);
  if (x.ndim() != 4) ctx.fail("needs a rank-4 input, got rank ", x.ndim());
  int64_t bs = ctx.attr_int("blocksize");
  if (bs <= 0) ctx.fail("blocksize must be positive");
  const Dims& d = x.dims;
  SymExpr h = floordiv(d[2], SymExpr(bs)), w = floordiv(d[3], SymExpr(bs));
  return {expr_value(
      reshuffle(ctx, x.expr(ctx), {d[0], d[1], h, bs, w, bs}, {0, 3, 5, 1, 2, 4}, {d[0], d[1] * (bs * bs), h, w}))};
}

// CenterCropPad with a target known only at run time, d and t the dims and
// targets of the listed axes: slice [max(d - t, 0) // 2, + min(d, t)), then
// pad max(t - d, 0) split as p // 2 before and the rest after.
Expr center_crop_pad_runtime(Context& ctx, const Ranked& x, const Ints& axes) {
  DataType i64 = DataType::i64();
  int64_t r = x.ndim(), k = int64_t(axes.size());
  Ints ax, both;
  Dims d, want = x.dims;
  for (int64_t a : axes) {
    ax.push_back(axis_of(ctx, a, int(r)));
    d.push_back(x.dims[ax.back()]);
    want[ax.back()] = SymExpr();
  }
  for (int64_t a : ax) both.push_back(a);
  for (int64_t a : ax) both.push_back(a + r);
  Expr t = as_i64(ctx, ctx.expr(1)), dims = dims_tensor(ctx, d), zero = ctx.scalar(i64, 0), two = ctx.scalar(i64, 2);
  Expr crop = ctx.emit_op("maximum", {ctx.emit_op("subtract", {dims, t}), zero});
  Expr begin = ctx.emit_op("floor_divide", {crop, two});
  Expr end = ctx.emit_op("add", {begin, ctx.emit_op("minimum", {dims, t})});
  Expr sliced =
      ctx.emit_op("dynamic_strided_slice", {x.expr(ctx), begin, end, i64_const(ctx, ax), i64_const(ctx, Ints(k, 1))});
  Expr extra = ctx.emit_op("maximum", {ctx.emit_op("subtract", {t, dims}), zero});
  Expr before = ctx.emit_op("floor_divide", {extra, two});
  Expr after = ctx.emit_op("subtract", {extra, before});
  Expr zeros = ctx.emit_op("zeros", {make_shape({2 * r})}, one("dtype", i64));
  Expr pads = ctx.emit_op("scatter_elements",
                          {zeros, i64_const(ctx, both), ctx.emit_op("concat", {make_tuple({before, after})})});
  Expr padded = ctx.emit_op("pad", {sliced, ctx.emit_op("tensor_to_shape", {pads}), ctx.scalar(x.dtype, 0)});
  return settle(ctx, padded, want);
}

// CenterCropPad with a known target: crop (slice from (d - t) // 2) where the
// target is smaller, pad (with (t - d) // 2 before) where it is larger.
std::vector<Value> convert_center_crop_pad(Context& ctx) {
  Ranked x = ranked(ctx, 0);
  Ints axes = ctx.attr_ints("axes");
  if (axes.empty())
    for (int i = 0; i < x.ndim(); ++i) axes.push_back(i);
  auto target = ctx.sym_values(1);
  if (!target) return {expr_value(center_crop_pad_runtime(ctx, x, axes))};
  if (target->size() != axes.size()) ctx.fail(target->size(), " target dims for ", axes.size(), " axes");
  const Analyzer& ana = ctx.ana();
  Ints crop_axes;
  Dims begin, end, pads(2 * x.ndim(), SymExpr(0));
  bool pad = false;
  for (size_t j = 0; j < axes.size(); ++j) {
    int ax = axis_of(ctx, axes[j], x.ndim());
    SymExpr d = x.dims[ax], t = (*target)[j];
    if (ana.can_prove_less_equal(t, d)) {
      if (d == t) continue;
      SymExpr b = ana.simplify(floordiv(d - t, SymExpr(2)));
      crop_axes.push_back(ax);
      begin.push_back(b);
      end.push_back(ana.simplify(b + t));
    } else if (ana.can_prove_less_equal(d, t)) {
      SymExpr b = ana.simplify(floordiv(t - d, SymExpr(2)));
      pads[ax] = b;
      pads[ax + x.ndim()] = ana.simplify(t - d - b);
      pad = true;
    } else {
      ctx.unsupported("a target dim that may be larger or smaller than the input's");
    }
  }
  Expr r = x.expr(ctx);
  if (!crop_axes.empty()) {
    Attrs a = one("axes", crop_axes);
    a.set("begin", begin);
    a.set("end", end);
    r = ctx.emit_op("strided_slice", {r}, a);
  }
  if (pad) r = ctx.emit_op("pad", {r, make_shape(pads), ctx.scalar(x.dtype, 0)}, one("mode", std::string("constant")));
  return {expr_value(r)};
}

std::vector<Value> convert_col2im(Context& ctx) {
  Ranked x = ranked(ctx, 0);
  auto image = ctx.sym_values(1), block = ctx.sym_values(2);
  Attrs a = one("dilations", ctx.attr_ints("dilations"));
  a.set("pads", ctx.attr_ints("pads"));
  a.set("strides", ctx.attr_ints("strides"));
  Expr r = ctx.emit_op("col2im", {x.expr(ctx), shape_operand(ctx, 1, image), shape_operand(ctx, 2, block)}, a);
  Dims want{x.dims[0]};
  return {expr_value(settle(ctx, r, want))};
}

}  // namespace

void register_shape_converters(ConverterRegistry& r) {
  struct Entry {
    const char* op;
    int min_opset;
    std::vector<Value> (*fn)(Context&);
  };
  static const Entry kTable[] = {
      {"Constant", 1, convert_constant},
      {"Shape", 1, convert_shape},
      {"Size", 1, convert_size},
      {"Reshape", 1, convert_reshape},
      {"Flatten", 1, convert_flatten},
      {"Transpose", 1, convert_transpose},
      {"Squeeze", 1, convert_squeeze},
      {"Unsqueeze", 1, convert_unsqueeze},
      {"Concat", 1, convert_concat},
      {"Split", 1, convert_split},
      {"Slice", 1, convert_slice},
      {"Gather", 1, convert_gather},
      {"GatherElements", 11, convert_gather_elements},
      {"GatherND", 11, convert_gather_nd},
      {"Scatter", 9, convert_scatter_elements},
      {"ScatterElements", 11, convert_scatter_elements},
      {"ScatterND", 11, convert_scatter_nd},
      {"Expand", 8, convert_expand},
      {"Tile", 6, convert_tile},
      {"Pad", 1, convert_pad},
      {"ConstantOfShape", 9, convert_constant_of_shape},
      {"Range", 11, convert_range},
      {"EyeLike", 9, convert_eye_like},
      {"OneHot", 9, convert_one_hot},
      {"NonZero", 9, convert_nonzero},
      {"Compress", 9, convert_compress},
      {"Unique", 11, convert_unique},
      {"Trilu", 14, convert_trilu},
      {"ReverseSequence", 10, convert_reverse_sequence},
      {"DepthToSpace", 1, convert_depth_to_space},
      {"SpaceToDepth", 1, convert_space_to_depth},
      {"CenterCropPad", 18, convert_center_crop_pad},
      {"Col2Im", 18, convert_col2im},
  };
  for (const Entry& e : kTable) r.add(e.op, e.min_opset, e.fn);
}

}  // namespace relax::onnx_fe
