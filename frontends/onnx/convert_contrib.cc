// ONNX converters: the com.microsoft contrib ops of exported transformers
// (what ONNX Runtime's transformer optimizer and generate() tooling write).
// Gelu, BiasGelu, FastGelu, QuickGelu, GemmFastGelu, BiasAdd, BiasSoftmax,
// FusedMatMul, LayerNormalization, SimplifiedLayerNormalization,
// SkipLayerNormalization, SkipSimplifiedLayerNormalization,
// EmbedLayerNormalization, RotaryEmbedding, MatMulNBits and Attention,
// composed from existing graph ops (matmul, softmax, take, reductions, where,
// bit and elementwise ops). Semantics from ONNX Runtime's CPU kernels
// (contrib_ops/cpu/, where one exists) and its operator schemas.
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

// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
Expr fast_gelu(Context& ctx, Expr x) {
  DataType dt = expr_dtype(x);
  Expr cube = mul(ctx, mul(ctx, x, x), x);
  Expr inner = add(ctx, x, mul(ctx, cube, scalar_like(ctx, dt, 0.044715)));
  Expr t = op(ctx, "tanh", {mul(ctx, inner, scalar_like(ctx, dt, std::sqrt(2.0 / M_PI)))});
  Expr half_x = mul(ctx, x, scalar_like(ctx, dt, 0.5));
  return mul(ctx, half_x, add(ctx, t, scalar_like(ctx, dt, 1.0)));
}

// FastGelu(X [+ bias]).
std::vector<Value> convert_fast_gelu(Context& ctx) {
  return {expr_value(fast_gelu(ctx, ctx.has_input(1) ? add(ctx, ctx.expr(0), ctx.expr(1)) : ctx.expr(0)))};
}

// GemmFastGelu (X, W, [bias]): FastGelu(MatMul(X, W) [+ bias]).
std::vector<Value> convert_gemm_fast_gelu(Context& ctx) {
  Expr y = op(ctx, "matmul", {ctx.expr(0), ctx.expr(1)});
  if (ctx.has_input(2)) y = add(ctx, y, ctx.expr(2));
  return {expr_value(fast_gelu(ctx, y))};
}

// BiasAdd (X, bias, skip): X + bias + skip.
std::vector<Value> convert_bias_add(Context& ctx) {
  return {expr_value(add(ctx, add(ctx, ctx.expr(0), ctx.expr(1)), ctx.expr(2)))};
}

// BiasSoftmax (data, bias; axis, is_inner_broadcast): softmax(data + bias)
// over the dims from `axis` on, flattened (opset-11 style). Both broadcast
// modes are numpy broadcasting of the bias's shape onto the data's.
std::vector<Value> convert_bias_softmax(Context& ctx) {
  Dims xs = ctx.bound_shape(0);
  int nd = int(xs.size());
  int64_t axis = ctx.attr_int("axis", 1);
  if (axis < 0) axis += nd;
  if (axis < 0 || axis >= nd) ctx.fail("axis ", ctx.attr_int("axis", 1), " out of range for rank ", nd);
  Expr z = add(ctx, ctx.expr(0), ctx.expr(1));
  if (axis == nd - 1) return {expr_value(op(ctx, "softmax", {z}, {{"axis", int64_t(-1)}}))};
  SymExpr outer = 1, inner = 1;
  for (int d = 0; d < nd; ++d) {
    if (d < axis)
      outer = outer * xs[size_t(d)];
    else
      inner = inner * xs[size_t(d)];
  }
  Expr flat = reshape(ctx, z, {simplify(ctx, outer), simplify(ctx, inner)});
  return {expr_value(reshape(ctx, op(ctx, "softmax", {flat}, {{"axis", int64_t(-1)}}), xs))};
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

// ---- com.microsoft: Attention, MultiHeadAttention, GroupQueryAttention ----------------------


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
    Expr s = slice_axis(ctx, idx, 0, begin, simplify(ctx, begin + batch));
    return reshape(ctx, s, {batch, SymExpr(1), SymExpr(1), SymExpr(1)});
  };
  Expr allowed = op(ctx, "less", {j, per_batch(SymExpr(0))});
  if (ctx.ana().can_prove_equal(md[0], batch)) return allowed;
  if (!ctx.ana().can_prove_equal(md[0], simplify(ctx, batch * 2))) ctx.unsupported("this mask_index length");
  return op(ctx, "logical_and", {allowed, op(ctx, "greater_equal", {j, per_batch(batch)})});
}

