// ONNX converters: indexing (gathers, scatters, TensorScatter), Expand,
// Tile, Pad, generators (ConstantOfShape, Range, EyeLike, OneHot),
// data-dependent ops (NonZero, Compress, Unique) and layout ops (Trilu,
// ReverseSequence, DepthToSpace, SpaceToDepth, CenterCropPad, Col2Im). Same
// three regimes as convert_shape.cc: import-time values, the tensor path,
// run-time shapes.
#include <algorithm>
#include <cmath>
#include <limits>

#include "frontends/onnx/compose.h"
#include "frontends/onnx/onnx_proto.h"
#include "frontends/onnx/shape_util.h"

namespace relax::onnx_fe {
namespace {

using namespace shape;

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

// The indices of a Gather along an axis of size `dim`: constant ones are
// checked here (an error naming the index) and made non-negative; others go
// to take as they are, which counts negative ones from the end and fails
// the run on one out of range, naming the node (passes/legalize).
Expr gather_indices(Context& ctx, size_t i, int64_t axis, const SymExpr& dim) {
  auto idx = ctx.const_ints(i);
  if (!idx || !dim.is_const()) return ctx.expr(i);
  int64_t n = dim.const_value();
  for (int64_t& v : *idx) {
    if (v < -n || v >= n)
      ctx.fail("index ", v, " is out of range for axis ", axis, " of size ", n, " (valid: ", -n, " to ", n - 1, ")");
    if (v < 0) v += n;
  }
  auto s = ctx.shape(i);
  Ints shape;
  for (const SymExpr& d : *s) shape.push_back(d.const_value());
  return ctx.constant(HostTensor::from_ints(ctx.dtype(i), shape, *idx));
}

std::vector<Value> convert_gather(Context& ctx) {
  if (auto v = gather_sym(ctx)) return {*v};
  Ranked x = ranked(ctx, 0);
  int ax = axis_of(ctx, ctx.attr_int("axis", 0), x.ndim());
  // One constant index into a dim of known size (a fused QKV projection's
  // q, k and v): a slice of one element without its axis, which a matmul
  // reading it reads in place (passes/fold_matmul_views.cc).
  if (auto one_idx = ctx.const_ints(1);
      one_idx && one_idx->size() == 1 && ctx.shape(1) && ctx.shape(1)->empty() && x.dims[ax].is_const()) {
    int64_t i = (*one_idx)[0], dim = x.dims[ax].const_value();
    if (i < 0) i += dim;
    if (i >= 0 && i < dim) {
      Expr part = slice_axis(ctx, x.expr(ctx), ax, i, i + 1);
      return {expr_value(ctx.emit_op("squeeze", {part}, one("axis", Ints{ax})))};
    }
  }
  Expr idx = gather_indices(ctx, 1, ax, x.dims[ax]);
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

// TensorScatter (opset 24): present = past with update[p..., s, ...] written
// at past[p..., w[p0] + s, ...] (w = write_indices, zeros when absent; modulo
// the cache length when circular): one scatter_elements whose indices are
// w + s.
std::vector<Value> convert_tensor_scatter(Context& ctx) {
  auto cs = ctx.shape(0), us = ctx.shape(1);
  if (!cs || !us) ctx.unsupported("TensorScatter operands of unknown shape");
  int nd = int(cs->size());
  if (int(us->size()) != nd) ctx.fail("past_cache and update ranks differ");
  int64_t axis = ctx.attr_int("axis", -2);
  if (axis < 0) axis += nd;
  if (axis <= 0 || axis >= nd) ctx.fail("axis ", ctx.attr_int("axis", -2), " is out of range or the batch axis");
  std::string mode = ctx.attr_string("mode", "linear");
  if (mode != "linear" && mode != "circular") ctx.fail("unknown mode '", mode, "'");
  Dims at(size_t(nd), SymExpr(1));
  at[size_t(axis)] = (*us)[size_t(axis)];
  Expr pos = reshape(ctx, iota(ctx, (*us)[size_t(axis)]), at);
  if (ctx.has_input(2)) {
    Dims batch(size_t(nd), SymExpr(1));
    batch[0] = (*cs)[0];
    pos = add(ctx, pos, reshape(ctx, as_i64(ctx, ctx.expr(2)), batch));
  }
  if (mode == "circular") pos = op(ctx, "mod", {pos, dim_scalar(ctx, (*cs)[size_t(axis)])});
  Expr idx = op(ctx, "broadcast_to", {pos, make_shape(*us)});
  return {expr_value(op(ctx, "scatter_elements", {ctx.expr(0), idx, ctx.expr(1)}, {{"axis", axis}}))};
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

void register_tensor_converters(ConverterRegistry& r) {
  struct Entry {
    const char* op;
    int min_opset;
    std::vector<Value> (*fn)(Context&);
  };
  static const Entry kTable[] = {
      {"Gather", 1, convert_gather},
      {"GatherElements", 11, convert_gather_elements},
      {"GatherND", 11, convert_gather_nd},
      {"Scatter", 9, convert_scatter_elements},
      {"ScatterElements", 11, convert_scatter_elements},
      {"ScatterND", 11, convert_scatter_nd},
      {"TensorScatter", 24, convert_tensor_scatter},
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
