// Legalisers of the random ops (ir/ops/random.cc): random_uniform,
// random_normal and multinomial, with the counter-based generator
// Philox-4x32-10 written in TIR integer arithmetic. The key schedule depends
// only on the seed, so the ten round keys are immediates; the counter is the
// element's row-major index. Each round's four words go through locals so
// that the expression stays linear in the number of rounds. Words are held
// in u64 (below 2^32), which makes the 32x32->64 products exact.
#include <array>
#include <cmath>

#include "ir/ops/common.h"
#include "passes/legalize/legalize.h"
#include "passes/legalize/te.h"

namespace relax {
namespace {

using namespace te;
using tir::BinOp;
using tir::Intrinsic;

const DataType kU64 = DataType::u(64);
const DataType kF64 = DataType::f(64);
constexpr uint64_t kMask = 0xffffffffu;

TExpr u64(uint64_t v) { return tir::imm_int(kU64, int64_t(v)); }
TExpr band(const TExpr& a, const TExpr& b) { return tir::binary(BinOp::BitAnd, a, b); }
TExpr bxor(const TExpr& a, const TExpr& b) { return tir::binary(BinOp::BitXor, a, b); }
TExpr bor(const TExpr& a, const TExpr& b) { return tir::binary(BinOp::BitOr, a, b); }
TExpr shr(const TExpr& a, int n) { return tir::binary(BinOp::Shr, a, u64(uint64_t(n))); }
TExpr shl(const TExpr& a, int n) { return tir::binary(BinOp::Shl, a, u64(uint64_t(n))); }

// The words r0..r3 of element `index` (an i64), in four u64 locals.
struct Philox {
  std::array<Local, 4> r{local("r0", kU64), local("r1", kU64), local("r2", kU64), local("r3", kU64)};
  Local p0 = local("p0", kU64), p1 = local("p1", kU64);

