// Legalisers of the nn ops (ir/ops/nn.cc): conv, conv_transpose,
// deform_conv, max_pool, avg_pool, lp_pool, max_pool_indices, max_unpool,
// lrn and nll_loss.
//
// conv, conv_transpose and the pools accumulate in place in their output
// when its dtype is the accumulator's (f32, f64, i32, i64; max_pool any
// dtype): one row of the output (the last spatial axis) is zeroed, every
// kernel tap adds its contribution to the whole row in a vectorisable loop,
// and the row is finished. Taps that fall into the padding are skipped by an
// `if` on the outer spatial axes and read as 0 (through a clamped index) on
// the last one. Narrow floats accumulate per element in f32 instead.
#include "ir/ops/common.h"
#include "passes/legalize/legalize.h"
#include "passes/legalize/te.h"

namespace relax {
namespace {

using namespace te;
using tir::Intrinsic;
using tir::LoopKind;

// ---- shared pieces ---------------------------------------------------------------

struct Window {
  std::vector<int64_t> strides, dilation, pad_begin, pad_end;
};

Window read_window(const std::string& op, const Attrs& attrs, int sp) {
  Window w;
  w.strides = ops::spatial_list(op, "strides", attrs.get_ints("strides"), sp, 1);
  w.dilation = ops::spatial_list(op, "dilation", attrs.get_ints("dilation"), sp, 1);
  std::vector<int64_t> pad = attrs.get_ints("padding");
  if (int(pad.size()) == 2 * sp) {
    w.pad_begin.assign(pad.begin(), pad.begin() + sp);
    w.pad_end.assign(pad.begin() + sp, pad.end());
  } else {
    w.pad_begin = w.pad_end = ops::spatial_list(op, "padding", pad, sp, 0);
  }
  return w;
}

TExpr clamp_index(const TExpr& i, const SymExpr& dim) { return max_(min_(i, idx(dim) - idx(1)), idx(0)); }
TExpr in_range(const TExpr& i, const SymExpr& lo, const SymExpr& hi) { return and_(ge(i, idx(lo)), lt(i, idx(hi))); }
TExpr all_of(const std::vector<TExpr>& cs) {
  TExpr r;
  for (const TExpr& c : cs) r = r ? and_(r, c) : c;
  return r;
}

// The loop kind of a row loop: vectorized unless it is short (the code
// generator handles any remainder).
LoopKind row_kind(const SymExpr& extent) {
  bool ok = !extent.is_const() || extent.const_value() >= 8;
  return ok ? LoopKind::Vectorized : LoopKind::Serial;
}
LoopKind outer_kind(const SymExpr& work) {
  return !work.is_const() || work.const_value() >= kParallelWork ? LoopKind::Parallel : LoopKind::Serial;
}

Stmt loop(const std::string& name, const SymExpr& extent, LoopKind kind,
          const std::function<Stmt(const TExpr&)>& body) {
  SymExpr v = SymExpr::var(name);
  return tir::make_for(v, extent, kind, body(idx(v)));
}
Stmt serial_nest(const std::vector<SymExpr>& extents, const std::string& prefix,
                 const std::function<Stmt(const Index&)>& body) {
  return loop_nest(extents, body, LoopHints{false, false, 1}, prefix);
}

// Helpers for the row-wise in-place form: `for nc in (N * M)`, then the
// outer spatial axes, then per row `init`, the taps, `finish`.
struct RowNest {
  SymExpr outer_extent;       // N * M
  SymExpr m;                  // M (the second dim)
  std::vector<SymExpr> rows;  // outer spatial extents of the output
  SymExpr width;              // the last spatial extent of the output
  SymExpr work;               // for the parallel decision
  std::function<Stmt(const TExpr& n, const TExpr& m, const Index& os)> row;
  Stmt build() const {
    return loop("nm", outer_extent, outer_kind(work), [&](const TExpr& nm) {
      TExpr n = tir::binary(tir::BinOp::FloorDiv, nm, idx(m));
      TExpr mm = tir::binary(tir::BinOp::FloorMod, nm, idx(m));
      return serial_nest(rows, "r", [&](const Index& os) { return row(n, mm, os); });
    });
  }
};

Index cat_index(std::initializer_list<TExpr> head, const Index& mid, const TExpr& last = nullptr) {
  Index out(head);
  out.insert(out.end(), mid.begin(), mid.end());
  if (last) out.push_back(last);
  return out;
}

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
// blocks of 16 channels (conv2d_depthwise_packed_size).
int64_t packed_size(int64_t layout, int64_t groups, int64_t Og, int64_t K) {
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
  // the runtime's own kernel, no workspace; but output planes known to be
  // small (16x16 or less) stay loop nests, which fuse the bias and
  // activation and were faster there (bench: 16x16x64 3x3 0.035 ms as a
  // loop nest, 0.040 ms in the library; 32x32x64 0.29 and 0.10 ms), at
  // row stride 1: strided, the nest gathers every input, and the library
  // ran EfficientNet-B0-like and MobileNetV3-like models 1.4-1.5x faster.
  Window win = library_window("conv", attrs, rank);
  const bool depthwise = ws[1].is_const(1) && ws[0].const_value() / groups < 8;
  if (depthwise && oh.is_const() && ow.is_const() && oh.const_value() * ow.const_value() <= 256 &&
      win.strides.back() == 1)
    return std::nullopt;
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
  // directly (runtime/conv_direct.h conv2d_prefers_direct: at least 8
  // outputs per group and an output plane known to hold fewer than 8
  // positions, or at least 4 and a kernel wider than 1x1 with a reduction
  // under 4096), else 1 (im2col + GEMM).
  // Depthwise ones with one output per channel over planes known to be
  // small (at most 64 outputs): layout 2, channels in the vector lanes
  // (conv2d_depthwise_packed_f32); the plane-wise kernel zero-fills and
  // splits a padded copy of each channel for a few outputs there.
  const int64_t plane = oh.is_const() && ow.is_const() ? oh.const_value() * ow.const_value() : -1;
  const bool channel_blocks = depthwise && ws[0].const_value() == groups && plane >= 0 && plane <= 64;
  if (!i32 && (!depthwise || channel_blocks) && weights->kind == ExprKind::Constant && ws[1].is_const() &&
      kh.is_const() && kw.is_const()) {
    int64_t Og = ws[0].const_value() / groups, K = ws[1].const_value() * kh.const_value() * kw.const_value();
    const bool small_plane = plane >= 0 && plane < 8;
    const bool wide = !kh.is_const(1) || !kw.is_const(1);
    int64_t layout = channel_blocks ? 2 : (Og >= 8 && small_plane) || (Og >= 4 && wide && K < 4096) ? 0 : 1;
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
        return with_locals({a}, tir::make_seq({a.set(zero(acc)), taps, tir::make_store(y, i, cast(y->dtype, a.get()))}));
      },
      hints);
}

std::optional<Expr> legalize_conv(LegalizeContext& ctx, const CallNode& call) {
  Attrs attrs = ops::attrs_of(call);
  if (std::optional<Expr> lib = gemm_conv2d(ctx, call, attrs)) return lib;
  ProgramBuilder pb(ctx, "conv");
  Buffer x = pb.input(call.args[0], "x");
  Buffer w = pb.input(call.args[1], "w");
  Buffer y = pb.output(call.sinfo, "y");
  if (!x || !y || !w) return std::nullopt;
  int sp = int(x->shape.size()) - 2;
  if (sp < 1) return std::nullopt;
  const ConvTaps t = conv_taps("conv", attrs, w, y, sp);
  const SymExpr O = y->shape[1];
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

  RowNest nest;
  nest.outer_extent = y->shape[0] * O;
  nest.m = O;
  nest.rows.assign(y->shape.begin() + 2, y->shape.end() - 1);
  nest.width = y->shape.back();
  nest.work = work;
  int last = sp - 1;
  nest.row = [&](const TExpr& n, const TExpr& o, const Index& os) {
    auto yi = [&](const TExpr& ow) { return cat_index({n, o}, os, ow); };
    Stmt init = loop("w0", nest.width, row_kind(nest.width),
                     [&](const TExpr& ow) { return tir::make_store(y, yi(ow), zero(acc)); });
    Stmt taps = serial_nest(reduce, "k", [&](const Index& r) {
      Index xi = {n, channel(o, r[0])};
      std::vector<TExpr> ok;
      for (int j = 0; j < last; ++j) {
        TExpr p = tap_pos(j, os[j], r[1 + j]);
        if (padded(j)) ok.push_back(in_range(p, 0, x->shape[2 + j]));
        xi.push_back(p);
      }
      Index wi = {o, r[0]};
      wi.insert(wi.end(), r.begin() + 1, r.end());
      TExpr wv = cast(acc, load(w, wi));
      Stmt body = loop("w1", nest.width, row_kind(nest.width), [&](const TExpr& ow) {
        TExpr p = tap_pos(last, ow, r[sp]);
        Index xr = xi;
        xr.push_back(padded(last) ? clamp_index(p, x->shape.back()) : p);
        TExpr v = cast(acc, load(x, xr));
        if (padded(last)) v = select(in_range(p, 0, x->shape.back()), v, zero(acc));
        return tir::make_store(y, yi(ow), load(y, yi(ow)) + v * wv);
      });
      return ok.empty() ? body : tir::make_if(all_of(ok), body);
    });
    return tir::make_seq({init, taps});
  };
  return pb.finish(nest.build());
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
  Expr pack = make_op_call(
      "call_library", {make_string(kQconvPack), make_tuple({call.args[1], call.args[3], make_shape({SymExpr(groups)})})},
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
  ProgramBuilder pb(ctx, "conv_integer");
  Buffer x = pb.input(call.args[0], "x");
  Buffer w = pb.input(call.args[1], "w");
  Buffer zx = pb.input(call.args[2], "x_zp");
  Buffer zw = pb.input(call.args[3], "w_zp");
  Buffer y = pb.output(call.sinfo, "y");
  if (!x || !w || !zx || !zw || !y) return std::nullopt;
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
  ProgramBuilder pb(ctx, "conv_transpose");
  Buffer x = pb.input(call.args[0], "x");
  Buffer w = pb.input(call.args[1], "w");
  Buffer y = pb.output(call.sinfo, "y");
  if (!x || !y || !w) return std::nullopt;
  int sp = int(x->shape.size()) - 2;
  if (sp < 1) return std::nullopt;
  Window win = read_window("conv_transpose", attrs, sp);
  int64_t groups = attrs.get_int("groups");
  SymExpr O = y->shape[1], Og = w->shape[1];
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
  RowNest nest;
  nest.outer_extent = y->shape[0] * O;
  nest.m = O;
  nest.rows.assign(y->shape.begin() + 2, y->shape.end() - 1);
  nest.width = y->shape.back();
  nest.work = num_elements(y->shape) * num_elements(reduce);
  int last = sp - 1;
  nest.row = [&](const TExpr& n, const TExpr& o, const Index& os) {
    auto yi = [&](const TExpr& ow) { return cat_index({n, o}, os, ow); };
    Stmt init = loop("w0", nest.width, row_kind(nest.width),
                     [&](const TExpr& ow) { return tir::make_store(y, yi(ow), zero(acc)); });
    Stmt taps = serial_nest(reduce, "k", [&](const Index& r) {
      Index xi = {n, channel(o, r[0])};
      std::vector<TExpr> ok;
      for (int j = 0; j < last; ++j) {
        Src s = source(j, os[j], r[1 + j]);
        ok.push_back(s.ok);
        xi.push_back(s.index);
      }
      TExpr wv = weight(o, r);
      Stmt body = loop("w1", nest.width, row_kind(nest.width), [&](const TExpr& ow) {
        Src s = source(last, ow, r[sp]);
        Index xr = xi;
        xr.push_back(s.index);
        TExpr v = select(s.ok, cast(acc, load(x, xr)), zero(acc));
        return tir::make_store(y, yi(ow), load(y, yi(ow)) + v * wv);
      });
      return ok.empty() ? body : tir::make_if(all_of(ok), body);
    });
    return tir::make_seq({init, taps});
  };
  return pb.finish(nest.build());
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
  ProgramBuilder pb(ctx, "deform_conv");
  Buffer x = pb.input(call.args[0], "x");
  Buffer w = pb.input(call.args[1], "w");
  Buffer off = pb.input(call.args[2], "offset");
  Buffer mask = call.args.size() > 3 ? pb.input(call.args[3], "mask") : nullptr;
  Buffer y = pb.output(call.sinfo, "y");
  if (!x || !w || !off || !y || (call.args.size() > 3 && !mask)) return std::nullopt;
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

// ---- pools ---------------------------------------------------------------------------------

enum class PoolKind { Max, Avg, Lp };

struct PoolSpec {
  PoolKind kind;
  std::vector<int64_t> size;
  Window win;
  bool ceil_mode = false, count_include_pad = false;
  double p = 2;
};

PoolSpec pool_spec(const std::string& op, const Attrs& attrs, int sp) {
  PoolSpec s;
  s.kind = op == "avg_pool" ? PoolKind::Avg : op == "lp_pool" ? PoolKind::Lp : PoolKind::Max;
  s.size = ops::spatial_list(op, "pool_size", attrs.get_ints("pool_size"), sp, 1);
  s.win = read_window(op, attrs, sp);
  s.ceil_mode = attrs.get_bool("ceil_mode");
  if (s.kind == PoolKind::Avg) s.count_include_pad = attrs.get_bool("count_include_pad");
  if (s.kind == PoolKind::Lp) s.p = attrs.get_float("p");
  return s;
}

// Whether windows along axis j may reach outside the input.
bool may_leave(const PoolSpec& s, int j) { return s.win.pad_begin[j] || s.win.pad_end[j] || s.ceil_mode; }

TExpr window_pos(const PoolSpec& s, int j, const TExpr& o, const TExpr& k) {
  return o * idx(s.win.strides[j]) + k * idx(s.win.dilation[j]) - idx(s.win.pad_begin[j]);
}

// The number of taps k in [0, K) of window o along axis j whose position lies in [lo, hi).
TExpr tap_count(const PoolSpec& s, int j, const TExpr& o, const SymExpr& lo, const SymExpr& hi) {
  int64_t d = s.win.dilation[j];
  TExpr p0 = o * idx(s.win.strides[j]) - idx(s.win.pad_begin[j]);
  auto ceil_div = [&](const TExpr& a) { return tir::binary(tir::BinOp::FloorDiv, a + idx(d - 1), idx(d)); };
  TExpr first = max_(ceil_div(idx(lo) - p0), idx(0));
  TExpr end = min_(ceil_div(idx(hi) - p0), idx(s.size[j]));
  return max_(end - first, idx(0));
}

TExpr lp_term(const TExpr& v, double p) {
  TExpr a = intrin(Intrinsic::abs, v);
  if (p == 1) return a;
  if (p == 2) return v * v;
  return intrin(Intrinsic::pow, a, const_of(v->dtype, p));
}
TExpr lp_finish(const TExpr& v, double p) {
  if (p == 1) return v;
  if (p == 2) return intrin(Intrinsic::sqrt, v);
  return intrin(Intrinsic::pow, v, const_of(v->dtype, 1.0 / p));
}

std::optional<Expr> legalize_pool(LegalizeContext& ctx, const CallNode& call) {
  const std::string& op = ops::op_name(call);
  Attrs attrs = ops::attrs_of(call);
  ProgramBuilder pb(ctx, op);
  Buffer x = pb.input(call.args[0], "x");
  Buffer y = pb.output(call.sinfo, "y");
  if (!x || !y) return std::nullopt;
  int sp = int(x->shape.size()) - 2;
  if (sp < 1) return std::nullopt;
  PoolSpec s = pool_spec(op, attrs, sp);
  DataType t = y->dtype;
  DataType acc = s.kind == PoolKind::Max ? t : compute_dtype(t);
  if (s.kind != PoolKind::Max && !acc.is_float()) return std::nullopt;
  std::vector<SymExpr> window;
  for (int64_t k : s.size) window.push_back(k);
  TExpr neutral = s.kind == PoolKind::Max ? min_value(acc) : zero(acc);
  auto combine = [&](const TExpr& a, const TExpr& v) {
    if (s.kind == PoolKind::Max) return max_(a, v);
    if (s.kind == PoolKind::Lp) return a + lp_term(v, s.p);
    return a + v;
  };
  auto divisor = [&](const Index& os) {
    TExpr cnt;
    for (int j = 0; j < sp; ++j) {
      SymExpr lo = s.count_include_pad ? SymExpr(-s.win.pad_begin[j]) : SymExpr(0);
      SymExpr hi = s.count_include_pad ? x->shape[2 + j] + s.win.pad_end[j] : x->shape[2 + j];
      TExpr c = tap_count(s, j, os[j], lo, hi);
      cnt = cnt ? cnt * c : c;
    }
    return cast(acc, max_(cnt, idx(1)));
  };
  auto finish = [&](const TExpr& a, const Index& os) {
    if (s.kind == PoolKind::Avg) return a / divisor(os);
    if (s.kind == PoolKind::Lp) return lp_finish(a, s.p);
    return a;
  };
  SymExpr work = num_elements(y->shape) * num_elements(window);

  // Per element with a local accumulator: narrow floats, and on GPU
  // targets (a thread per output element; a row nest would loop over the
  // whole row in one thread). On the cpu also small windows strided along
  // the row (ResNet's and a CRNN's 2x2 / 3x3 max pools, stride 2): the
  // taps of one output element, unrolled inside the vector loop, read
  // neighbouring inputs that LLVM loads as whole vectors and deinterleaves,
  // where a pass over the row per tap gathered every strided element and
  // read and wrote the output row once per tap.
  int64_t taps = 1;
  for (int64_t k : s.size) taps *= k;
  bool strided_row = s.win.strides.back() > 1 && taps <= 16;
  if (acc != t || ctx.gpu() || strided_row) {
    LoopHints hints{true, false, num_elements(window)};
    return pb.finish(loop_nest(
        y->shape,
        [&](const Index& i) {
          Local a = local("acc", acc);
          Index os(i.begin() + 2, i.end());
          Stmt taps = serial_nest(window, "k", [&](const Index& k) {
            Index xi = {i[0], i[1]};
            std::vector<TExpr> ok;
            for (int j = 0; j < sp; ++j) {
              TExpr p = window_pos(s, j, os[j], k[j]);
              if (may_leave(s, j)) ok.push_back(in_range(p, 0, x->shape[2 + j]));
              xi.push_back(may_leave(s, j) ? clamp_index(p, x->shape[2 + j]) : p);
            }
            TExpr v = cast(acc, load(x, xi));
            if (!ok.empty()) v = select(all_of(ok), v, neutral);
            return a.set(combine(a.get(), v));
          });
          return with_locals(
              {a}, tir::make_seq({a.set(neutral), taps, tir::make_store(y, i, cast(t, finish(a.get(), os)))}));
        },
        hints));
  }

  RowNest nest;
  nest.outer_extent = y->shape[0] * y->shape[1];
  nest.m = y->shape[1];
  nest.rows.assign(y->shape.begin() + 2, y->shape.end() - 1);
  nest.width = y->shape.back();
  nest.work = work;
  int last = sp - 1;
  nest.row = [&](const TExpr& n, const TExpr& c, const Index& os) {
    auto yi = [&](const TExpr& ow) { return cat_index({n, c}, os, ow); };
    LoopKind rk = row_kind(nest.width);
    Stmt init = loop("w0", nest.width, rk, [&](const TExpr& ow) { return tir::make_store(y, yi(ow), neutral); });
    Stmt taps = serial_nest(window, "k", [&](const Index& k) {
      Index xi = {n, c};
      std::vector<TExpr> ok;
      for (int j = 0; j < last; ++j) {
        TExpr p = window_pos(s, j, os[j], k[j]);
        if (may_leave(s, j)) ok.push_back(in_range(p, 0, x->shape[2 + j]));
        xi.push_back(p);
      }
      Stmt body = loop("w1", nest.width, rk, [&](const TExpr& ow) {
        TExpr p = window_pos(s, last, ow, k[last]);
        Index xr = xi;
        xr.push_back(may_leave(s, last) ? clamp_index(p, x->shape.back()) : p);
        TExpr v = load(x, xr);
        if (may_leave(s, last)) v = select(in_range(p, 0, x->shape.back()), v, neutral);
        return tir::make_store(y, yi(ow), combine(load(y, yi(ow)), v));
      });
      return ok.empty() ? body : tir::make_if(all_of(ok), body);
    });
    std::vector<Stmt> seq{init, taps};
    if (s.kind != PoolKind::Max) {
      seq.push_back(loop("w2", nest.width, LoopKind::Serial, [&](const TExpr& ow) {
        Index full = os;
        full.push_back(ow);
        return tir::make_store(y, yi(ow), finish(load(y, yi(ow)), full));
      }));
    }
    return tir::make_seq(seq);
  };
  return pb.finish(nest.build());
}

// The flat position of x's element (n, c, p...) as ONNX MaxPool's Indices
// hold it: row-major, or the spatial dims column-major with storage_order 1.
TExpr storage_index(const Buffer& x, const TExpr& n, const TExpr& c, const Index& p, bool column_major) {
  int sp = int(p.size());
  TExpr plane = (n * idx(x->shape[1]) + c);
  std::vector<SymExpr> spatial(x->shape.begin() + 2, x->shape.end());
  TExpr off;
  if (!column_major) {
    off = flat_index(p, spatial);
  } else {
    off = idx(0);
    for (int j = sp; j-- > 0;) off = off * idx(spatial[j]) + p[j];
  }
  return plane * idx(num_elements(spatial)) + off;
}

std::optional<Expr> legalize_max_pool_indices(LegalizeContext& ctx, const CallNode& call) {
  Attrs attrs = ops::attrs_of(call);
  ProgramBuilder pb(ctx, "max_pool_indices");
  Buffer x = pb.input(call.args[0], "x");
  Buffer y = pb.output(call.sinfo, "indices");
  if (!x || !y) return std::nullopt;
  int sp = int(x->shape.size()) - 2;
  if (sp < 1) return std::nullopt;
  PoolSpec s = pool_spec("max_pool_indices", attrs, sp);
  bool column_major = attrs.get_int("storage_order") == 1;
  std::vector<SymExpr> window;
  for (int64_t k : s.size) window.push_back(k);
  DataType t = x->dtype;
  LoopHints hints{true, false, num_elements(window)};
  return pb.finish(loop_nest(
      y->shape,
      [&](const Index& i) {
        Local best = local("best", t), at = local("at", DataType::i64());
        Index os(i.begin() + 2, i.end());
        Stmt taps = serial_nest(window, "k", [&](const Index& k) {
          Index xi = {i[0], i[1]}, pos;
          std::vector<TExpr> ok;
          for (int j = 0; j < sp; ++j) {
            TExpr p = window_pos(s, j, os[j], k[j]);
            if (may_leave(s, j)) ok.push_back(in_range(p, 0, x->shape[2 + j]));
            TExpr pc = may_leave(s, j) ? clamp_index(p, x->shape[2 + j]) : p;
            xi.push_back(pc);
            pos.push_back(pc);
          }
          TExpr v = load(x, xi);
          TExpr better = or_(gt(v, best.get()), lt(at.get(), idx(0)));
          if (!ok.empty()) better = and_(all_of(ok), better);
          Local flag = local("better", DataType::boolean());
          Stmt upd =
              tir::make_seq({flag.set(better), best.set(select(flag.get(), v, best.get())),
                             at.set(select(flag.get(), storage_index(x, i[0], i[1], pos, column_major), at.get()))});
          return with_locals({flag}, upd);
        });
        return with_locals({best, at}, tir::make_seq({best.set(min_value(t)), at.set(idx(-1)), taps,
                                                      tir::make_store(y, i, max_(at.get(), idx(0)))}));
      },
      hints));
}

// ---- max_unpool ----------------------------------------------------------------------------

std::optional<Expr> legalize_max_unpool(LegalizeContext& ctx, const CallNode& call) {
  ProgramBuilder pb(ctx, "max_unpool");
  Buffer x = pb.input(call.args[0], "x");
  Buffer ind = pb.input(call.args[1], "indices");
  Buffer y = pb.output(call.sinfo, "y");
  if (!x || !ind || !y) return std::nullopt;
  SymExpr total = num_elements(y->shape);
  Stmt zero_fill = compute(y, [&](const Index&) { return zero(y->dtype); });
  Stmt scatter = serial_nest(x->shape, "i", [&](const Index& i) {
    TExpr flat = max_(min_(as_index(load(ind, i)), idx(total) - idx(1)), idx(0));
    return tir::make_store(y, unflatten(flat, y->shape), load(x, i));
  });
  return pb.finish(tir::make_seq({zero_fill, scatter}));
}

// ---- lrn -----------------------------------------------------------------------------------

std::optional<Expr> legalize_lrn(LegalizeContext& ctx, const CallNode& call) {
  Attrs attrs = ops::attrs_of(call);
  ProgramBuilder pb(ctx, "lrn");
  Buffer x = pb.input(call.args[0], "x");
  Buffer y = pb.output(call.sinfo, "y");
  if (!x || !y) return std::nullopt;
  int64_t size = attrs.get_int("size");
  int64_t before = (size - 1) / 2;
  DataType t = compute_dtype(y->dtype);
  SymExpr C = x->shape[1];
  TExpr alpha = const_of(t, attrs.get_float("alpha") / double(size));
  TExpr beta = const_of(t, attrs.get_float("beta")), bias = const_of(t, attrs.get_float("bias"));
  LoopHints hints{true, false, size};
  return pb.finish(loop_nest(
      y->shape,
      [&](const Index& i) {
        Local a = local("acc", t);
        Stmt sum = serial_nest({size}, "k", [&](const Index& k) {
          TExpr c = i[1] - idx(before) + k[0];
          Index xi = i;
          xi[1] = clamp_index(c, C);
          TExpr v = cast(t, load(x, xi));
          return a.set(a.get() + select(in_range(c, 0, C), v * v, zero(t)));
        });
        TExpr denom = intrin(Intrinsic::pow, bias + alpha * a.get(), beta);
        return with_locals({a}, tir::make_seq({a.set(zero(t)), sum,
                                               tir::make_store(y, i, cast(y->dtype, cast(t, load(x, i)) / denom))}));
      },
      hints));
}

// ---- nll_loss -------------------------------------------------------------------------------

std::optional<Expr> legalize_nll_loss(LegalizeContext& ctx, const CallNode& call) {
  Attrs attrs = ops::attrs_of(call);
  ProgramBuilder pb(ctx, "nll_loss");
  Buffer x = pb.input(call.args[0], "input");
  Buffer target = pb.input(call.args[1], "target");
  Buffer weight = call.args.size() > 2 ? pb.input(call.args[2], "weight") : nullptr;
  Buffer y = pb.output(call.sinfo, "loss");
  if (!x || !target || !y || (call.args.size() > 2 && !weight)) return std::nullopt;
  std::string reduction = attrs.get_string("reduction");
  int64_t ignore = attrs.get_int("ignore_index");
  DataType t = compute_dtype(y->dtype);
  SymExpr C = x->shape[1];
  // (-input[n, target, d...] * w, w) for target index ti.
  auto term = [&](const Index& ti, bool want_weight) {
    TExpr cls = as_index(load(target, ti));
    TExpr valid = ne(cls, idx(ignore));
    TExpr c = clamp_index(cls, C);
    TExpr wv = weight ? cast(t, load(weight, {c})) : one(t);
    wv = select(valid, wv, zero(t));
    if (want_weight) return wv;
    Index xi = {ti[0], c};
    xi.insert(xi.end(), ti.begin() + 1, ti.end());
    return -cast(t, load(x, xi)) * wv;
  };
  if (reduction == "none") return pb.finish(compute(y, [&](const Index& i) { return cast(y->dtype, term(i, false)); }));
  Local sum = local("sum", t), wsum = local("wsum", t);
  Stmt body = serial_nest(target->shape, "i", [&](const Index& i) {
    return tir::make_seq({sum.set(sum.get() + term(i, false)), wsum.set(wsum.get() + term(i, true))});
  });
  TExpr result = reduction == "mean" ? sum.get() / wsum.get() : sum.get();
  return pb.finish(with_locals({sum, wsum}, tir::make_seq({sum.set(zero(t)), wsum.set(zero(t)), body,
                                                           tir::make_store(y, {}, cast(y->dtype, result))})));
}

}  // namespace

void register_nn_legalizers(LegalizerRegistry& reg) {
  reg.add("conv", legalize_conv);
  reg.add("conv_integer", legalize_conv_integer);
  reg.add("conv_transpose", legalize_conv_transpose);
  reg.add("deform_conv", legalize_deform_conv);
  reg.add("max_pool", legalize_pool);
  reg.add("avg_pool", legalize_pool);
  reg.add("lp_pool", legalize_pool);
  reg.add("max_pool_indices", legalize_max_pool_indices);
  reg.add("max_unpool", legalize_max_unpool);
  reg.add("lrn", legalize_lrn);
  reg.add("nll_loss", legalize_nll_loss);
}

}  // namespace relax
