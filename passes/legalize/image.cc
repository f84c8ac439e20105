// Legalisers of the image ops (ir/ops/image.cc): resize, grid_sample,
// affine_grid and roi_align, following ONNX's reference implementation.
//
// resize is separable: each resized axis maps an output coordinate to an
// input coordinate (coordinate_transformation_mode, in f64 as ONNX's
// reference does) and then to taps with weights (nearest: one tap; linear
// and cubic: a kernel over the distance, widened by 1 / scale with
// antialias). Each resized axis's taps and weights depend only on the
// output position along that axis: a first program (resize_taps)
// tabulates them per axis, and the resize reads the tables, its value the
// weighted sum over the product of the axes' taps (tf_crop_and_resize,
// which also tests each coordinate against the roi, computes them per
// output element into local arrays). Axes whose size does not change are
// read directly.
#include <cmath>

#include "ir/ops/common.h"
#include "passes/legalize/legalize.h"
#include "passes/legalize/te.h"

namespace relax {
namespace {

using namespace te;
using tir::Intrinsic;
using tir::LoopKind;

TExpr clamp_index(const TExpr& i, const SymExpr& dim) { return max_(min_(i, idx(dim) - idx(1)), idx(0)); }
TExpr in_range(const TExpr& i, const SymExpr& dim) { return and_(ge(i, idx(0)), lt(i, idx(dim))); }
Stmt serial_nest(const std::vector<SymExpr>& extents, const std::string& prefix,
                 const std::function<Stmt(const Index&)>& body) {
  return loop_nest(extents, body, LoopHints{false, false, 1}, prefix);
}
Stmt store1(const Buffer& b, const TExpr& i, const TExpr& v) { return tir::make_store(b, {i}, v); }

// Keys' cubic convolution kernel at distance |x| with coefficient a.
TExpr cubic_kernel(const TExpr& x, double a) {
  DataType t = x->dtype;
  TExpr ax = intrin(Intrinsic::abs, x);
  TExpr x2 = ax * ax, x3 = x2 * ax;
  TExpr A = const_of(t, a);
  TExpr near = (A + const_of(t, 2)) * x3 - (A + const_of(t, 3)) * x2 + one(t);
  TExpr far = A * x3 - const_of(t, 5 * a) * x2 + const_of(t, 8 * a) * ax - const_of(t, 4 * a);
  return select(le(ax, one(t)), near, select(lt(ax, const_of(t, 2)), far, zero(t)));
}

// ---- resize ------------------------------------------------------------------------------

constexpr const char* kResize2d = "image.resize2d";

struct ResizeAttrs {
  std::string mode, coord, nearest;
  double cubic_a = -0.75, extrapolation = 0;
  bool exclude_outside = false, antialias = false;
};

// The buffers one program reads the geometry from: x (for its dims),
// scales and roi when given, and the output dim of each axis.
struct Geometry {
  Buffer x, scales, roi;
  std::vector<SymExpr> out;
};

// One resize call's plan: its attributes, the resized axes and their tap
// counts, and the arithmetic every form shares (coordinates, taps and
// weights, the weighted sum over the taps).
class Resize {
 public:
  Resize(LegalizeContext& ctx, const CallNode& call) : ctx_(ctx), call_(call) {
    Attrs attrs = ops::attrs_of(call);
    ra_ = ResizeAttrs{attrs.get_string("mode"),
                      attrs.get_string("coordinate_transformation_mode"),
                      attrs.get_string("nearest_mode"),
                      attrs.get_float("cubic_coeff_a"),
                      attrs.get_float("extrapolation_value"),
                      attrs.get_bool("exclude_outside"),
                      attrs.get_bool("antialias")};
    crop_ = ra_.coord == "tf_crop_and_resize";
    nearest_ = ra_.mode == "nearest";
    cubic_ = ra_.mode == "cubic";
  }

