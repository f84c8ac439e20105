// Convolution and pooling over N-d inputs laid out N, C, spatial... .
#include "ir/ops/common.h"

namespace relax {
namespace {

using namespace ops;

// The window geometry shared by conv and pooling, one entry per spatial axis.
struct Window {
  std::vector<int64_t> strides, dilation, pad_begin, pad_end;
};

// Reads strides / padding / dilation for `sp` spatial axes. Padding lists all
// begins then all ends; one value or one per axis pads both sides alike.
Window read_window(const std::string& op, const Attrs& attrs, int sp) {
  Window w;
  w.strides = spatial_list(op, "strides", attrs.get_ints("strides"), sp, 1);
  w.dilation = spatial_list(op, "dilation", attrs.get_ints("dilation"), sp, 1);
  std::vector<int64_t> pad = attrs.get_ints("padding");
  if (int(pad.size()) == 2 * sp && sp > 0) {
    w.pad_begin.assign(pad.begin(), pad.begin() + sp);
    w.pad_end.assign(pad.begin() + sp, pad.end());
  } else {
    if (!pad.empty() && pad.size() != 1 && int(pad.size()) != sp)
      fail(op, ": padding has ", pad.size(), " values, expected ", 2 * sp);
    w.pad_begin = w.pad_end = spatial_list(op, "padding", pad, sp, 0);
  }
  for (int i = 0; i < sp; ++i) {
    if (w.strides[i] < 1) fail(op, ": stride ", w.strides[i], " is not positive");
    if (w.dilation[i] < 1) fail(op, ": dilation ", w.dilation[i], " is not positive");
    if (w.pad_begin[i] < 0 || w.pad_end[i] < 0) fail(op, ": negative padding");
  }
  return w;
}

// The number of window positions along spatial axis i:
// floor((in + pads - dilation * (k - 1) - 1 [+ stride - 1 with ceil_mode]) / stride) + 1.
SymExpr window_count(const std::string& op, const Window& w, int i, const SymExpr& in, const SymExpr& k, bool ceil_mode,
                     const Analyzer& ana) {
  int64_t s = w.strides[i];
  SymExpr span = in + (w.pad_begin[i] + w.pad_end[i]) - SymExpr(w.dilation[i]) * (k - 1) - 1;
  if (ceil_mode) span = span + (s - 1);
  SymExpr out = ana.simplify(floordiv(span, SymExpr(s)) + 1);
  if (ana.prove_less(out, 1) == Tri::Yes)
    fail(op, ": output size ", out, " at spatial axis ", i, " is not positive (input ", in, ", window ", k, ")");
  return out;
}

int spatial_rank(const std::string& op, int ndim) {
  if (ndim < 3) fail(op, ": input must have rank >= 3 (N, C, spatial...), got ", ndim);
  return ndim - 2;
}

StructInfo infer_conv(const CallNode& call, const InferContext& ctx) {
  Attrs attrs = attrs_of(call);
  const std::string& op = op_name(call);
  TensorInfo x = tensor_arg(call, 0), w = tensor_arg(call, 1);
  DataType dtype = common_dtype(op, x.dtype, w.dtype);
  if (DataType out = attrs.get_dtype("out_dtype"); !out.is_void()) dtype = out;
  int64_t groups = attrs.get_int("groups");
  if (groups < 1) fail(op, ": groups ", groups, " is not positive");
  if (!x.unknown_rank() && !w.unknown_rank() && x.ndim != w.ndim)
    fail(op, ": input has rank ", x.ndim, " but the weight has rank ", w.ndim);
  int ndim = x.unknown_rank() ? w.ndim : x.ndim;
  if (ndim < 0) return tensor_si_ndim(dtype, -1);
  int sp = spatial_rank(op, ndim);
  Window win = read_window(op, attrs, sp);
  if (!x.shape || !w.shape) return tensor_si_ndim(dtype, ndim);

  const Dims &xs = *x.shape, &ws = *w.shape;
  SymExpr expect = ctx.ana.simplify(ws[1] * groups);
  if (ctx.ana.can_prove_not_equal(xs[1], expect))
    fail(op, ": input has ", xs[1], " channels but the weight expects ", expect, " (groups ", groups, ")");
  if (ctx.ana.prove_divisible(ws[0], groups) == Tri::No)
    fail(op, ": ", ws[0], " output channels do not divide into ", groups, " groups");
  Dims out = {xs[0], ws[0]};
  for (int i = 0; i < sp; ++i) out.push_back(window_count(op, win, i, xs[2 + i], ws[2 + i], false, ctx.ana));
  return tensor_si(dtype, std::move(out));
}

StructInfo infer_pool(const CallNode& call, const InferContext& ctx) {
  Attrs attrs = attrs_of(call);
  const std::string& op = op_name(call);
  TensorInfo x = tensor_arg(call, 0);
  if (x.unknown_rank()) return tensor_si_ndim(x.dtype, -1);
  int sp = spatial_rank(op, x.ndim);
  std::vector<int64_t> size = attrs.get_ints("pool_size");
  if (size.empty()) fail(op, ": pool_size is empty");
  size = spatial_list(op, "pool_size", size, sp, 1);
  for (int64_t k : size)
    if (k < 1) fail(op, ": pool size ", k, " is not positive");
  Window win = read_window(op, attrs, sp);
  if (!x.shape) return tensor_si_ndim(x.dtype, x.ndim);
  const Dims& xs = *x.shape;
  Dims out = {xs[0], xs[1]};
  bool ceil_mode = attrs.get_bool("ceil_mode");
  for (int i = 0; i < sp; ++i) out.push_back(window_count(op, win, i, xs[2 + i], SymExpr(size[i]), ceil_mode, ctx.ana));
  return tensor_si(x.dtype, std::move(out));
}

}  // namespace

void register_nn_ops(OpRegistry& reg) {
  using T = AttrType;
  const std::vector<int64_t> none;
  reg.add("conv")
      .doc(
          "conv(x, w, strides, padding, dilation, groups, out_dtype): N-d cross-correlation. x is (N, C, "
          "spatial...), w is (O, C / groups, kernel...), the result (N, O, out...) with out = floor((in + "
          "pad_begin + pad_end - dilation * (k - 1) - 1) / stride) + 1. Channels are split into `groups` "
          "independent groups. Empty lists mean strides and dilation 1, padding 0; padding lists all begins "
          "then all ends.")
      .args(2)
      .attr("strides", T::Ints, none)
      .attr("padding", T::Ints, none)
      .attr("dilation", T::Ints, none)
      .attr("groups", T::Int, int64_t(1))
      .attr("out_dtype", T::DType, DataType::void_())
      .infer(infer_conv);
  const char* pool_doc =
      "(x, pool_size, strides, padding, dilation, ceil_mode, count_include_pad): a window of pool_size slides "
      "over the spatial dims of x (N, C, spatial...); out = floor((in + pads - dilation * (k - 1) - 1) / "
      "stride) + 1, rounding up instead with ceil_mode. Padded positions never win a max; count_include_pad "
      "makes avg_pool divide by the full window size.";
  reg.add("max_pool")
      .doc(cat("max_pool", pool_doc, " The result is each window's largest element."))
      .args(1)
      .attr("pool_size", T::Ints)
      .attr("strides", T::Ints, none)
      .attr("padding", T::Ints, none)
      .attr("dilation", T::Ints, none)
      .attr("ceil_mode", T::Bool, false)
      .attr("count_include_pad", T::Bool, false)
      .infer(infer_pool);
  reg.add("avg_pool")
      .doc(cat("avg_pool", pool_doc, " The result is each window's mean."))
      .args(1)
      .attr("pool_size", T::Ints)
      .attr("strides", T::Ints, none)
      .attr("padding", T::Ints, none)
      .attr("dilation", T::Ints, none)
      .attr("ceil_mode", T::Bool, false)
      .attr("count_include_pad", T::Bool, false)
      .infer(infer_pool);
}

}  // namespace relax
