// Attention ops that are a distinct kernel rather than a composition of
// existing graph ops (the importer composes the others: matmul, softmax,
// frontends/onnx/convert_attention.cc):
//
//   linear_attention  the recurrent (linear) attention of ONNX's
//                     LinearAttention: a scan over time of a per-head state
//                     matrix, with optional decay gating and delta-rule
//                     correction.
#include <string>

#include "ir/ops/common.h"

namespace relax {
namespace {

using namespace ops;

// The update rules of linear_attention, and which optional operands each
// takes: decay (gated rules) then beta (delta rules).
struct UpdateRule {
  const char* name;
  bool gated, delta;
};
constexpr UpdateRule kUpdateRules[] = {
    {"linear", false, false},
    {"gated", true, false},
    {"delta", false, true},
    {"gated_delta", true, true},
};

const UpdateRule& find_rule(const std::string& op, const std::string& name) {
  for (const UpdateRule& r : kUpdateRules)
    if (name == r.name) return r;
  fail(op, ": unknown update_rule '", name, "' (linear, gated, delta or gated_delta)");
}

// Errors when dims `a` and `b` (of `what`) provably differ.
void check_same_dim(const std::string& op, const char* what, const SymExpr& a, const SymExpr& b, const Analyzer& ana) {
  if (ana.can_prove_not_equal(a, b)) fail(op, ": ", what, " differ: ", a, " and ", b);
}

// Errors unless `d` may be one of `a` or `b`.
void check_dim_in(const std::string& op, const char* what, const SymExpr& d, const SymExpr& a, const SymExpr& b,
                  const Analyzer& ana) {
  if (ana.can_prove_not_equal(d, a) && ana.can_prove_not_equal(d, b))
    fail(op, ": ", what, " is ", d, ", expected ", a, " or ", b);
}

// linear_attention(q, k, v, state, [decay], [beta]): operands are
// (B, Hq, T, dk), (B, Hkv, T, dk), (B, Hkv, T, dv), (B, Hkv, dk, dv), decay
// (B, Hkv, T, dk or 1), beta (B, Hkv or 1, T, 1), all of one float dtype.
// The result is the tuple (output (B, Hq, T, dv), final state (B, Hkv, dk, dv)).
StructInfo infer_linear_attention(const CallNode& call, const InferContext& ctx) {
  Attrs attrs = attrs_of(call);
  const std::string& op = op_name(call);
  const UpdateRule& rule = find_rule(op, attrs.get_string("update_rule"));
  size_t want = 4 + size_t(rule.gated) + size_t(rule.delta);
  if (call.args.size() != want)
    fail(op, ": update_rule '", rule.name, "' takes ", want, " operands, got ", call.args.size());
  std::vector<TensorInfo> t;
  DataType dtype = DataType::void_();
  for (size_t i = 0; i < want; ++i) {
    t.push_back(tensor_arg(call, i));
    if (!t[i].unknown_rank() && t[i].ndim != 4) fail(op, ": operand ", i, " must have rank 4, got ", t[i].ndim);
    require_float(op, t[i].dtype, cat("operand ", i));
    dtype = i == 0 ? t[i].dtype : common_dtype(op, dtype, t[i].dtype);
  }
  const TensorInfo &q = t[0], &k = t[1], &v = t[2], &s = t[3];
  auto unknown = [&] { return tuple_si({tensor_si_ndim(dtype, 4), tensor_si_ndim(dtype, 4)}); };
  for (const TensorInfo& x : t)
    if (!x.shape) return unknown();
  const Dims &qd = *q.shape, &kd = *k.shape, &vd = *v.shape, &sd = *s.shape;
  const Analyzer& ana = ctx.ana;
  for (size_t i = 1; i < want; ++i) check_same_dim(op, "batch sizes", qd[0], (*t[i].shape)[0], ana);
  check_same_dim(op, "sequence lengths", qd[2], kd[2], ana);
  check_same_dim(op, "sequence lengths", qd[2], vd[2], ana);
  check_same_dim(op, "kv head counts", kd[1], vd[1], ana);
  check_same_dim(op, "kv head counts", kd[1], sd[1], ana);
  check_same_dim(op, "key head sizes", qd[3], kd[3], ana);
  check_same_dim(op, "key head sizes", kd[3], sd[2], ana);
  check_same_dim(op, "value head sizes", vd[3], sd[3], ana);
  if (ana.prove_divisible(qd[1], kd[1]) == Tri::No)
    fail(op, ": ", qd[1], " query heads are no multiple of ", kd[1], " kv heads");
  size_t next = 4;
  if (rule.gated) {
    const Dims& g = *t[next++].shape;
    check_same_dim(op, "decay heads", g[1], kd[1], ana);
    check_same_dim(op, "decay lengths", g[2], qd[2], ana);
    check_dim_in(op, "the decay's last dim", g[3], kd[3], SymExpr(1), ana);
  }
  if (rule.delta) {
    const Dims& b = *t[next++].shape;
    check_dim_in(op, "beta's head dim", b[1], kd[1], SymExpr(1), ana);
    check_same_dim(op, "beta lengths", b[2], qd[2], ana);
    check_same_dim(op, "beta's last dim and 1", b[3], SymExpr(1), ana);
  }
  return tuple_si({tensor_si(dtype, {qd[0], qd[1], qd[2], vd[3]}), tensor_si(dtype, sd)});
}

}  // namespace

void register_attention_ops(OpRegistry& reg) {
  using T = AttrType;
  reg.add("linear_attention")
      .doc(
          "linear_attention(q, k, v, state, [decay], [beta], update_rule=r, scale=c): ONNX LinearAttention on "
          "unpacked heads. q (B, Hq, T, dk), k (B, Hkv, T, dk), v (B, Hkv, T, dv), state (B, Hkv, dk, dv); "
          "decay (B, Hkv, T, dk or 1) is given for r = gated / gated_delta, beta (B, Hkv or 1, T, 1) for r = "
          "delta / gated_delta. For t = 0..T-1, per (b, kv head): S = exp(decay_t) * S (gated rules, "
          "broadcast over dv); v_t' = beta_t * (v_t - S^T k_t) (delta rules, else v_t); S = S + k_t v_t'^T; "
          "query head h reads kv head h / (Hq / Hkv): out_t = c * q_t^T S (c = 0 means 1 / sqrt(dk)). "
          "Returns (out (B, Hq, T, dv), the final S); all operands share one float dtype, which is "
          "the accumulation dtype.")
      .args(4, 6)
      .attr("update_rule", T::String, std::string("gated_delta"))
      .attr("scale", T::Float, 0.0)
      .infer(infer_linear_attention);
}

}  // namespace relax
