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
  SymExpr out = floordiv(span, SymExpr(s)) + 1;
  // With ceil_mode the last window must start inside the input or the left
  // padding: (out - 1) * s < in + pad_begin. That holds by itself unless
  // pad_end + s - 1 > dilation * (k - 1).
  bool may_start_in_pad = !k.is_const() || w.pad_end[i] + s - 1 > w.dilation[i] * (k.const_value() - 1);
  if (ceil_mode && may_start_in_pad) out = min(out, floordiv(in + (w.pad_begin[i] - 1), SymExpr(s)) + 1);
  out = ana.simplify(out);
  if (ana.prove_less(out, 1) == Tri::Yes)
    fail(op, ": output size ", out, " at spatial axis ", i, " is not positive (input ", in, ", window ", k, ")");
  return out;
}

int spatial_rank(const std::string& op, int ndim) {
  if (ndim < 3) fail(op, ": input must have rank >= 3 (N, C, spatial...), got ", ndim);
  return ndim - 2;
}

// The result of a convolution of x (argument 0) by w (argument 1) with
// elements of `dtype`.
// A convolution's x (argument 0) and w (argument 1), its groups, rank
// (-1: unknown), spatial rank and window, checked against each other.
struct ConvOperands {
  TensorInfo x, w;
  int64_t groups;
  int ndim, sp = 0;
  Window win;
};
ConvOperands conv_operands(const CallNode& call) {
  Attrs attrs = attrs_of(call);
  const std::string& op = op_name(call);
  ConvOperands c{tensor_arg(call, 0), tensor_arg(call, 1), attrs.get_int("groups"), -1, 0, {}};
  const TensorInfo &x = c.x, &w = c.w;
  if (c.groups < 1) fail(op, ": groups ", c.groups, " is not positive");
  if (!x.unknown_rank() && !w.unknown_rank() && x.ndim != w.ndim)
    fail(op, ": input has rank ", x.ndim, " but the weight has rank ", w.ndim);
  c.ndim = x.unknown_rank() ? w.ndim : x.ndim;
  if (c.ndim < 0) return c;
  c.sp = spatial_rank(op, c.ndim);
  c.win = read_window(op, attrs, c.sp);
  return c;
}