// q (B, N, S, H) attending to k, v (B, Nk, T, H) (each group of N / Nk query
// heads shares a key head): softmax(scale q k^T + bias, masked) v as (B, S,
// N * Hv). The node's attributes: scale (1 / sqrt(H) when 0 or absent),
// unidirectional (key j allowed up to past_len + s), mask_filter_value (the
// score of a masked key); `mask` as mask_allowed reads it. With a
// `window` of W >= 0, query s sees only the last W keys up to its own
// position past_len + s (a sliding window, as ONNX Runtime 1.30 and
// Mistral's sliding_window count it).
Expr attend(Context& ctx, Expr q, Expr k, Expr v, const SymExpr& past_len, std::optional<Expr> mask,
            std::optional<Expr> bias, bool causal, int64_t window = -1) {
  DataType dt = expr_dtype(q);
  Dims qd = dims_of(ctx, q), kd = dims_of(ctx, k);
  int64_t heads = const_dim(ctx, qd[1], "head count"), kv_heads = const_dim(ctx, kd[1], "key head count");
  if (heads % kv_heads) ctx.fail(heads, " query heads do not group over ", kv_heads, " key heads");
  if (heads != kv_heads) {  // (B, Nk, T, H) -> (B, Nk, N / Nk, T, H) -> (B, N, T, H)
    auto repeat = [&](Expr e) {
      Dims d = dims_of(ctx, e);
      Expr x = op(ctx, "expand_dims", {e}, {{"axis", Ints{2}}});
      x = op(ctx, "broadcast_to", {x, make_shape({d[0], d[1], SymExpr(heads / kv_heads), d[2], d[3]})});
      return reshape(ctx, x, {d[0], SymExpr(heads), d[2], d[3]});
    };
    k = repeat(k);
    v = repeat(v);
  }
  double scale = ctx.attr_float("scale", 0.0f);
  if (scale == 0.0) scale = 1.0 / std::sqrt(double(const_dim(ctx, qd[3], "head size")));
  Expr scores = mul(ctx, op(ctx, "matmul", {q, permute(ctx, k, {0, 1, 3, 2})}), scalar_like(ctx, dt, scale));
  double softcap = ctx.attr_float("softcap", 0.0f);
  if (softcap > 0)
    scores = mul(ctx, op(ctx, "tanh", {mul(ctx, scores, scalar_like(ctx, dt, 1.0 / softcap))}),
                 scalar_like(ctx, dt, softcap));
  if (bias) scores = add(ctx, scores, *bias);
  SymExpr batch = qd[0], seq = qd[2], total = kd[2];
  std::optional<Expr> allowed;
  if (mask) allowed = mask_allowed(ctx, *mask, batch, seq, total);
  if (causal || ctx.attr_int("unidirectional", 0)) {
    Expr i = reshape(ctx, iota(ctx, seq), {seq, SymExpr(1)});
    Expr j = reshape(ctx, iota(ctx, total), {SymExpr(1), total});
    Expr last = add(ctx, i, dim_scalar(ctx, past_len));
    Expr c = op(ctx, "less_equal", {j, last});
    if (window >= 0)
      c = op(ctx, "logical_and", {c, op(ctx, "greater", {add(ctx, j, ctx.scalar(kI64, window)), last})});
    allowed = allowed ? op(ctx, "logical_and", {*allowed, c}) : c;
  }
  if (allowed) {
    Expr filter = scalar_like(ctx, dt, ctx.attr_float("mask_filter_value", -10000.0f));
    scores = add(ctx, scores, op(ctx, "where", {*allowed, scalar_like(ctx, dt, 0.0), filter}));
  }
  Expr probs = op(ctx, "softmax", {scores}, {{"axis", int64_t(-1)}});
  return merge_heads(ctx, op(ctx, "matmul", {probs, v}));
}