  std::optional<Expr> legalize() {
    ProgramBuilder pb(ctx_, "resize");
    Buffer x = pb.input(call_.args[0], "x");
    Buffer roi = call_.args.size() > 1 ? pb.input(call_.args[1], "roi") : nullptr;
    Buffer scales = call_.args.size() > 2 ? pb.input(call_.args[2], "scales") : nullptr;
    Buffer y = pb.output(call_.sinfo, "y");
    if (!x || !y || (call_.args.size() > 1 && !roi) || (call_.args.size() > 2 && !scales))
      return ctx_.decline("an operand or the result has no known shape");
    rank_ = int(x->shape.size());
    if (crop_ && !roi) return ctx_.decline("tf_crop_and_resize without a roi");
    if (!plan_axes(x, y)) return ctx_.decline("antialias over an axis of unknown input size");
    // The tabulated form's weights and sums: f32 for an f32 resize on the
    // cpu (a vector of 16 lanes, not 8; the coordinates and weights are
    // still computed in f64, then rounded once), else f64.
    W_ = ctx_.libraries() && x->dtype == DataType::f32() ? DataType::f32() : D_;
    if (!crop_ && !axes_.empty()) return tabulated(y->dtype);
    Geometry g{x, scales, roi, y->shape};
    if (nearest_) return pb.finish(compute(y, [&](const Index& i) { return direct_nearest(g, y->dtype, i); }));
    return pb.finish(loop_nest(
        y->shape, [&](const Index& i) { return direct(g, y, i); }, LoopHints{true, false, 8}));
  }

 private:
  // The resized axes and their tap counts (2 * K taps at offsets 1 - K .. K);
  // false when antialiasing needs an input size that is not known.
  bool plan_axes(const Buffer& x, const Buffer& y) {
    double support = cubic_ ? 2 : 1;
    for (int a = 0; a < rank_; ++a) {
      const SymExpr &in = x->shape[a], &out = y->shape[a];
      if (!crop_ && (in == out || ctx_.analyzer().can_prove_equal(in, out))) continue;
      axes_.push_back(a);
      int64_t k = int64_t(support);
      if (ra_.antialias && !nearest_) {
        // The filter widens by in / out; an unknown out may be as small as 1.
        if (!in.is_const()) return false;
        int64_t out_min = out.is_const() ? std::max<int64_t>(out.const_value(), 1) : 1;
        double ratio = double(in.const_value()) / double(out_min);
        if (ratio > 1) k = int64_t(std::ceil(support * ratio)) + 1;
      }
      half_taps_.push_back(k);
    }
    return true;
  }

  TExpr scale_of(const Geometry& g, int a) const {
    if (g.scales) return cast(D_, load(g.scales, {idx(a)}));
    return from_index(D_, g.out[a]) / from_index(D_, g.x->shape[a]);
  }

  // The input coordinate of output position o along axis a.
  TExpr coordinate(const Geometry& g, int a, const TExpr& o) const {
    const DataType D = D_;
    TExpr s = scale_of(g, a);
    TExpr in = from_index(D, g.x->shape[a]), od = cast(D, o);
    TExpr half = const_of(D, 0.5), c1 = one(D);
    TExpr out_w = s * in;
    const std::string& m = ra_.coord;
    if (m == "align_corners") return select(eq(out_w, c1), zero(D), od * (in - c1) / (out_w - c1));
    if (m == "asymmetric") return od / s;
    if (m == "tf_half_pixel_for_nn") return (od + half) / s;
    if (m == "pytorch_half_pixel") return select(eq(out_w, c1), -half, (od + half) / s - half);
    if (m == "half_pixel_symmetric") {
      TExpr adjust = from_index(D, g.out[a]) / out_w;
      TExpr offset = in / const_of(D, 2) * (c1 - adjust);
      return offset + (od + half) / s - half;
    }
    if (crop_) {
      TExpr r0 = cast(D, load(g.roi, {idx(a)})), r1 = cast(D, load(g.roi, {idx(rank_ + a)}));
      TExpr span = (r1 - r0) * (in - c1);
      return select(eq(out_w, c1), span / const_of(D, 2), od * span / (out_w - c1)) + r0 * (in - c1);
    }
    return (od + half) / s - half;  // half_pixel
  }

  TExpr outside(const Geometry& g, int a, const TExpr& xo) const {
    return or_(lt(xo, zero(D_)), gt(xo, from_index(D_, g.x->shape[a]) - one(D_)));
  }

  // Nearest: the tap of input coordinate xo along axis a.
  TExpr nearest_tap(const Geometry& g, int a, const TExpr& xo) const {
    TExpr f = intrin(Intrinsic::floor, xo), r = xo - f;
    TExpr up;
    if (ra_.nearest == "round_prefer_ceil")
      up = ge(r, const_of(D_, 0.5));
    else if (ra_.nearest == "floor")
      up = tir::imm_int(DataType::boolean(), 0);
    else if (ra_.nearest == "ceil")
      up = gt(r, zero(D_));
    else
      up = gt(r, const_of(D_, 0.5));
    return clamp_index(as_index(f) + select(up, idx(1), idx(0)), g.x->shape[a]);
  }