StructInfo conv_result(const CallNode& call, const InferContext& ctx, DataType dtype) {
  const std::string& op = op_name(call);
  ConvOperands c = conv_operands(call);
  if (c.ndim < 0) return tensor_si_ndim(dtype, -1);
  const TensorInfo &x = c.x, &w = c.w;
  const int64_t groups = c.groups;
  const int sp = c.sp;
  const Window& win = c.win;
  if (!x.shape || !w.shape) return tensor_si_ndim(dtype, c.ndim);

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

StructInfo infer_conv(const CallNode& call, const InferContext& ctx) {
  DataType dtype = common_dtype(op_name(call), tensor_arg(call, 0).dtype, tensor_arg(call, 1).dtype);
  if (DataType out = attrs_of(call).get_dtype("out_dtype"); !out.is_void()) dtype = out;
  return conv_result(call, ctx, dtype);
}

// conv_blocked(x, w): x in the blocked channel layout (N, ceil(C / 16), H,
// W, 16), w (O, C / groups, KH, KW) as conv's, groups 1 or one input
// channel and one output per group (depthwise); or x plain (N, C, H, W),
// groups 1. The result blocked, (N, ceil(O / 16), OH, OW, 16).
StructInfo infer_conv_blocked(const CallNode& call, const InferContext& ctx) {
  const std::string& op = op_name(call);
  Attrs attrs = attrs_of(call);
  TensorInfo x = tensor_arg(call, 0), w = tensor_arg(call, 1);
  const int64_t groups = attrs.get_int("groups");
  DataType dtype = common_dtype(op, x.dtype, w.dtype);
  if (!x.unknown_rank() && x.ndim != 5 && x.ndim != 4)
    fail(op, ": x must have rank 5 (N, C / 16, H, W, 16) or 4 (N, C, H, W), got ", x.ndim);
  if (!w.unknown_rank() && w.ndim != 4) fail(op, ": w must have rank 4 (O, C / groups, KH, KW), got ", w.ndim);
  if (!x.shape || !w.shape) return tensor_si_ndim(dtype, 5);
  const Dims &xs = *x.shape, &ws = *w.shape;
  const bool plain = xs.size() == 4;
  if (!plain && !xs[4].is_const(16)) fail(op, ": x's last dim must be 16, got ", xs[4]);
  if (groups != 1 && (plain || !(ws[1].is_const(1) && ws[0].is_const(groups))))
    fail(op, ": groups must be 1 or (x blocked) one input channel and one output per group, got ", groups,
         " groups for w ", ws[0], "x", ws[1]);
  SymExpr blocks = ctx.ana.simplify(plain ? ws[1] : floordiv(ws[1] * groups + 15, SymExpr(16)));
  if (ctx.ana.can_prove_not_equal(xs[1], blocks))
    fail(op, ": x has ", xs[1], plain ? " channels" : " channel blocks", " but the weight expects ", blocks);
  Window win = read_window(op, attrs, 2);
  Dims out = {xs[0], ctx.ana.simplify(floordiv(ws[0] + 15, SymExpr(16)))};
  for (int i = 0; i < 2; ++i) out.push_back(window_count(op, win, i, xs[2 + i], ws[2 + i], false, ctx.ana));
  out.push_back(SymExpr(16));
  return tensor_si(dtype, std::move(out));
}

// conv_integer(x, w, x_zp, w_zp): 8-bit x and w; x_zp one value of x's
// dtype, w_zp w's dtype, one value or one per output channel.
StructInfo infer_conv_integer(const CallNode& call, const InferContext& ctx) {
  const std::string& op = op_name(call);
  TensorInfo x = tensor_arg(call, 0), w = tensor_arg(call, 1), zx = tensor_arg(call, 2), zw = tensor_arg(call, 3);
  check_8bit_operand(op, x, "x", zx, "x_zp");
  check_8bit_operand(op, w, "w", zw, "w_zp");
  if (zx.shape)
    for (const SymExpr& d : *zx.shape)
      if (!d.is_const(1)) fail(op, ": x_zp must be one value, got a dim ", d);
  if (zw.ndim > 1) fail(op, ": w_zp must be one value or one per output channel, got rank ", zw.ndim);
  if (zw.shape && w.shape && zw.ndim == 1 && !(*zw.shape)[0].is_const(1) &&
      ctx.ana.can_prove_not_equal((*zw.shape)[0], (*w.shape)[0]))
    fail(op, ": w_zp has ", (*zw.shape)[0], " values for ", (*w.shape)[0], " output channels");
  return conv_result(call, ctx, DataType::i32());
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

// strides, padding and dilation, as every window op takes them (empty
// lists: strides and dilation 1, padding 0; padding lists all begins then
// all ends).
OpRegistry::Builder& window_attrs(OpRegistry::Builder& b) {
  const std::vector<int64_t> none;
  return b.attr("strides", AttrType::Ints, none)
      .attr("padding", AttrType::Ints, none)
      .attr("dilation", AttrType::Ints, none);
}

// ---- Further nn ops, added for the ONNX frontend: transposed and deformable
// convolution, Lp pooling, max-pooling indices, unpooling, LRN and the
// negative log-likelihood loss. ------------------------------------------------

StructInfo infer_conv_transpose(const CallNode& call, const InferContext& ctx) {
  Attrs attrs = attrs_of(call);
  const std::string& op = op_name(call);
  DataType dtype = common_dtype(op, tensor_arg(call, 0).dtype, tensor_arg(call, 1).dtype);
  if (DataType out = attrs.get_dtype("out_dtype"); !out.is_void()) dtype = out;
  ConvOperands c = conv_operands(call);
  if (c.ndim < 0) return tensor_si_ndim(dtype, -1);
  const TensorInfo &x = c.x, &w = c.w;
  const int64_t groups = c.groups;
  const int sp = c.sp, ndim = c.ndim;
  const Window& win = c.win;
  std::vector<int64_t> opad = spatial_list(op, "output_padding", attrs.get_ints("output_padding"), sp, 0);
  for (int64_t p : opad)
    if (p < 0) fail(op, ": negative output_padding");
  if (!x.shape || !w.shape) return tensor_si_ndim(dtype, ndim);

  const Dims &xs = *x.shape, &ws = *w.shape;
  if (ctx.ana.can_prove_not_equal(xs[1], ws[0]))
    fail(op, ": input has ", xs[1], " channels but the weight expects ", ws[0]);
  if (ctx.ana.prove_divisible(xs[1], groups) == Tri::No)
    fail(op, ": ", xs[1], " input channels do not divide into ", groups, " groups");
  Dims out = {xs[0], ctx.ana.simplify(ws[1] * groups)};
  for (int i = 0; i < sp; ++i) {
    SymExpr o = (xs[2 + i] - 1) * win.strides[i] - (win.pad_begin[i] + win.pad_end[i]) +
                SymExpr(win.dilation[i]) * (ws[2 + i] - 1) + (opad[i] + 1);
    o = ctx.ana.simplify(o);
    if (ctx.ana.prove_less(o, 1) == Tri::Yes) fail(op, ": output size ", o, " at spatial axis ", i, " is not positive");
    out.push_back(o);
  }
  return tensor_si(dtype, std::move(out));
}

// deform_conv: conv's result; the offsets (and mask) must fit it.
StructInfo infer_deform_conv(const CallNode& call, const InferContext& ctx) {
  const std::string& op = op_name(call);
  StructInfo si = infer_conv(call, ctx);
  int64_t offset_groups = attrs_of(call).get_int("offset_groups");
  if (offset_groups < 1) fail(op, ": offset_groups ", offset_groups, " is not positive");
  const auto* out = as<TensorSI>(si);
  TensorInfo w = tensor_arg(call, 1);
  for (size_t i = 2; i < call.args.size(); ++i) {
    TensorInfo t = tensor_arg(call, i);
    const char* what = i == 2 ? "offset" : "mask";
    common_dtype(op, out->dtype, t.dtype);
    if (t.unknown_rank() || out->unknown_rank()) continue;
    if (t.ndim != out->ndim) fail(op, ": ", what, " has rank ", t.ndim, " but the result has rank ", out->ndim);
    if (!t.shape || !out->shape || !w.shape) continue;
    Dims kernel(w.shape->begin() + 2, w.shape->end());
    SymExpr channels = ctx.ana.simplify(product(kernel) * (offset_groups * (i == 2 ? 2 : 1)));
    if (ctx.ana.can_prove_not_equal((*t.shape)[1], channels))
      fail(op, ": ", what, " has ", (*t.shape)[1], " channels, expected ", channels);
    for (int d = 2; d < t.ndim; ++d)
      if (ctx.ana.can_prove_not_equal((*t.shape)[d], (*out->shape)[d]))
        fail(op, ": ", what, " dim ", d, " is ", (*t.shape)[d], " but the result has ", (*out->shape)[d]);
  }
  return si;
}

StructInfo infer_pool_indices(const CallNode& call, const InferContext& ctx) {
  StructInfo values = infer_pool(call, ctx);
  const auto* t = as<TensorSI>(values);
  return make_tensor(DataType::i64(), t->ndim, t->shape);
}

StructInfo infer_max_unpool(const CallNode& call, const InferContext& ctx) {
  Attrs attrs = attrs_of(call);
  const std::string& op = op_name(call);
  TensorInfo x = tensor_arg(call, 0), idx = tensor_arg(call, 1);
  require_integer(op, idx.dtype, "indices", false);
  Dims shape = get_syms(attrs, "output_shape");
  check_dims_nonnegative(op, shape, ctx.ana);
  int ndim = int(shape.size());
  for (const TensorInfo* t : {&x, &idx}) {
    if (t->unknown_rank()) continue;
    if (t->ndim != ndim) fail(op, ": operand has rank ", t->ndim, " but output_shape has ", ndim, " dims");
    if (!t->shape) continue;
    for (int d = 0; d < 2 && d < ndim; ++d)
      if (ctx.ana.can_prove_not_equal((*t->shape)[d], shape[d]))
        fail(op, ": dim ", d, " is ", (*t->shape)[d], " but output_shape has ", shape[d]);
  }
  if (x.shape && idx.shape)
    for (int d = 0; d < ndim; ++d)
      if (ctx.ana.can_prove_not_equal((*x.shape)[d], (*idx.shape)[d]))
        fail(op, ": x and indices differ at dim ", d, " (", (*x.shape)[d], " vs ", (*idx.shape)[d], ")");
  return tensor_si(x.dtype, std::move(shape));
}

StructInfo infer_lrn(const CallNode& call, const InferContext&) {
  Attrs attrs = attrs_of(call);
  const std::string& op = op_name(call);
  StructInfo si = arg_sinfo(call, 0);
  TensorInfo x = tensor_info(op, si, "argument 0", false);
  require_float(op, x.dtype, "the operand");
  if (!x.unknown_rank() && x.ndim < 2) fail(op, ": input must have rank >= 2 (N, C, ...), got ", x.ndim);
  if (attrs.get_int("size") < 1) fail(op, ": size ", attrs.get_int("size"), " is not positive");
  return si;
}

StructInfo infer_nll_loss(const CallNode& call, const InferContext& ctx) {
  Attrs attrs = attrs_of(call);
  const std::string& op = op_name(call);
  TensorInfo x = tensor_arg(call, 0), target = tensor_arg(call, 1);
  require_float(op, x.dtype, "the input");
  require_integer(op, target.dtype, "the target", false);
  std::string reduction = attrs.get_string("reduction");
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    fail(op, ": reduction '", reduction, "' is not none, sum or mean");
  if (!x.unknown_rank() && x.ndim < 2) fail(op, ": input must have rank >= 2 (N, C, ...), got ", x.ndim);
  if (!x.unknown_rank() && !target.unknown_rank() && target.ndim != x.ndim - 1)
    fail(op, ": target has rank ", target.ndim, ", expected ", x.ndim - 1);
  if (call.args.size() > 2) {
    TensorInfo wt = tensor_arg(call, 2);
    common_dtype(op, x.dtype, wt.dtype);
    if (!wt.unknown_rank() && wt.ndim != 1) fail(op, ": weight must have rank 1, got ", wt.ndim);
    if (wt.shape && x.shape && ctx.ana.can_prove_not_equal((*wt.shape)[0], (*x.shape)[1]))
      fail(op, ": weight has ", (*wt.shape)[0], " classes but the input has ", (*x.shape)[1]);
  }
  if (x.shape && target.shape) {
    for (int d = 0; d < target.ndim; ++d) {
      const SymExpr& xd = (*x.shape)[d == 0 ? 0 : d + 1];
      if (ctx.ana.can_prove_not_equal(xd, (*target.shape)[d]))
        fail(op, ": target dim ", d, " is ", (*target.shape)[d], " but the input has ", xd);
    }
  }
  if (reduction != "none") return tensor_si(x.dtype, {});
  if (target.shape) return tensor_si(x.dtype, *target.shape);
  if (x.shape) {
    Dims out = *x.shape;
    out.erase(out.begin() + 1);
    return tensor_si(x.dtype, std::move(out));
  }
  return tensor_si_ndim(x.dtype, target.unknown_rank() ? (x.unknown_rank() ? -1 : x.ndim - 1) : target.ndim);
}

void register_nn_extra_ops(OpRegistry& reg) {
  using T = AttrType;
  const std::vector<int64_t> none;
  reg.add("conv_transpose")
      .doc(
          "conv_transpose(x, w, strides, padding, output_padding, dilation, groups, out_dtype): the gradient "
          "of conv with respect to its input. x is (N, C, spatial...), w is (C, O / groups, kernel...), the "
          "result (N, O, out...) with out = (in - 1) * stride - pad_begin - pad_end + dilation * (k - 1) + "
          "output_padding + 1: each input element scatters w's window, scaled, to the positions at stride "
          "steps; padding crops the result and output_padding appends positions at the end.")
      .args(2)
      .attr("strides", T::Ints, none)
      .attr("padding", T::Ints, none)
      .attr("output_padding", T::Ints, none)
      .attr("dilation", T::Ints, none)
      .attr("groups", T::Int, int64_t(1))
      .attr("out_dtype", T::DType, DataType::void_())
      .infer(infer_conv_transpose);
  window_attrs(
      reg.add("deform_conv")
          .doc("deform_conv(x, w, offset, [mask], strides, padding, dilation, groups, offset_groups): conv "
               "whose kernel taps are moved by learned offsets. offset is (N, offset_groups * 2 * prod(kernel), "
               "out...), holding per output position and tap a (dy, dx, ...) displacement (one pair per spatial "
               "axis, in axis order) added to the tap's position; x is sampled there bilinearly (zero outside). "
               "mask (N, offset_groups * prod(kernel), out...) scales each sampled tap (absent: 1). The input "
               "channels split into offset_groups groups sharing offsets. The result is conv's.")
          .args(3, 4))
      .attr("groups", T::Int, int64_t(1))
      .attr("offset_groups", T::Int, int64_t(1))
      .attr("out_dtype", T::DType, DataType::void_())
      .infer(infer_deform_conv);
  window_attrs(reg.add("lp_pool")
                   .doc("lp_pool(x, p, pool_size, strides, padding, dilation, ceil_mode): max_pool's windows, each "
                        "reduced to (sum |v|^p)^(1/p); padded positions count as 0.")
                   .args(1)
                   .attr("p", T::Float, 2.0)
                   .attr("pool_size", T::Ints))
      .attr("ceil_mode", T::Bool, false)
      .infer(infer_pool);
  window_attrs(
      reg.add("max_pool_indices")
          .doc("max_pool_indices(x, pool_size, strides, padding, dilation, ceil_mode, storage_order): max_pool's "
               "windows, each giving the position (i64) of its first largest element as a flat index into x "
               "(row-major over N, C, spatial...; with storage_order 1 the spatial dims are flattened "
               "column-major instead). The shape is max_pool's.")
          .args(1)
          .attr("pool_size", T::Ints))
      .attr("ceil_mode", T::Bool, false)
      .attr("storage_order", T::Int, int64_t(0))
      .infer(infer_pool_indices);
  reg.add("max_unpool")
      .doc(
          "max_unpool(x, indices, output_shape=[...]): a zero tensor of output_shape (same rank, N and C as "
          "x) in which each x element is stored at the flat row-major position given by the matching "
          "element of indices (as max_pool_indices produces them).")
      .args(2)
      .attr("output_shape", T::Syms)
      .infer(infer_max_unpool);
  reg.add("lrn")
      .doc(
          "lrn(x, size, alpha, beta, bias): local response normalisation across channels of x (N, C, ...): "
          "x / (bias + alpha / size * sum of x^2 over channels c - floor((size - 1) / 2) .. c + ceil((size "
          "- 1) / 2), clipped to [0, C))^beta.")
      .args(1)
      .attr("size", T::Int)
      .attr("alpha", T::Float, 1e-4)
      .attr("beta", T::Float, 0.75)
      .attr("bias", T::Float, 1.0)
      .infer(infer_lrn);
  reg.add("nll_loss")
      .doc(
          "nll_loss(input, target, [weight], reduction, ignore_index): input (N, C, d...) holds "
          "log-probabilities, target (N, d...) class indices. loss[n, d...] = -input[n, target, d...] * "
          "weight[target] (weight absent: 1), and 0 where target == ignore_index. reduction none keeps that "
          "shape; sum adds everything; mean divides the sum by the sum of the applied weights.")
      .args(2, 3)
      .attr("reduction", T::String, std::string("mean"))
      .attr("ignore_index", T::Int, int64_t(-100))
      .infer(infer_nll_loss);
}

}  // namespace

void register_nn_ops(OpRegistry& reg) {
  using T = AttrType;
  window_attrs(
      reg.add("conv")
          .doc("conv(x, w, strides, padding, dilation, groups, out_dtype): N-d cross-correlation. x is (N, C, "
               "spatial...), w is (O, C / groups, kernel...), the result (N, O, out...) with out = floor((in + "
               "pad_begin + pad_end - dilation * (k - 1) - 1) / stride) + 1. Channels are split into `groups` "
               "independent groups. Empty lists mean strides and dilation 1, padding 0; padding lists all begins "
               "then all ends.")
          .args(2))
      .attr("groups", T::Int, int64_t(1))
      .attr("out_dtype", T::DType, DataType::void_())
      .infer(infer_conv);
  window_attrs(reg.add("conv_blocked")
                   .doc("conv_blocked(x, w, strides, padding, dilation, groups): conv of x held in the blocked "
                        "channel layout, (N, ceil(C / 16), H, W, 16) with channel b * 16 + l at [n, b, h, w, l] "
                        "and zeros past C, by w (O, C / groups, KH, KW) as conv's, 2-D; groups 1 or depthwise "
                        "(one input channel and one output per group). The result is blocked too: (N, ceil(O / "
                        "16), OH, OW, 16), zeros past O. x may also be plain (N, C, H, W) for groups 1 (a network's "
                        "first convolution). Written by passes/block_layout.cc.")
                   .args(2))
      .attr("groups", T::Int, int64_t(1))
      .infer(infer_conv_blocked);
  window_attrs(
      reg.add("conv_integer")
          .doc("conv_integer(x, w, x_zp, w_zp, strides, padding, dilation, groups): the i32 convolution of x - x_zp "
               "by w - w_zp (ONNX ConvInteger) for u8 or i8 x and w, in i32 arithmetic; the padding reads as x_zp "
               "(0 after the subtraction). x_zp is one value of x's dtype, w_zp w's dtype, one value or one per "
               "output channel. Shapes and attributes as conv's.")
          .args(4))
      .attr("groups", T::Int, int64_t(1))
      .infer(infer_conv_integer);
  const char* pool_doc =
      "(x, pool_size, strides, padding, dilation, ceil_mode, count_include_pad): a window of pool_size slides "
      "over the spatial dims of x (N, C, spatial...); out = floor((in + pads - dilation * (k - 1) - 1) / "
      "stride) + 1, rounding up instead with ceil_mode (then a last window that would start in the right "
      "padding is dropped: (out - 1) * stride < in + pad_begin). Padded positions never win a max; count_include_pad "
      "makes avg_pool divide by the full window size.";
  window_attrs(reg.add("max_pool")
                   .doc(cat("max_pool", pool_doc, " The result is each window's largest element."))
                   .args(1)
                   .attr("pool_size", T::Ints))
      .attr("ceil_mode", T::Bool, false)
      .attr("count_include_pad", T::Bool, false)
      .infer(infer_pool);
  window_attrs(reg.add("avg_pool")
                   .doc(cat("avg_pool", pool_doc, " The result is each window's mean."))
                   .args(1)
                   .attr("pool_size", T::Ints))
      .attr("ceil_mode", T::Bool, false)
      .attr("count_include_pad", T::Bool, false)
      .infer(infer_pool);
  register_nn_extra_ops(reg);
}

}  // namespace relax
