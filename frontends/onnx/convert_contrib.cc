// ONNX converters: the com.microsoft contrib ops of exported transformers.
// Gelu, BiasGelu, FastGelu, QuickGelu, FusedMatMul, LayerNormalization,
// SimplifiedLayerNormalization, SkipLayerNormalization,
// SkipSimplifiedLayerNormalization and Attention, composed from existing
// graph ops (matmul, softmax, reductions, where and elementwise ops).
#include <cmath>
#include <optional>

#include "frontends/onnx/compose.h"

namespace relax::onnx_fe {
namespace {

const DataType kI64 = DataType::i64();
const DataType kF32 = DataType::f32();

// ---- com.microsoft: activations and FusedMatMul ---------------------------------------

std::vector<Value> convert_gelu(Context& ctx) { return {expr_value(op(ctx, "gelu", {ctx.expr(0)}))}; }

std::vector<Value> convert_bias_gelu(Context& ctx) {
  return {expr_value(op(ctx, "gelu", {add(ctx, ctx.expr(0), ctx.expr(1))}))};
}

// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), x = X + bias.
std::vector<Value> convert_fast_gelu(Context& ctx) {
  Expr x = ctx.has_input(1) ? add(ctx, ctx.expr(0), ctx.expr(1)) : ctx.expr(0);
  DataType dt = ctx.dtype(0);
  Expr cube = mul(ctx, mul(ctx, x, x), x);
  Expr inner = add(ctx, x, mul(ctx, cube, scalar_like(ctx, dt, 0.044715)));
  Expr t = op(ctx, "tanh", {mul(ctx, inner, scalar_like(ctx, dt, std::sqrt(2.0 / M_PI)))});
  Expr half_x = mul(ctx, x, scalar_like(ctx, dt, 0.5));
  return {expr_value(mul(ctx, half_x, add(ctx, t, scalar_like(ctx, dt, 1.0))))};
}

// x * sigmoid(alpha x).
std::vector<Value> convert_quick_gelu(Context& ctx) {
  Expr x = ctx.expr(0);
  Expr s = op(ctx, "sigmoid", {mul(ctx, x, scalar_like(ctx, ctx.dtype(0), ctx.attr_float("alpha", 1.702f)))});
  return {expr_value(mul(ctx, x, s))};
}

// The last two dims of input i swapped (for rank >= 2).
Expr transposed(Context& ctx, size_t i) {
  int nd = ctx.ndim(i);
  if (nd < 0) ctx.unsupported("FusedMatMul operand of unknown rank");
  if (nd < 2) return ctx.expr(i);
  Ints axes;
  for (int d = 0; d < nd; ++d) axes.push_back(d);
  std::swap(axes[size_t(nd - 1)], axes[size_t(nd - 2)]);
  return permute(ctx, ctx.expr(i), axes);
}

// Y = alpha * op(A) op(B), op transposing the last two dims when asked.
std::vector<Value> convert_fused_matmul(Context& ctx) {
  if (ctx.attr_int("transBatchA", 0) || ctx.attr_int("transBatchB", 0)) ctx.unsupported("transBatchA / transBatchB");
  Expr a = ctx.attr_int("transA", 0) ? transposed(ctx, 0) : ctx.expr(0);
  Expr b = ctx.attr_int("transB", 0) ? transposed(ctx, 1) : ctx.expr(1);
  Expr y = op(ctx, "matmul", {a, b});
  double alpha = ctx.attr_float("alpha", 1.0f);
  if (alpha != 1.0) y = mul(ctx, y, scalar_like(ctx, ctx.dtype(0), alpha));
  return {expr_value(y)};
}

// ---- com.microsoft: layer normalizations --------------------------------------------------

// Normalizes x over axes [axis, rank): y = (x - mean) * inv_std (or, when
// simplified, x * inv_std with the RMS), then * scale (+ bias). Returns y,
// mean and inv_std, the statistics keeping unit dims.
struct Normalized {
  Expr y, mean, inv_std;
};

Normalized normalize(Context& ctx, Expr x, int64_t axis, bool simplified, double eps, Expr scale,
                     std::optional<Expr> bias) {
  int nd = int(dims_of(ctx, x).size());
  if (axis < 0) axis += nd;
  if (axis < 0 || axis >= nd) ctx.fail("axis out of range for rank ", nd);
  Ints axes;
  for (int64_t i = axis; i < nd; ++i) axes.push_back(i);
  Attrs keep{{"axis", axes}, {"keepdims", true}};
  DataType dt = expr_dtype(x);
  Normalized n;
  Expr centred = x;
  if (!simplified) {
    n.mean = op(ctx, "mean", {x}, keep);
    centred = op(ctx, "subtract", {x, n.mean});
  }
  Expr var = op(ctx, "mean", {mul(ctx, centred, centred)}, keep);
  n.inv_std = op(ctx, "rsqrt", {add(ctx, var, scalar_like(ctx, dt, eps))});
  n.y = mul(ctx, mul(ctx, centred, n.inv_std), scale);
  if (bias) n.y = add(ctx, n.y, *bias);
  return n;
}

std::optional<Expr> optional_input(Context& ctx, size_t i) {
  if (!ctx.has_input(i)) return std::nullopt;
  return ctx.expr(i);
}

// LayerNormalization / SimplifiedLayerNormalization (X, scale, [bias]) ->
// (Y, mean, inv_std_var); the statistics in f32 for narrower inputs
// (stash_type 1).
Converter layer_norm(bool simplified) {
  return [simplified](Context& ctx) -> std::vector<Value> {
    DataType dt = ctx.dtype(0);
    bool stash = ctx.attr_int("stash_type", 1) == 1 && dt.bits < 32;
    Expr x = stash ? cast_to(ctx, ctx.expr(0), kF32) : ctx.expr(0);
    Expr scale = stash ? cast_to(ctx, ctx.expr(1), kF32) : ctx.expr(1);
    std::optional<Expr> bias = simplified ? std::nullopt : optional_input(ctx, 2);
    if (bias && stash) bias = cast_to(ctx, *bias, kF32);
    Normalized n =
        normalize(ctx, x, ctx.attr_int("axis", -1), simplified, ctx.attr_float("epsilon", 1e-5f), scale, bias);
    std::vector<Value> out = {expr_value(cast_to(ctx, n.y, dt))};
    if (!simplified) out.push_back(expr_value(n.mean));
    out.push_back(expr_value(n.inv_std));
    return out;
  };
}

// SkipLayerNormalization / SkipSimplifiedLayerNormalization (input, skip,
// gamma, [beta], [bias]) -> (output, mean, inv_std_var, input_skip_bias_sum):
// the normalization over the last axis of input + skip + bias.
Converter skip_layer_norm(bool simplified) {
  return [simplified](Context& ctx) -> std::vector<Value> {
    size_t bias_at = simplified ? 3 : 4;
    Expr sum = add(ctx, ctx.expr(0), ctx.expr(1));
    if (ctx.has_input(bias_at)) sum = add(ctx, sum, ctx.expr(bias_at));
    std::optional<Expr> beta = simplified ? std::nullopt : optional_input(ctx, 3);
    Normalized n = normalize(ctx, sum, -1, simplified, ctx.attr_float("epsilon", 1e-12f), ctx.expr(2), beta);
    if (simplified && ctx.output_used(1)) ctx.unsupported("the mean of a simplified norm");
    Value mean = simplified ? Value{} : expr_value(n.mean);
    return {expr_value(n.y), mean, expr_value(n.inv_std), expr_value(sum)};
  };
}

// ---- com.microsoft: Attention ---------------------------------------------------------------

// x with the dims `want`: itself when they provably hold, an error when
// one provably differs, else x match_cast to them (checked at run time).
Expr conform(Context& ctx, Expr x, const Dims& want, const char* what) {
  const Dims& have = dims_of(ctx, x);
  if (have.size() != want.size()) ctx.fail(what, " has rank ", have.size(), ", expected ", want.size());
  bool proven = true;
  for (size_t i = 0; i < want.size(); ++i) {
    if (ctx.ana().can_prove_not_equal(have[i], want[i]))
      ctx.fail(what, " dim ", i, " is ", have[i], ", expected ", want[i]);
    proven &= ctx.ana().can_prove_equal(have[i], want[i]);
  }
  return proven ? x : ctx.emit_match_cast(x, tensor_si(expr_dtype(x), want), what);
}

// Where keys may be attended, from mask_index: a raw 0/1 mask (B, T) or
// (B, S, T), key lengths (B,) (right padding) or end and start positions
// (2B,) (left padding). Broadcasts against (B, N, S, T).
Expr mask_allowed(Context& ctx, Expr mask, const SymExpr& batch, const SymExpr& seq, const SymExpr& total) {
  Dims md = dims_of(ctx, mask);
  if (md.size() == 2) mask = conform(ctx, mask, {batch, total}, "mask_index");
  if (md.size() == 3) mask = conform(ctx, mask, {batch, seq, total}, "mask_index");
  if (md.size() == 2 || md.size() == 3) {
    Expr keep = op(ctx, "greater", {mask, ctx.scalar(expr_dtype(mask), 0)});
    return op(ctx, "expand_dims", {keep}, {{"axis", md.size() == 2 ? Ints{1, 2} : Ints{1}}});
  }
  if (md.size() != 1) ctx.unsupported(cat("mask_index of rank ", md.size()));
  Expr j = reshape(ctx, iota(ctx, total), {SymExpr(1), SymExpr(1), SymExpr(1), total});
  Expr idx = cast_to(ctx, mask, kI64);
  auto per_batch = [&](const SymExpr& begin) {
    Expr s = op(ctx, "strided_slice", {idx},
                {{"axes", Ints{0}}, {"begin", Dims{begin}}, {"end", Dims{simplify(ctx, begin + batch)}}});
    return reshape(ctx, s, {batch, SymExpr(1), SymExpr(1), SymExpr(1)});
  };
  Expr allowed = op(ctx, "less", {j, per_batch(SymExpr(0))});
  if (ctx.ana().can_prove_equal(md[0], batch)) return allowed;
  if (!ctx.ana().can_prove_equal(md[0], simplify(ctx, batch * 2))) ctx.unsupported("this mask_index length");
  return op(ctx, "logical_and", {allowed, op(ctx, "greater_equal", {j, per_batch(batch)})});
}

// Multi-head attention over input (B, S, D) with merged Q/K/V weights
// (D, Hq + Hk + Hv) and bias; past (2, B, N, P, H) is prepended to K and V,
// which form the present. Masked scores (mask_index, unidirectional) are set
// to mask_filter_value; attention_bias is added.
std::vector<Value> convert_ms_attention(Context& ctx) {
  if (ctx.attr_int("do_rotary", 0)) ctx.unsupported("do_rotary");
  if (ctx.attr_int("past_present_share_buffer", 0)) ctx.unsupported("past_present_share_buffer");
  int64_t heads = ctx.attr_int("num_heads");
  if (heads < 1) ctx.fail("needs num_heads");
  DataType dt = ctx.dtype(0);
  Expr qkv = op(ctx, "matmul", {ctx.expr(0), ctx.expr(1)});
  if (ctx.has_input(2)) qkv = add(ctx, qkv, ctx.expr(2));
  const Dims& xd = dims_of(ctx, qkv);
  if (xd.size() != 3) ctx.fail("input must have rank 3");
  Ints sizes = ctx.attr_ints("qkv_hidden_sizes");
  if (sizes.empty()) {
    int64_t total = const_dim(ctx, xd[2], "hidden size");
    sizes = {total / 3, total / 3, total / 3};
  }
  if (sizes.size() != 3) ctx.fail("qkv_hidden_sizes must have 3 values");
  Expr part[3];
  int64_t at = 0;
  for (int p = 0; p < 3; ++p) {
    Expr s = op(ctx, "strided_slice", {qkv},
                {{"axes", Ints{2}}, {"begin", Dims{SymExpr(at)}}, {"end", Dims{SymExpr(at + sizes[size_t(p)])}}});
    part[p] = split_heads(ctx, s, heads);
    at += sizes[size_t(p)];
  }
  Expr q = part[0], k = part[1], v = part[2];
  SymExpr past_len(0);
  if (ctx.has_input(4)) {
    Expr past = ctx.expr(4);
    auto half = [&](int64_t i) {
      Expr s = op(ctx, "strided_slice", {past},
                  {{"axes", Ints{0}}, {"begin", Dims{SymExpr(i)}}, {"end", Dims{SymExpr(i + 1)}}});
      return op(ctx, "squeeze", {s}, {{"axis", Ints{0}}});
    };
    past_len = dims_of(ctx, past)[3];
    k = op(ctx, "concat", {make_tuple({half(0), k})}, {{"axis", int64_t(2)}});
    v = op(ctx, "concat", {make_tuple({half(1), v})}, {{"axis", int64_t(2)}});
  }
  auto stacked = [&](Expr e) { return op(ctx, "expand_dims", {e}, {{"axis", Ints{0}}}); };
  Expr present = op(ctx, "concat", {make_tuple({stacked(k), stacked(v)})}, {{"axis", int64_t(0)}});

  double scale = ctx.has_attr("scale") ? ctx.attr_float("scale")
                                       : 1.0 / std::sqrt(double(const_dim(ctx, dims_of(ctx, q)[3], "head size")));
  Expr scores = mul(ctx, op(ctx, "matmul", {q, permute(ctx, k, {0, 1, 3, 2})}), scalar_like(ctx, dt, scale));
  if (ctx.has_input(5)) scores = add(ctx, scores, ctx.expr(5));
  SymExpr batch = xd[0], seq = xd[1], total = dims_of(ctx, k)[2];
  std::optional<Expr> allowed;
  if (ctx.has_input(3)) allowed = mask_allowed(ctx, ctx.expr(3), batch, seq, total);
  if (ctx.attr_int("unidirectional", 0)) {
    Expr i = reshape(ctx, iota(ctx, seq), {seq, SymExpr(1)});
    Expr j = reshape(ctx, iota(ctx, total), {SymExpr(1), total});
    Expr causal = op(ctx, "less_equal", {j, add(ctx, i, dim_scalar(ctx, past_len))});
    allowed = allowed ? op(ctx, "logical_and", {*allowed, causal}) : causal;
  }
  if (allowed) {
    Expr filter = scalar_like(ctx, dt, ctx.attr_float("mask_filter_value", -10000.0f));
    scores = add(ctx, scores, op(ctx, "where", {*allowed, scalar_like(ctx, dt, 0.0), filter}));
  }
  Expr probs = op(ctx, "softmax", {scores}, {{"axis", int64_t(-1)}});
  return {expr_value(merge_heads(ctx, op(ctx, "matmul", {probs, v}))), expr_value(present)};
}

}  // namespace

void register_contrib_converters(ConverterRegistry& r) {
  const std::string ms = "com.microsoft";
  r.add(ms, "Gelu", 1, convert_gelu);
  r.add(ms, "BiasGelu", 1, convert_bias_gelu);
  r.add(ms, "FastGelu", 1, convert_fast_gelu);
  r.add(ms, "QuickGelu", 1, convert_quick_gelu);
  r.add(ms, "FusedMatMul", 1, convert_fused_matmul);
  r.add(ms, "LayerNormalization", 1, layer_norm(false));
  r.add(ms, "SimplifiedLayerNormalization", 1, layer_norm(true));
  r.add(ms, "SkipLayerNormalization", 1, skip_layer_norm(false));
  r.add(ms, "SkipSimplifiedLayerNormalization", 1, skip_layer_norm(true));
  r.add(ms, "Attention", 1, convert_ms_attention);
}

}  // namespace relax::onnx_fe
