// Legalisers of the convolutions (ir/ops/nn.cc): conv, conv_integer,
// conv_transpose and deform_conv; the pools, max_unpool, lrn and nll_loss
// are in pool.cc.
//
// conv and conv_transpose accumulate in place in their output when its
// dtype is the accumulator's (f32, f64, i32, i64): one row of the output
// (the last spatial axis) is zeroed, every kernel tap adds its
// contribution to the whole row in a vectorisable loop, and the row is
// finished. Taps that fall into the padding are skipped by an `if` on the
// outer spatial axes and read as 0 (through a clamped index) on the last
// one. Narrow floats accumulate per element in f32 instead.
#include "ir/ops/common.h"
#include "passes/legalize/legalize.h"
#include "passes/legalize/nn_common.h"
#include "passes/legalize/te.h"
#include "runtime/conv_blocked.h"
#include "runtime/conv_direct.h"

namespace relax {
namespace {

using namespace te;
using namespace nn_legalize;
using tir::Intrinsic;
using tir::LoopKind;

// ---- conv -------------------------------------------------------------------------

constexpr const char* kGemmConv2d = "gemm.conv2d";

// The f32 (or, `i32_too`, i32) operands of a library convolution, all of
// rank 4 or all of rank 3: their rank, else 0.
size_t library_conv_rank(const CallNode& call, bool i32_too) {
  const auto* y = as<TensorSI>(call.sinfo);
  const auto* x = as<TensorSI>(call.args[0]->sinfo);
  const auto* w = as<TensorSI>(call.args[1]->sinfo);
  size_t rank = y && y->shape ? y->shape->size() : 0;
  DataType t = i32_too && y && y->dtype == DataType::i32() ? DataType::i32() : DataType::f32();
  for (const TensorSI* s : {y, x, w})
    if (!s || !s->shape || s->dtype != t || s->shape->size() != rank || (rank != 4 && rank != 3)) return 0;
  return rank;
}

// A library convolution's window in two dims (a 1-D one as height 1:
// stride, padding and dilation 1, 0 and 1) and its parameters, shape(sh,
// sw, ph, pw, dh, dw, groups).
Window library_window(const std::string& op, const Attrs& attrs, size_t rank) {
  Window win = read_window(op, attrs, int(rank) - 2);
  if (rank == 3) {
    win.strides.insert(win.strides.begin(), 1);
    win.dilation.insert(win.dilation.begin(), 1);
    win.pad_begin.insert(win.pad_begin.begin(), 0);
    win.pad_end.insert(win.pad_end.begin(), 0);
  }
  return win;
}
Expr library_params(const Window& win, int64_t groups) {
  return make_shape({SymExpr(win.strides[0]), SymExpr(win.strides[1]), SymExpr(win.pad_begin[0]),
                     SymExpr(win.pad_begin[1]), SymExpr(win.dilation[0]), SymExpr(win.dilation[1]), SymExpr(groups)});
}

constexpr const char* kConv2dPack = "gemm.conv2d_pack";
constexpr const char* kConv2dPacked = "gemm.conv2d_packed";

// A constant f32 weight's packed size in floats for the runtime's layouts
// (runtime/builtins_blas.cc gemm.conv2d_pack, which checks it): 0, the
// direct kernel's blocks of 8 or 16 channels (runtime/conv_direct.h
// conv2d_direct_lanes); 1, per group the GEMM's A in panels of 6 rows
// (runtime/gemm.h gemm_packed_a_size); 2, a depthwise convolution's
// blocks of 16 channels (conv2d_depthwise_packed_size); 3, a depthwise
// convolution's weights as they are.
int64_t packed_size(int64_t layout, int64_t groups, int64_t Og, int64_t K) {
  if (layout == 3) return groups * Og * K;
  if (layout == 2) return (groups * Og + 15) / 16 * K * 16;
  if (layout == 0) {
    int64_t L = Og <= 8 ? 8 : 16;
    return groups * ((Og + L - 1) / L) * K * L;
  }
  return groups * ((Og + 5) / 6 * 6) * K;
}
// A 2-D (or 1-D) f32 convolution as the runtime library's convolution
// (gemm.conv2d, runtime/builtins_blas.cc: direct, or im2col + matrix
// product), when each group has enough output channels
// for a matrix product to pay, and depthwise ones (the runtime's
// depthwise kernel). The im2col matrix is the call's second output, a
// workspace the graph allocates and memory planning covers; a 1x1 kernel
// with stride 1 and no padding reads the input directly and needs none.
std::optional<Expr> gemm_conv2d(LegalizeContext& ctx, const CallNode& call, const Attrs& attrs) {
  if (!ctx.libraries()) return std::nullopt;
  // f32, or i32 (ConvInteger's widened operands), which the runtime convolves directly, with no workspace.
  size_t rank = library_conv_rank(call, /*i32_too=*/true);
  if (!rank) return std::nullopt;
  const bool i32 = as<TensorSI>(call.sinfo)->dtype == DataType::i32();
  int64_t groups = attrs.get_int("groups");
  const std::vector<SymExpr>&ws = *as<TensorSI>(call.args[1]->sinfo)->shape, &ys = *as<TensorSI>(call.sinfo)->shape;
  if (!ws[0].is_const() || groups < 1 || ws[0].const_value() % groups != 0) return std::nullopt;
  SymExpr kh = rank == 4 ? ws[2] : SymExpr(1), kw = ws[rank - 1];
  SymExpr oh = rank == 4 ? ys[2] : SymExpr(1), ow = ys[rank - 1];
  // Depthwise (one input channel per group, fewer than 8 outputs each):
  // the runtime's own kernel, no workspace, whatever the plane. (Small
  // planes at stride 1 stayed loop nests, which fuse the bias and
  // activation, on a bench of 16x16x64 3x3 (0.035 against 0.040 ms); on
  // the 14x14 planes of 184 to 672 channels of MobileNetV3-Large and
  // EfficientNet-B0 the nests ran at 5 GFLOP/s, and the library took
  // EfficientNet-B0 from 14.6 to 11.5 ms and MobileNetV3-Large from 7.07 to
  // 6.28, one thread.) Planes of at most 64 outputs over 16 channels or
  // more take the channels-in-lanes kernel (layout 2 below).
  Window win = library_window("conv", attrs, rank);
  const bool depthwise = ws[1].is_const(1) && ws[0].const_value() / groups < 8;
  if (!depthwise && ws[0].const_value() / groups < 4) return std::nullopt;
  // No workspace: a plain product (1x1, stride 1, no padding), or i32.
  bool no_workspace = kh.is_const(1) && kw.is_const(1) && win.strides == std::vector<int64_t>{1, 1};
  for (int64_t p : win.pad_begin) no_workspace &= p == 0;
  for (int64_t p : win.pad_end) no_workspace &= p == 0;
  no_workspace |= i32 || depthwise;
  Expr params = library_params(win, groups);
  const char* library = kGemmConv2d;
  Expr weights = call.args[1];
  // A constant f32 weight is packed once as the runtime reads it
  // (gemm.conv2d_pack): at O2 the packing moves to @transform_params and a
  // build folds it into the package, so no run transposes or repacks it.
  // Layout 0 (the direct kernel, no workspace) where the runtime convolves
  // directly (runtime/conv_direct.h conv2d_direct_pays, for the target CPU:
  // the module's `avx512`, which the cpu target sets), else 1 (im2col +
  // GEMM).
  // Depthwise ones with one output per channel over planes known to be
  // small (at most 64 outputs): layout 2, channels in the vector lanes
  // (conv2d_depthwise_packed_f32); the plane-wise kernel zero-fills and
  // splits a padded copy of each channel for a few outputs there. Other
  // depthwise ones: layout 3, the weights as they are for the plane-wise
  // kernel, packed only so that the call takes the bias and activation
  // after it as an epilogue (passes/fuse_library_epilogues.cc).
  const int64_t plane = oh.is_const() && ow.is_const() ? oh.const_value() * ow.const_value() : -1;
  const bool channel_blocks = depthwise && ws[0].const_value() == groups && plane >= 0 && plane <= 64;
  if (!i32 && weights->kind == ExprKind::Constant && ws[1].is_const() &&
      kh.is_const() && kw.is_const()) {
    int64_t Og = ws[0].const_value() / groups, K = ws[1].const_value() * kh.const_value() * kw.const_value();
    const bool direct = rt::conv2d_direct_pays(kh.const_value(), kw.const_value(), Og, K, plane, win.strides[0],
                                               win.strides[1], ctx.traits().vector_bits >= 512);
    int64_t layout = channel_blocks ? 2 : depthwise ? 3 : direct ? 0 : 1;
    if (layout == 0) no_workspace = true;
    for (const char* name : {kConv2dPack, kConv2dPacked})
      if (!ctx.module().extern_decl(name)) ctx.module().add_extern(name);
    StructInfo packed_si = tensor_si(DataType::f32(), {SymExpr(packed_size(layout, groups, Og, K))});
    Expr pack =
        make_op_call("call_library",
                     {make_string(kConv2dPack), make_tuple({weights, make_shape({SymExpr(groups), SymExpr(layout)})})},
                     {}, {packed_si});
    pack->sinfo = packed_si;
    weights = ctx.emit(pack, "conv_weights");
    std::vector<SymExpr> p = as<ShapeExprNode>(params)->values;
    for (SymExpr d : {kh, kw, SymExpr(layout)}) p.push_back(d);
    params = make_shape(p);
    library = kConv2dPacked;
  }
  if (!ctx.module().extern_decl(library)) ctx.module().add_extern(library);
  Analyzer& ana = ctx.analyzer();
  StructInfo out = call.sinfo;
  if (!no_workspace)
    out = tuple_si({call.sinfo, tensor_si(DataType::f32(), {ana.simplify(ws[1] * kh * kw), ana.simplify(oh * ow)})});
  Expr r = make_op_call("call_library", {make_string(library), make_tuple({call.args[0], weights, params})}, {}, {out});
  r->sinfo = out;
  if (no_workspace) return r;
  Expr item = make_tuple_get_item(ctx.emit(r, "conv_all"), 0);
  item->sinfo = call.sinfo;
  return item;
}

// A convolution's window over x (N, C, spatial...) by w (O, C / groups,
// kernel...) for the loop nests: x's index for output position o (spatial
// dim j) through tap k, and the taps reduced over.
struct ConvTaps {
  Window win;
  int64_t groups;
  int sp;
  SymExpr Cg, Og;
  std::vector<SymExpr> reduce;  // C / groups, kernel...
  TExpr pos(int j, const TExpr& o, const TExpr& k) const {
    return o * idx(win.strides[j]) + k * idx(win.dilation[j]) - idx(win.pad_begin[j]);
  }
  bool padded(int j) const { return win.pad_begin[j] != 0 || win.pad_end[j] != 0; }
  TExpr channel(const TExpr& o, const TExpr& c) const {
    if (groups == 1) return c;
    return tir::binary(tir::BinOp::FloorDiv, o, idx(Og)) * idx(Cg) + c;
  }
};
ConvTaps conv_taps(const char* op, const Attrs& attrs, const Buffer& w, const Buffer& y, int sp) {
  ConvTaps t{read_window(op, attrs, sp), attrs.get_int("groups"), sp, w->shape[1], SymExpr(), {w->shape[1]}};
  t.Og = floordiv(y->shape[1], SymExpr(t.groups));
  t.reduce.insert(t.reduce.end(), w->shape.begin() + 2, w->shape.end());
  return t;
}

// A convolution with one local accumulator of `acc` per output element;
// a tap adds x_term(x's element, inside) * w_term(w's element, output
// channel), where `inside` is false for the padding (x's index clamped,
// so the load is safe).
using TapTerm = std::function<TExpr(const TExpr& value, const TExpr& extra)>;
Stmt conv_per_element(const ConvTaps& t, const Buffer& x, const Buffer& w, const Buffer& y, DataType acc,
                      const TapTerm& x_term, const TapTerm& w_term) {
  LoopHints hints{true, false, num_elements(t.reduce)};
  return loop_nest(
      y->shape,
      [&](const Index& i) {
        Local a = local("acc", acc);
        Stmt taps = serial_nest(t.reduce, "k", [&](const Index& r) {
          Index xi = {i[0], t.channel(i[1], r[0])};
          std::vector<TExpr> ok;
          for (int j = 0; j < t.sp; ++j) {
            TExpr p = t.pos(j, i[2 + j], r[1 + j]);
            if (t.padded(j)) ok.push_back(in_range(p, 0, x->shape[2 + j]));
            xi.push_back(t.padded(j) ? clamp_index(p, x->shape[2 + j]) : p);
          }
          Index wi = {i[1], r[0]};
          wi.insert(wi.end(), r.begin() + 1, r.end());
          TExpr xv = x_term(load(x, xi), ok.empty() ? TExpr() : all_of(ok));
          return a.set(a.get() + xv * w_term(load(w, wi), i[1]));
        });
        return with_locals({a},
                           tir::make_seq({a.set(zero(acc)), taps, tir::make_store(y, i, cast(y->dtype, a.get()))}));
      },
      hints);
}

// The in-place row form of conv and conv_transpose: per output row (n,
// o, the outer spatial positions) zeroed, then per tap r (input channel
// c, kernel offsets) whose outer sources are all in range, x at the
// sources times the tap's weight added to the whole row; a source out of
// range along the row reads 0. source(j, o, k, along_row): x's index
// along spatial dim j for output position o through kernel offset k, and
// whether it is in range (null: always).
struct ConvSource {
  TExpr index, ok;
};
using SourceFn = std::function<ConvSource(int j, const TExpr& o, const TExpr& k, bool along_row)>;
Stmt conv_rows(const Buffer& x, const Buffer& y, DataType acc, const std::vector<SymExpr>& reduce, const SymExpr& work,
               const std::function<TExpr(const TExpr& o, const TExpr& c)>& channel, const SourceFn& source,
               const std::function<TExpr(const TExpr& o, const Index& r)>& weight) {
  const int sp = int(x->shape.size()) - 2, last = sp - 1;
  RowNest nest = RowNest::of(y, work);
  nest.row = [&](const TExpr& n, const TExpr& o, const Index& os) {
    auto yi = [&](const TExpr& ow) { return cat_index({n, o}, os, ow); };
    Stmt init = loop("w0", nest.width, row_kind(nest.width),
                     [&](const TExpr& ow) { return tir::make_store(y, yi(ow), zero(acc)); });
    Stmt taps = serial_nest(reduce, "k", [&](const Index& r) {
      Index xi = {n, channel(o, r[0])};
      std::vector<TExpr> ok;
      for (int j = 0; j < last; ++j) {
        ConvSource s = source(j, os[j], r[1 + j], false);
        if (s.ok) ok.push_back(s.ok);
        xi.push_back(s.index);
      }
      TExpr wv = weight(o, r);
      Stmt body = loop("w1", nest.width, row_kind(nest.width), [&](const TExpr& ow) {
        ConvSource s = source(last, ow, r[sp], true);
        Index xr = xi;
        xr.push_back(s.index);
        TExpr v = cast(acc, load(x, xr));
        if (s.ok) v = select(s.ok, v, zero(acc));
        return tir::make_store(y, yi(ow), load(y, yi(ow)) + v * wv);
      });
      return ok.empty() ? body : tir::make_if(all_of(ok), body);
    });
    return tir::make_seq({init, taps});
  };
  return nest.build();
}

std::optional<Expr> legalize_conv(LegalizeContext& ctx, const CallNode& call) {
  Attrs attrs = ops::attrs_of(call);
  if (std::optional<Expr> lib = gemm_conv2d(ctx, call, attrs)) return lib;
  ProgramBuilder pb(ctx, call, "conv");
  Buffer x = pb.arg(0, "x"), w = pb.arg(1, "w"), y = pb.result("y");
  if (!pb.known()) return pb.unknown();
  int sp = int(x->shape.size()) - 2;
  if (sp < 1) return std::nullopt;
  const ConvTaps t = conv_taps("conv", attrs, w, y, sp);
  const std::vector<SymExpr>& reduce = t.reduce;
  DataType acc = compute_dtype(y->dtype);
  if (acc.is_bool()) return std::nullopt;
  auto tap_pos = [&](int j, const TExpr& o, const TExpr& k) { return t.pos(j, o, k); };
  auto padded = [&](int j) { return t.padded(j); };
  auto channel = [&](const TExpr& o, const TExpr& c) { return t.channel(o, c); };
  SymExpr work = num_elements(y->shape) * num_elements(reduce);

  if (acc != y->dtype || ctx.gpu()) {
    // Per element with a local accumulator: narrow floats (accumulated in
    // f32), and on GPU targets (a thread per output element, register
    // tiles sharing the weight loads). The padding reads as 0.
    return pb.finish(conv_per_element(
        t, x, w, y, acc,
        [&](const TExpr& v, const TExpr& inside) {
          TExpr xv = cast(acc, v);
          return inside ? select(inside, xv, zero(acc)) : xv;
        },
        [&](const TExpr& v, const TExpr&) { return cast(acc, v); }));
  }

  // Unpadded outer axes index x directly; a padded one is tested (the
  // tap skipped), the row's axis clamped and masked.
  auto source = [&](int j, const TExpr& o, const TExpr& k, bool along_row) {
    TExpr p = tap_pos(j, o, k);
    if (!padded(j)) return ConvSource{p, nullptr};
    return ConvSource{along_row ? clamp_index(p, x->shape[2 + j]) : p, in_range(p, 0, x->shape[2 + j])};
  };
  auto weight = [&](const TExpr& o, const Index& r) {
    Index wi = {o, r[0]};
    wi.insert(wi.end(), r.begin() + 1, r.end());
    return cast(acc, load(w, wi));
  };
  return pb.finish(conv_rows(x, y, acc, reduce, work, channel, source, weight));
}

// ---- conv_blocked --------------------------------------------------------------------

// conv_blocked (x and y in the blocked channel layout, runtime/conv_blocked.h):
// the runtime's gemm.conv2d_packed layout 4 from weights packed once
// (gemm.conv2d_pack, lifted and folded at O2), the groups parameter the
// padded channel count for a depthwise one (a plain x of rank 4 read as it
// is). Only block-layout writes the op, and only for targets with that
// library: elsewhere it is declined, not given a loop nest no test runs.
std::optional<Expr> legalize_conv_blocked(LegalizeContext& ctx, const CallNode& call) {
  Attrs attrs = ops::attrs_of(call);
  const int64_t groups = attrs.get_int("groups");
  const auto* ysi = as<TensorSI>(call.sinfo);
  const auto* xsi = as<TensorSI>(call.args[0]->sinfo);
  const auto* wsi = as<TensorSI>(call.args[1]->sinfo);
  if (!ysi || !xsi || !wsi || !wsi->shape) return ctx.decline("an operand has no known shape");
  const std::vector<SymExpr>& ws = *wsi->shape;
  const bool known = ws[0].is_const() && ws[1].is_const() && ws[2].is_const() && ws[3].is_const();
  const int64_t size = known ? rt::conv2d_blocked_packed_size(ws[0].const_value(), ws[1].const_value(), groups,
                                                                ws[2].const_value(), ws[3].const_value())
                             : -1;
  if (!ctx.libraries() || size <= 0 || ysi->dtype != DataType::f32() || xsi->dtype != DataType::f32() ||
      wsi->dtype != DataType::f32())
    return ctx.decline("conv_blocked needs the cpu library (f32, a weight of known shape, groups 1 or depthwise)");
  for (const char* name : {kConv2dPack, kConv2dPacked})
    if (!ctx.module().extern_decl(name)) ctx.module().add_extern(name);
  StructInfo packed_si = tensor_si(DataType::f32(), {SymExpr(size)});
  Expr pack = make_op_call(
      "call_library", {make_string(kConv2dPack), make_tuple({call.args[1], make_shape({SymExpr(groups), SymExpr(4)})})},
      {}, {packed_si});
  pack->sinfo = packed_si;
  Expr weights = ctx.emit(pack, "conv_weights");
  const int64_t O = ws[0].const_value();
  const int64_t groups_padded = groups == 1 ? 1 : rt::channel_blocks(O) * rt::kChannelBlock;
  std::vector<SymExpr> p = as<ShapeExprNode>(library_params(library_window("conv_blocked", attrs, 4), groups_padded))->values;
  for (const SymExpr& d : {ws[2], ws[3], SymExpr(4)}) p.push_back(d);
  Expr r = make_op_call("call_library", {make_string(kConv2dPacked), make_tuple({call.args[0], weights, make_shape(p)})},
                        {}, {call.sinfo});
  r->sinfo = call.sinfo;
  return r;
}

// ---- conv_integer -----------------------------------------------------------------------

constexpr const char* kQconvPack = "gemm.qconv2d_pack";
constexpr const char* kQconvPacked = "gemm.qconv2d_packed";

// A 2-D (or 1-D) 8-bit convolution with a constant weight and zero points
// as the runtime's integer product over x's patches (runtime/qgemm.h
// qconv2d: integer dot products, VNNI where the CPU has it), when each
// group has at least 4 output channels; the weight is packed once
// (gemm.qconv2d_pack, lifted and folded into the package at O2).
std::optional<Expr> library_conv_integer(LegalizeContext& ctx, const CallNode& call, const Attrs& attrs) {
  if (!ctx.libraries()) return std::nullopt;
  const auto* y = as<TensorSI>(call.sinfo);
  const auto* x = as<TensorSI>(call.args[0]->sinfo);
  const auto* w = as<TensorSI>(call.args[1]->sinfo);
  const auto* zx = as<TensorSI>(call.args[2]->sinfo);
  const auto* zw = as<TensorSI>(call.args[3]->sinfo);
  for (const TensorSI* t : {y, x, w, zx, zw})
    if (!t || !t->shape) return std::nullopt;
  const size_t rank = y->shape->size();
  if ((rank != 4 && rank != 3) || x->shape->size() != rank || w->shape->size() != rank) return std::nullopt;
  if (call.args[1]->kind != ExprKind::Constant || call.args[3]->kind != ExprKind::Constant) return std::nullopt;
  const int64_t groups = attrs.get_int("groups");
  int64_t O = 0, K = 1;  // w (O, C / groups, kernel...): K per output channel
  for (size_t i = 0; i < rank; ++i) {
    const SymExpr& d = (*w->shape)[i];
    if (!d.is_const()) return std::nullopt;
    if (i == 0)
      O = d.const_value();
    else
      K *= d.const_value();
  }
  if (groups < 1 || O % groups != 0 || O / groups < 4) return std::nullopt;
  for (const SymExpr& d : *zx->shape)
    if (!d.is_const(1)) return std::nullopt;
  const std::vector<SymExpr>& zws = *zw->shape;
  if (!(zws.empty() || (zws.size() == 1 && (zws[0].is_const(1) || zws[0].is_const(O))))) return std::nullopt;
  for (const char* name : {kQconvPack, kQconvPacked})
    if (!ctx.module().extern_decl(name)) ctx.module().add_extern(name);
  StructInfo packed_si = tensor_si(DataType::u(8), {SymExpr(groups * qgemm_packed_b_bytes(K, O / groups))});
  Expr pack =
      make_op_call("call_library",
                   {make_string(kQconvPack), make_tuple({call.args[1], call.args[3], make_shape({SymExpr(groups)})})},
                   {}, {packed_si});
  pack->sinfo = packed_si;
  Expr packed = ctx.emit(pack, "qconv_weights");
  Window win = library_window("conv", attrs, rank);
  std::vector<SymExpr> p = as<ShapeExprNode>(library_params(win, groups))->values;
  p.push_back(rank == 4 ? (*w->shape)[2] : SymExpr(1));
  p.push_back(w->shape->back());
  Expr r = make_op_call("call_library",
                        {make_string(kQconvPacked), make_tuple({call.args[0], packed, call.args[2], make_shape(p)})},
                        {}, {call.sinfo});
  r->sinfo = call.sinfo;
  return r;
}

// Else one i32 accumulator per output element over (x - x_zp) (w - w_zp),
// the padding 0.
std::optional<Expr> legalize_conv_integer(LegalizeContext& ctx, const CallNode& call) {
  Attrs attrs = ops::attrs_of(call);
  if (std::optional<Expr> lib = library_conv_integer(ctx, call, attrs)) return lib;
  ProgramBuilder pb(ctx, call, "conv_integer");
  Buffer x = pb.arg(0, "x"), w = pb.arg(1, "w"), zx = pb.arg(2, "x_zp"), zw = pb.arg(3, "w_zp"), y = pb.result("y");
  if (!pb.known()) return pb.unknown();
  int sp = int(x->shape.size()) - 2;
  if (sp < 1) return std::nullopt;
  const DataType i32 = DataType::i32();
  auto first = [](const Buffer& b) { return load(b, Index(b->shape.size(), idx(0))); };
  const bool per_channel = zw->shape.size() == 1 && !zw->shape[0].is_const(1);
  return pb.finish(conv_per_element(
      conv_taps("conv_integer", attrs, w, y, sp), x, w, y, i32,
      [&](const TExpr& v, const TExpr& inside) {
        TExpr xv = cast(i32, v) - cast(i32, first(zx));
        return inside ? select(inside, xv, zero(i32)) : xv;
      },
      [&](const TExpr& v, const TExpr& o) {
        return cast(i32, v) - cast(i32, per_channel ? load(zw, {o}) : first(zw));
      }));
}

// ---- conv_transpose -----------------------------------------------------------------

constexpr const char* kGemmConvTranspose2d = "gemm.conv_transpose2d";

// A 2-D (or 1-D) f32 transposed convolution as the runtime library's
// product and scatter (gemm.conv_transpose2d, runtime/builtins_blas.cc),
// when each group's product has rows enough to pay (output channels times
// taps at least 8). Its columns, (O/g * KH * KW) x (H * W), are the call's
// second output, a workspace memory planning covers.
std::optional<Expr> gemm_conv_transpose2d(LegalizeContext& ctx, const CallNode& call, const Attrs& attrs) {
  if (!ctx.libraries()) return std::nullopt;
  size_t rank = library_conv_rank(call, /*i32_too=*/false);
  if (!rank) return std::nullopt;
  int64_t groups = attrs.get_int("groups");
  const std::vector<SymExpr>&ws = *as<TensorSI>(call.args[1]->sinfo)->shape,
        &xs = *as<TensorSI>(call.args[0]->sinfo)->shape;
  SymExpr kh = rank == 4 ? ws[2] : SymExpr(1), kw = ws[rank - 1];
  SymExpr ih = rank == 4 ? xs[2] : SymExpr(1), iw = xs[rank - 1];
  Analyzer& ana = ctx.analyzer();
  SymExpr rows = ana.simplify(ws[1] * kh * kw);
  if (groups < 1 || !rows.is_const() || rows.const_value() < 8) return std::nullopt;
  Expr params = library_params(library_window("conv_transpose", attrs, rank), groups);
  if (!ctx.module().extern_decl(kGemmConvTranspose2d)) ctx.module().add_extern(kGemmConvTranspose2d);
  StructInfo out = tuple_si({call.sinfo, tensor_si(DataType::f32(), {rows, ana.simplify(ih * iw)})});
  Expr r = make_op_call(
      "call_library", {make_string(kGemmConvTranspose2d), make_tuple({call.args[0], call.args[1], params})}, {}, {out});
  r->sinfo = out;
  Expr item = make_tuple_get_item(ctx.emit(r, "conv_transpose_all"), 0);
  item->sinfo = call.sinfo;
  return item;
}

std::optional<Expr> legalize_conv_transpose(LegalizeContext& ctx, const CallNode& call) {
  Attrs attrs = ops::attrs_of(call);
  if (std::optional<Expr> lib = gemm_conv_transpose2d(ctx, call, attrs)) return lib;
  ProgramBuilder pb(ctx, call, "conv_transpose");
  Buffer x = pb.arg(0, "x"), w = pb.arg(1, "w"), y = pb.result("y");
  if (!pb.known()) return pb.unknown();
  int sp = int(x->shape.size()) - 2;
  if (sp < 1) return std::nullopt;
  Window win = read_window("conv_transpose", attrs, sp);
  int64_t groups = attrs.get_int("groups");
  SymExpr Og = w->shape[1];
  SymExpr Cg = floordiv(x->shape[1], SymExpr(groups));
  std::vector<SymExpr> kernel(w->shape.begin() + 2, w->shape.end());
  DataType acc = compute_dtype(y->dtype);
  if (acc.is_bool()) return std::nullopt;
  std::vector<SymExpr> reduce = {Cg};
  reduce.insert(reduce.end(), kernel.begin(), kernel.end());
  // Output position o receives x[i] through tap k when o + pad = i * s + k * d.
  struct Src {
    TExpr index, ok;
  };
  auto source = [&](int j, const TExpr& o, const TExpr& k) {
    TExpr t = o + idx(win.pad_begin[j]) - k * idx(win.dilation[j]);
    int64_t s = win.strides[j];
    TExpr i = s == 1 ? t : tir::binary(tir::BinOp::FloorDiv, t, idx(s));
    TExpr ok = and_(ge(t, idx(0)), lt(i, idx(x->shape[2 + j])));
    if (s != 1) ok = and_(ok, eq(tir::binary(tir::BinOp::FloorMod, t, idx(s)), idx(0)));
    return Src{clamp_index(i, x->shape[2 + j]), ok};
  };
  auto channel = [&](const TExpr& o, const TExpr& c) {
    return tir::binary(tir::BinOp::FloorDiv, o, idx(Og)) * idx(Cg) + c;
  };
  auto weight = [&](const TExpr& o, const Index& r) {
    Index wi = {channel(o, r[0]), tir::binary(tir::BinOp::FloorMod, o, idx(Og))};
    wi.insert(wi.end(), r.begin() + 1, r.end());
    return cast(acc, load(w, wi));
  };
  if (acc != y->dtype || ctx.gpu()) {
    // Per element with a local accumulator: narrow floats (accumulated in
    // f32), and on GPU targets (a thread per output element; the row form
    // loops over a whole output row per tap in one invocation).
    LoopHints hints{true, false, num_elements(reduce)};
    return pb.finish(loop_nest(
        y->shape,
        [&](const Index& i) {
          Local a = local("acc", acc);
          Stmt taps = serial_nest(reduce, "k", [&](const Index& r) {
            Index xi = {i[0], channel(i[1], r[0])};
            std::vector<TExpr> ok;
            for (int j = 0; j < sp; ++j) {
              Src s = source(j, i[2 + j], r[1 + j]);
              ok.push_back(s.ok);
              xi.push_back(s.index);
            }
            return a.set(a.get() + select(all_of(ok), cast(acc, load(x, xi)) * weight(i[1], r), zero(acc)));
          });
          return with_locals({a},
                             tir::make_seq({a.set(zero(acc)), taps, tir::make_store(y, i, cast(y->dtype, a.get()))}));
        },
        hints));
  }
  auto row_source = [&](int j, const TExpr& o, const TExpr& k, bool) {
    Src src = source(j, o, k);
    return ConvSource{src.index, src.ok};
  };
  return pb.finish(conv_rows(x, y, acc, reduce, num_elements(y->shape) * num_elements(reduce), channel, row_source,
                             weight));
}

// ---- deform_conv (2-D) -------------------------------------------------------------------

// Bilinear sample of x[n, c] at (h, w) (f32), zero outside.
TExpr bilinear_zero(const Buffer& x, const TExpr& n, const TExpr& c, const TExpr& h, const TExpr& w, DataType t) {
  SymExpr H = x->shape[2], W = x->shape[3];
  TExpr h0f = intrin(Intrinsic::floor, h), w0f = intrin(Intrinsic::floor, w);
  TExpr fh = h - h0f, fw = w - w0f;
  TExpr h0 = as_index(h0f), w0 = as_index(w0f);
  TExpr sum;
  for (int dh = 0; dh < 2; ++dh) {
    for (int dw = 0; dw < 2; ++dw) {
      TExpr hh = h0 + idx(dh), ww = w0 + idx(dw);
      TExpr wt = (dh ? fh : one(t) - fh) * (dw ? fw : one(t) - fw);
      TExpr ok = and_(in_range(hh, 0, H), in_range(ww, 0, W));
      TExpr v = select(ok, cast(t, load(x, {n, c, clamp_index(hh, H), clamp_index(ww, W)})), zero(t));
      sum = sum ? sum + wt * v : wt * v;
    }
  }
  // Far outside (h <= -1 or h >= H ...) every corner is invalid already.
  return sum;
}

std::optional<Expr> legalize_deform_conv(LegalizeContext& ctx, const CallNode& call) {
  Attrs attrs = ops::attrs_of(call);
  ProgramBuilder pb(ctx, call, "deform_conv");
  Buffer x = pb.arg(0, "x"), w = pb.arg(1, "w"), off = pb.arg(2, "offset"), mask = pb.arg(3, "mask"),
         y = pb.result("y");
  if (!pb.known()) return pb.unknown();
  if (x->shape.size() != 4) return std::nullopt;
  Window win = read_window("deform_conv", attrs, 2);
  int64_t groups = attrs.get_int("groups"), ogroups = attrs.get_int("offset_groups");
  SymExpr O = y->shape[1], Cg = w->shape[1], KH = w->shape[2], KW = w->shape[3];
  SymExpr Og = floordiv(O, SymExpr(groups));
  SymExpr Cpo = floordiv(x->shape[1], SymExpr(ogroups));  // channels per offset group
  DataType t = compute_dtype(y->dtype);
  if (!t.is_float()) return std::nullopt;
  LoopHints hints{true, false, Cg * KH * KW};
  return pb.finish(loop_nest(
      y->shape,
      [&](const Index& i) {
        Local a = local("acc", t);
        Stmt taps = serial_nest({Cg, KH, KW}, "k", [&](const Index& r) {
          TExpr c = tir::binary(tir::BinOp::FloorDiv, i[1], idx(Og)) * idx(Cg) + r[0];
          TExpr g = tir::binary(tir::BinOp::FloorDiv, c, idx(Cpo));
          TExpr tap = r[1] * idx(KW) + r[2];
          TExpr base = g * idx(KH * KW) + tap;
          TExpr dy = cast(t, load(off, {i[0], base * idx(2), i[2], i[3]}));
          TExpr dx = cast(t, load(off, {i[0], base * idx(2) + idx(1), i[2], i[3]}));
          TExpr ph = cast(t, i[2] * idx(win.strides[0]) - idx(win.pad_begin[0]) + r[1] * idx(win.dilation[0])) + dy;
          TExpr pw = cast(t, i[3] * idx(win.strides[1]) - idx(win.pad_begin[1]) + r[2] * idx(win.dilation[1])) + dx;
          TExpr v = bilinear_zero(x, i[0], c, ph, pw, t);
          if (mask) v = v * cast(t, load(mask, {i[0], base, i[2], i[3]}));
          return a.set(a.get() + v * cast(t, load(w, {i[1], r[0], r[1], r[2]})));
        });
        return with_locals({a}, tir::make_seq({a.set(zero(t)), taps, tir::make_store(y, i, cast(y->dtype, a.get()))}));
      },
      hints));
}

}  // namespace

void register_nn_legalizers(LegalizerRegistry& reg) {
  reg.add("conv", legalize_conv);
  reg.add("conv_blocked", legalize_conv_blocked);
  reg.add("conv_integer", legalize_conv_integer);
  reg.add("conv_transpose", legalize_conv_transpose);
  reg.add("deform_conv", legalize_deform_conv);
}

}  // namespace relax
