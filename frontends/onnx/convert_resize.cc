// ONNX converters: Resize and Upsample, with output sizes computed symbolically
// where the scales or sizes are known at import time.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include "frontends/onnx/nn_util.h"

namespace relax::onnx_fe {
namespace {

using namespace nn;

// ---- Resize, Upsample ------------------------------------------------------------

void check_scale(Context& ctx, double scale) {
  if (!(scale > 0) || !std::isfinite(scale)) ctx.fail("scale ", scale, " is not a positive finite number");
}

// floor(in * scale) for a float32 scale (positive and finite: check_scale),
// symbolically: scale as p / q (q <= 1000) when it is that fraction rounded
// to float32; floor(n * s) is then (n * p) // q, or (n * p - 1) // q when s
// lies just below p / q. A constant result past 2^62: nullopt.
std::optional<SymExpr> scaled_dim(const SymExpr& in, double scale, const Analyzer& ana) {
  if (in.is_const()) {
    double v = std::floor(double(in.const_value()) * scale);
    if (!(v < 0x1p62)) return std::nullopt;
    return SymExpr(int64_t(v));
  }
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
    return k < 0 ? float_vector(ctx, {1.0}, "one") : slice_axis(ctx, given, 0, k, k + 1);
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
    return k < 0 ? slice_axis(ctx, int_dims, 0, a, a + 1) : slice_axis(ctx, resized, 0, k, k + 1);
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
    check_scale(ctx, (*scales)[k]);
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
      return slice_axis(ctx, given, 0, end * n + k, end * n + k + 1);
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
// X's rank: its own, or, where unknown and no `axes` narrows them, the
// length of sizes or scales, which then name every axis.
int resize_rank(Context& ctx, size_t scales_in, size_t sizes_in) {
  if (ctx.ndim(0) >= 0 || ctx.has_attr("axes")) return known_rank(ctx, 0);
  for (size_t i : {sizes_in, scales_in}) {
    auto s = i < ctx.num_inputs() && ctx.has_input(i) ? ctx.shape(i) : std::nullopt;
    if (s && s->size() == 1 && (*s)[0].is_const() && (*s)[0].const_value() > 0) return int((*s)[0].const_value());
  }
  return known_rank(ctx, 0);
}

std::vector<Value> convert_resize(Context& ctx) {
  size_t scales_in = ctx.opset() < 11 ? 1 : 2, roi_in = 1, sizes_in = 3;
  int nd = resize_rank(ctx, scales_in, sizes_in);
  Dims xs = ctx.bound_shape(0, nd);
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
  Dims xs = ctx.bound_shape(0);
  Ints all = range_ints(0, nd);
  ResizeSpec spec;
  if (ctx.opset() < 9) {
    std::vector<double> scales;
    for (float f : ctx.attr_floats("scales")) scales.push_back(f);
    if (int(scales.size()) != nd) ctx.fail("scales has ", scales.size(), " values for rank ", nd);
    spec.sizes = xs;
    for (int i = 0; i < nd; ++i) {
      check_scale(ctx, scales[size_t(i)]);
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

}  // namespace

void register_resize_converters(ConverterRegistry& r) {
  r.add("Resize", 10, convert_resize);
  r.add("Upsample", 7, convert_upsample);
}

}  // namespace relax::onnx_fe
