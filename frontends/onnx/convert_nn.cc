// ONNX converters: the nn family. Convolution and pooling (with ONNX's
// auto_pad resolved to explicit padding at import time), normalisations
// (composed from reductions and elementwise ops), resampling (resize,
// grid_sample, affine_grid, roi_align), losses, attention and rotary
// embeddings.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include "frontends/onnx/context.h"

namespace relax::onnx_fe {
namespace {

using Dims = std::vector<SymExpr>;
using Ints = std::vector<int64_t>;

constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- Small helpers -------------------------------------------------------------

int known_rank(Context& ctx, size_t i) {
  int r = ctx.ndim(i);
  if (r < 0) ctx.unsupported(cat("input ", i, " of unknown rank"));
  return r;
}

Dims known_shape(Context& ctx, size_t i) {
  auto s = ctx.shape(i);
  if (!s) ctx.unsupported(cat("input ", i, " of unknown shape"));
  return *s;
}

Ints range_ints(int64_t begin, int64_t end) {
  Ints v;
  for (int64_t i = begin; i < end; ++i) v.push_back(i);
  return v;
}

Expr op(Context& ctx, const std::string& name, std::vector<Expr> args, Attrs attrs = {}) {
  return ctx.emit_op(name, std::move(args), std::move(attrs));
}

Expr reshape(Context& ctx, Expr x, Dims shape) { return op(ctx, "reshape", {x, make_shape(std::move(shape))}); }

Expr slice(Context& ctx, Expr x, int64_t axis, SymExpr begin, SymExpr end) {
  return op(ctx, "strided_slice", {x}, {{"axes", Ints{axis}}, {"begin", Dims{begin}}, {"end", Dims{end}}});
}

Expr concat(Context& ctx, std::vector<Expr> xs, int64_t axis) {
  return op(ctx, "concat", {make_tuple(std::move(xs))}, {{"axis", axis}});
}

// A per-channel vector (C,) reshaped to (C, 1, ..., 1) so that it broadcasts
// against an (N, C, spatial...) tensor of rank `nd`.
Expr per_channel(Context& ctx, Expr v, int nd) {
  if (nd <= 2) return v;
  return op(ctx, "expand_dims", {v}, {{"axis", range_ints(1, nd - 1)}});
}

// Adds an optional per-channel bias (input `i`) to y of rank `nd`.
Expr add_bias(Context& ctx, Expr y, size_t i, int nd) {
  if (!ctx.has_input(i)) return y;
  return op(ctx, "add", {y, per_channel(ctx, ctx.expr(i), nd)});
}

// The float scalar `v` in x's dtype.
Expr scalar_like(Context& ctx, DataType dtype, double v) {
  return ctx.scalar(dtype.is_void() ? DataType::f32() : dtype, v);
}

// A rank-1 f32 constant.
Expr float_vector(Context& ctx, const std::vector<double>& v, const std::string& hint) {
  return ctx.constant(HostTensor::from_floats(DataType::f32(), {int64_t(v.size())}, v), hint);
}

// The dims a shape-like input (sizes, output_shape, ...) holds: its symbolic
// values when known at import time, else fresh variables bound at run time by
// a match_cast of the tensor converted to a shape.
Dims shape_input(Context& ctx, size_t i, const std::string& hint) {
  if (auto v = ctx.sym_values(i)) return *v;
  auto s = ctx.shape(i);
  if (!s || s->size() != 1 || !(*s)[0].is_const()) ctx.unsupported(cat("input ", i, " of unknown length"));
  Dims syms;
  for (int64_t k = 0; k < (*s)[0].const_value(); ++k) syms.push_back(ctx.fresh_sym(cat(hint, k)));
  Expr shape = op(ctx, "tensor_to_shape", {ctx.expr(i)});
  ctx.emit_match_cast(shape, shape_si(syms));
  return syms;
}

// ---- Convolution and pooling geometry -----------------------------------------

// Kernel, strides, dilations and pads (all begins, then all ends) per
// spatial axis, with auto_pad resolved.
struct Geometry {
  Ints kernel, strides, dilations, pads;
};

Ints list_attr(Context& ctx, const std::string& name, int sp, int64_t fill) {
  Ints v = ctx.attr_ints(name);
  if (v.empty()) return Ints(size_t(sp), fill);
  if (int(v.size()) != sp) ctx.fail(name, " has ", v.size(), " values for ", sp, " spatial axes");
  return v;
}

// Explicit pads for auto_pad SAME_UPPER / SAME_LOWER: the output size is
// ceil(in / stride) and the total padding is split, the extra element going
// at the end (UPPER) or the beginning (LOWER). Needs the input size unless the
// stride is 1.
void same_pads(Context& ctx, Geometry& g, const std::optional<Dims>& in, bool upper) {
  size_t sp = g.kernel.size();
  for (size_t i = 0; i < sp; ++i) {
    int64_t eff = (g.kernel[i] - 1) * g.dilations[i] + 1, total;
    if (g.strides[i] == 1) {
      total = eff - 1;
    } else {
      if (!in || !(*in)[i].is_const()) ctx.unsupported("auto_pad SAME with a stride over a symbolic dim");
      int64_t n = (*in)[i].const_value(), s = g.strides[i];
      total = std::max<int64_t>(0, ((n + s - 1) / s - 1) * s + eff - n);
    }
    int64_t small = total / 2, big = total - small;
    g.pads[i] = upper ? small : big;
    g.pads[sp + i] = upper ? big : small;
  }
}

// Reads the geometry attributes for `sp` spatial axes; `kernel` is the
// weight's spatial dims (conv) when kernel_shape is absent; `in` the input's.
Geometry read_geometry(Context& ctx, int sp, const std::optional<Dims>& kernel, const std::optional<Dims>& in) {
  Geometry g;
  g.kernel = ctx.attr_ints("kernel_shape");
  if (g.kernel.empty() && kernel) {
    for (const SymExpr& k : *kernel) g.kernel.push_back(k.is_const() ? k.const_value() : -1);
  }
  g.strides = list_attr(ctx, "strides", sp, 1);
  g.dilations = list_attr(ctx, "dilations", sp, 1);
  g.pads = ctx.attr_ints("pads");
  if (g.pads.empty()) g.pads.assign(size_t(2 * sp), 0);
  if (int(g.pads.size()) != 2 * sp) ctx.fail("pads has ", g.pads.size(), " values for ", sp, " spatial axes");
  std::string auto_pad = ctx.attr_string("auto_pad", "NOTSET");
  if (auto_pad == "VALID") {
    std::fill(g.pads.begin(), g.pads.end(), 0);
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    if (int(g.kernel.size()) != sp || std::count(g.kernel.begin(), g.kernel.end(), -1))
      ctx.unsupported("auto_pad SAME with an unknown kernel size");
    same_pads(ctx, g, in, auto_pad == "SAME_UPPER");
  } else if (auto_pad != "NOTSET") {
    ctx.fail("unknown auto_pad '", auto_pad, "'");
  }
  return g;
}

std::optional<Dims> spatial_dims(Context& ctx, size_t i) {
  auto s = ctx.shape(i);
  if (!s) return std::nullopt;
  return Dims(s->begin() + 2, s->end());
}

Attrs window_attrs(const Geometry& g) {
  return {{"strides", g.strides}, {"padding", g.pads}, {"dilation", g.dilations}};
}

// ---- Conv, ConvTranspose, DeformConv -----------------------------------------

std::vector<Value> convert_conv(Context& ctx) {
  int nd = known_rank(ctx, 0);
  if (nd < 3) ctx.fail("input must have rank >= 3, got ", nd);
  Geometry g = read_geometry(ctx, nd - 2, spatial_dims(ctx, 1), spatial_dims(ctx, 0));
  Attrs attrs = window_attrs(g);
  attrs.set("groups", ctx.attr_int("group", 1));
  Expr y = op(ctx, "conv", {ctx.expr(0), ctx.expr(1)}, attrs);
  return {expr_value(add_bias(ctx, y, 2, nd))};
}

std::vector<Value> convert_deform_conv(Context& ctx) {
  int nd = known_rank(ctx, 0);
  if (nd < 3) ctx.fail("input must have rank >= 3, got ", nd);
  Geometry g = read_geometry(ctx, nd - 2, spatial_dims(ctx, 1), spatial_dims(ctx, 0));
  Attrs attrs = window_attrs(g);
  attrs.set("groups", ctx.attr_int("group", 1));
  attrs.set("offset_groups", ctx.attr_int("offset_group", 1));
  std::vector<Expr> args = {ctx.expr(0), ctx.expr(1), ctx.expr(2)};
  if (ctx.has_input(4)) args.push_back(ctx.expr(4));
  Expr y = op(ctx, "deform_conv", args, attrs);
  return {expr_value(add_bias(ctx, y, 3, nd))};
}

// ConvTranspose: output_shape (or SAME auto_pad) fixes the total padding
// stride * (in - 1) + output_padding + (k - 1) * dilation + 1 - out; a
// negative end padding becomes extra output_padding.
std::vector<Value> convert_conv_transpose(Context& ctx) {
  int nd = known_rank(ctx, 0), sp = nd - 2;
  if (nd < 3) ctx.fail("input must have rank >= 3, got ", nd);
  std::string auto_pad = ctx.attr_string("auto_pad", "NOTSET");
  Geometry g;
  g.strides = list_attr(ctx, "strides", sp, 1);
  g.dilations = list_attr(ctx, "dilations", sp, 1);
  g.pads = ctx.attr_ints("pads");
  if (g.pads.empty() || auto_pad == "VALID") g.pads.assign(size_t(2 * sp), 0);
  Ints opad = list_attr(ctx, "output_padding", sp, 0);
  Ints out_shape = ctx.attr_ints("output_shape");
  if (out_shape.size() > size_t(sp)) out_shape.erase(out_shape.begin(), out_shape.end() - sp);
  bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  if (same || !out_shape.empty()) {
    auto kernel = spatial_dims(ctx, 1);
    Ints k = ctx.attr_ints("kernel_shape");
    auto in = spatial_dims(ctx, 0);
    for (int i = 0; i < sp; ++i) {
      int64_t ki = !k.empty() ? k[i] : (kernel && (*kernel)[i].is_const() ? (*kernel)[i].const_value() : -1);
      if (ki < 0) ctx.unsupported("ConvTranspose output_shape with an unknown kernel size");
      int64_t total;
      if (out_shape.empty()) {  // SAME: out = in * stride
        total = opad[i] + (ki - 1) * g.dilations[i] + 1 - g.strides[i];
      } else {
        if (!in || !(*in)[i].is_const()) ctx.unsupported("ConvTranspose output_shape over a symbolic dim");
        total = g.strides[i] * ((*in)[i].const_value() - 1) + opad[i] + (ki - 1) * g.dilations[i] + 1 - out_shape[i];
      }
      int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);  // floor(total / 2)
      bool upper = auto_pad == "SAME_UPPER";
      int64_t begin = upper ? half : total - half, end = upper ? total - half : half;
      if (begin < 0) ctx.unsupported("ConvTranspose output_shape larger than the full result at the start");
      if (end < 0) opad[i] -= end, end = 0;
      g.pads[i] = begin;
      g.pads[sp + i] = end;
    }
  }
  Attrs attrs = window_attrs(g);
  attrs.set("output_padding", opad);
  attrs.set("groups", ctx.attr_int("group", 1));
  Expr y = op(ctx, "conv_transpose", {ctx.expr(0), ctx.expr(1)}, attrs);
  return {expr_value(add_bias(ctx, y, 2, nd))};
}

// CausalConvWithState: a depthwise 1-D conv over the past state (zeros when
// absent: k - 1 steps) followed by the input, with an optional SiLU; the
// last k - 1 steps of that concatenation are the present state.
std::vector<Value> convert_causal_conv(Context& ctx) {
  Dims xs = known_shape(ctx, 0), ws = known_shape(ctx, 1);
  if (xs.size() != 3 || ws.size() != 3) ctx.fail("input and weight must have rank 3");
  std::string act = ctx.attr_string("activation", "none");
  if (act != "none" && act != "silu" && act != "swish") ctx.fail("unknown activation '", act, "'");
  if (!xs[1].is_const()) ctx.unsupported("CausalConvWithState over a symbolic channel count");
  SymExpr history = ctx.ana().simplify(ws[2] - 1);
  Expr past = ctx.has_input(3) ? ctx.expr(3)
                               : op(ctx, "zeros", {make_shape({xs[0], xs[1], history})}, {{"dtype", ctx.dtype(0)}});
  Expr padded = concat(ctx, {past, ctx.expr(0)}, 2);
  Expr y = op(ctx, "conv", {padded, ctx.expr(1)}, {{"groups", xs[1].const_value()}});
  y = add_bias(ctx, y, 2, 3);
  if (act != "none") y = op(ctx, "silu", {y});
  SymExpr total = ctx.ana().simplify(xs[2] + history);
  return {expr_value(y), expr_value(slice(ctx, padded, 2, xs[2], total))};
}

// ---- Pooling -----------------------------------------------------------------------

Attrs pool_attrs(Context& ctx, int nd) {
  if (nd < 3) ctx.fail("input must have rank >= 3, got ", nd);
  Geometry g = read_geometry(ctx, nd - 2, std::nullopt, spatial_dims(ctx, 0));
  if (int(g.kernel.size()) != nd - 2) ctx.fail("kernel_shape must have ", nd - 2, " values");
  Attrs attrs = window_attrs(g);
  attrs.set("pool_size", g.kernel);
  attrs.set("ceil_mode", ctx.attr_int("ceil_mode", 0) != 0);
  return attrs;
}

std::vector<Value> convert_max_pool(Context& ctx) {
  int nd = known_rank(ctx, 0);
  Attrs attrs = pool_attrs(ctx, nd);
  std::vector<Value> out = {expr_value(op(ctx, "max_pool", {ctx.expr(0)}, attrs))};
  if (ctx.output_used(1)) {
    attrs.set("storage_order", ctx.attr_int("storage_order", 0));
    out.push_back(expr_value(op(ctx, "max_pool_indices", {ctx.expr(0)}, attrs)));
  }
  return out;
}

std::vector<Value> convert_avg_pool(Context& ctx) {
  Attrs attrs = pool_attrs(ctx, known_rank(ctx, 0));
  attrs.set("count_include_pad", ctx.attr_int("count_include_pad", 0) != 0);
  return {expr_value(op(ctx, "avg_pool", {ctx.expr(0)}, attrs))};
}

std::vector<Value> convert_lp_pool(Context& ctx) {
  Attrs attrs = pool_attrs(ctx, known_rank(ctx, 0));
  const onnx::AttributeProto* p = ctx.attr("p");
  double pv = !p ? 2.0 : p->type() == onnx::AttributeProto::FLOAT ? p->f() : double(p->i());
  attrs.set("p", pv);
  return {expr_value(op(ctx, "lp_pool", {ctx.expr(0)}, attrs))};
}

// GlobalAveragePool / GlobalMaxPool: a keepdims reduction over the spatial axes.
Converter global_pool(const char* reduction) {
  return [reduction](Context& ctx) -> std::vector<Value> {
    int nd = known_rank(ctx, 0);
    Attrs attrs{{"axis", range_ints(2, nd)}, {"keepdims", true}};
    return {expr_value(op(ctx, reduction, {ctx.expr(0)}, attrs))};
  };
}

// MaxUnpool: the output shape is the output_shape input, else per spatial
// axis (in - 1) * stride + kernel - pad_begin - pad_end.
std::vector<Value> convert_max_unpool(Context& ctx) {
  int nd = known_rank(ctx, 0), sp = nd - 2;
  Dims out;
  if (ctx.has_input(2)) {
    out = shape_input(ctx, 2, "unpool");
  } else {
    Dims xs = known_shape(ctx, 0);
    Geometry g = read_geometry(ctx, sp, std::nullopt, std::nullopt);
    if (int(g.kernel.size()) != sp) ctx.fail("kernel_shape must have ", sp, " values");
    out = {xs[0], xs[1]};
    for (int i = 0; i < sp; ++i)
      out.push_back(ctx.ana().simplify((xs[2 + i] - 1) * g.strides[i] + (g.kernel[i] - g.pads[i] - g.pads[sp + i])));
  }
  return {expr_value(op(ctx, "max_unpool", {ctx.expr(0), ctx.expr(1)}, {{"output_shape", out}}))};
}

// ---- Normalisations ------------------------------------------------------------

// The statistics of x over `axes` (kept as unit dims): the centred x and the
// inverse standard deviation 1 / sqrt(var + eps), var the biased variance.
struct Moments {
  Expr mean, centred, inv_std;
};

Moments moments(Context& ctx, Expr x, const Ints& axes, DataType dtype, double eps) {
  Attrs keep{{"axis", axes}, {"keepdims", true}};
  Moments m;
  m.mean = op(ctx, "mean", {x}, keep);
  m.centred = op(ctx, "subtract", {x, m.mean});
  Expr var = op(ctx, "mean", {op(ctx, "multiply", {m.centred, m.centred})}, keep);
  m.inv_std = op(ctx, "rsqrt", {op(ctx, "add", {var, scalar_like(ctx, dtype, eps)})});
  return m;
}

// x in the stash dtype (stash_type 1: f32) for the statistics.
DataType stash_dtype(Context& ctx, DataType x) {
  int64_t stash = ctx.attr_int("stash_type", 1);
  if (stash != 1) ctx.unsupported(cat("stash_type ", stash));
  return x.is_void() ? x : DataType::f32();
}

Expr cast_to(Context& ctx, Expr x, DataType from, DataType to) {
  if (from == to || to.is_void()) return x;
  return op(ctx, "astype", {x}, {{"dtype", to}});
}

std::vector<Value> convert_batch_norm(Context& ctx) {
  int nd = known_rank(ctx, 0);
  if (ctx.attr_int("spatial", 1) != 1) ctx.unsupported("spatial=0");
  DataType dtype = ctx.dtype(0);
  double eps = ctx.attr_float("epsilon", 1e-5f);
  Expr x = ctx.expr(0);
  auto chan = [&](Expr v) { return per_channel(ctx, v, nd); };
  bool training = ctx.attr_int("training_mode", 0) != 0 ||
                  (ctx.opset() < 7 && ctx.attr_int("is_test", 0) == 0 && ctx.num_outputs() > 1 && ctx.output_used(1));
  if (!training) {
    Expr inv = op(ctx, "rsqrt", {op(ctx, "add", {ctx.expr(4), scalar_like(ctx, ctx.dtype(4), eps)})});
    Expr factor = op(ctx, "multiply", {ctx.expr(1), inv});
    Expr y = op(ctx, "multiply", {op(ctx, "subtract", {x, chan(ctx.expr(3))}), chan(factor)});
    return {expr_value(op(ctx, "add", {y, chan(ctx.expr(2))}))};
  }
  // Training: normalise with the batch statistics; also return the updated
  // running statistics running * momentum + batch * (1 - momentum).
  Ints axes = {0};
  for (int i = 2; i < nd; ++i) axes.push_back(i);
  Moments m = moments(ctx, x, axes, dtype, eps);
  Expr y = op(ctx, "multiply", {m.centred, m.inv_std});
  y = op(ctx, "add", {op(ctx, "multiply", {y, chan(ctx.expr(1))}), chan(ctx.expr(2))});
  double momentum = ctx.attr_float("momentum", 0.9f);
  Attrs drop{{"axis", axes}, {"keepdims", false}};
  Expr batch_mean = op(ctx, "squeeze", {m.mean}, {{"axis", axes}});
  Expr batch_var = op(ctx, "mean", {op(ctx, "multiply", {m.centred, m.centred})}, drop);
  auto update = [&](Expr running, Expr batch) {
    return op(ctx, "add",
              {op(ctx, "multiply", {running, scalar_like(ctx, dtype, momentum)}),
               op(ctx, "multiply", {batch, scalar_like(ctx, dtype, 1 - momentum)})});
  };
  return {expr_value(y), expr_value(update(ctx.expr(3), batch_mean)), expr_value(update(ctx.expr(4), batch_var))};
}

std::vector<Value> convert_instance_norm(Context& ctx) {
  int nd = known_rank(ctx, 0);
  Moments m = moments(ctx, ctx.expr(0), range_ints(2, nd), ctx.dtype(0), ctx.attr_float("epsilon", 1e-5f));
  Expr y = op(ctx, "multiply", {m.centred, m.inv_std});
  y = op(ctx, "multiply", {y, per_channel(ctx, ctx.expr(1), nd)});
  return {expr_value(add_bias(ctx, y, 2, nd))};
}

// LayerNormalization over axes [axis, rank): the layer_norm op when only Y is
// wanted and scale and bias have the normalised shape, else composed.
std::vector<Value> convert_layer_norm(Context& ctx) {
  int nd = known_rank(ctx, 0);
  int64_t axis = ctx.attr_int("axis", -1);
  if (axis < 0) axis += nd;
  if (axis < 0 || axis >= nd) ctx.fail("axis ", ctx.attr_int("axis", -1), " out of range for rank ", nd);
  double eps = ctx.attr_float("epsilon", 1e-5f);
  DataType dtype = ctx.dtype(0), stash = stash_dtype(ctx, dtype);
  Ints axes = range_ints(axis, nd);
  int norm_rank = nd - int(axis);
  bool fused = !ctx.output_used(1) && !ctx.output_used(2) && ctx.has_input(2) && stash == dtype &&
               ctx.ndim(1) == norm_rank && ctx.ndim(2) == norm_rank;
  if (fused) {
    Attrs attrs{{"axes", axes}, {"epsilon", eps}};
    return {expr_value(op(ctx, "layer_norm", {ctx.expr(0), ctx.expr(1), ctx.expr(2)}, attrs))};
  }
  Expr x = cast_to(ctx, ctx.expr(0), dtype, stash);
  Moments m = moments(ctx, x, axes, stash, eps);
  Expr y = cast_to(ctx, op(ctx, "multiply", {m.centred, m.inv_std}), stash, dtype);
  y = op(ctx, "multiply", {y, ctx.expr(1)});
  if (ctx.has_input(2)) y = op(ctx, "add", {y, ctx.expr(2)});
  return {expr_value(y), expr_value(m.mean), expr_value(m.inv_std)};
}

// GroupNormalization: x (N, C, spatial...) viewed as (N, G, C / G, spatial...)
// and normalised per (n, group); scale and bias are per channel (opset 21) or
// per group (opset 18).
std::vector<Value> convert_group_norm(Context& ctx) {
  int nd = known_rank(ctx, 0);
  Dims xs = known_shape(ctx, 0);
  int64_t groups = ctx.attr_int("num_groups");
  if (groups < 1) ctx.fail("num_groups ", groups, " is not positive");
  DataType dtype = ctx.dtype(0), stash = stash_dtype(ctx, dtype);
  Dims grouped = {xs[0], SymExpr(groups), ctx.ana().simplify(floordiv(xs[1], SymExpr(groups)))};
  grouped.insert(grouped.end(), xs.begin() + 2, xs.end());
  Expr x = cast_to(ctx, reshape(ctx, ctx.expr(0), grouped), dtype, stash);
  Moments m = moments(ctx, x, range_ints(2, nd + 1), stash, ctx.attr_float("epsilon", 1e-5f));
  Expr y = cast_to(ctx, op(ctx, "multiply", {m.centred, m.inv_std}), stash, dtype);
  y = reshape(ctx, y, xs);
  auto channel_param = [&](size_t i) {
    Expr p = ctx.expr(i);
    if (ctx.opset() < 21) {  // per group: repeat each value C / G times
      p = op(ctx, "expand_dims", {p}, {{"axis", Ints{1}}});
      p = op(ctx, "broadcast_to", {p, make_shape({SymExpr(groups), grouped[2]})});
      p = reshape(ctx, p, {xs[1]});
    }
    return per_channel(ctx, p, nd);
  };
  y = op(ctx, "add", {op(ctx, "multiply", {y, channel_param(1)}), channel_param(2)});
  return {expr_value(y)};
}

// RMSNormalization: x / sqrt(mean(x^2 over [axis, rank)) + eps) * scale.
std::vector<Value> convert_rms_norm(Context& ctx) {
  int nd = known_rank(ctx, 0);
  int64_t axis = ctx.attr_int("axis", -1);
  if (axis < 0) axis += nd;
  if (axis < 0 || axis >= nd) ctx.fail("axis out of range for rank ", nd);
  DataType dtype = ctx.dtype(0), stash = stash_dtype(ctx, dtype);
  Expr x = cast_to(ctx, ctx.expr(0), dtype, stash);
  Expr ms = op(ctx, "mean", {op(ctx, "multiply", {x, x})}, {{"axis", range_ints(axis, nd)}, {"keepdims", true}});
  Expr inv = op(ctx, "rsqrt", {op(ctx, "add", {ms, scalar_like(ctx, stash, ctx.attr_float("epsilon", 1e-5f))})});
  Expr y = cast_to(ctx, op(ctx, "multiply", {x, inv}), stash, dtype);
  return {expr_value(op(ctx, "multiply", {y, ctx.expr(1)}))};
}

// LpNormalization: x / ||x||_p along axis (p 1 or 2).
std::vector<Value> convert_lp_norm(Context& ctx) {
  int64_t p = ctx.attr_int("p", 2);
  Expr x = ctx.expr(0);
  Attrs keep{{"axis", Ints{ctx.attr_int("axis", -1)}}, {"keepdims", true}};
  Expr norm;
  if (p == 1)
    norm = op(ctx, "sum", {op(ctx, "abs", {x})}, keep);
  else if (p == 2)
    norm = op(ctx, "sqrt", {op(ctx, "sum", {op(ctx, "multiply", {x, x})}, keep)});
  else
    ctx.unsupported(cat("p=", p));
  return {expr_value(op(ctx, "divide", {x, norm}))};
}

std::vector<Value> convert_lrn(Context& ctx) {
  Attrs attrs{{"size", ctx.attr_int("size")},
              {"alpha", double(ctx.attr_float("alpha", 1e-4f))},
              {"beta", double(ctx.attr_float("beta", 0.75f))},
              {"bias", double(ctx.attr_float("bias", 1.0f))}};
  return {expr_value(op(ctx, "lrn", {ctx.expr(0)}, attrs))};
}

// MeanVarianceNormalization: (x - mean) / (sqrt(var) + 1e-9) over axes.
std::vector<Value> convert_mvn(Context& ctx) {
  Ints axes = ctx.attr_ints("axes", {0, 2, 3});
  Attrs keep{{"axis", axes}, {"keepdims", true}};
  DataType dtype = ctx.dtype(0);
  Expr x = ctx.expr(0);
  Expr centred = op(ctx, "subtract", {x, op(ctx, "mean", {x}, keep)});
  Expr var = op(ctx, "mean", {op(ctx, "multiply", {centred, centred})}, keep);
  Expr denom = op(ctx, "add", {op(ctx, "sqrt", {var}), scalar_like(ctx, dtype, 1e-9)});
  return {expr_value(op(ctx, "divide", {centred, denom}))};
}

// ---- Resize, Upsample ------------------------------------------------------------

// floor(in * scale) for a float32 scale, symbolically: scale as p / q (q <=
// 1000) when it is that fraction rounded to float32; floor(n * s) is then
// (n * p) // q, or (n * p - 1) // q when s lies just below p / q.
std::optional<SymExpr> scaled_dim(const SymExpr& in, double scale, const Analyzer& ana) {
  if (in.is_const()) return SymExpr(int64_t(std::floor(double(in.const_value()) * scale)));
  for (int64_t q = 1; q <= 1000; ++q) {
    double pq = std::round(scale * double(q));
    if (double(float(pq / double(q))) != scale) continue;
    int64_t p = int64_t(pq);
    SymExpr num = in * p;
    if (scale < pq / double(q)) num = num - 1;
    return ana.simplify(floordiv(num, SymExpr(q)));
  }
  return std::nullopt;
}

struct ResizeSpec {
  Dims sizes;                  // the output shape
  std::optional<Expr> scales;  // per-axis scales for the coordinate mapping
};

// A rank-1 tensor of `n` elements, each the one-element tensor piece(i).
Expr join_pieces(Context& ctx, int64_t n, const std::function<Expr(int64_t)>& piece) {
  std::vector<Expr> parts;
  for (int64_t i = 0; i < n; ++i) parts.push_back(piece(i));
  return parts.size() == 1 ? parts[0] : concat(ctx, parts, 0);
}

// The position of `axis` in `axes`, or -1.
int64_t axis_index(const Ints& axes, int64_t axis) {
  auto it = std::find(axes.begin(), axes.end(), axis);
  return it == axes.end() ? -1 : int64_t(it - axes.begin());
}

// x's shape as an f64 tensor (the run-time size computations of Resize
// follow ONNX: float32 scales times the dims, in double precision).
Expr shape_tensor(Context& ctx, Expr x, DataType dtype) {
  Expr s = op(ctx, "shape_to_tensor", {op(ctx, "shape_of", {x})});
  return dtype == DataType::i64() ? s : op(ctx, "astype", {s}, {{"dtype", dtype}});
}

// Binds the run-time output shape `sizes` (an i64 tensor) to a shape whose
// dims outside `axes` are x's and inside are fresh variables.
Dims bind_sizes(Context& ctx, Expr sizes, const Dims& xs, const Ints& axes) {
  Dims out = xs;
  for (int64_t a : axes) out[size_t(a)] = ctx.fresh_sym(cat("resized", a));
  ctx.emit_match_cast(op(ctx, "tensor_to_shape", {sizes}), shape_si(out));
  return out;
}

// Scales known only at run time: sizes = floor(dims * scales), computed at run time.
ResizeSpec resize_runtime_scales(Context& ctx, size_t i, const Dims& xs, const Ints& axes) {
  const DataType f64 = DataType::f(64);
  Expr given = op(ctx, "astype", {ctx.expr(i)}, {{"dtype", DataType::f32()}});
  Expr full = join_pieces(ctx, int64_t(xs.size()), [&](int64_t a) {
    int64_t k = axis_index(axes, a);
    return k < 0 ? float_vector(ctx, {1.0}, "one") : slice(ctx, given, 0, k, k + 1);
  });
  Expr prod = op(ctx, "multiply", {shape_tensor(ctx, ctx.expr(0), f64), op(ctx, "astype", {full}, {{"dtype", f64}})});
  Expr sizes = op(ctx, "astype", {op(ctx, "floor", {prod})}, {{"dtype", DataType::i64()}});
  return {bind_sizes(ctx, sizes, xs, axes), full};
}

// keep_aspect_ratio_policy over sizes known only at run time: one scale, the
// min (not_larger) or max (not_smaller) of sizes / dims over the axes; each
// resized dim is round_half_up(scale * dim).
ResizeSpec resize_runtime_aspect(Context& ctx, size_t i, const Dims& xs, const Ints& axes, bool not_larger) {
  const DataType f64 = DataType::f(64);
  Expr dims = shape_tensor(ctx, ctx.expr(0), f64);
  Expr axis_dims = op(
      ctx, "take", {dims, ctx.constant(HostTensor::from_ints(DataType::i64(), {int64_t(axes.size())}, axes), "axes")});
  Expr ratio = op(ctx, "divide", {op(ctx, "astype", {ctx.expr(i)}, {{"dtype", f64}}), axis_dims});
  Expr scale = op(ctx, not_larger ? "min" : "max", {ratio}, {{"axis", Ints{0}}, {"keepdims", true}});
  Expr resized = op(ctx, "floor", {op(ctx, "add", {op(ctx, "multiply", {scale, axis_dims}), ctx.scalar(f64, 0.5)})});
  resized = op(ctx, "astype", {resized}, {{"dtype", DataType::i64()}});
  Expr int_dims = shape_tensor(ctx, ctx.expr(0), DataType::i64());
  Expr sizes = join_pieces(ctx, int64_t(xs.size()), [&](int64_t a) {
    int64_t k = axis_index(axes, a);
    return k < 0 ? slice(ctx, int_dims, 0, a, a + 1) : slice(ctx, resized, 0, k, k + 1);
  });
  Expr scale32 = op(ctx, "astype", {scale}, {{"dtype", DataType::f32()}});
  Expr scales = join_pieces(ctx, int64_t(xs.size()), [&](int64_t a) {
    return axis_index(axes, a) < 0 ? float_vector(ctx, {1.0}, "one") : scale32;
  });
  return {bind_sizes(ctx, sizes, xs, axes), scales};
}

// The output shape from a scales input (full rank after `axes`).
ResizeSpec resize_from_scales(Context& ctx, size_t i, const Dims& xs, const Ints& axes) {
  ResizeSpec r;
  r.sizes = xs;
  auto scales = ctx.const_floats(i);
  if (!scales) return resize_runtime_scales(ctx, i, xs, axes);
  if (scales->size() != axes.size()) ctx.fail("scales has ", scales->size(), " values for ", axes.size(), " axes");
  std::vector<double> full(xs.size(), 1.0);
  for (size_t k = 0; k < axes.size(); ++k) {
    full[size_t(axes[k])] = (*scales)[k];
    auto d = scaled_dim(xs[size_t(axes[k])], (*scales)[k], ctx.ana());
    if (!d) ctx.unsupported("Resize scale that is no simple fraction over a symbolic dim");
    r.sizes[size_t(axes[k])] = *d;
  }
  r.scales = float_vector(ctx, full, "scales");
  return r;
}

// The output shape from a sizes input, with keep_aspect_ratio_policy.
ResizeSpec resize_from_sizes(Context& ctx, size_t i, const Dims& xs, const Ints& axes) {
  ResizeSpec r;
  r.sizes = xs;
  std::string policy = ctx.attr_string("keep_aspect_ratio_policy", "stretch");
  if (policy != "stretch" && !ctx.sym_values(i)) return resize_runtime_aspect(ctx, i, xs, axes, policy == "not_larger");
  Dims sizes = shape_input(ctx, i, "size");
  if (sizes.size() != axes.size()) ctx.fail("sizes has ", sizes.size(), " values for ", axes.size(), " axes");
  if (policy == "stretch") {
    for (size_t k = 0; k < axes.size(); ++k) r.sizes[size_t(axes[k])] = sizes[k];
    return r;
  }
  if (policy != "not_larger" && policy != "not_smaller") ctx.fail("unknown keep_aspect_ratio_policy ", policy);
  double scale = policy == "not_larger" ? kInf : -kInf;
  for (size_t k = 0; k < axes.size(); ++k) {
    const SymExpr& in = xs[size_t(axes[k])];
    if (!in.is_const() || !sizes[k].is_const()) return resize_runtime_aspect(ctx, i, xs, axes, policy == "not_larger");
    double s = double(sizes[k].const_value()) / double(in.const_value());
    scale = policy == "not_larger" ? std::min(scale, s) : std::max(scale, s);
  }
  std::vector<double> full(xs.size(), 1.0);
  for (int64_t a : axes) {
    full[size_t(a)] = scale;
    r.sizes[size_t(a)] = int64_t(std::floor(scale * double(xs[size_t(a)].const_value()) + 0.5));
  }
  r.scales = float_vector(ctx, full, "scales");
  return r;
}

// roi as a full-rank constant (all starts then all ends), or the input.
Expr resize_roi(Context& ctx, size_t i, size_t rank, const Ints& axes) {
  auto roi = ctx.const_floats(i);
  if (!roi) {
    Expr given = op(ctx, "astype", {ctx.expr(i)}, {{"dtype", DataType::f32()}});
    bool all = axes == range_ints(0, int64_t(rank));
    if (all) return given;
    int64_t n = int64_t(axes.size());
    return join_pieces(ctx, int64_t(2 * rank), [&](int64_t j) {
      int64_t a = j % int64_t(rank), k = axis_index(axes, a), end = j / int64_t(rank);
      if (k < 0) return float_vector(ctx, {double(end)}, end ? "one" : "zero");
      return slice(ctx, given, 0, end * n + k, end * n + k + 1);
    });
  }
  if (roi->size() != 2 * axes.size()) ctx.fail("roi has ", roi->size(), " values for ", axes.size(), " axes");
  std::vector<double> full(2 * rank, 0.0);
  std::fill(full.begin() + long(rank), full.end(), 1.0);
  for (size_t k = 0; k < axes.size(); ++k) {
    full[size_t(axes[k])] = (*roi)[k];
    full[rank + size_t(axes[k])] = (*roi)[axes.size() + k];
  }
  return float_vector(ctx, full, "roi");
}

// Resize (opsets 10, 11, 13, 18, 19): inputs X, roi, scales, sizes (opset
// 10: X, scales).
std::vector<Value> convert_resize(Context& ctx) {
  int nd = known_rank(ctx, 0);
  Dims xs = known_shape(ctx, 0);
  size_t scales_in = ctx.opset() < 11 ? 1 : 2, roi_in = 1, sizes_in = 3;
  Ints axes = ctx.attr_ints("axes");
  for (int64_t& a : axes) a = a < 0 ? a + nd : a;
  if (axes.empty()) axes = range_ints(0, nd);
  auto is_empty = [&](size_t i) {
    auto s = ctx.has_input(i) ? ctx.shape(i) : std::nullopt;
    return !ctx.has_input(i) || (s && s->size() == 1 && (*s)[0].is_const(0));
  };
  ResizeSpec spec;
  if (ctx.opset() >= 11 && !is_empty(sizes_in))
    spec = resize_from_sizes(ctx, sizes_in, xs, axes);
  else if (!is_empty(scales_in))
    spec = resize_from_scales(ctx, scales_in, xs, axes);
  else
    ctx.fail("neither scales nor sizes is given");

  std::string mode = ctx.attr_string("mode", "nearest");
  std::string coord = ctx.opset() < 11 ? "asymmetric" : ctx.attr_string("coordinate_transformation_mode", "half_pixel");
  std::string nearest = ctx.opset() < 11 ? "floor" : ctx.attr_string("nearest_mode", "round_prefer_floor");
  if (mode == "bilinear" || mode == "trilinear") mode = "linear";
  if (mode == "bicubic") mode = "cubic";
  Attrs attrs{{"sizes", spec.sizes},
              {"mode", mode},
              {"coordinate_transformation_mode", coord},
              {"nearest_mode", nearest},
              {"cubic_coeff_a", double(ctx.attr_float("cubic_coeff_a", -0.75f))},
              {"exclude_outside", ctx.attr_int("exclude_outside", 0) != 0},
              {"extrapolation_value", double(ctx.attr_float("extrapolation_value", 0.0f))},
              {"antialias", ctx.attr_int("antialias", 0) != 0}};
  std::vector<Expr> args = {ctx.expr(0)};
  bool crop = coord == "tf_crop_and_resize";
  if (crop && is_empty(roi_in)) ctx.fail("tf_crop_and_resize needs roi");
  if (crop || spec.scales) {
    std::vector<double> whole(size_t(nd), 0.0);
    whole.resize(size_t(2 * nd), 1.0);
    args.push_back(crop ? resize_roi(ctx, roi_in, size_t(nd), axes) : float_vector(ctx, whole, "roi"));
  }
  if (spec.scales) args.push_back(*spec.scales);
  return {expr_value(op(ctx, "resize", args, attrs))};
}

// Upsample (opsets 7 and 9): nearest (floor of asymmetric coordinates) or
// linear resizing by the scales (an attribute at opset 7, an input after).
std::vector<Value> convert_upsample(Context& ctx) {
  int nd = known_rank(ctx, 0);
  Dims xs = known_shape(ctx, 0);
  Ints all = range_ints(0, nd);
  ResizeSpec spec;
  if (ctx.opset() < 9) {
    std::vector<double> scales;
    for (float f : ctx.attr_floats("scales")) scales.push_back(f);
    if (int(scales.size()) != nd) ctx.fail("scales has ", scales.size(), " values for rank ", nd);
    spec.sizes = xs;
    for (int i = 0; i < nd; ++i) {
      auto d = scaled_dim(xs[size_t(i)], scales[size_t(i)], ctx.ana());
      if (!d) ctx.unsupported("Upsample scale that is no simple fraction over a symbolic dim");
      spec.sizes[size_t(i)] = *d;
    }
    spec.scales = float_vector(ctx, scales, "scales");
  } else {
    spec = resize_from_scales(ctx, 1, xs, all);
  }
  std::string mode = ctx.attr_string("mode", "nearest");
  if (mode == "bilinear") mode = "linear";
  std::vector<double> roi(size_t(nd), 0.0);
  roi.resize(size_t(2 * nd), 1.0);
  Attrs attrs{{"sizes", spec.sizes},
              {"mode", mode},
              {"coordinate_transformation_mode", std::string("asymmetric")},
              {"nearest_mode", std::string("floor")}};
  Expr y = op(ctx, "resize", {ctx.expr(0), float_vector(ctx, roi, "roi"), *spec.scales}, attrs);
  return {expr_value(y)};
}

// ---- Sampling and regions -----------------------------------------------------------

std::vector<Value> convert_grid_sample(Context& ctx) {
  std::string mode = ctx.attr_string("mode", ctx.opset() < 20 ? "bilinear" : "linear");
  if (mode == "bilinear") mode = "linear";
  if (mode == "bicubic") mode = "cubic";
  Attrs attrs{{"mode", mode},
              {"padding_mode", ctx.attr_string("padding_mode", "zeros")},
              {"align_corners", ctx.attr_int("align_corners", 0) != 0}};
  return {expr_value(op(ctx, "grid_sample", {ctx.expr(0), ctx.expr(1)}, attrs))};
}

std::vector<Value> convert_affine_grid(Context& ctx) {
  Dims size = shape_input(ctx, 1, "size");
  Attrs attrs{{"size", size}, {"align_corners", ctx.attr_int("align_corners", 0) != 0}};
  return {expr_value(op(ctx, "affine_grid", {ctx.expr(0)}, attrs))};
}

std::vector<Value> convert_roi_align(Context& ctx) {
  std::string coord =
      ctx.opset() < 16 ? "output_half_pixel" : ctx.attr_string("coordinate_transformation_mode", "half_pixel");
  Attrs attrs{{"output_height", ctx.attr_int("output_height", 1)},
              {"output_width", ctx.attr_int("output_width", 1)},
              {"sampling_ratio", ctx.attr_int("sampling_ratio", 0)},
              {"spatial_scale", double(ctx.attr_float("spatial_scale", 1.0f))},
              {"mode", ctx.attr_string("mode", "avg")},
              {"coordinate_transformation_mode", coord}};
  return {expr_value(op(ctx, "roi_align", {ctx.expr(0), ctx.expr(1), ctx.expr(2)}, attrs))};
}

// ---- Losses ---------------------------------------------------------------------------

Attrs loss_attrs(Context& ctx) {
  Attrs attrs{{"reduction", ctx.attr_string("reduction", "mean")}};
  if (ctx.has_attr("ignore_index")) attrs.set("ignore_index", ctx.attr_int("ignore_index"));
  return attrs;
}

std::vector<Expr> loss_args(Context& ctx, Expr input) {
  std::vector<Expr> args = {input, ctx.expr(1)};
  if (ctx.has_input(2)) args.push_back(ctx.expr(2));
  return args;
}

std::vector<Value> convert_nll_loss(Context& ctx) {
  return {expr_value(op(ctx, "nll_loss", loss_args(ctx, ctx.expr(0)), loss_attrs(ctx)))};
}

// SoftmaxCrossEntropyLoss: nll_loss of log_softmax over the class axis; the
// log-probabilities are the optional second output.
std::vector<Value> convert_sce_loss(Context& ctx) {
  Expr log_prob = op(ctx, "log_softmax", {ctx.expr(0)}, {{"axis", int64_t(1)}});
  Expr loss = op(ctx, "nll_loss", loss_args(ctx, log_prob), loss_attrs(ctx));
  return {expr_value(loss), expr_value(log_prob)};
}

// ---- Attention (opsets 23, 24) ----------------------------------------------------------

// (B, S, H * D) -> (B, H, S, D).
Expr split_heads(Context& ctx, Expr x, int64_t heads) {
  auto shape = as<TensorSI>(sinfo_of(x))->shape;
  if (!shape) ctx.unsupported("Attention input of unknown shape");
  const Dims& d = *shape;
  Expr r = reshape(ctx, x, {d[0], d[1], SymExpr(heads), ctx.ana().simplify(floordiv(d[2], SymExpr(heads)))});
  return op(ctx, "permute_dims", {r}, {{"axes", Ints{0, 2, 1, 3}}});
}

const Dims& dims_of(Context& ctx, const Expr& e) {
  const auto* t = as<TensorSI>(sinfo_of(e));
  if (!t || !t->shape) ctx.unsupported("Attention operand of unknown shape");
  return *t->shape;
}

int64_t const_dim(Context& ctx, const SymExpr& d, const char* what) {
  if (!d.is_const()) ctx.unsupported(cat("Attention with a symbolic ", what));
  return d.const_value();
}

// Repeats each of the kv heads `rep` times: (B, H, L, D) -> (B, H * rep, L, D).
Expr repeat_heads(Context& ctx, Expr x, int64_t rep) {
  if (rep == 1) return x;
  Dims d = dims_of(ctx, x);
  Expr e = op(ctx, "expand_dims", {x}, {{"axis", Ints{2}}});
  e = op(ctx, "broadcast_to", {e, make_shape({d[0], d[1], SymExpr(rep), d[2], d[3]})});
  return reshape(ctx, e, {d[0], ctx.ana().simplify(d[1] * rep), d[2], d[3]});
}

// An additive (q, kv) constant: 0 where key j <= query i + offset, else -inf.
Expr causal_bias(Context& ctx, DataType dtype, int64_t q, int64_t kv, int64_t offset) {
  std::vector<double> v(size_t(q * kv));
  for (int64_t i = 0; i < q; ++i)
    for (int64_t j = 0; j < kv; ++j) v[size_t(i * kv + j)] = j <= i + offset ? 0.0 : -kInf;
  return ctx.constant(HostTensor::from_floats(dtype, {q, kv}, v), "causal");
}

// Per-batch key masks from nonpad_kv_seqlen (B,): 0 / -inf of shape
// (B, 1, q, kv) (causal, frontier j <= i + len - q) or (B, 1, 1, kv).
Expr nonpad_bias(Context& ctx, DataType dtype, Expr lens, int64_t q, int64_t kv, bool causal) {
  Ints js = range_ints(0, kv), is = range_ints(0, q);
  Expr j = ctx.constant(HostTensor::from_ints(DataType::i64(), {1, 1, kv}, js), "key_index");
  Expr len = op(ctx, "astype", {lens}, {{"dtype", DataType::i64()}});
  len = reshape(ctx, len, {dims_of(ctx, lens)[0], SymExpr(1), SymExpr(1)});
  Expr limit = len;  // keys j < len
  if (causal) {
    Expr i = ctx.constant(HostTensor::from_ints(DataType::i64(), {1, q, 1}, is), "query_index");
    limit = op(ctx, "add", {op(ctx, "subtract", {i, ctx.scalar(DataType::i64(), double(q - 1))}), len});
  }
  Expr allowed = op(ctx, "less", {j, limit});
  Expr bias = op(ctx, "where", {allowed, scalar_like(ctx, dtype, 0), scalar_like(ctx, dtype, -kInf)});
  return op(ctx, "expand_dims", {bias}, {{"axis", Ints{1}}});
}

// The attention mask as an additive bias, padded with -inf to kv keys.
Expr mask_bias(Context& ctx, DataType dtype, int64_t kv) {
  Expr mask = ctx.expr(3);
  if (ctx.dtype(3) == DataType::boolean())
    mask = op(ctx, "where", {mask, scalar_like(ctx, dtype, 0), scalar_like(ctx, dtype, -kInf)});
  Dims md = dims_of(ctx, mask);
  int64_t have = const_dim(ctx, md.back(), "mask length");
  if (have >= kv) return mask;
  Ints pad_shape;
  for (size_t k = 0; k + 1 < md.size(); ++k) pad_shape.push_back(const_dim(ctx, md[k], "mask dim"));
  pad_shape.push_back(kv - have);
  int64_t n = std::accumulate(pad_shape.begin(), pad_shape.end(), int64_t(1), std::multiplies<>());
  Expr pad = ctx.constant(HostTensor::from_floats(dtype, pad_shape, std::vector<double>(size_t(n), -kInf)), "mask_pad");
  return concat(ctx, {mask, pad}, -1);
}

std::vector<Value> convert_attention(Context& ctx) {
  int nd = known_rank(ctx, 0);
  DataType dtype = ctx.dtype(0);
  Expr q = ctx.expr(0), k = ctx.expr(1), v = ctx.expr(2);
  if (nd == 3) {
    int64_t qh = ctx.attr_int("q_num_heads"), kvh = ctx.attr_int("kv_num_heads");
    if (qh < 1 || kvh < 1) ctx.fail("3-D inputs need q_num_heads and kv_num_heads");
    q = split_heads(ctx, q, qh), k = split_heads(ctx, k, kvh), v = split_heads(ctx, v, kvh);
  } else if (nd != 4) {
    ctx.fail("Q must have rank 3 or 4, got ", nd);
  }
  if (ctx.has_input(4)) k = concat(ctx, {ctx.expr(4), k}, 2);
  if (ctx.has_input(5)) v = concat(ctx, {ctx.expr(5), v}, 2);
  Expr present_k = k, present_v = v;
  Dims qd = dims_of(ctx, q), kd = dims_of(ctx, k);
  int64_t q_heads = const_dim(ctx, qd[1], "head count"), kv_heads = const_dim(ctx, kd[1], "head count");
  if (q_heads % kv_heads) ctx.fail(q_heads, " query heads are no multiple of ", kv_heads, " kv heads");
  k = repeat_heads(ctx, k, q_heads / kv_heads);
  v = repeat_heads(ctx, v, q_heads / kv_heads);

  double scale =
      ctx.has_attr("scale") ? ctx.attr_float("scale") : 1.0 / std::sqrt(double(const_dim(ctx, qd[3], "head size")));
  Expr kt = op(ctx, "permute_dims", {k}, {{"axes", Ints{0, 1, 3, 2}}});
  Expr scores = op(ctx, "multiply", {op(ctx, "matmul", {q, kt}), scalar_like(ctx, dtype, scale)});
  double softcap = ctx.attr_float("softcap", 0.0f);
  if (softcap > 0) {
    Expr t = op(ctx, "tanh", {op(ctx, "divide", {scores, scalar_like(ctx, dtype, softcap)})});
    scores = op(ctx, "multiply", {t, scalar_like(ctx, dtype, softcap)});
  }

  // The additive bias: mask, causal frontier and key padding.
  int64_t q_len = const_dim(ctx, qd[2], "query length"), kv_len = const_dim(ctx, kd[2], "key length");
  bool causal = ctx.attr_int("is_causal", 0) != 0, nonpad = ctx.has_input(6);
  std::optional<Expr> bias;
  auto add = [&](Expr b) { bias = bias ? op(ctx, "add", {*bias, b}) : b; };
  if (ctx.has_input(3)) add(mask_bias(ctx, dtype, kv_len));
  if (causal && !nonpad) {
    int64_t past = ctx.has_input(4) ? const_dim(ctx, dims_of(ctx, ctx.expr(4))[2], "past length") : 0;
    add(causal_bias(ctx, dtype, q_len, kv_len, past));
  }
  if (nonpad) add(nonpad_bias(ctx, dtype, ctx.expr(6), q_len, kv_len, causal));
  Expr with_bias = bias ? op(ctx, "add", {scores, *bias}) : scores;

  DataType soft_dtype = dtype;
  if (ctx.has_attr("softmax_precision")) {
    int64_t p = ctx.attr_int("softmax_precision");
    if (p == 1)
      soft_dtype = DataType::f32();
    else if (p == 10)
      soft_dtype = DataType::f16();
    else if (p == 11)
      soft_dtype = DataType::f(64);
    else if (p == 16)
      soft_dtype = DataType::bf16();
  }
  Expr probs = op(ctx, "softmax", {cast_to(ctx, with_bias, dtype, soft_dtype)}, {{"axis", int64_t(-1)}});
  probs = cast_to(ctx, probs, soft_dtype, dtype);
  if (bias) {  // rows whose keys are all masked attend to nothing
    Expr row_max = op(ctx, "max", {*bias}, {{"axis", Ints{-1}}, {"keepdims", true}});
    Expr dead = op(ctx, "equal", {row_max, scalar_like(ctx, dtype, -kInf)});
    probs = op(ctx, "where", {dead, scalar_like(ctx, dtype, 0), probs});
  }
  Expr y = op(ctx, "matmul", {probs, v});
  if (nd == 3) {
    Dims yd = dims_of(ctx, y);
    y = op(ctx, "permute_dims", {y}, {{"axes", Ints{0, 2, 1, 3}}});
    y = reshape(ctx, y, {yd[0], yd[2], ctx.ana().simplify(yd[1] * yd[3])});
  }
  int64_t mode = ctx.attr_int("qk_matmul_output_mode", 0);
  Expr qk = mode == 2 ? with_bias : mode == 3 ? probs : scores;
  return {expr_value(y), expr_value(present_k), expr_value(present_v), expr_value(qk)};
}

// ---- RotaryEmbedding (opset 23) -------------------------------------------------------

// Rotates pairs (x1, x2) of the first rotary_embedding_dim features of each
// head by the cached angles: (x1 cos - x2 sin, x1 sin + x2 cos); pairs are
// adjacent (interleaved) or the two halves.
std::vector<Value> convert_rotary(Context& ctx) {
  int nd = known_rank(ctx, 0);
  Dims xs = known_shape(ctx, 0);
  Expr x = ctx.expr(0);
  Dims bshd;  // (B, S, H, D)
  if (nd == 4) {
    x = op(ctx, "permute_dims", {x}, {{"axes", Ints{0, 2, 1, 3}}});
    bshd = {xs[0], xs[2], xs[1], xs[3]};
  } else if (nd == 3) {
    int64_t heads = ctx.attr_int("num_heads");
    if (heads < 1) ctx.fail("3-D input needs num_heads");
    bshd = {xs[0], xs[1], SymExpr(heads), ctx.ana().simplify(floordiv(xs[2], SymExpr(heads)))};
    x = reshape(ctx, x, bshd);
  } else {
    ctx.fail("input must have rank 3 or 4, got ", nd);
  }
  SymExpr rot = bshd[3];
  if (int64_t r = ctx.attr_int("rotary_embedding_dim", 0)) rot = SymExpr(r);
  SymExpr half = ctx.ana().simplify(floordiv(rot, SymExpr(2)));
  Expr cos = ctx.expr(1), sin = ctx.expr(2);
  if (ctx.has_input(3)) {
    cos = op(ctx, "take", {cos, ctx.expr(3)}, {{"axis", int64_t(0)}});
    sin = op(ctx, "take", {sin, ctx.expr(3)}, {{"axis", int64_t(0)}});
  }
  cos = op(ctx, "expand_dims", {cos}, {{"axis", Ints{2}}});
  sin = op(ctx, "expand_dims", {sin}, {{"axis", Ints{2}}});
  bool interleaved = ctx.attr_int("interleaved", 0) != 0;
  bool partial = !ctx.ana().can_prove_equal(rot, bshd[3]);
  Expr x_rot = partial ? slice(ctx, x, 3, 0, rot) : x;
  Expr x1, x2;
  if (interleaved) {
    Expr pairs = reshape(ctx, x_rot, {bshd[0], bshd[1], bshd[2], half, SymExpr(2)});
    x1 = op(ctx, "squeeze", {slice(ctx, pairs, 4, 0, 1)}, {{"axis", Ints{4}}});
    x2 = op(ctx, "squeeze", {slice(ctx, pairs, 4, 1, 2)}, {{"axis", Ints{4}}});
  } else {
    x1 = slice(ctx, x_rot, 3, 0, half);
    x2 = slice(ctx, x_rot, 3, half, rot);
  }
  Expr real = op(ctx, "subtract", {op(ctx, "multiply", {cos, x1}), op(ctx, "multiply", {sin, x2})});
  Expr imag = op(ctx, "add", {op(ctx, "multiply", {sin, x1}), op(ctx, "multiply", {cos, x2})});
  Expr rotated;
  if (interleaved) {
    Expr pairs = concat(
        ctx, {op(ctx, "expand_dims", {real}, {{"axis", Ints{4}}}), op(ctx, "expand_dims", {imag}, {{"axis", Ints{4}}})},
        4);
    rotated = reshape(ctx, pairs, {bshd[0], bshd[1], bshd[2], rot});
  } else {
    rotated = concat(ctx, {real, imag}, 3);
  }
  if (partial) rotated = concat(ctx, {rotated, slice(ctx, x, 3, rot, bshd[3])}, 3);
  Expr y = nd == 4 ? op(ctx, "permute_dims", {rotated}, {{"axes", Ints{0, 2, 1, 3}}}) : reshape(ctx, rotated, xs);
  return {expr_value(y)};
}

}  // namespace