// The cached angles at `positions` ((B, S) or (1, S)), as rotate_heads takes
// them, and the rotary dim (twice the caches' width).
struct Angles {
  Expr cos, sin;
  SymExpr rot;
};
Angles gather_angles(Context& ctx, Expr positions, Expr cos_cache, Expr sin_cache) {
  Dims cs = dims_of(ctx, cos_cache);
  if (cs.size() != 2) ctx.fail("cos_cache must be (max_sequence, rotary_dim / 2)");
  auto at = [&](Expr cache) { return op(ctx, "take", {cache, positions}, {{"axis", int64_t(0)}}); };
  return {at(cos_cache), at(sin_cache), simplify(ctx, cs[1] * 2)};
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
    part[p] = split_heads(ctx, slice_axis(ctx, qkv, 2, at, at + sizes[size_t(p)]), heads);
    at += sizes[size_t(p)];
  }
  Expr q = part[0], k = part[1], v = part[2];
  SymExpr past_len(0);
  if (ctx.has_input(4)) {
    Expr past = ctx.expr(4);
    auto half = [&](int64_t i) {
      return op(ctx, "squeeze", {slice_axis(ctx, past, 0, i, i + 1)}, {{"axis", Ints{0}}});
    };
    Dims pd = dims_of(ctx, past);
    if (pd.size() != 5) ctx.fail("past must be (2, batch, heads, past, head size), got rank ", pd.size());
    past_len = pd[3];
    k = op(ctx, "concat", {make_tuple({half(0), k})}, {{"axis", int64_t(2)}});
    v = op(ctx, "concat", {make_tuple({half(1), v})}, {{"axis", int64_t(2)}});
  }
  auto stacked = [&](Expr e) { return op(ctx, "expand_dims", {e}, {{"axis", Ints{0}}}); };
  Expr present = op(ctx, "concat", {make_tuple({stacked(k), stacked(v)})}, {{"axis", int64_t(0)}});

  std::optional<Expr> mask = optional_input(ctx, 3);
  std::optional<Expr> bias = optional_input(ctx, 5);
  return {expr_value(attend(ctx, q, k, v, past_len, mask, bias, false)), expr_value(present)};
}

// MultiHeadAttention (query, [key], [value], [bias], [key_padding_mask],
// [attention_bias], [past_key], [past_value]) -> (output, present_key,
// present_value): query (B, S, D) and key, value (B, L, D) projected
// already (bias [q | k | v] added before the heads split), or key, value
// (B, N, L, H) as they are (cross attention, no k/v bias); past (B, N, P,
// H) prepended. Packed QKV and shared buffers (ONNX Runtime's CUDA paths)
// are not supported.
std::vector<Value> convert_multi_head_attention(Context& ctx) {
  int64_t heads = ctx.attr_int("num_heads");
  if (heads < 1) ctx.fail("needs num_heads");
  if (!ctx.has_input(1) || !ctx.has_input(2)) ctx.unsupported("packed QKV or KV (key and value absent)");
  if (ctx.has_input(8) || ctx.has_input(9)) ctx.unsupported("past_sequence_length / cache_indirection (shared buffers)");
  Expr q = ctx.expr(0), k = ctx.expr(1), v = ctx.expr(2);
  int64_t d = const_dim(ctx, ctx.bound_shape(0, 3)[2], "hidden size");
  bool bnsh = ctx.bound_shape(1).size() == 4;
  if (ctx.has_input(3)) {
    Expr b = ctx.expr(3);
    auto part = [&](int64_t begin, int64_t end) { return slice_axis(ctx, b, 0, begin, end); };
    int64_t total = const_dim(ctx, ctx.bound_shape(3, 1)[0], "bias size");
    q = add(ctx, q, part(0, d));
    if (!bnsh) {
      k = add(ctx, k, part(d, 2 * d));
      v = add(ctx, v, part(2 * d, total));
    }
  }
  q = split_heads(ctx, q, heads);
  if (!bnsh) {
    k = split_heads(ctx, k, heads);
    v = split_heads(ctx, v, heads);
  }
  SymExpr past_len(0);
  if (ctx.has_input(6) != ctx.has_input(7)) ctx.fail("past_key and past_value come together");
  if (ctx.has_input(6)) {
    past_len = ctx.bound_shape(6, 4)[2];
    k = op(ctx, "concat", {make_tuple({ctx.expr(6), k})}, {{"axis", int64_t(2)}});
    v = op(ctx, "concat", {make_tuple({ctx.expr(7), v})}, {{"axis", int64_t(2)}});
  }
  std::optional<Expr> mask = optional_input(ctx, 4);
  std::optional<Expr> bias = optional_input(ctx, 5);
  return {expr_value(attend(ctx, q, k, v, past_len, mask, bias, false)), expr_value(k), expr_value(v)};
}

