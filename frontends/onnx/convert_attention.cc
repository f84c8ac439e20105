// ONNX converters: Attention (opsets 23, 24), RotaryEmbedding, LinearAttention
// (opset 27) and FlexAttention (ai.onnx.preview 1). All but LinearAttention
// (the graph op linear_attention, a scan over time) are composed from matmul,
// softmax, where and elementwise ops; FlexAttention inlines its score_mod /
// prob_mod subgraphs.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include "frontends/onnx/nn_util.h"
#include "frontends/onnx/onnx_proto.h"

namespace relax::onnx_fe {
namespace {

using namespace nn;

const DataType kF32 = DataType::f32();

// ---- Attention (opsets 23, 24) ----------------------------------------------------------

// Repeats each of the kv heads `rep` times in place: (B, H, L, D) ->
// (B, H * rep, L, D), head h of the result being head h / rep of x.
Expr repeat_heads(Context& ctx, Expr x, int64_t rep) {
  if (rep == 1) return x;
  Dims d = dims_of(ctx, x);
  Expr e = op(ctx, "expand_dims", {x}, {{"axis", Ints{2}}});
  e = op(ctx, "broadcast_to", {e, make_shape({d[0], d[1], SymExpr(rep), d[2], d[3]})});
  return reshape(ctx, e, {d[0], ctx.ana().simplify(d[1] * rep), d[2], d[3]});
}

// An additive (q, kv) constant: 0 where key j <= query i + offset, else -inf.
Expr causal_bias(Context& ctx, DataType dtype, int64_t q, int64_t kv, int64_t offset) {
  std::vector<double> v(size_t(q * kv));
  for (int64_t i = 0; i < q; ++i)
    for (int64_t j = 0; j < kv; ++j) v[size_t(i * kv + j)] = j <= i + offset ? 0.0 : -kInf;
  return ctx.constant(HostTensor::from_floats(dtype, {q, kv}, v), "causal");
}

// Per-batch key masks from nonpad_kv_seqlen (B,): 0 / -inf of shape
// (B, 1, q, kv) (causal, frontier j <= i + len - q) or (B, 1, 1, kv).
Expr nonpad_bias(Context& ctx, DataType dtype, Expr lens, int64_t q, int64_t kv, bool causal) {
  Ints js = range_ints(0, kv), is = range_ints(0, q);
  Expr j = ctx.constant(HostTensor::from_ints(DataType::i64(), {1, 1, kv}, js), "key_index");
  Expr len = op(ctx, "astype", {lens}, {{"dtype", DataType::i64()}});
  len = reshape(ctx, len, {dims_of(ctx, lens)[0], SymExpr(1), SymExpr(1)});
  Expr limit = len;  // keys j < len
  if (causal) {
    Expr i = ctx.constant(HostTensor::from_ints(DataType::i64(), {1, q, 1}, is), "query_index");
    limit = op(ctx, "add", {op(ctx, "subtract", {i, ctx.scalar(DataType::i64(), double(q - 1))}), len});
  }
  Expr allowed = op(ctx, "less", {j, limit});
  Expr bias = op(ctx, "where", {allowed, scalar_like(ctx, dtype, 0), scalar_like(ctx, dtype, -kInf)});
  return op(ctx, "expand_dims", {bias}, {{"axis", Ints{1}}});
}

// The attention mask as an additive bias, padded with -inf to kv keys.
Expr mask_bias(Context& ctx, DataType dtype, int64_t kv) {
  Expr mask = ctx.expr(3);
  if (ctx.dtype(3) == DataType::boolean())
    mask = op(ctx, "where", {mask, scalar_like(ctx, dtype, 0), scalar_like(ctx, dtype, -kInf)});
  Dims md = dims_of(ctx, mask);
  int64_t have = const_dim(ctx, md.back(), "mask length");
  if (have >= kv) return mask;
  Ints pad_shape;
  for (size_t k = 0; k + 1 < md.size(); ++k) pad_shape.push_back(const_dim(ctx, md[k], "mask dim"));
  pad_shape.push_back(kv - have);
  int64_t n = std::accumulate(pad_shape.begin(), pad_shape.end(), int64_t(1), std::multiplies<>());
  Expr pad = ctx.constant(HostTensor::from_floats(dtype, pad_shape, std::vector<double>(size_t(n), -kInf)), "mask_pad");
  return concat(ctx, {mask, pad}, -1);
}

std::vector<Value> convert_attention(Context& ctx) {
  int nd = known_rank(ctx, 0);
  DataType dtype = ctx.dtype(0);
  Expr q = ctx.expr(0), k = ctx.expr(1), v = ctx.expr(2);
  if (nd == 3) {
    int64_t qh = ctx.attr_int("q_num_heads"), kvh = ctx.attr_int("kv_num_heads");
    if (qh < 1 || kvh < 1) ctx.fail("3-D inputs need q_num_heads and kv_num_heads");
    q = split_heads(ctx, q, qh), k = split_heads(ctx, k, kvh), v = split_heads(ctx, v, kvh);
  } else if (nd != 4) {
    ctx.fail("Q must have rank 3 or 4, got ", nd);
  }
  if (ctx.has_input(4)) k = concat(ctx, {ctx.expr(4), k}, 2);
  if (ctx.has_input(5)) v = concat(ctx, {ctx.expr(5), v}, 2);
  Expr present_k = k, present_v = v;
  Dims qd = dims_of(ctx, q), kd = dims_of(ctx, k);
  int64_t q_heads = const_dim(ctx, qd[1], "head count"), kv_heads = const_dim(ctx, kd[1], "head count");
  if (q_heads % kv_heads) ctx.fail(q_heads, " query heads are no multiple of ", kv_heads, " kv heads");
  k = repeat_heads(ctx, k, q_heads / kv_heads);
  v = repeat_heads(ctx, v, q_heads / kv_heads);

  double scale =
      ctx.has_attr("scale") ? ctx.attr_float("scale") : 1.0 / std::sqrt(double(const_dim(ctx, qd[3], "head size")));
  Expr kt = op(ctx, "permute_dims", {k}, {{"axes", Ints{0, 1, 3, 2}}});
  Expr scores = op(ctx, "multiply", {op(ctx, "matmul", {q, kt}), scalar_like(ctx, dtype, scale)});
  double softcap = ctx.attr_float("softcap", 0.0f);
  if (softcap > 0) {
    Expr t = op(ctx, "tanh", {op(ctx, "divide", {scores, scalar_like(ctx, dtype, softcap)})});
    scores = op(ctx, "multiply", {t, scalar_like(ctx, dtype, softcap)});
  }

  // The additive bias: mask, causal frontier and key padding.
  int64_t q_len = const_dim(ctx, qd[2], "query length"), kv_len = const_dim(ctx, kd[2], "key length");
  bool causal = ctx.attr_int("is_causal", 0) != 0, nonpad = ctx.has_input(6);
  std::optional<Expr> bias;
  auto add = [&](Expr b) { bias = bias ? op(ctx, "add", {*bias, b}) : b; };
  if (ctx.has_input(3)) add(mask_bias(ctx, dtype, kv_len));
  if (causal && !nonpad) {
    int64_t past = ctx.has_input(4) ? const_dim(ctx, dims_of(ctx, ctx.expr(4))[2], "past length") : 0;
    add(causal_bias(ctx, dtype, q_len, kv_len, past));
  }
  if (nonpad) add(nonpad_bias(ctx, dtype, ctx.expr(6), q_len, kv_len, causal));
  Expr with_bias = bias ? op(ctx, "add", {scores, *bias}) : scores;

  DataType soft_dtype = dtype;
  if (ctx.has_attr("softmax_precision")) {
    int64_t p = ctx.attr_int("softmax_precision");
    if (p == 1)
      soft_dtype = DataType::f32();
    else if (p == 10)
      soft_dtype = DataType::f16();
    else if (p == 11)
      soft_dtype = DataType::f(64);
    else if (p == 16)
      soft_dtype = DataType::bf16();
  }
  Expr probs = op(ctx, "softmax", {cast_to(ctx, with_bias, dtype, soft_dtype)}, {{"axis", int64_t(-1)}});
  probs = cast_to(ctx, probs, soft_dtype, dtype);
  if (bias) {  // rows whose keys are all masked attend to nothing
    Expr row_max = op(ctx, "max", {*bias}, {{"axis", Ints{-1}}, {"keepdims", true}});
    Expr dead = op(ctx, "equal", {row_max, scalar_like(ctx, dtype, -kInf)});
    probs = op(ctx, "where", {dead, scalar_like(ctx, dtype, 0), probs});
  }
  Expr y = op(ctx, "matmul", {probs, v});
  if (nd == 3) y = merge_heads(ctx, y);
  int64_t mode = ctx.attr_int("qk_matmul_output_mode", 0);
  Expr qk = mode == 2 ? with_bias : mode == 3 ? probs : scores;
  return {expr_value(y), expr_value(present_k), expr_value(present_v), expr_value(qk)};
}

// ---- RotaryEmbedding (opset 23) -------------------------------------------------------

// The first rotary_embedding_dim features of each head rotated by the cached
// angles (rotate_heads), gathered at position_ids when given.
std::vector<Value> convert_rotary(Context& ctx) {
  int nd = known_rank(ctx, 0);
  Dims xs = ctx.bound_shape(0);
  Expr x = ctx.expr(0);
  Dims bshd;  // (B, S, H, D)
  if (nd == 4) {
    x = op(ctx, "permute_dims", {x}, {{"axes", Ints{0, 2, 1, 3}}});
    bshd = {xs[0], xs[2], xs[1], xs[3]};
  } else if (nd == 3) {
    int64_t heads = ctx.attr_int("num_heads");
    if (heads < 1) ctx.fail("3-D input needs num_heads");
    bshd = {xs[0], xs[1], SymExpr(heads), ctx.ana().simplify(floordiv(xs[2], SymExpr(heads)))};
    x = reshape(ctx, x, bshd);
  } else {
    ctx.fail("input must have rank 3 or 4, got ", nd);
  }
  SymExpr rot = bshd[3];
  if (int64_t r = ctx.attr_int("rotary_embedding_dim", 0)) rot = SymExpr(r);
  Expr cos = ctx.expr(1), sin = ctx.expr(2);
  if (ctx.has_input(3)) {
    cos = op(ctx, "take", {cos, ctx.expr(3)}, {{"axis", int64_t(0)}});
    sin = op(ctx, "take", {sin, ctx.expr(3)}, {{"axis", int64_t(0)}});
  }
  Expr rotated = rotate_heads(ctx, x, cos, sin, rot, ctx.attr_int("interleaved", 0) != 0);
  Expr y = nd == 4 ? op(ctx, "permute_dims", {rotated}, {{"axes", Ints{0, 2, 1, 3}}}) : reshape(ctx, rotated, xs);
  return {expr_value(y)};
}

// ---- LinearAttention (opset 27) -------------------------------------------------------

// (B, T, Hkv) per-head decay or beta -> (B, Hkv, T, 1); (B, T, Hkv * dk)
// per-key-dim decay -> (B, Hkv, T, dk).
Expr unpack_gate(Context& ctx, Expr g, int64_t heads) {
  Dims d = dims_of(ctx, g);
  if (d.size() != 3) ctx.fail("decay and beta must have rank 3");
  if (ctx.ana().can_prove_equal(d[2], SymExpr(heads))) {
    return permute(ctx, reshape(ctx, g, {d[0], d[1], d[2], SymExpr(1)}), {0, 2, 1, 3});
  }
  return split_heads(ctx, g, heads);
}

std::vector<Value> convert_linear_attention(Context& ctx) {
  int64_t qh = ctx.attr_int("q_num_heads"), kvh = ctx.attr_int("kv_num_heads");
  if (qh < 1 || kvh < 1 || qh % kvh)
    ctx.fail("q_num_heads (", qh, ") must be a positive multiple of kv_num_heads (", kvh, ")");
  std::string rule = ctx.attr_string("update_rule", "gated_delta");
  bool gated = rule == "gated" || rule == "gated_delta", delta = rule == "delta" || rule == "gated_delta";
  if (!gated && !delta && rule != "linear") ctx.fail("unknown update_rule '", rule, "'");
  if (gated != ctx.has_input(4)) ctx.fail("update_rule '", rule, gated ? "' needs" : "' forbids", " the decay input");
  if (delta != ctx.has_input(5)) ctx.fail("update_rule '", rule, delta ? "' needs" : "' forbids", " the beta input");
  // The recurrence runs in f32, as ONNX's reference does.
  DataType dtype = ctx.dtype(0);
  auto unpack = [&](size_t i, int64_t heads) { return split_heads(ctx, cast_to(ctx, ctx.expr(i), kF32), heads); };
  Expr q = unpack(0, qh), k = unpack(1, kvh), v = unpack(2, kvh);
  const Dims &kd = dims_of(ctx, k), &vd = dims_of(ctx, v);
  DataType state_dtype = ctx.has_input(3) ? ctx.dtype(3) : dtype;
  Expr state = ctx.has_input(3) ? cast_to(ctx, ctx.expr(3), kF32)
                                : op(ctx, "zeros", {make_shape({kd[0], kd[1], kd[3], vd[3]})}, {{"dtype", kF32}});
  std::vector<Expr> args = {q, k, v, state};
  if (gated) args.push_back(unpack_gate(ctx, cast_to(ctx, ctx.expr(4), kF32), kvh));
  if (delta) {
    Expr beta = cast_to(ctx, ctx.expr(5), kF32);
    const Dims& bd = dims_of(ctx, beta);
    if (bd.size() != 3) ctx.fail("beta must have rank 3");
    args.push_back(permute(ctx, reshape(ctx, beta, {bd[0], bd[1], bd[2], SymExpr(1)}), {0, 2, 1, 3}));
  }
  Attrs attrs{{"update_rule", rule}, {"scale", double(ctx.attr_float("scale", 0.0f))}};
  Expr t = ctx.emit(make_op_call("linear_attention", args, attrs), "linear_attention");
  Expr out = cast_to(ctx, merge_heads(ctx, ctx.emit(make_tuple_get_item(t, 0))), dtype);
  Expr present = cast_to(ctx, ctx.emit(make_tuple_get_item(t, 1)), state_dtype);
  return {expr_value(out), expr_value(present)};
}

// ---- FlexAttention (ai.onnx.preview 1) ----------------------------------------------

// The dtype of an ONNX element-type attribute value (softmax_precision, ...).
DataType onnx_dtype(Context& ctx, int64_t type, const char* what) {
  auto d = onnx_fe::dtype_of(int(type));
  if (!d) ctx.unsupported(cat(what, " of type ", onnx_type_name(int(type))));
  return *d;
}

// Applies a one-input, one-output modifier subgraph to `x`, inlined: its
// parameter is bound to x, followed by its body.
Expr apply_modifier(Context& ctx, const onnx::GraphProto& g, Expr x) {
  if (g.input_size() != 1 || g.output_size() != 1) ctx.fail("a modifier subgraph must have one input and one output");
  Expr fn = ctx.import_subgraph(g, {sinfo_of(x)});
  const auto* f = as<FunctionNode>(fn);
  RELAX_CHECK(f && f->params.size() == 1, "a modifier subgraph imports as a one-parameter function");
  std::vector<BindingBlock> blocks = {BindingBlock{false, {Binding{f->params[0], x, nullptr}}}};
  blocks.insert(blocks.end(), f->body->blocks.begin(), f->body->blocks.end());
  return ctx.emit(make_seq(std::move(blocks), f->body->body));
}

// Y = prob_mod(softmax(score_mod((Q sqrt(s)) (K sqrt(s))^T))) V, K and V heads
// repeated for grouped queries; the softmax (and the product with V) in the
// softmax precision (f32 for f16 / bf16 / f32 inputs, else the input's).
std::vector<Value> convert_flex_attention(Context& ctx) {
  if (ctx.ndim(0) != 4 || ctx.ndim(1) != 4 || ctx.ndim(2) != 4) ctx.fail("Q, K and V must have rank 4");
  DataType dtype = ctx.dtype(0);
  Expr q = ctx.expr(0), k = ctx.expr(1), v = ctx.expr(2);
  const Dims &qd = dims_of(ctx, q), &kd = dims_of(ctx, k);
  int64_t q_heads = const_dim(ctx, qd[1], "head count"), kv_heads = const_dim(ctx, kd[1], "head count");
  if (kv_heads < 1 || q_heads % kv_heads) ctx.fail(q_heads, " query heads are no multiple of ", kv_heads, " kv heads");
  double scale =
      ctx.has_attr("scale") ? ctx.attr_float("scale") : 1.0 / std::sqrt(double(const_dim(ctx, qd[3], "head size")));
  DataType soft = dtype.bits == 64 ? dtype : kF32;
  if (ctx.has_attr("softmax_precision")) soft = onnx_dtype(ctx, ctx.attr_int("softmax_precision"), "softmax_precision");
  k = repeat_heads(ctx, k, q_heads / kv_heads);
  v = repeat_heads(ctx, v, q_heads / kv_heads);
  Expr root = scalar_like(ctx, dtype, double(std::sqrt(float(scale))));
  Expr kt = permute(ctx, mul(ctx, k, root), {0, 1, 3, 2});
  Expr scores = cast_to(ctx, op(ctx, "matmul", {mul(ctx, q, root), kt}), soft);
  if (const onnx::GraphProto* g = ctx.attr_graph("score_mod")) scores = apply_modifier(ctx, *g, scores);
  Expr probs = op(ctx, "softmax", {scores}, {{"axis", int64_t(-1)}});
  if (const onnx::GraphProto* g = ctx.attr_graph("prob_mod")) probs = apply_modifier(ctx, *g, probs);
  Expr y = op(ctx, "matmul", {probs, cast_to(ctx, v, soft)});
  return {expr_value(cast_to(ctx, y, dtype))};
}

}  // namespace

Expr rotate_heads(Context& ctx, Expr x, Expr cos, Expr sin, SymExpr rot, bool interleaved) {
  Dims bshd = dims_of(ctx, x);
  if (bshd.size() != 4) ctx.fail("rotary: expected a (batch, sequence, heads, head size) operand");
  SymExpr half = ctx.ana().simplify(floordiv(rot, SymExpr(2)));
  cos = op(ctx, "expand_dims", {cos}, {{"axis", Ints{2}}});
  sin = op(ctx, "expand_dims", {sin}, {{"axis", Ints{2}}});
  bool partial = !ctx.ana().can_prove_equal(rot, bshd[3]);
  Expr x_rot = partial ? slice_axis(ctx, x, 3, 0, rot) : x;
  Expr x1, x2;
  if (interleaved) {
    Expr pairs = reshape(ctx, x_rot, {bshd[0], bshd[1], bshd[2], half, SymExpr(2)});
    x1 = op(ctx, "squeeze", {slice_axis(ctx, pairs, 4, 0, 1)}, {{"axis", Ints{4}}});
    x2 = op(ctx, "squeeze", {slice_axis(ctx, pairs, 4, 1, 2)}, {{"axis", Ints{4}}});
  } else {
    x1 = slice_axis(ctx, x_rot, 3, 0, half);
    x2 = slice_axis(ctx, x_rot, 3, half, rot);
  }
  Expr real = op(ctx, "subtract", {mul(ctx, cos, x1), mul(ctx, sin, x2)});
  Expr imag = add(ctx, mul(ctx, sin, x1), mul(ctx, cos, x2));
  Expr rotated;
  if (interleaved) {
    Expr pairs = op(ctx, "concat",
                    {make_tuple({op(ctx, "expand_dims", {real}, {{"axis", Ints{4}}}),
                                 op(ctx, "expand_dims", {imag}, {{"axis", Ints{4}}})})},
                    {{"axis", int64_t(4)}});
    rotated = reshape(ctx, pairs, {bshd[0], bshd[1], bshd[2], rot});
  } else {
    rotated = op(ctx, "concat", {make_tuple({real, imag})}, {{"axis", int64_t(3)}});
  }
  if (partial)
    rotated = op(ctx, "concat", {make_tuple({rotated, slice_axis(ctx, x, 3, rot, bshd[3])})}, {{"axis", int64_t(3)}});
  return rotated;
}

void register_attention_converters(ConverterRegistry& r) {
  r.add("Attention", 23, convert_attention);
  r.add("RotaryEmbedding", 23, convert_rotary);
  r.add("LinearAttention", 27, convert_linear_attention);
  r.add("ai.onnx.preview", "FlexAttention", 1, convert_flex_attention);
}

}  // namespace relax::onnx_fe