  using Store = std::function<Stmt(const TExpr&, const TExpr&)>;
  // Linear and cubic: the taps of output position o along the resized axis
  // q into t[j] (store_t), their weights into w[j] (store_w, read back by
  // load_w), j < 2 * K, normalised when antialiasing or excluding the
  // outside.
  Stmt tap_loops(const Geometry& g, size_t q, const TExpr& o, const Store& store_w, const Store& store_t,
                 const std::function<TExpr(const TExpr&)>& load_w) const {
    const DataType D = D_;
    int a = axes_[q];
    int64_t k = half_taps_[q], n = 2 * k;
    std::string sfx = std::to_string(a);
    std::vector<Stmt> out;
    Local sum = local("wsum", D);
    TExpr xo = coordinate(g, a, o);
    TExpr f = intrin(Intrinsic::floor, xo), r = xo - f;
    TExpr s = ra_.antialias ? min_(scale_of(g, a), one(D)) : one(D);
    bool normalise = ra_.antialias || ra_.exclude_outside;
    SymExpr jv = SymExpr::var("j" + sfx);
    TExpr j = idx(jv);
    TExpr off = j + idx(1 - k);
    TExpr at = as_index(f) + off;
    TExpr dist = ra_.antialias ? (cast(D, off) - r) * s : cast(D, off) - r;
    TExpr wt = cubic_ ? cubic_kernel(dist, ra_.cubic_a) : max_(one(D) - intrin(Intrinsic::abs, dist), zero(D));
    if (ra_.exclude_outside) wt = select(in_range(at, g.x->shape[a]), wt, zero(D));
    std::vector<Stmt> per_tap{store_w(j, wt), store_t(j, clamp_index(at, g.x->shape[a]))};
    if (normalise) {
      out.push_back(sum.set(zero(D)));
      per_tap.push_back(sum.set(sum.get() + wt));
    }
    out.push_back(tir::make_for(jv, n, LoopKind::Serial, tir::make_seq(per_tap)));
    if (normalise) {
      SymExpr jn = SymExpr::var("m" + sfx);
      TExpr total = select(eq(sum.get(), zero(D)), one(D), sum.get());
      out.push_back(tir::make_for(jn, n, LoopKind::Serial, store_w(idx(jn), load_w(idx(jn)) / total)));
    }
    return with_locals({sum}, tir::make_seq(out));
  }

  // acc = the weighted sum over the product of the axes' taps around output
  // position i of x: tap(q, k) and weight(q, k) read axis q's k-th tap and
  // weight.
  using TapRead = std::function<TExpr(size_t, const TExpr&)>;
  Stmt tap_sum(const Buffer& xb, const Index& i, const Local& acc, const TapRead& tap, const TapRead& weight) const {
    std::vector<SymExpr> extents;
    for (size_t q = 0; q < axes_.size(); ++q) extents.push_back(2 * half_taps_[q]);
    Stmt sum = serial_nest(extents, "k", [&](const Index& k) {
      Index xi = i;
      TExpr wt;
      for (size_t q = 0; q < axes_.size(); ++q) {
        xi[size_t(axes_[q])] = tap(q, k[q]);
        TExpr wq = weight(q, k[q]);
        wt = wt ? wt * wq : wq;
      }
      DataType A = acc.get()->dtype;
      if (!wt) wt = one(A);
      return acc.set(acc.get() + cast(A, wt) * cast(A, load(xb, xi)));
    });
    return tir::make_seq({acc.set(zero(acc.get()->dtype)), sum});
  }

  // The value as an output of dtype t stores it: integers rounded half to
  // even and saturated.
  static TExpr stored(TExpr v, DataType t) {
    DataType A = v->dtype;
    if (t.is_integer()) v = min_(max_(round_half_even(v), cast(A, min_value(t))), cast(A, max_value(t)));
    return v;
  }