// GroupQueryAttention (query, [key], [value], [past_key], [past_value],
// seqlens_k, total_sequence_length, [cos_cache], [sin_cache]) -> (output,
// present_key, present_value): query (B, S, N H) (or packed [q | k | v]
// heads when key is absent), key and value (B, S, Nk H); each group of N /
// Nk query heads shares a key head. The present is the past (B, Nk, P, H)
// with the new keys after it, and query row s sees keys j <= P + s that lie
// below its batch's seqlens_k + 1: the layout of a past buffer holding
// exactly the tokens so far. Rotary (do_rotary) turns Q and the new K at
// positions P + s, or at position_ids (B, S) when given. local_window_size
// W >= 0 limits row s to the W keys up to P + s; attention_bias (B or
// 1, N or 1, S, T) is added to the scores. Shared past/present buffers (a
// past longer than the tokens so far), head_sink and smooth_softmax are
// not supported.
std::vector<Value> convert_group_query_attention(Context& ctx) {
  int64_t heads = ctx.attr_int("num_heads"), kv_heads = ctx.attr_int("kv_num_heads");
  if (heads < 1 || kv_heads < 1 || heads % kv_heads) ctx.fail("needs num_heads, a multiple of kv_num_heads");
  if (ctx.num_inputs() > 11 && ctx.has_input(11)) ctx.unsupported("head_sink");
  if (ctx.attr_int("smooth_softmax", 0)) ctx.unsupported("smooth_softmax");
  Dims qs = ctx.bound_shape(0, 3);
  Expr q = ctx.expr(0), k, v;
  int64_t width = const_dim(ctx, qs[2], "query width");
  if (ctx.has_input(1)) {
    for (size_t i : {1, 2})
      if (ctx.ndim(i) != 3)
        ctx.fail("key and value must be (batch, sequence, kv_num_heads x head size); input ", i, " has rank ",
                 ctx.ndim(i));
    k = ctx.expr(1);
    v = ctx.expr(2);
  } else {
    int64_t head = width / (heads + 2 * kv_heads);
    k = slice_axis(ctx, q, 2, heads * head, (heads + kv_heads) * head);
    v = slice_axis(ctx, q, 2, (heads + kv_heads) * head, width);
    q = slice_axis(ctx, q, 2, 0, heads * head);
  }
  SymExpr past_len(0);
  if (ctx.has_input(3)) past_len = ctx.bound_shape(3, 4)[2];
  if (ctx.attr_int("do_rotary", 0)) {  // Q and the new K at positions P .. P + S - 1
    if (!ctx.has_input(7) || !ctx.has_input(8)) ctx.fail("do_rotary needs cos_cache and sin_cache");
    Expr pos = ctx.has_input(9) ? cast_to(ctx, ctx.expr(9), kI64)
                                : reshape(ctx, add(ctx, iota(ctx, qs[1]), dim_scalar(ctx, past_len)), {SymExpr(1), qs[1]});
    Angles a = gather_angles(ctx, pos, ctx.expr(7), ctx.expr(8));
    bool interleaved = ctx.attr_int("rotary_interleaved", 0) != 0;
    auto turn = [&](Expr e, int64_t n) {  // (B, S, n H) -> (B, S, n, H), rotated, back
      Dims d = dims_of(ctx, e);
      Expr r = reshape(ctx, e, {d[0], d[1], SymExpr(n), simplify(ctx, floordiv(d[2], SymExpr(n)))});
      return reshape(ctx, rotate_heads(ctx, r, a.cos, a.sin, a.rot, interleaved), d);
    };
    q = turn(q, heads);
    k = turn(k, kv_heads);
  }
  q = split_heads(ctx, q, heads);
  k = split_heads(ctx, k, kv_heads);
  v = split_heads(ctx, v, kv_heads);
  if (ctx.has_input(3)) {
    k = op(ctx, "concat", {make_tuple({ctx.expr(3), k})}, {{"axis", int64_t(2)}});
    v = op(ctx, "concat", {make_tuple({ctx.expr(4), v})}, {{"axis", int64_t(2)}});
  }
  // Keys below each batch's seqlens_k + 1, as key lengths (B,).
  Expr lengths = add(ctx, cast_to(ctx, ctx.expr(5), kI64), ctx.scalar(kI64, 1));
  std::optional<Expr> bias = optional_input(ctx, 10);
  Expr out = attend(ctx, q, k, v, past_len, lengths, bias, /*causal=*/true, ctx.attr_int("local_window_size", -1));
  return {expr_value(out), expr_value(k), expr_value(v)};
}

