// Image ops: resizing, grid sampling, region pooling and non-max
// suppression over boxes, on tensors laid
// out N, C, spatial... .
#include <algorithm>

#include "ir/ops/common.h"

namespace relax {
namespace {

using namespace ops;

// Errors unless `value` is one of `allowed`.
void check_choice(const std::string& op, const std::string& attr, const std::string& value,
                  std::initializer_list<const char*> allowed) {
  for (const char* a : allowed)
    if (value == a) return;
  std::string list;
  for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
  fail(op, ": ", attr, " '", value, "' is not one of ", list);
}

// An optional rank-1 float argument holding `expect` values (roi, scales).
void check_vector_arg(const CallNode& call, size_t i, const char* what, int expect, const Analyzer& ana) {
  if (call.args.size() <= i) return;
  const std::string& op = op_name(call);
  TensorInfo t = tensor_arg(call, i);
  require_float(op, t.dtype, what);
  if (t.unknown_rank()) return;
  if (t.ndim != 1) fail(op, ": ", what, " must have rank 1, got ", t.ndim);
  if (t.shape && expect >= 0 && ana.can_prove_not_equal((*t.shape)[0], expect))
    fail(op, ": ", what, " has ", (*t.shape)[0], " values, expected ", expect);
}

StructInfo infer_resize(const CallNode& call, const InferContext& ctx) {
  Attrs attrs = attrs_of(call);
  const std::string& op = op_name(call);
  TensorInfo x = tensor_arg(call, 0);
  check_choice(op, "mode", attrs.get_string("mode"), {"nearest", "linear", "cubic"});
  check_choice(op, "coordinate_transformation_mode", attrs.get_string("coordinate_transformation_mode"),
               {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
                "tf_crop_and_resize", "tf_half_pixel_for_nn"});
  check_choice(op, "nearest_mode", attrs.get_string("nearest_mode"),
               {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"});
  Dims sizes = get_syms(attrs, "sizes");
  check_dims_nonnegative(op, sizes, ctx.ana);
  int ndim = int(sizes.size());
  if (!x.unknown_rank() && x.ndim != ndim) fail(op, ": input has rank ", x.ndim, " but sizes has ", ndim, " dims");
  check_vector_arg(call, 1, "roi", 2 * ndim, ctx.ana);
  check_vector_arg(call, 2, "scales", ndim, ctx.ana);
  return tensor_si(x.dtype, std::move(sizes));
}

StructInfo infer_grid_sample(const CallNode& call, const InferContext& ctx) {
  Attrs attrs = attrs_of(call);
  const std::string& op = op_name(call);
  TensorInfo x = tensor_arg(call, 0), grid = tensor_arg(call, 1);
  check_choice(op, "mode", attrs.get_string("mode"), {"nearest", "linear", "cubic"});
  check_choice(op, "padding_mode", attrs.get_string("padding_mode"), {"zeros", "border", "reflection"});
  common_dtype(op, x.dtype, grid.dtype);
  require_float(op, grid.dtype, "the grid");
  if (!x.unknown_rank() && x.ndim < 3) fail(op, ": input must have rank >= 3 (N, C, spatial...), got ", x.ndim);
  if (!x.unknown_rank() && !grid.unknown_rank() && grid.ndim != x.ndim)
    fail(op, ": grid has rank ", grid.ndim, " but the input has rank ", x.ndim);
  int ndim = x.unknown_rank() ? grid.ndim : x.ndim;
  if (!x.shape || !grid.shape) return tensor_si_ndim(x.dtype, ndim);
  const Dims &xs = *x.shape, &gs = *grid.shape;
  if (ctx.ana.can_prove_not_equal(xs[0], gs[0])) fail(op, ": input batch ", xs[0], " but grid batch ", gs[0]);
  if (ctx.ana.can_prove_not_equal(gs.back(), ndim - 2))
    fail(op, ": grid's last dim is ", gs.back(), ", expected ", ndim - 2, " (one coordinate per spatial axis)");
  Dims out = {xs[0], xs[1]};
  out.insert(out.end(), gs.begin() + 1, gs.end() - 1);
  return tensor_si(x.dtype, std::move(out));
}

StructInfo infer_affine_grid(const CallNode& call, const InferContext& ctx) {
  Attrs attrs = attrs_of(call);
  const std::string& op = op_name(call);
  TensorInfo theta = tensor_arg(call, 0);
  require_float(op, theta.dtype, "theta");
  Dims size = get_syms(attrs, "size");
  check_dims_nonnegative(op, size, ctx.ana);
  int sp = int(size.size()) - 2;
  if (sp < 1) fail(op, ": size must list N, C and at least one spatial dim, got ", size.size(), " dims");
  if (!theta.unknown_rank() && theta.ndim != 3) fail(op, ": theta must have rank 3, got ", theta.ndim);
  if (theta.shape) {
    const Dims& ts = *theta.shape;
    if (ctx.ana.can_prove_not_equal(ts[0], size[0])) fail(op, ": theta batch ", ts[0], " but size batch ", size[0]);
    if (ctx.ana.can_prove_not_equal(ts[1], sp) || ctx.ana.can_prove_not_equal(ts[2], sp + 1))
      fail(op, ": theta is (", ts[1], ", ", ts[2], ") per batch, expected (", sp, ", ", sp + 1, ")");
  }
  Dims out = {size[0]};
  out.insert(out.end(), size.begin() + 2, size.end());
  out.push_back(SymExpr(sp));
  return tensor_si(theta.dtype, std::move(out));
}

StructInfo infer_roi_align(const CallNode& call, const InferContext& ctx) {
  Attrs attrs = attrs_of(call);
  const std::string& op = op_name(call);
  TensorInfo x = tensor_arg(call, 0), rois = tensor_arg(call, 1), bidx = tensor_arg(call, 2);
  check_choice(op, "mode", attrs.get_string("mode"), {"avg", "max"});
  check_choice(op, "coordinate_transformation_mode", attrs.get_string("coordinate_transformation_mode"),
               {"half_pixel", "output_half_pixel"});
  common_dtype(op, x.dtype, rois.dtype);
  require_integer(op, bidx.dtype, "batch_indices", false);
  int64_t oh = attrs.get_int("output_height"), ow = attrs.get_int("output_width");
  if (oh < 1 || ow < 1) fail(op, ": output size ", oh, "x", ow, " is not positive");
  if (!x.unknown_rank() && x.ndim != 4) fail(op, ": input must have rank 4 (N, C, H, W), got ", x.ndim);
  if (!rois.unknown_rank() && rois.ndim != 2) fail(op, ": rois must have rank 2, got ", rois.ndim);
  if (!bidx.unknown_rank() && bidx.ndim != 1) fail(op, ": batch_indices must have rank 1, got ", bidx.ndim);
  if (rois.shape && ctx.ana.can_prove_not_equal((*rois.shape)[1], 4))
    fail(op, ": rois hold ", (*rois.shape)[1], " values per box, expected 4");
  if (rois.shape && bidx.shape && ctx.ana.can_prove_not_equal((*rois.shape)[0], (*bidx.shape)[0]))
    fail(op, ": ", (*rois.shape)[0], " rois but ", (*bidx.shape)[0], " batch indices");
  SymExpr num;
  if (rois.shape)
    num = (*rois.shape)[0];
  else if (bidx.shape)
    num = (*bidx.shape)[0];
  if (!num.defined() || !x.shape) return tensor_si_ndim(x.dtype, 4);
  return tensor_si(x.dtype, {num, (*x.shape)[1], SymExpr(oh), SymExpr(ow)});
}

// ---- non_max_suppression ------------------------------------------------------------

StructInfo infer_nms(const CallNode& call, const InferContext& ctx) {
  int64_t center = attrs_of(call).get_int("center_point_box");
  const std::string& op = op_name(call);
  if (center != 0 && center != 1) fail(op, ": center_point_box must be 0 or 1, got ", center);
  TensorInfo boxes = tensor_arg(call, 0), scores = tensor_arg(call, 1);
  require_float(op, boxes.dtype, "the boxes");
  common_dtype(op, boxes.dtype, scores.dtype);
  if (!boxes.unknown_rank() && boxes.ndim != 3) fail(op, ": boxes must have rank 3, got ", boxes.ndim);
  if (!scores.unknown_rank() && scores.ndim != 3) fail(op, ": scores must have rank 3, got ", scores.ndim);
  const char* names[] = {"max_output_boxes_per_class", "iou_threshold", "score_threshold"};
  for (size_t i = 2; i < call.args.size(); ++i) check_scalar_arg(call, i, names[i - 2], ctx.ana);
  if (boxes.shape) {
    const Dims& b = *boxes.shape;
    if (ctx.ana.can_prove_not_equal(b[2], 4)) fail(op, ": boxes must have 4 coordinates, got ", b[2]);
    if (scores.shape) {
      const Dims& s = *scores.shape;
      if (ctx.ana.can_prove_not_equal(b[0], s[0])) fail(op, ": boxes have ", b[0], " batches, scores ", s[0]);
      if (ctx.ana.can_prove_not_equal(b[1], s[2])) fail(op, ": boxes have ", b[1], " boxes, scores ", s[2]);
    }
  }
  return tensor_si_ndim(DataType::i64(), 2);
}

}  // namespace

void register_image_ops(OpRegistry& reg) {
  using T = AttrType;
  reg.add("resize")
      .doc(
          "resize(x, [roi], [scales], sizes, mode, coordinate_transformation_mode, nearest_mode, cubic_coeff_a, "
          "exclude_outside, extrapolation_value, antialias): x resampled to the shape `sizes` (one dim per "
          "axis), separably along each axis whose size changes. Output coordinate o maps to the input "
          "coordinate given by coordinate_transformation_mode (ONNX Resize's formulas) with the axis's scale: "
          "scales[axis] when the scales tensor is given, else sizes[axis] / in. mode nearest rounds it per "
          "nearest_mode; linear and cubic (with coefficient cubic_coeff_a; exclude_outside drops and "
          "renormalises taps outside the input) interpolate, with antialias widening the filter by 1 / scale "
          "when downscaling. roi (rank-1, all starts then all ends, fractions of each axis) is used only by "
          "tf_crop_and_resize, whose samples outside the input take extrapolation_value. tf_half_pixel_for_nn "
          "(Resize opset 11 only) maps o to (o + 0.5) / scale.")
      .args(1, 3)
      .attr("sizes", T::Syms)
      .attr("mode", T::String, std::string("nearest"))
      .attr("coordinate_transformation_mode", T::String, std::string("half_pixel"))
      .attr("nearest_mode", T::String, std::string("round_prefer_floor"))
      .attr("cubic_coeff_a", T::Float, -0.75)
      .attr("exclude_outside", T::Bool, false)
      .attr("extrapolation_value", T::Float, 0.0)
      .attr("antialias", T::Bool, false)
      .infer(infer_resize);
  reg.add("grid_sample")
      .doc(
          "grid_sample(x, grid, mode, padding_mode, align_corners): samples x (N, C, spatial...) at the "
          "normalised coordinates of grid (N, out..., r), r the number of spatial axes, coordinates in "
          "[-1, 1] listed innermost axis first (x, y[, z]); the result is (N, C, out...). mode nearest, "
          "linear or cubic; padding_mode zeros, border or reflection decides samples outside the input; "
          "align_corners makes -1 and 1 the centres of the corner elements instead of their outer edges.")
      .args(2)
      .attr("mode", T::String, std::string("linear"))
      .attr("padding_mode", T::String, std::string("zeros"))
      .attr("align_corners", T::Bool, false)
      .infer(infer_grid_sample);
  reg.add("affine_grid")
      .doc(
          "affine_grid(theta, size=[N, C, spatial...], align_corners): the sampling grid (N, spatial..., r) "
          "of the affine maps theta (N, r, r + 1): each output position's normalised coordinates in [-1, "
          "1] (innermost axis first, then 1) multiplied by theta. align_corners as in grid_sample.")
      .args(1)
      .attr("size", T::Syms)
      .attr("align_corners", T::Bool, false)
      .infer(infer_affine_grid);
  reg.add("roi_align")
      .doc(
          "roi_align(x, rois, batch_indices, output_height, output_width, sampling_ratio, spatial_scale, mode, "
          "coordinate_transformation_mode): for each box r of rois (R, 4: x1, y1, x2, y2, scaled by "
          "spatial_scale, shifted by -0.5 with half_pixel) over image batch_indices[r] of x (N, C, H, W), an "
          "(output_height, output_width) grid of bins, each the avg or max of sampling_ratio^2 bilinear "
          "samples (0: ceil(bin size) per axis). The result is (R, C, output_height, output_width).")
      .args(3)
      .attr("output_height", T::Int, int64_t(1))
      .attr("output_width", T::Int, int64_t(1))
      .attr("sampling_ratio", T::Int, int64_t(0))
      .attr("spatial_scale", T::Float, 1.0)
      .attr("mode", T::String, std::string("avg"))
      .attr("coordinate_transformation_mode", T::String, std::string("half_pixel"))
      .infer(infer_roi_align);
  reg.add("non_max_suppression")
      .doc(
          "non_max_suppression(boxes [B, S, 4], scores [B, C, S], [max_per_class], [iou_threshold], "
          "[score_threshold], center_point_box=c): per batch and class, greedily keeps the highest-scoring "
          "boxes above score_threshold whose IoU with every kept box is at most iou_threshold, at most "
          "max_per_class of them (absent or 0: none); returns the kept [batch, class, box] triples as an "
          "[n, 3] i64 tensor whose n depends on the data. Boxes are corners (y1, x1, y2, x2) or, with c=1, "
          "(x center, y center, width, height).")
      .args(2, 5)
      .attr("center_point_box", T::Int, int64_t(0))
      .infer(infer_nms);
}

}  // namespace relax
