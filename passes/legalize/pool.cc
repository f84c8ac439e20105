// Legalisers of pooling and the other nn ops (ir/ops/nn.cc): max_pool,
// avg_pool, lp_pool, max_pool_indices, max_unpool, lrn and nll_loss.
//
// The pools accumulate in place in their output (max_pool in any dtype):
// one row of the output (the last spatial axis) is initialised, every
// window tap combines into the whole row in a vectorisable loop, and the
// row is finished; taps in the padding are skipped by an `if` on the outer
// spatial axes and masked on the last one (passes/legalize/nn_common.h).
#include "ir/ops/common.h"
#include "passes/legalize/legalize.h"
#include "passes/legalize/nn_common.h"
#include "passes/legalize/te.h"

namespace relax {
namespace {

using namespace te;
using namespace nn_legalize;
using tir::Intrinsic;
using tir::LoopKind;

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

constexpr const char* kMaxPool2d = "pool.max2d";

// A 2-D f32 max pool on the cpu: the runtime's pool.max2d (window rows
// reduced a whole row at a time, runtime/builtins_pool.cc); a loop nest
// per output element reads its taps with strided scalar loads.
// A 3-D one whose window is one element of its last axis (stride 1, no
// padding), L long: a 2-D pool of positions of L lanes (a blocked layout's,
// passes/block_layout.cc), pool.max2d with L as a ninth parameter.
Expr library_max_pool(LegalizeContext& ctx, const CallNode& call, const PoolSpec& s, int64_t lanes = 0) {
  std::vector<SymExpr> p;
  for (int64_t v : {s.size[0], s.size[1], s.win.strides[0], s.win.strides[1], s.win.pad_begin[0], s.win.pad_begin[1],
                    s.win.dilation[0], s.win.dilation[1]})
    p.push_back(SymExpr(v));
  if (lanes) p.push_back(SymExpr(lanes));
  if (!ctx.module().extern_decl(kMaxPool2d)) ctx.module().add_extern(kMaxPool2d);
  Expr r = make_op_call("call_library", {make_string(kMaxPool2d), make_tuple({call.args[0], make_shape(p)})}, {},
                        {call.sinfo});
  r->sinfo = call.sinfo;
  return r;
}

std::optional<Expr> legalize_pool(LegalizeContext& ctx, const CallNode& call) {
  const std::string& op = ops::op_name(call);
  Attrs attrs = ops::attrs_of(call);
  ProgramBuilder pb(ctx, call, op);
  Buffer x = pb.arg(0, "x"), y = pb.result("y");
  if (!pb.known()) return pb.unknown();
  int sp = int(x->shape.size()) - 2;
  if (sp < 1) return std::nullopt;
  PoolSpec s = pool_spec(op, attrs, sp);
  DataType t = y->dtype;
  if (s.kind == PoolKind::Max && sp == 2 && t == DataType::f32() && x->dtype == t && ctx.libraries())
    return library_max_pool(ctx, call, s);
  if (s.kind == PoolKind::Max && sp == 3 && t == DataType::f32() && x->dtype == t && ctx.libraries() &&
      s.size[2] == 1 && s.win.strides[2] == 1 && s.win.dilation[2] == 1 && s.win.pad_begin[2] == 0 &&
      s.win.pad_end[2] == 0 && x->shape[4].is_const() && x->shape[4].const_value() > 0)
    return library_max_pool(ctx, call, s, x->shape[4].const_value());
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

  RowNest nest = RowNest::of(y, work);
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
  ProgramBuilder pb(ctx, call, "max_pool_indices");
  Buffer x = pb.arg(0, "x"), y = pb.result("indices");
  if (!pb.known()) return pb.unknown();
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
  ProgramBuilder pb(ctx, call, "max_unpool");
  Buffer x = pb.arg(0, "x"), ind = pb.arg(1, "indices"), y = pb.result("y");
  if (!pb.known()) return pb.unknown();
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
  ProgramBuilder pb(ctx, call, "lrn");
  Buffer x = pb.arg(0, "x"), y = pb.result("y");
  if (!pb.known()) return pb.unknown();
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
  ProgramBuilder pb(ctx, call, "nll_loss");
  Buffer x = pb.arg(0, "input"), target = pb.arg(1, "target"), weight = pb.arg(2, "weight"), y = pb.result("loss");
  if (!pb.known()) return pb.unknown();
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

void register_pool_legalizers(LegalizerRegistry& reg) {
  reg.add("max_pool", legalize_pool);
  reg.add("avg_pool", legalize_pool);
  reg.add("lp_pool", legalize_pool);
  reg.add("max_pool_indices", legalize_max_pool_indices);
  reg.add("max_unpool", legalize_max_unpool);
  reg.add("lrn", legalize_lrn);
  reg.add("nll_loss", legalize_nll_loss);
}

}  // namespace relax