// ---- com.microsoft: EmbedLayerNormalization -------------------------------------------------

// (input_ids, [segment_ids], word_embedding, position_embedding,
// [segment_embedding], gamma, beta, [mask], [position_ids]) -> (output,
// mask_index, embedding_sum): the embeddings' sum (positions 0..S-1 unless
// position_ids, (B, S) or (1, S), are given) layer-normalised over the
// hidden dim; mask_index counts each row's mask elements equal to 1 (zeros
// without a mask), as ONNX Runtime's CPU kernel does.
std::vector<Value> convert_embed_layer_norm(Context& ctx) {
  Dims ids = ctx.bound_shape(0);
  if (ids.size() != 2) ctx.fail("input_ids must be (batch, sequence), got rank ", ids.size());
  Expr e = op(ctx, "take", {ctx.expr(2), ctx.expr(0)}, {{"axis", int64_t(0)}});
  Expr positions = ctx.has_input(8)
                       ? ctx.expr(8)
                       : iota(ctx, ids[1]);
  e = add(ctx, e, op(ctx, "take", {ctx.expr(3), positions}, {{"axis", int64_t(0)}}));
  if (ctx.has_input(1) != ctx.has_input(4)) ctx.fail("segment_ids and segment_embedding come together");
  if (ctx.has_input(1)) e = add(ctx, e, op(ctx, "take", {ctx.expr(4), ctx.expr(1)}, {{"axis", int64_t(0)}}));
  Normalized n = normalize(ctx, e, -1, false, ctx.attr_float("epsilon", 1e-12f), ctx.expr(5), ctx.expr(6));
  const DataType i32 = DataType::i32();
  Expr mask_index;
  if (ctx.has_input(7)) {
    Expr ones = op(ctx, "equal", {ctx.expr(7), ctx.scalar(ctx.dtype(7), 1)});
    mask_index = op(ctx, "sum", {cast_to(ctx, ones, i32)}, {{"axis", Ints{1}}});
  } else {
    mask_index = op(ctx, "zeros", {make_shape({ids[0]})}, {{"dtype", i32}});
  }
  return {expr_value(n.y), expr_value(mask_index), expr_value(e)};
}

