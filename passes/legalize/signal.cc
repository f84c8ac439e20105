// Legalisers of the signal-processing ops (ir/ops/signal.cc): dft, stft,
// window and mel_weight_matrix. The Fourier transforms and the windows
// evaluate their angles and sums in f64 (angles reduced modulo the length
// in integers first), as the reference does in numpy.
#include <cmath>
#include <functional>
#include <string>

#include "ir/ops/common.h"
#include "passes/legalize/legalize.h"
#include "passes/legalize/te.h"

namespace relax {
namespace {

using namespace te;
using tir::BinOp;
using tir::Intrinsic;

const DataType kF64 = DataType::f(64);

TExpr f64(const TExpr& e) { return cast(kF64, e); }
TExpr floormod(const TExpr& a, const SymExpr& n) { return tir::binary(BinOp::FloorMod, a, idx(max(n, SymExpr(1)))); }
// 2 pi (m mod n) / n in f64.
TExpr angle(const TExpr& m, const SymExpr& n) {
  return f64(floormod(m, n)) * (tir::imm(kF64, 2 * M_PI) / f64(idx(max(n, SymExpr(1)))));
}

// ---- dft, stft ---------------------------------------------------------------------------

// One complex Fourier sum per output element (rows of `outer` dims and a
// bin): re + i im = sum_t (xr + i xi)(cos a -/+ i sin a), a = 2 pi k t / n.
struct Signal {
  std::function<TExpr(const TExpr&t)> re, im;  // f64 samples; t in [0, extent)
  SymExpr extent;                              // samples summed
};

Stmt fourier(const Local& re, const Local& im, const Signal& s, const TExpr& bin, const SymExpr& n, bool inverse) {
  Stmt loop = loop_nest(
      {s.extent},
      [&](const Index& tt) {
        TExpr a = angle(bin * tt[0], n);
        TExpr c = intrin(Intrinsic::cos, a), sn = intrin(Intrinsic::sin, a);
        if (!inverse) sn = -sn;
        TExpr xr = s.re(tt[0]), xi = s.im(tt[0]);
        return tir::make_seq({re.set(re.get() + (xr * c - xi * sn)), im.set(im.get() + (xi * c + xr * sn))});
      },
      LoopHints{false, false, 1}, "t");
  return tir::make_seq({re.set(zero(kF64)), im.set(zero(kF64)), loop});
}

// dft along a fixed axis, or (with the axis operand) along an axis read at
// run time: then a builtin (relax.dft_params) gives the result dims, the
// axis, n and the dim at the axis, bound by a match_cast, and the program
// picks the axis coordinate with selects.
std::optional<Expr> legalize_dft(LegalizeContext& ctx, const CallNode& call) {
  Attrs attrs = ops::attrs_of(call);
  bool inverse = attrs.get_bool("inverse"), onesided = attrs.get_bool("onesided");
  bool runtime_axis = call.args.size() > 1;
  const auto* xsi = as<TensorSI>(call.args[0]->sinfo);
  const auto* ysi = as<TensorSI>(call.sinfo);
  if (!xsi || !ysi || xsi->ndim < 2) return std::nullopt;
  size_t r = size_t(xsi->ndim);
  SymExpr len = ops::get_sym(attrs, "length");
  bool has_len = len.defined() && !len.is_const(-1);
  StructInfo out_si = call.sinfo;
  std::vector<SymExpr> pp;
  if (runtime_axis) {
    Expr params = ctx.call_pure_builtin("relax.dft_params",
                                        {call.args[0], call.args[1], make_prim_bool(inverse), make_prim_bool(onesided),
                                         make_prim_int(has_len ? len : SymExpr(-1))},
                                        shape_si_ndim(int(r) + 3));
    pp = *ctx.bind_shape(params, "dft_p");
    out_si = tensor_si(ysi->dtype, std::vector<SymExpr>(pp.begin(), pp.begin() + std::ptrdiff_t(r)));
  }
  ProgramBuilder pb(ctx, "dft");
  Buffer x = pb.input(call.args[0], "x");
  Buffer y = pb.output(out_si, "out");
  if (!x || !y) return std::nullopt;
  size_t axis = 0;
  SymExpr a, d, n;
  if (runtime_axis) {
    a = pb.sym(pp[r]);
    n = pb.sym(pp[r + 1]);
    d = pb.sym(pp[r + 2]);
  } else {
    axis = size_t(ops::normalize_axis("dft", attrs.get_int("axis"), int(r)));
    d = x->shape[axis];
    n = has_len ? pb.sym(len) : onesided && inverse ? 2 * (d - 1) : d;
  }
  // The coordinate of i on the axis, and i with it replaced.
  auto on_axis = [&](const Index& i) {
    if (!runtime_axis) return i[axis];
    TExpr v = i[0];
    for (size_t j = 1; j + 1 < r; ++j) v = select(eq(idx(a), idx(int64_t(j))), i[j], v);
    return v;
  };
  auto at_axis = [&](Index i, const TExpr& v) {
    if (!runtime_axis) {
      i[axis] = v;
      return i;
    }
    for (size_t j = 0; j + 1 < r; ++j) i[j] = select(eq(idx(a), idx(int64_t(j))), v, i[j]);
    return i;
  };
  bool complex_in = !x->shape[r - 1].is_const(1);
  DataType t = x->dtype;
  std::vector<SymExpr> rows(y->shape.begin(), y->shape.end() - 1);
  bool real_out = y->shape[r - 1].is_const(1);
  return pb.finish(loop_nest(
      rows,
      [&](const Index& i) {
        Local re = local("re", kF64), im = local("im", kF64);
        TExpr bin = on_axis(i);
        auto sample = [&](const TExpr& tt, int part) {
          Index xi = at_axis(i, min_(tt, idx(d) - idx(1)));
          xi.push_back(idx(part));
          return select(lt(tt, idx(d)), f64(load(x, xi)), zero(kF64));
        };
        Signal s;
        // Bins above n/2 are the conjugates of those below (Hermitian).
        // (Outside the branch: s's functions below hold them by reference
        // and run after it.)
        const SymExpr half = floordiv(n, 2);
        auto mirror = [&](const TExpr& k) { return select(le(k, idx(half)), k, idx(n) - k); };
        if (inverse && onesided) {
          s.re = [&](const TExpr& k) { return sample(mirror(k), 0); };
          s.im = [&](const TExpr& k) {
            if (!complex_in) return zero(kF64);
            TExpr v = sample(mirror(k), 1);
            return select(le(k, idx(half)), v, -v);
          };
          s.extent = n;
        } else {
          s.re = [&](const TExpr& tt) { return sample(tt, 0); };
          s.im = [&](const TExpr& tt) { return complex_in ? sample(tt, 1) : zero(kF64); };
          s.extent = min(n, d);
        }
        Stmt sum = fourier(re, im, s, bin, n, inverse);
        TExpr scale = inverse ? one(kF64) / f64(idx(max(n, SymExpr(1)))) : one(kF64);
        auto at = [&](int part) {
          Index o = i;
          o.push_back(idx(part));
          return o;
        };
        std::vector<Stmt> body{sum, tir::make_store(y, at(0), cast(t, re.get() * scale))};
        if (!real_out) {
          // A last dim known only at run time may be 1 (a real output):
          // the imaginary part then has no place (and would land on the
          // next row's real part).
          Stmt store_im = tir::make_store(y, at(1), cast(t, im.get() * scale));
          const SymExpr& parts = y->shape[r - 1];
          body.push_back(parts.is_const() ? store_im : tir::make_if(lt(idx(int64_t(1)), idx(parts)), store_im));
        }
        return with_locals({re, im}, tir::make_seq(body));
      },
      LoopHints{true, false, n}));
}

std::optional<Expr> legalize_stft(LegalizeContext& ctx, const CallNode& call) {
  Attrs attrs = ops::attrs_of(call);
  ProgramBuilder pb(ctx, call, "stft");
  Buffer x = pb.arg(0, "signal"), w = pb.arg(1, "window"), y = pb.result("out");
  if (!pb.known()) return pb.unknown();
  SymExpr step = pb.sym(ops::get_sym(attrs, "frame_step"));
  SymExpr len = ops::get_sym(attrs, "frame_length");
  SymExpr n = len.defined() && !len.is_const(-1) ? pb.sym(len) : w ? w->shape[0] : SymExpr();
  if (!n.defined()) return std::nullopt;
  bool complex_in = !x->shape[2].is_const(1);
  DataType t = x->dtype;
  std::vector<SymExpr> rows(y->shape.begin(), y->shape.end() - 1);  // batch, frame, bin
  return pb.finish(loop_nest(
      rows,
      [&](const Index& i) {
        Local re = local("re", kF64), im = local("im", kF64);
        auto sample = [&](const TExpr& tt, int part) {
          TExpr v = f64(load(x, {i[0], i[1] * idx(step) + tt, idx(part)}));
          return w ? v * f64(load(w, {tt})) : v;
        };
        Signal s;
        s.re = [&](const TExpr& tt) { return sample(tt, 0); };
        s.im = [&](const TExpr& tt) { return complex_in ? sample(tt, 1) : zero(kF64); };
        s.extent = n;
        Stmt sum = fourier(re, im, s, i[2], n, false);
        return with_locals({re, im},
                           tir::make_seq({sum, tir::make_store(y, {i[0], i[1], i[2], idx(0)}, cast(t, re.get())),
                                          tir::make_store(y, {i[0], i[1], i[2], idx(1)}, cast(t, im.get()))}));
      },
      LoopHints{true, false, n}));
}

// ---- window, mel_weight_matrix -----------------------------------------------------------

std::optional<Expr> legalize_window(LegalizeContext& ctx, const CallNode& call) {
  Attrs attrs = ops::attrs_of(call);
  std::string kind = attrs.get_string("kind");
  ProgramBuilder pb(ctx, call, "window_" + kind);
  Buffer y = pb.result("out");
  if (!pb.known()) return pb.unknown();
  SymExpr size = y->shape[0];
  // Periodic: N points of an N+1-point symmetric window.
  SymExpr denom = max(attrs.get_bool("periodic") ? size : size - 1, SymExpr(1));
  return pb.finish(compute(y, [&](const Index& i) {
    TExpr a = angle(i[0], denom);
    TExpr c1 = intrin(Intrinsic::cos, a);
    auto k = [](double v) { return tir::imm(kF64, v); };
    TExpr v = kind == "hann"      ? k(0.5) - k(0.5) * c1
              : kind == "hamming" ? k(25.0 / 46.0) - k(21.0 / 46.0) * c1
                                  : k(0.42) - k(0.5) * c1 + k(0.08) * intrin(Intrinsic::cos, a + a);
    return cast(y->dtype, v);
  }));
}

std::optional<Expr> legalize_mel_weight_matrix(LegalizeContext& ctx, const CallNode& call) {
  Attrs attrs = ops::attrs_of(call);
  ProgramBuilder pb(ctx, call, "mel_weight_matrix");
  Buffer sr = pb.arg(0, "sample_rate"), lo = pb.arg(1, "lower_edge_hertz"), hi = pb.arg(2, "upper_edge_hertz"),
         y = pb.result("out");
  if (!pb.known()) return pb.unknown();
  SymExpr dft_length = pb.sym(ops::get_sym(attrs, "dft_length"));
  SymExpr bins = y->shape[1];
  auto scalar = [&](const Buffer& b) { return load(b, Index(b->shape.size(), idx(0))); };
  // The mel edges in the operands' float dtype (as the reference's numpy
  // does), the rest in f64.
  DataType ft = compute_dtype(lo->dtype.is_float() ? lo->dtype : kF64);
  auto c = [&](double v) { return tir::imm(ft, v); };
  auto mel = [&](const Buffer& hz) {
    TExpr v = cast(ft, scalar(hz));
    return c(2595) * (intrin(Intrinsic::log, c(1) + v / c(700)) / c(std::log(10.0)));
  };
  TExpr low = mel(lo), step = (mel(hi) - low) / cast(ft, idx(bins + 2));
  TExpr rate = f64(scalar(sr));
  // The spectrogram bin of mel point m, floored; 0 for a zero sample rate.
  auto bin_of = [&](const TExpr& m) {
    TExpr f = f64(m) * f64(step) + f64(low);
    TExpr hz = tir::imm(kF64, 700) *
               (intrin(Intrinsic::exp, f / tir::imm(kF64, 2595) * tir::imm(kF64, std::log(10.0))) - tir::imm(kF64, 1));
    TExpr b = intrin(Intrinsic::floor, f64(idx(dft_length + 1)) * hz / select(eq(rate, zero(kF64)), one(kF64), rate));
    b = max_(min_(b, tir::imm(kF64, 1e15)), tir::imm(kF64, -1e15));
    return select(eq(rate, zero(kF64)), idx(0), as_index(b));
  };
  return pb.finish(compute(y, [&](const Index& i) {
    TExpr j = i[0], l = bin_of(i[1]), m = bin_of(i[1] + idx(1)), h = bin_of(i[1] + idx(2));
    auto ratio = [&](const TExpr& a, const TExpr& b) { return f64(a) / f64(max_(b, idx(1))); };
    TExpr v = select(eq(j, m), one(kF64),
                     select(and_(ge(j, l), lt(j, m)), ratio(j - l, m - l),
                            select(and_(gt(j, m), lt(j, h)), ratio(h - j, h - m), zero(kF64))));
    return cast(y->dtype, v);
  }));
}

}  // namespace

void register_signal_legalizers(LegalizerRegistry& reg) {
  reg.add("dft", legalize_dft);
  reg.add("stft", legalize_stft);
  reg.add("window", legalize_window);
  reg.add("mel_weight_matrix", legalize_mel_weight_matrix);
}

}  // namespace relax