  // Each resized axis's taps (and weights) depend on the output position
  // along that axis only: a first program tabulates them, t_a and w_a of
  // shape (taps, out_a), and the resize reads the tables, so the
  // coordinate arithmetic (f64 divisions, floors) runs once per output row
  // and column instead of once per output element.
  std::optional<Expr> tabulated(DataType y_dtype) {
    const auto& graph_out = *as<TensorSI>(call_.sinfo)->shape;
    bool has_scales = call_.args.size() > 2;
    ProgramBuilder tb(ctx_, "resize_taps");
    Geometry tg{tb.input(call_.args[0], "x"), has_scales ? tb.input(call_.args[2], "scales") : nullptr, nullptr, {}};
    if (!tg.x || (has_scales && !tg.scales)) return ctx_.decline("the tables' operands have no known shape");
    tg.out.resize(size_t(rank_));
    std::vector<Buffer> tw, tt;
    std::vector<StructInfo> table_si;
    for (size_t q = 0; q < axes_.size(); ++q) {
      int64_t n = nearest_ ? 1 : 2 * half_taps_[q];
      // (taps, out): a tap's entries for consecutive output positions are contiguous.
      StructInfo tsi = tensor_si(DataType::i64(), {SymExpr(n), graph_out[size_t(axes_[q])]});
      tt.push_back(tb.output(tsi, "t" + std::to_string(axes_[q])));
      table_si.push_back(tsi);
      if (!tt.back()) return ctx_.decline("a tap table has no known shape");
      tg.out[size_t(axes_[q])] = tt.back()->shape[1];
      if (nearest_) continue;
      StructInfo wsi = tensor_si(W_, {SymExpr(n), graph_out[size_t(axes_[q])]});
      tw.push_back(tb.output(wsi, "w" + std::to_string(axes_[q])));
      table_si.push_back(wsi);
      if (!tw.back()) return ctx_.decline("a weight table has no known shape");
    }
    std::vector<Stmt> tables;
    for (size_t q = 0; q < axes_.size(); ++q) {
      int a = axes_[q];
      tables.push_back(loop_nest(
          {tg.out[size_t(a)]},
          [&](const Index& o) {
            if (nearest_) return tir::make_store(tt[q], {idx(0), o[0]}, nearest_tap(tg, a, coordinate(tg, a, o[0])));
            return tap_loops(
                tg, q, o[0],
                [&](const TExpr& j, const TExpr& v) {
                  return tir::make_store(tw[q], {j, o[0]}, cast(W_, v));
                },
                [&](const TExpr& j, const TExpr& v) {
                  return tir::make_store(tt[q], {j, o[0]}, v);
                },
                [&](const TExpr& j) {
                  return cast(D_, load(tw[q], {j, o[0]}));
                });
          },
          LoopHints{false, false, 1}, "o" + std::to_string(a)));
    }
    Var all = ctx_.emit(tb.finish(tir::make_seq(tables)), "resize_taps");
    auto table = [&](size_t f) {
      Expr e = make_tuple_get_item(all, int(f));
      e->sinfo = table_si[f];
      return ctx_.emit(e, "resize_table");
    };
    if (W_ == DataType::f32() && !nearest_ && y_dtype == DataType::f32() && axes_.size() == 2 &&
        axes_[0] == rank_ - 2 && axes_[1] == rank_ - 1)
      return library_2d(table_si.size(), table);
    return read_tables(table);
  }

  // The cpu, f32 linear or cubic over the last two axes: the runtime's
  // separable image.resize2d (runtime/builtins_image.cc: each input row
  // interpolated along its columns once, then whole rows combined), where
  // a loop nest per output gathers all its taps with vector gathers.
  std::optional<Expr> library_2d(size_t n_tables, const std::function<Var(size_t)>& table) {
    std::vector<Expr> args = {call_.args[0]};
    for (size_t f = 0; f < n_tables; ++f) args.push_back(table(f));
    if (!ctx_.module().extern_decl(kResize2d)) ctx_.module().add_extern(kResize2d);
    Expr r = make_op_call("call_library", {make_string(kResize2d), make_tuple(args)}, {}, {call_.sinfo});
    r->sinfo = call_.sinfo;
    return r;
  }

