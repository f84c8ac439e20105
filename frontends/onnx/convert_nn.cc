// ONNX converters: the nn family. Convolution and pooling (with ONNX's
// auto_pad resolved to explicit padding at import time), normalisations
// (composed from reductions and elementwise ops), sampling (grid_sample,
// affine_grid, roi_align) and losses. Resize is in convert_resize.cc,
// attention in convert_attention.cc.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include "frontends/onnx/nn_util.h"

namespace relax::onnx_fe {
namespace {

using namespace nn;

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
  if (s->size() < 3) ctx.fail("input ", i, " must have rank >= 3, got ", s->size());
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
  Dims xs = ctx.bound_shape(0), ws = ctx.bound_shape(1);
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
  return {expr_value(y), expr_value(slice_axis(ctx, padded, 2, xs[2], total))};
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
    Dims xs = ctx.bound_shape(0);
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
  Dims xs = ctx.bound_shape(0);
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

// LpNormalization: x / ||x||_p along axis (p 1 or 2); 0 where the norm is
// 0 (ONNX's reference: not the NaN of 0 / 0).
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
  DataType dt = as<TensorSI>(sinfo_of(x)) ? as<TensorSI>(sinfo_of(x))->dtype : DataType::f32();
  Expr zero = ctx.scalar(dt, 0);
  Expr is_zero = op(ctx, "equal", {norm, zero});
  return {expr_value(op(ctx, "where", {is_zero, zero, op(ctx, "divide", {x, norm})}))};
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
  r.add("GridSample", 16, convert_grid_sample);
  r.add("AffineGrid", 20, convert_affine_grid);
  r.add("RoiAlign", 10, convert_roi_align);
  r.add("NegativeLogLikelihoodLoss", 12, convert_nll_loss);
  r.add("SoftmaxCrossEntropyLoss", 12, convert_sce_loss);
}

}  // namespace relax::onnx_fe