  Stmt generate(const TExpr& index, int64_t seed) const {
    TExpr i = cast(kU64, index);
    std::vector<Stmt> s{r[0].set(band(i, u64(kMask))), r[1].set(shr(i, 32)), r[2].set(u64(0)), r[3].set(u64(0))};
    uint64_t k0 = uint64_t(seed) & kMask, k1 = uint64_t(seed) >> 32;
    for (int round = 0; round < 10; ++round) {
      if (round > 0) {
        k0 = (k0 + 0x9E3779B9u) & kMask;
        k1 = (k1 + 0xBB67AE85u) & kMask;
      }
      s.push_back(p0.set(u64(0xD2511F53u) * r[0].get()));
      s.push_back(p1.set(u64(0xCD9E8D57u) * r[2].get()));
      s.push_back(r[0].set(bxor(bxor(shr(p1.get(), 32), r[1].get()), u64(k0))));
      s.push_back(r[2].set(bxor(bxor(shr(p0.get(), 32), r[3].get()), u64(k1))));
      s.push_back(r[1].set(band(p1.get(), u64(kMask))));
      s.push_back(r[3].set(band(p0.get(), u64(kMask))));
    }
    return tir::make_seq(s);
  }
  Stmt wrap(Stmt body) const { return with_locals({r[0], r[1], r[2], r[3], p0, p1}, body); }
  TExpr word(int k) const { return r[size_t(k)].get(); }
};

// u24(r) in f32 and u53(a, b) in f64 (ir/ops/random.cc).
TExpr u24(const TExpr& r) { return cast(DataType::f32(), shr(r, 8)) * tir::imm(DataType::f32(), std::ldexp(1.0, -24)); }
TExpr u53(const TExpr& a, const TExpr& b) {
  return cast(kF64, bor(shl(a, 21), shr(b, 11))) * tir::imm(kF64, std::ldexp(1.0, -53));
}

std::optional<Expr> legalize_generator(LegalizeContext& ctx, const CallNode& call) {
  const std::string& op = ops::op_name(call);
  Attrs attrs = ops::attrs_of(call);
  ProgramBuilder pb(ctx, call, op);
  Buffer y = pb.result("out");
  if (!pb.known()) return pb.unknown();
  bool normal = op == "random_normal";
  bool wide = y->dtype == kF64;
  DataType ct = wide ? kF64 : DataType::f32();
  double a = attrs.get_float(normal ? "mean" : "low", 0.0);
  double b = attrs.get_float(normal ? "scale" : "high", 1.0);
  int64_t seed = attrs.get_int("seed");
  return pb.finish(loop_nest(
      y->shape,
      [&](const Index& i) {
        Philox g;
        TExpr u1 = wide ? u53(g.word(0), g.word(1)) : u24(g.word(0));
        TExpr v;
        if (!normal) {
          v = tir::imm(ct, a) + (tir::imm(ct, b) - tir::imm(ct, a)) * u1;
        } else {
          TExpr u2 = wide ? u53(g.word(2), g.word(3)) : u24(g.word(1));
          TExpr radius = intrin(Intrinsic::sqrt, tir::imm(ct, -2.0) * intrin(Intrinsic::log, one(ct) - u1));
          v = tir::imm(ct, a) + tir::imm(ct, b) * radius * intrin(Intrinsic::cos, tir::imm(ct, 2 * M_PI) * u2);
        }
        return g.wrap(
            tir::make_seq({g.generate(flat_index(i, y->shape), seed), tir::make_store(y, i, cast(y->dtype, v))}));
      },
      LoopHints{true, false, 64}));
}

std::optional<Expr> legalize_multinomial(LegalizeContext& ctx, const CallNode& call) {
  Attrs attrs = ops::attrs_of(call);
  ProgramBuilder pb(ctx, call, "multinomial");
  Buffer x = pb.arg(0, "x"), y = pb.result("out");
  if (!pb.known()) return pb.unknown();
  bool wide = x->dtype == kF64;
  DataType ct = wide ? kF64 : DataType::f32();
  SymExpr classes = x->shape[1];
  int64_t seed = attrs.get_int("seed");
  LoopHints serial{false, false, 1};
  return pb.finish(loop_nest(
      y->shape,
      [&](const Index& i) {
        Philox g;
        Local mx = local("mx", ct), total = local("total", ct), run = local("run", ct),
              pick = local("pick", DataType::i64());
        auto xv = [&](const TExpr& c) { return cast(ct, load(x, {i[0], c})); };
        auto e = [&](const TExpr& c) { return intrin(Intrinsic::exp, xv(c) - mx.get()); };
        TExpr u = wide ? u53(g.word(0), g.word(1)) : u24(g.word(0));
        Stmt find_max = accumulate(
            mx, {classes}, [&](const Index& c) { return xv(c[0]); },
            [](const TExpr& a, const TExpr& v) { return max_(a, v); });
        Stmt sum = accumulate(
            total, {classes}, [&](const Index& c) { return e(c[0]); },
            [](const TExpr& a, const TExpr& v) { return a + v; });
        // The first class whose running sum exceeds u * S; the last if none.
        Stmt scan = loop_nest(
            {classes},
            [&](const Index& c) {
              return tir::make_seq(
                  {run.set(run.get() + e(c[0])),
                   pick.set(select(and_(lt(pick.get(), idx(0)), lt(u * total.get(), run.get())), c[0], pick.get()))});
            },
            serial, "c");
        Stmt body = tir::make_seq(
            {g.generate(flat_index(i, y->shape), seed), mx.set(min_value(ct)), find_max, total.set(zero(ct)), sum,
             run.set(zero(ct)), pick.set(idx(-1)), scan,
             tir::make_store(y, i, cast(y->dtype, select(lt(pick.get(), idx(0)), idx(classes) - idx(1), pick.get())))});
        return g.wrap(with_locals({mx, total, run, pick}, body));
      },
      LoopHints{true, false, classes * 3}));
}

}  // namespace

void register_random_legalizers(LegalizerRegistry& reg) {
  reg.add("random_uniform", legalize_generator);
  reg.add("random_normal", legalize_generator);
  reg.add("multinomial", legalize_multinomial);
}

}  // namespace relax