// ---- com.microsoft: RotaryEmbedding ------------------------------------------------------------


// RotaryEmbedding (input, position_ids, cos_cache, sin_cache; interleaved,
// num_heads, rotary_embedding_dim): input (B, S, N H) or (B, N, S, H),
// rotated per head (rotate_heads); position_ids (B, S), or one offset:
// positions offset .. offset + S - 1.
std::vector<Value> convert_rotary_embedding(Context& ctx) {
  Dims xs = ctx.bound_shape(0);
  int64_t half = const_dim(ctx, ctx.bound_shape(2, 2)[1], "cos_cache width");
  int64_t num_heads = ctx.attr_int("num_heads", 0), rot_attr = ctx.attr_int("rotary_embedding_dim", 0);
  if (rot_attr > 0 && rot_attr != 2 * half) ctx.fail("rotary_embedding_dim ", rot_attr, " is not cos_cache's width x 2");
  Expr x = ctx.expr(0);
  SymExpr seq;
  if (xs.size() == 3) {  // (B, S, N * H) -> (B, S, N, H)
    int64_t hidden = const_dim(ctx, xs[2], "hidden size");
    if (rot_attr > 0 && num_heads <= 0) ctx.fail("num_heads is required with rotary_embedding_dim");
    int64_t head = rot_attr == 0 ? 2 * half : hidden / num_heads;
    if (head <= 0 || hidden % head) ctx.fail("hidden size ", hidden, " is no multiple of the head size ", head);
    x = reshape(ctx, x, {xs[0], xs[1], SymExpr(hidden / head), SymExpr(head)});
    seq = xs[1];
  } else if (xs.size() == 4) {  // (B, N, S, H) -> (B, S, N, H)
    x = permute(ctx, x, {0, 2, 1, 3});
    seq = xs[2];
  } else {
    ctx.fail("input must be (batch, sequence, hidden) or (batch, heads, sequence, head), got rank ", xs.size());
  }
  Dims ps = ctx.bound_shape(1);
  Expr pos = ctx.expr(1);
  if (ps.size() <= 1) {  // one offset
    Expr offset = ps.empty() ? pos : reshape(ctx, pos, {});
    pos = reshape(ctx, add(ctx, iota(ctx, seq), cast_to(ctx, offset, kI64)), {SymExpr(1), seq});
  }
  Angles a = gather_angles(ctx, pos, ctx.expr(2), ctx.expr(3));
  Expr y = rotate_heads(ctx, x, a.cos, a.sin, a.rot, ctx.attr_int("interleaved", 0) != 0);
  return {expr_value(xs.size() == 3 ? reshape(ctx, y, xs) : permute(ctx, y, {0, 2, 1, 3}))};
}

// ---- com.microsoft: MatMulNBits ----------------------------------------------------------------

// The 4-bit fields of a uint8 tensor (..., n) as (..., 2 n) integers,
// low nibble first.
Expr nibbles(Context& ctx, Expr packed) {
  Dims d = dims_of(ctx, packed);
  Expr b = cast_to(ctx, packed, DataType::i32());
  Expr lo = op(ctx, "bitwise_and", {b, ctx.scalar(DataType::i32(), 15)});
  Expr hi = op(ctx, "right_shift", {b, ctx.scalar(DataType::i32(), 4)});
  Dims out(d.begin(), d.end() - 1);
  out.push_back(simplify(ctx, d.back() * 2));
  auto col = [&](Expr e) { return op(ctx, "expand_dims", {e}, {{"axis", Ints{-1}}}); };
  Expr pairs = op(ctx, "concat", {make_tuple({col(lo), col(hi)})}, {{"axis", int64_t(-1)}});
  return reshape(ctx, pairs, out);
}