  // The resize proper over x and the tables.
  std::optional<Expr> read_tables(const std::function<Var(size_t)>& table) {
    ProgramBuilder rb(ctx_, "resize");
    Buffer rx = rb.input(call_.args[0], "x");
    std::vector<Buffer> rt, rw;
    for (size_t f = 0, q = 0; q < axes_.size(); ++q) {
      auto item = [&](size_t field) { return rb.input(table(field), "tab" + std::to_string(field)); };
      rt.push_back(item(f++));
      if (!nearest_) rw.push_back(item(f++));
    }
    Buffer yo = rb.output(call_.sinfo, "y");
    bool known = rx && yo;
    for (const std::vector<Buffer>* bs : {&rt, &rw})
      for (const Buffer& b : *bs) known = known && b;
    if (!known) return ctx_.decline("the resize's operands have no known shape");
    if (nearest_)
      return rb.finish(compute(yo, [&](const Index& i) {
        Index xi = i;
        for (size_t q = 0; q < axes_.size(); ++q) xi[size_t(axes_[q])] = load(rt[q], {idx(0), i[size_t(axes_[q])]});
        return load(rx, xi);
      }));
    return rb.finish(loop_nest(
        yo->shape,
        [&](const Index& i) {
          Local acc = local("acc", W_);
          Stmt sum = tap_sum(
              rx, i, acc,
              [&](size_t q, const TExpr& k) {
                return load(rt[q], {k, i[size_t(axes_[q])]});
              },
              [&](size_t q, const TExpr& k) {
                return load(rw[q], {k, i[size_t(axes_[q])]});
              });
          return with_locals(
              {acc}, tir::make_seq({sum, tir::make_store(yo, i, cast(yo->dtype, stored(acc.get(), yo->dtype)))}));
        },
        LoopHints{true, false, 8, /*vectorize_gathers=*/W_ == DataType::f32()}));
  }

  // Nearest, per output element (tf_crop_and_resize, or no axis resized):
  // the extrapolation value outside the roi.
  TExpr direct_nearest(const Geometry& g, DataType y_dtype, const Index& i) const {
    Index xi = i;
    TExpr out_of_roi;
    for (int a : axes_) {
      TExpr xo = coordinate(g, a, i[a]);
      xi[a] = nearest_tap(g, a, xo);
      if (crop_) out_of_roi = out_of_roi ? or_(out_of_roi, outside(g, a, xo)) : outside(g, a, xo);
    }
    TExpr v = load(g.x, xi);
    if (crop_) v = select(out_of_roi, cast(y_dtype, const_of(D_, ra_.extrapolation)), v);
    return v;
  }

  // Linear and cubic per output element: each axis's taps and weights into
  // local arrays, then their weighted sum.
  Stmt direct(const Geometry& g, const Buffer& y, const Index& i) const {
    std::vector<Buffer> wts, taps;
    std::vector<Stmt> prep;
    Local acc = local("acc", D_);
    TExpr out_of_roi;
    for (size_t q = 0; q < axes_.size(); ++q) {
      int a = axes_[q];
      int64_t n = 2 * half_taps_[q];
      std::string sfx = std::to_string(a);
      Buffer w = tir::make_buffer("w" + sfx, D_, {SymExpr(n)}, tir::Scope::Local);
      Buffer t = tir::make_buffer("t" + sfx, DataType::i64(), {SymExpr(n)}, tir::Scope::Local);
      wts.push_back(w);
      taps.push_back(t);
      if (crop_) {
        TExpr xo = coordinate(g, a, i[a]);
        out_of_roi = out_of_roi ? or_(out_of_roi, outside(g, a, xo)) : outside(g, a, xo);
      }
      prep.push_back(tap_loops(
          g, q, i[a], [&](const TExpr& j, const TExpr& v) { return store1(w, j, v); },
          [&](const TExpr& j, const TExpr& v) { return store1(t, j, v); },
          [&](const TExpr& j) { return load(w, {j}); }));
    }
    prep.push_back(tap_sum(
        g.x, i, acc, [&](size_t q, const TExpr& k) { return load(taps[q], {k}); },
        [&](size_t q, const TExpr& k) { return load(wts[q], {k}); }));
    TExpr v = stored(acc.get(), y->dtype);
    if (crop_) v = select(out_of_roi, const_of(D_, ra_.extrapolation), v);
    prep.push_back(tir::make_store(y, i, cast(y->dtype, v)));
    Stmt body = with_locals({acc}, tir::make_seq(prep));
    for (size_t q = 0; q < axes_.size(); ++q) body = tir::make_allocate(wts[q], tir::make_allocate(taps[q], body));
    return body;
  }

