// Legaliser of linear_attention (ir/ops/attention.cc): the recurrence over time
// runs per (batch, kv head) in the program's second output, the final
// state, which starts as a copy of the initial state.
//
// Per step t: S *= exp(decay_t) (gated rules); then column e of S alone
// gives v'_t[e] = beta_t (v_t[e] - sum_d S[d, e] k_t[d]) (delta rules, else
// v_t[e]) and takes S[d, e] += k_t[d] v'_t[e], so the columns update one
// by one without a scratch vector; last, every query head of the group
// reads out_t[e] = c * sum_d q_t[d] S[d, e].
#include <cmath>

#include "ir/ops/common.h"
#include "passes/legalize/legalize.h"
#include "passes/legalize/te.h"

namespace relax {
namespace {

using namespace te;
using tir::Intrinsic;

// The index of a dim that may be 1 (broadcast) for coordinate `v` of a dim
// of size `full`.
TExpr bcast(const SymExpr& dim, const SymExpr& full, const TExpr& v) {
  if (dim == full) return v;
  if (dim.is_const(1)) return idx(0);
  return select(eq(idx(dim), idx(1)), idx(0), v);
}

std::optional<Expr> legalize_linear_attention(LegalizeContext& ctx, const CallNode& call) {
  Attrs attrs = ops::attrs_of(call);
  std::string rule = attrs.get_string("update_rule");
  bool gated = rule == "gated" || rule == "gated_delta", delta = rule == "delta" || rule == "gated_delta";
  const auto* out_si = as<TupleSI>(call.sinfo);
  if (!out_si || out_si->fields.size() != 2) return std::nullopt;
  ProgramBuilder pb(ctx, "linear_attention_" + rule);
  Buffer q = pb.input(call.args[0], "q"), k = pb.input(call.args[1], "k"), v = pb.input(call.args[2], "v");
  Buffer s0 = pb.input(call.args[3], "state");
  size_t next = 4;
  Buffer decay = gated && call.args.size() > next ? pb.input(call.args[next++], "decay") : nullptr;
  Buffer beta = delta && call.args.size() > next ? pb.input(call.args[next++], "beta") : nullptr;
  Buffer out = pb.output(out_si->fields[0], "out"), s = pb.output(out_si->fields[1], "final_state");
  if (!q || !k || !v || !s0 || !out || !s || (gated && !decay) || (delta && !beta)) return std::nullopt;
  SymExpr B = q->shape[0], Hq = q->shape[1], T = q->shape[2], dk = q->shape[3];
  SymExpr Hkv = k->shape[1], dv = v->shape[3];
  SymExpr group = floordiv(Hq, max(Hkv, SymExpr(1)));
  DataType t = out->dtype, acc = compute_dtype(t);
  double scale = attrs.get_float("scale");
  TExpr c = scale != 0 ? tir::imm(acc, scale) : one(acc) / intrin(Intrinsic::sqrt, cast(acc, idx(dk)));
  LoopHints serial{false, false, 1};
  Stmt body = loop_nest(
      {B, Hkv},
      [&](const Index& bh) {
        TExpr b = bh[0], h = bh[1];
        auto S = [&](const TExpr& d, const TExpr& e) { return Index{b, h, d, e}; };
        auto sv = [&](const TExpr& d, const TExpr& e) { return cast(acc, load(s, S(d, e))); };
        Stmt init = loop_nest(
            {dk, dv}, [&](const Index& de) { return tir::make_store(s, S(de[0], de[1]), load(s0, S(de[0], de[1]))); },
            serial, "c");
        Stmt steps = loop_nest(
            {T},
            [&](const Index& tt) {
              TExpr ti = tt[0];
              std::vector<Stmt> st;
              if (gated) {
                st.push_back(loop_nest(
                    {dk, dv},
                    [&](const Index& de) {
                      TExpr g = cast(acc, load(decay, {b, h, ti, bcast(decay->shape[3], dk, de[0])}));
                      return tir::make_store(s, S(de[0], de[1]), cast(t, sv(de[0], de[1]) * intrin(Intrinsic::exp, g)));
                    },
                    serial, "g"));
              }
              Local vp = local("vp", acc), dot = local("dot", acc);
              st.push_back(loop_nest(
                  {dv},
                  [&](const Index& ee) {
                    TExpr e = ee[0];
                    TExpr vt = cast(acc, load(v, {b, h, ti, e}));
                    std::vector<Stmt> col;
                    if (delta) {
                      col.push_back(dot.set(zero(acc)));
                      col.push_back(accumulate(
                          dot, {dk},
                          [&](const Index& d) {
                            return sv(d[0], e) * cast(acc, load(k, {b, h, ti, d[0]}));
                          },
                          [](const TExpr& a, const TExpr& x) { return a + x; }, "d"));
                      TExpr bt = cast(acc, load(beta, {b, bcast(beta->shape[1], Hkv, h), ti, idx(0)}));
                      col.push_back(vp.set(bt * (vt - dot.get())));
                    } else {
                      col.push_back(vp.set(vt));
                    }
                    col.push_back(loop_nest(
                        {dk},
                        [&](const Index& d) {
                          return tir::make_store(
                              s, S(d[0], e), cast(t, sv(d[0], e) + cast(acc, load(k, {b, h, ti, d[0]})) * vp.get()));
                        },
                        serial, "u"));
                    return tir::make_seq(col);
                  },
                  serial, "e"));
              st.push_back(loop_nest(
                  {group, dv},
                  [&](const Index& je) {
                    TExpr hq = h * idx(group) + je[0];
                    Stmt sum = accumulate(
                        dot, {dk},
                        [&](const Index& d) {
                          return cast(acc, load(q, {b, hq, ti, d[0]})) * sv(d[0], je[1]);
                        },
                        [](const TExpr& a, const TExpr& x) { return a + x; }, "d");
                    return tir::make_seq(
                        {dot.set(zero(acc)), sum, tir::make_store(out, {b, hq, ti, je[1]}, cast(t, c * dot.get()))});
                  },
                  serial, "o"));
              return with_locals({vp, dot}, tir::make_seq(st));
            },
            serial, "t");
        return tir::make_seq({init, steps});
      },
      LoopHints{true, false, T * dk * dv * 3});
  return pb.finish(body);
}

}  // namespace

void register_attention_legalizers(LegalizerRegistry& reg) { reg.add("linear_attention", legalize_linear_attention); }

}  // namespace relax