// (A, B, scales, [zero_points], [g_idx], [bias]; K, N, bits, block_size):
// A (..., K) times the 4-bit weight W (N, K) transposed, plus bias. B holds
// W as (N, blocks, block_size / 2) bytes, low nibble first; W[n, k] =
// (q[n, k] - zero[n, k / block_size]) * scale[n, k / block_size], the zero
// point 8 unless given (packed 4-bit like B, or in the scales' dtype).
std::vector<Value> convert_matmul_nbits(Context& ctx) {
  int64_t K = ctx.attr_int("K", 0), N = ctx.attr_int("N", 0), bits = ctx.attr_int("bits", 4);
  int64_t bs = ctx.attr_int("block_size", 0);
  if (bits != 4) ctx.unsupported(cat("bits=", bits));
  if (K <= 0 || N <= 0 || bs < 16 || (bs & (bs - 1))) ctx.fail("K, N and block_size (a power of 2, >= 16) are required");
  if (ctx.has_input(4)) ctx.unsupported("g_idx");
  int64_t blocks = (K + bs - 1) / bs;
  DataType dt = ctx.dtype(0);
  Expr q = cast_to(ctx, reshape(ctx, nibbles(ctx, ctx.expr(1)), {N, blocks, bs}), dt);
  Expr scale = reshape(ctx, cast_to(ctx, ctx.expr(2), dt), {N, blocks, 1});
  Expr zero;
  if (!ctx.has_input(3)) {
    zero = ctx.scalar(dt, 8);
  } else if (ctx.dtype(3) == DataType::u(8)) {
    Expr z = nibbles(ctx, reshape(ctx, ctx.expr(3), {N, (blocks + 1) / 2}));
    zero = reshape(ctx, cast_to(ctx, slice_axis(ctx, z, 1, 0, blocks), dt), {N, blocks, 1});
  } else {
    zero = reshape(ctx, cast_to(ctx, ctx.expr(3), dt), {N, blocks, 1});
  }
  Expr w = mul(ctx, op(ctx, "subtract", {q, zero}), scale);
  w = reshape(ctx, w, {N, blocks * bs});
  if (blocks * bs != K) w = slice_axis(ctx, w, 1, 0, K);
  Expr y = op(ctx, "matmul", {ctx.expr(0), permute(ctx, w, {1, 0})});
  if (ctx.has_input(5)) y = add(ctx, y, ctx.expr(5));
  return {expr_value(y)};
}

}  // namespace

void register_contrib_converters(ConverterRegistry& r) {
  const std::string ms = "com.microsoft";
  r.add(ms, "Gelu", 1, convert_gelu);
  r.add(ms, "BiasGelu", 1, convert_bias_gelu);
  r.add(ms, "FastGelu", 1, convert_fast_gelu);
  r.add(ms, "GemmFastGelu", 1, convert_gemm_fast_gelu);
  r.add(ms, "BiasAdd", 1, convert_bias_add);
  r.add(ms, "BiasSoftmax", 1, convert_bias_softmax);
  r.add(ms, "EmbedLayerNormalization", 1, convert_embed_layer_norm);
  r.add(ms, "RotaryEmbedding", 1, convert_rotary_embedding);
  r.add(ms, "MatMulNBits", 1, convert_matmul_nbits);
  r.add(ms, "QuickGelu", 1, convert_quick_gelu);
  r.add(ms, "FusedMatMul", 1, convert_fused_matmul);
  r.add(ms, "LayerNormalization", 1, layer_norm(false));
  r.add(ms, "SimplifiedLayerNormalization", 1, layer_norm(true));
  // ONNX Runtime registers it in the ONNX domain, where its optimizer and
  // generate() tooling write it (an RMS norm of Llama-style models).
  r.add("", "SimplifiedLayerNormalization", 1, layer_norm(true));
  r.add(ms, "SkipLayerNormalization", 1, skip_layer_norm(false));
  r.add(ms, "SkipSimplifiedLayerNormalization", 1, skip_layer_norm(true));
  r.add(ms, "Attention", 1, convert_ms_attention);
  r.add(ms, "MultiHeadAttention", 1, convert_multi_head_attention);
  r.add(ms, "GroupQueryAttention", 1, convert_group_query_attention);
}

}  // namespace relax::onnx_fe