  LegalizeContext& ctx_;
  const CallNode& call_;
  ResizeAttrs ra_;
  bool crop_ = false, nearest_ = false, cubic_ = false;
  int rank_ = 0;
  const DataType D_ = DataType::f(64);  // coordinates and weights
  DataType W_;                          // the tables' weights and the tabulated form's sums
  std::vector<int> axes_;
  std::vector<int64_t> half_taps_;
};

std::optional<Expr> legalize_resize(LegalizeContext& ctx, const CallNode& call) { return Resize(ctx, call).legalize(); }

// ---- grid_sample ----------------------------------------------------------------------------

// Reflects v into [lo, hi] as ONNX's reference does.
TExpr reflect(const TExpr& v, const TExpr& lo, const TExpr& hi) {
  DataType t = v->dtype;
  TExpr range = hi - lo;
  TExpr safe = select(eq(range, zero(t)), one(t), range);
  auto fold = [&](const TExpr& dx, bool below) {
    TExpr n = intrin(Intrinsic::trunc, dx / safe);
    TExpr r = dx - n * safe;
    TExpr even = eq(intrin(Intrinsic::fmod, n, const_of(t, 2)), zero(t));
    return below ? select(even, lo + r, hi - r) : select(even, hi - r, lo + r);
  };
  TExpr out = select(lt(v, lo), fold(lo - v, true), select(gt(v, hi), fold(v - hi, false), v));
  return select(eq(range, zero(t)), lo, out);
}

std::optional<Expr> legalize_grid_sample(LegalizeContext& ctx, const CallNode& call) {
  Attrs attrs = ops::attrs_of(call);
  std::string mode = attrs.get_string("mode"), padding = attrs.get_string("padding_mode");
  bool align = attrs.get_bool("align_corners");
  ProgramBuilder pb(ctx, call, "grid_sample");
  Buffer x = pb.arg(0, "x"), grid = pb.arg(1, "grid"), y = pb.result("y");
  if (!pb.known()) return pb.unknown();
  int sp = int(x->shape.size()) - 2;
  DataType t = compute_dtype(x->dtype);
  if (!t.is_float()) t = DataType::f32();
  int ntaps = mode == "nearest" ? 1 : mode == "linear" ? 2 : 4;
  LoopHints hints{true, false, 8};
  return pb.finish(loop_nest(
      y->shape,
      [&](const Index& i) {
        std::vector<Buffer> wts, taps;
        std::vector<Stmt> prep;
        for (int a = 0; a < sp; ++a) {
          std::string sfx = std::to_string(a);
          SymExpr dim = x->shape[2 + a];
          TExpr d = from_index(t, dim);
          Buffer w = tir::make_buffer("w" + sfx, t, {SymExpr(ntaps)}, tir::Scope::Local);
          Buffer tp = tir::make_buffer("t" + sfx, DataType::i64(), {SymExpr(ntaps)}, tir::Scope::Local);
          wts.push_back(w);
          taps.push_back(tp);
          Index gi = {i[0]};
          gi.insert(gi.end(), i.begin() + 2, i.end());
          gi.push_back(idx(sp - 1 - a));
          TExpr g = cast(t, load(grid, gi));
          TExpr one_ = one(t), two = const_of(t, 2);
          TExpr v = align ? (g + one_) / two * (d - one_) : ((g + one_) * d - one_) / two;
          // With align_corners an axis of one pixel maps every coordinate to it, an infinite one
          // included (inf * 0 would be NaN): RAFT's correlation pyramid divides by (H - 1) = 0
          // on its coarsest level and samples that row, as ONNX Runtime does.
          if (align) v = select(eq(d, one_), zero(t), v);
          if (mode == "nearest") v = round_half_even(v);
          TExpr lo = align ? zero(t) : const_of(t, -0.5);
          TExpr hi = align ? d - one_ : d - const_of(t, 0.5);
          if (padding == "border") v = select(or_(lt(v, lo), gt(v, hi)), min_(max_(v, zero(t)), d - one_), v);
          if (padding == "reflection") v = reflect(v, lo, hi);
          // A coordinate still outside [-100, d + 100] (NaN, an infinity, a far one) samples
          // nothing, as in PyTorch: -100 lies outside the axis for every tap, and unlike NaN or
          // 1e30 its floor converts to an index.
          TExpr far = const_of(t, 100);
          v = select(and_(ge(v, zero(t) - far), le(v, d + far)), v, zero(t) - far);
          TExpr base = mode == "nearest" ? intrin(Intrinsic::trunc, v) : intrin(Intrinsic::floor, v);
          TExpr frac = v - base;
          for (int k = 0; k < ntaps; ++k) {
            int64_t off = ntaps == 4 ? k - 1 : k;
            TExpr at = as_index(base) + idx(off);
            TExpr wt = ntaps == 1   ? one(t)
                       : ntaps == 2 ? (k == 0 ? one(t) - frac : frac)
                                    : cubic_kernel(frac - const_of(t, double(off)), -0.75);
            TExpr pos = at;
            if (padding == "zeros") wt = select(in_range(at, dim), wt, zero(t));
            if (padding == "reflection") pos = as_index(reflect(cast(t, at), lo, hi));
            prep.push_back(store1(w, idx(k), wt));
            prep.push_back(store1(tp, idx(k), clamp_index(pos, dim)));
          }
        }
        Local acc = local("acc", t);
        prep.push_back(acc.set(zero(t)));
        std::vector<SymExpr> extents(static_cast<size_t>(sp), SymExpr(ntaps));
        prep.push_back(serial_nest(extents, "k", [&](const Index& k) {
          Index xi = {i[0], i[1]};
          TExpr wt;
          for (int a = 0; a < sp; ++a) {
            xi.push_back(load(taps[a], {k[a]}));
            TExpr wa = load(wts[a], {k[a]});
            wt = wt ? wt * wa : wa;
          }
          return acc.set(acc.get() + wt * cast(t, load(x, xi)));
        }));
        prep.push_back(tir::make_store(y, i, cast(y->dtype, acc.get())));
        Stmt body = with_locals({acc}, tir::make_seq(prep));
        for (int a = 0; a < sp; ++a) body = tir::make_allocate(wts[a], tir::make_allocate(taps[a], body));
        return body;
      },
      hints));
}

// ---- affine_grid -----------------------------------------------------------------------------

std::optional<Expr> legalize_affine_grid(LegalizeContext& ctx, const CallNode& call) {
  Attrs attrs = ops::attrs_of(call);
  bool align = attrs.get_bool("align_corners");
  ProgramBuilder pb(ctx, call, "affine_grid");
  Buffer theta = pb.arg(0, "theta"), y = pb.result("grid");
  if (!pb.known()) return pb.unknown();
  int sp = int(y->shape.size()) - 2;
  DataType t = compute_dtype(y->dtype);
  // The normalised coordinate of position p along an axis of size n.
  auto coord = [&](const TExpr& p, const SymExpr& n) {
    TExpr pf = cast(t, p), nf = from_index(t, n);
    if (align) return select(le(nf, one(t)), -one(t), const_of(t, -1) + pf * const_of(t, 2) / (nf - one(t)));
    return (const_of(t, 2) * pf + one(t)) / nf - one(t);
  };
  return pb.finish(compute(y, [&](const Index& i) {
    TExpr sum = cast(t, load(theta, {i[0], i.back(), idx(sp)}));
    for (int k = 0; k < sp; ++k) {
      int axis = sp - 1 - k;  // component k is the k-th innermost spatial axis
      sum = sum + cast(t, load(theta, {i[0], i.back(), idx(k)})) * coord(i[1 + axis], y->shape[1 + axis]);
    }
    return cast(y->dtype, sum);
  }));
}

// ---- roi_align -----------------------------------------------------------------------------

std::optional<Expr> legalize_roi_align(LegalizeContext& ctx, const CallNode& call) {
  Attrs attrs = ops::attrs_of(call);
  ProgramBuilder pb(ctx, call, "roi_align");
  Buffer x = pb.arg(0, "x"), rois = pb.arg(1, "rois"), bidx = pb.arg(2, "batch_indices"), y = pb.result("y");
  if (!pb.known()) return pb.unknown();
  int64_t OH = attrs.get_int("output_height"), OW = attrs.get_int("output_width");
  int64_t ratio = attrs.get_int("sampling_ratio");
  double scale = attrs.get_float("spatial_scale");
  bool is_max = attrs.get_string("mode") == "max";
  bool half_pixel = attrs.get_string("coordinate_transformation_mode") == "half_pixel";
  DataType t = compute_dtype(y->dtype);
  SymExpr H = x->shape[2], W = x->shape[3];
  LoopHints hints{true, false, 16};
  return pb.finish(loop_nest(
      y->shape,
      [&](const Index& i) {
        TExpr r = i[0];
        TExpr b = clamp_index(as_index(load(bidx, {r})), x->shape[0]);
        TExpr off = const_of(t, half_pixel ? 0.5 : 0.0);
        auto box = [&](int k) { return cast(t, load(rois, {r, idx(k)})) * const_of(t, scale) - off; };
        TExpr sw = box(0), sh = box(1);
        TExpr rw = box(2) - sw, rh = box(3) - sh;
        if (!half_pixel) rw = max_(rw, one(t)), rh = max_(rh, one(t));
        TExpr bh = rh / const_of(t, double(OH)), bw = rw / const_of(t, double(OW));
        TExpr gh = ratio > 0 ? idx(ratio) : as_index(intrin(Intrinsic::ceil, bh));
        TExpr gw = ratio > 0 ? idx(ratio) : as_index(intrin(Intrinsic::ceil, bw));
        gh = max_(gh, idx(0)), gw = max_(gw, idx(0));
        TExpr count = cast(t, max_(gh * gw, idx(1)));
        Local acc = local("acc", t), seen = local("seen", DataType::i64());
        TExpr fh = from_index(t, H), fw = from_index(t, W);
        SymExpr ey = ratio > 0 ? SymExpr(ratio) : H, ex = ratio > 0 ? SymExpr(ratio) : W;
        Stmt samples = serial_nest({ey, ex}, "s", [&](const Index& s) {
          TExpr yy = sh + cast(t, i[2]) * bh + (cast(t, s[0]) + const_of(t, 0.5)) * bh / cast(t, gh);
          TExpr xx = sw + cast(t, i[3]) * bw + (cast(t, s[1]) + const_of(t, 0.5)) * bw / cast(t, gw);
          TExpr empty = or_(or_(lt(yy, const_of(t, -1)), gt(yy, fh)), or_(lt(xx, const_of(t, -1)), gt(xx, fw)));
          TExpr yc = max_(yy, zero(t)), xc = max_(xx, zero(t));
          TExpr ylo = as_index(intrin(Intrinsic::trunc, yc)), xlo = as_index(intrin(Intrinsic::trunc, xc));
          TExpr ytop = ge(ylo, idx(H) - idx(1)), xtop = ge(xlo, idx(W) - idx(1));
          TExpr y0 = select(ytop, idx(H) - idx(1), ylo), x0 = select(xtop, idx(W) - idx(1), xlo);
          TExpr y1 = select(ytop, y0, ylo + idx(1)), x1 = select(xtop, x0, xlo + idx(1));
          TExpr ly = select(ytop, zero(t), yc - cast(t, y0)), lx = select(xtop, zero(t), xc - cast(t, x0));
          TExpr hy = one(t) - ly, hx = one(t) - lx;
          auto px = [&](const TExpr& yi, const TExpr& xi) {
            return cast(t, load(x, {b, i[1], clamp_index(yi, H), clamp_index(xi, W)}));
          };
          TExpr z = zero(t);
          TExpr v1 = select(empty, z, hy * hx * px(y0, x0)), v2 = select(empty, z, hy * lx * px(y0, x1));
          TExpr v3 = select(empty, z, ly * hx * px(y1, x0)), v4 = select(empty, z, ly * lx * px(y1, x1));
          Stmt update = is_max ? tir::make_seq({acc.set(select(eq(seen.get(), idx(0)), max_(max_(v1, v2), max_(v3, v4)),
                                                               max_(acc.get(), max_(max_(v1, v2), max_(v3, v4))))),
                                                seen.set(idx(1))})
                               : acc.set(acc.get() + v1 + v2 + v3 + v4);
          return tir::make_if(and_(lt(s[0], gh), lt(s[1], gw)), update);
        });
        TExpr result = is_max ? acc.get() : acc.get() / count;
        return with_locals({acc, seen}, tir::make_seq({acc.set(zero(t)), seen.set(idx(0)), samples,
                                                       tir::make_store(y, i, cast(y->dtype, result))}));
      },
      hints));
}

}  // namespace

void register_image_legalizers(LegalizerRegistry& reg) {
  reg.add("resize", legalize_resize);
  reg.add("grid_sample", legalize_grid_sample);
  reg.add("affine_grid", legalize_affine_grid);
  reg.add("roi_align", legalize_roi_align);
}

}  // namespace relax