void register_nn_converters(ConverterRegistry& r) {
  r.add("Conv", 1, convert_conv);
  r.add("ConvTranspose", 1, convert_conv_transpose);
  r.add("DeformConv", 19, convert_deform_conv);
  r.add("CausalConvWithState", 1, convert_causal_conv);
  r.add("MaxPool", 1, convert_max_pool);
  r.add("AveragePool", 1, convert_avg_pool);
  r.add("LpPool", 1, convert_lp_pool);
  r.add("GlobalAveragePool", 1, global_pool("mean"));
  r.add("GlobalMaxPool", 1, global_pool("max"));
  r.add("MaxUnpool", 9, convert_max_unpool);
  r.add("BatchNormalization", 1, convert_batch_norm);
  r.add("InstanceNormalization", 1, convert_instance_norm);
  r.add("LayerNormalization", 17, convert_layer_norm);
  r.add("GroupNormalization", 18, convert_group_norm);
  r.add("RMSNormalization", 23, convert_rms_norm);
  r.add("LpNormalization", 1, convert_lp_norm);
  r.add("LRN", 1, convert_lrn);
  r.add("MeanVarianceNormalization", 9, convert_mvn);
  r.add("Resize", 10, convert_resize);
  r.add("Upsample", 7, convert_upsample);
  r.add("GridSample", 16, convert_grid_sample);
  r.add("AffineGrid", 20, convert_affine_grid);
  r.add("RoiAlign", 10, convert_roi_align);
  r.add("NegativeLogLikelihoodLoss", 12, convert_nll_loss);
  r.add("SoftmaxCrossEntropyLoss", 12, convert_sce_loss);
  r.add("Attention", 23, convert_attention);
  r.add("RotaryEmbedding", 23, convert_rotary);
}

}  // namespace relax::onnx_fe
