// ONNX converters: newer and preview ops, the ai.onnx.ml domain, and the
// com.microsoft contrib ops of exported transformers.
//
// Everything but LinearAttention (the graph op linear_attention, a scan over
// time) is composed from existing graph ops:
//   SwiGLU, TensorScatter (scatter_elements), FlexAttention (matmul,
//   softmax, with its score_mod / prob_mod subgraphs inlined);
//   ai.onnx.ml Binarizer, ArrayFeatureExtractor (take), LabelEncoder (a
//   comparison against the keys), TreeEnsemble (every split evaluated at
//   once, leaves found by a matmul against the constant paths);
//   com.microsoft Gelu, BiasGelu, FastGelu, QuickGelu, FusedMatMul,
//   LayerNormalization, SimplifiedLayerNormalization, SkipLayerNormalization,
//   SkipSimplifiedLayerNormalization and Attention.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>

#include "frontends/onnx/context.h"
#include "frontends/onnx/onnx_proto.h"

namespace relax::onnx_fe {
namespace {

using Dims = std::vector<SymExpr>;
using Ints = std::vector<int64_t>;

const DataType kI64 = DataType::i64();
const DataType kF32 = DataType::f32();
const DataType kBool = DataType::boolean();

// ---- Small helpers -----------------------------------------------------------------

Expr op(Context& ctx, const std::string& name, std::vector<Expr> args, Attrs attrs = {}) {
  return ctx.emit_op(name, std::move(args), std::move(attrs));
}

Expr reshape(Context& ctx, Expr x, Dims shape) { return op(ctx, "reshape", {x, make_shape(std::move(shape))}); }
Expr permute(Context& ctx, Expr x, Ints axes) { return op(ctx, "permute_dims", {x}, {{"axes", axes}}); }
Expr mul(Context& ctx, Expr a, Expr b) { return op(ctx, "multiply", {a, b}); }
Expr add(Context& ctx, Expr a, Expr b) { return op(ctx, "add", {a, b}); }

DataType expr_dtype(const Expr& e) {
  const auto* t = as<TensorSI>(sinfo_of(e));
  return t ? t->dtype : DataType::void_();
}

Expr cast_to(Context& ctx, Expr x, DataType to) {
  if (to.is_void() || expr_dtype(x) == to) return x;
  return op(ctx, "astype", {x}, {{"dtype", to}});
}

// The float scalar `v` in `dtype` (f32 when unknown).
Expr fscalar(Context& ctx, DataType dtype, double v) { return ctx.scalar(dtype.is_void() ? kF32 : dtype, v); }

const Dims& dims_of(Context& ctx, const Expr& e) {
  const auto* t = as<TensorSI>(sinfo_of(e));
  if (!t || !t->shape) ctx.unsupported("an operand of unknown shape");
  return *t->shape;
}

SymExpr simplify(Context& ctx, const SymExpr& e) { return ctx.ana().simplify(e); }

int64_t const_dim(Context& ctx, const SymExpr& d, const char* what) {
  if (!d.is_const()) ctx.unsupported(cat("a symbolic ", what));
  return d.const_value();
}

// The scalar i64 tensor holding the dim `d` (known at run time only when
// symbolic).
Expr dim_scalar(Context& ctx, const SymExpr& d) {
  if (d.is_const()) return ctx.scalar(kI64, double(d.const_value()));
  return ctx.expr_of(sym_value({d}, true));
}

// 0, 1, ..., n - 1 as an i64 vector.
Expr iota(Context& ctx, const SymExpr& n) {
  if (n.is_const()) {
    Ints v(size_t(n.const_value()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = int64_t(i);
    return ctx.constant(HostTensor::from_ints(kI64, {n.const_value()}, v), "iota");
  }
  return op(ctx, "arange", {make_shape({n}), ctx.scalar(kI64, 0), ctx.scalar(kI64, 1)});
}

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

// (B, T, H * D) -> (B, H, T, D).
Expr split_heads(Context& ctx, Expr x, int64_t heads) {
  const Dims& d = dims_of(ctx, x);
  if (d.size() != 3) ctx.fail("expected a rank-3 (batch, sequence, heads * size) operand");
  Expr r = reshape(ctx, x, {d[0], d[1], SymExpr(heads), simplify(ctx, floordiv(d[2], SymExpr(heads)))});
  return permute(ctx, r, {0, 2, 1, 3});
}

// (B, H, T, D) -> (B, T, H * D).
Expr merge_heads(Context& ctx, Expr x) {
  Dims d = dims_of(ctx, x);
  return reshape(ctx, permute(ctx, x, {0, 2, 1, 3}), {d[0], d[2], simplify(ctx, d[1] * d[3])});
}

// Repeats each head `rep` times in place: (B, H, L, D) -> (B, H * rep, L, D),
// head h of the result being head h / rep of x.
Expr repeat_heads(Context& ctx, Expr x, int64_t rep) {
  if (rep == 1) return x;
  Dims d = dims_of(ctx, x);
  Expr e = op(ctx, "expand_dims", {x}, {{"axis", Ints{2}}});
  e = op(ctx, "broadcast_to", {e, make_shape({d[0], d[1], SymExpr(rep), d[2], d[3]})});
  return reshape(ctx, e, {d[0], simplify(ctx, d[1] * rep), d[2], d[3]});
}

// The dtype of an ONNX element-type attribute value (softmax_precision, ...).
DataType onnx_dtype(Context& ctx, int64_t type, const char* what) {
  auto d = onnx_fe::dtype_of(int(type));
  if (!d) ctx.unsupported(cat(what, " of type ", onnx_type_name(int(type))));
  return *d;
}

// ---- SwiGLU (opset 28) -----------------------------------------------------------

// Y = A * sigmoid(alpha * A) * B, A and B of one shape.
std::vector<Value> convert_swiglu(Context& ctx) {
  auto as = ctx.shape(0), bs = ctx.shape(1);
  if (as && bs) {
    bool differ = as->size() != bs->size();
    for (size_t i = 0; !differ && i < as->size(); ++i) differ = ctx.ana().can_prove_not_equal((*as)[i], (*bs)[i]);
    if (differ) ctx.fail("A and B must have the same shape");
  }
  double alpha = ctx.attr_float("alpha", 1.0f);
  Expr a = ctx.expr(0);
  Expr gate = alpha == 1.0 ? op(ctx, "silu", {a})
                           : mul(ctx, a, op(ctx, "sigmoid", {mul(ctx, a, fscalar(ctx, ctx.dtype(0), alpha))}));
  return {expr_value(mul(ctx, gate, ctx.expr(1)))};
}

// ---- TensorScatter (opset 24) ------------------------------------------------------

// present = past with update[p..., s, ...] written at past[p..., w[p0] + s, ...]
// (w = write_indices, zeros when absent; modulo the cache length when
// circular): one scatter_elements whose indices are w + s.
std::vector<Value> convert_tensor_scatter(Context& ctx) {
  auto cs = ctx.shape(0), us = ctx.shape(1);
  if (!cs || !us) ctx.unsupported("TensorScatter operands of unknown shape");
  int nd = int(cs->size());
  if (int(us->size()) != nd) ctx.fail("past_cache and update ranks differ");
  int64_t axis = ctx.attr_int("axis", -2);
  if (axis < 0) axis += nd;
  if (axis <= 0 || axis >= nd) ctx.fail("axis ", ctx.attr_int("axis", -2), " is out of range or the batch axis");
  std::string mode = ctx.attr_string("mode", "linear");
  if (mode != "linear" && mode != "circular") ctx.fail("unknown mode '", mode, "'");
  Dims at(size_t(nd), SymExpr(1));
  at[size_t(axis)] = (*us)[size_t(axis)];
  Expr pos = reshape(ctx, iota(ctx, (*us)[size_t(axis)]), at);
  if (ctx.has_input(2)) {
    Dims batch(size_t(nd), SymExpr(1));
    batch[0] = (*cs)[0];
    pos = add(ctx, pos, reshape(ctx, cast_to(ctx, ctx.expr(2), kI64), batch));
  }
  if (mode == "circular") pos = op(ctx, "mod", {pos, dim_scalar(ctx, (*cs)[size_t(axis)])});
  Expr idx = op(ctx, "broadcast_to", {pos, make_shape(*us)});
  return {expr_value(op(ctx, "scatter_elements", {ctx.expr(0), idx, ctx.expr(1)}, {{"axis", axis}}))};
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
  Expr root = fscalar(ctx, dtype, double(std::sqrt(float(scale))));
  Expr kt = permute(ctx, mul(ctx, k, root), {0, 1, 3, 2});
  Expr scores = cast_to(ctx, op(ctx, "matmul", {mul(ctx, q, root), kt}), soft);
  if (const onnx::GraphProto* g = ctx.attr_graph("score_mod")) scores = apply_modifier(ctx, *g, scores);
  Expr probs = op(ctx, "softmax", {scores}, {{"axis", int64_t(-1)}});
  if (const onnx::GraphProto* g = ctx.attr_graph("prob_mod")) probs = apply_modifier(ctx, *g, probs);
  Expr y = op(ctx, "matmul", {probs, cast_to(ctx, v, soft)});
  return {expr_value(cast_to(ctx, y, dtype))};
}

// ---- ai.onnx.ml: Binarizer, ArrayFeatureExtractor, LabelEncoder ---------------------

std::vector<Value> convert_binarizer(Context& ctx) {
  Expr above = op(ctx, "greater", {ctx.expr(0), fscalar(ctx, ctx.dtype(0), ctx.attr_float("threshold", 0.0f))});
  return {expr_value(cast_to(ctx, above, ctx.dtype(0)))};
}

// Z = X[..., indices.flatten()]; a rank-1 X gives a (1, n) result.
std::vector<Value> convert_array_feature_extractor(Context& ctx) {
  Dims xs = dims_of(ctx, ctx.expr(0)), is = dims_of(ctx, ctx.expr(1));
  if (xs.empty()) ctx.fail("X must have rank >= 1");
  SymExpr n(1);
  for (const SymExpr& d : is) n = simplify(ctx, n * d);
  SymExpr last = xs.back();
  Expr idx = reshape(ctx, cast_to(ctx, ctx.expr(1), kI64), {n});
  auto known = ctx.const_ints(1);
  bool nonneg = known && std::all_of(known->begin(), known->end(), [](int64_t i) { return i >= 0; });
  if (!nonneg) {  // negative indices count from the end
    Expr zero = ctx.scalar(kI64, 0);
    idx = op(ctx, "where", {op(ctx, "less", {idx, zero}), add(ctx, idx, dim_scalar(ctx, last)), idx});
  }
  Expr z = op(ctx, "take", {ctx.expr(0), idx}, {{"axis", int64_t(xs.size()) - 1}});
  if (xs.size() == 1) z = reshape(ctx, z, {SymExpr(1), n});
  return {expr_value(z)};
}

// A LabelEncoder key or value list: from keys_<kind>s / values_<kind>s or the
// <prefix>_tensor attribute. String lists are unsupported (no string tensors).
std::optional<HostTensor> encoder_list(Context& ctx, const std::string& prefix) {
  if (ctx.has_attr(prefix + "_strings")) ctx.unsupported("LabelEncoder with string keys or values");
  if (ctx.has_attr(prefix + "_int64s")) {
    Ints v = ctx.attr_ints(prefix + "_int64s");
    return HostTensor::from_ints(kI64, {int64_t(v.size())}, v);
  }
  if (ctx.has_attr(prefix + "_floats")) {
    std::vector<float> f = ctx.attr_floats(prefix + "_floats");
    return HostTensor::from_floats(kF32, {int64_t(f.size())}, std::vector<double>(f.begin(), f.end()));
  }
  if (const onnx::AttributeProto* a = ctx.attr(prefix + "_tensor")) {
    if (a->t().data_type() == kString) ctx.unsupported("LabelEncoder with string keys or values");
    return ctx.attr_tensor(prefix + "_tensor");
  }
  return std::nullopt;
}

// Y[i] = values[j] for the last j with keys[j] == X[i] (NaN keys match NaN),
// else the default.
std::vector<Value> convert_label_encoder(Context& ctx) {
  std::optional<HostTensor> keys = encoder_list(ctx, "keys"), values = encoder_list(ctx, "values");
  if (!keys || !values) ctx.fail("needs keys and values");
  if (keys->numel() != values->numel()) ctx.fail(keys->numel(), " keys for ", values->numel(), " values");
  DataType xt = ctx.dtype(0), vt = values->dtype;
  bool float_keys = keys->dtype.is_float();
  auto kf = keys->to_floats(), vf = values->to_floats();
  auto ki = keys->to_ints(), vi = values->to_ints();
  // Later duplicates win: keep each key's last value.
  std::vector<double> key_d, val_d;
  std::vector<bool> key_nan;
  for (int64_t j = keys->numel() - 1; j >= 0; --j) {
    double kv = float_keys ? (*kf)[size_t(j)] : double((*ki)[size_t(j)]);
    bool nan = std::isnan(kv), seen = false;
    for (size_t m = 0; m < key_d.size(); ++m) seen |= nan ? bool(key_nan[m]) : key_d[m] == kv;
    if (seen) continue;
    key_d.push_back(kv);
    key_nan.push_back(nan);
    val_d.push_back(vt.is_float() ? (*vf)[size_t(j)] : double((*vi)[size_t(j)]));
  }
  double def = vt.is_float() ? -0.0 : -1.0;
  if (vt.is_float() && ctx.has_attr("default_float")) def = ctx.attr_float("default_float");
  if (!vt.is_float() && ctx.has_attr("default_int64")) def = double(ctx.attr_int("default_int64"));
  if (auto d = ctx.attr_tensor("default_tensor")) {
    auto f = d->to_floats();
    if (!f || f->empty()) ctx.fail("default_tensor must hold one number");
    def = (*f)[0];
  }
  int64_t n = int64_t(key_d.size());
  auto make = [&](DataType t, const std::vector<double>& v, const char* hint) {
    if (t.is_float()) return ctx.constant(HostTensor::from_floats(t, {n}, v), hint);
    return ctx.constant(HostTensor::from_ints(t, {n}, Ints(v.begin(), v.end())), hint);
  };
  Expr xe = op(ctx, "expand_dims", {ctx.expr(0)}, {{"axis", Ints{-1}}});
  Expr match = op(ctx, "equal", {xe, make(xt, key_d, "keys")});
  if (xt.is_float() && std::count(key_nan.begin(), key_nan.end(), true)) {
    std::vector<int64_t> nan_flags(key_nan.begin(), key_nan.end());
    Expr nan_keys = ctx.constant(HostTensor::from_ints(kBool, {n}, nan_flags), "nan_keys");
    match = op(ctx, "logical_or", {match, op(ctx, "logical_and", {op(ctx, "isnan", {xe}), nan_keys})});
  }
  Expr hits = cast_to(ctx, match, DataType::i32());
  Expr which = op(ctx, "argmax", {hits}, {{"axis", int64_t(-1)}});
  Expr found = op(ctx, "greater", {op(ctx, "max", {hits}, {{"axis", Ints{-1}}}), ctx.scalar(DataType::i32(), 0)});
  Expr picked = op(ctx, "take", {make(vt, val_d, "values"), which}, {{"axis", int64_t(0)}});
  return {expr_value(op(ctx, "where", {found, picked, ctx.scalar(vt, def)}))};
}

// ---- ai.onnx.ml: TreeEnsemble (ai.onnx.ml 5) ---------------------------------------------
//
// Every split node is evaluated for every row at once, giving a (N, M)
// decision matrix D. A leaf is reached when all the decisions on its path
// go its way: with A[m, l] = +1 (-1) when leaf l's path takes the true
// (false) branch at node m, the row reaches l iff (D A)[l] equals the number
// of true branches on the path. Reached leaves are then summed (or averaged,
// or min/max-ed) per target.

enum TreeMode : int64_t { kLeq = 0, kLt, kGte, kGt, kEq, kNeq, kMember };

struct TreeAttrs {
  std::vector<double> splits;
  Ints features, modes, true_ids, false_ids, true_leaf, false_leaf, missing_true;
  std::vector<std::vector<double>> sets;  // per node: the members (kMember)
};

// A leaf reached through the path of (node, branch) decisions.
struct LeafPath {
  int64_t leaf;
  std::vector<std::pair<int64_t, bool>> path;
};

std::vector<double> floats_attr(Context& ctx, const std::string& name) {
  std::optional<HostTensor> t = ctx.attr_tensor(name);
  if (!t) return {};
  auto v = t->to_floats();
  if (!v) ctx.fail(name, " must hold floats");
  return *v;
}

TreeAttrs read_tree_attrs(Context& ctx) {
  TreeAttrs a;
  a.splits = floats_attr(ctx, "nodes_splits");
  a.features = ctx.attr_ints("nodes_featureids");
  std::optional<HostTensor> modes = ctx.attr_tensor("nodes_modes");
  if (modes) a.modes = modes->to_ints().value_or(Ints{});
  a.true_ids = ctx.attr_ints("nodes_truenodeids");
  a.false_ids = ctx.attr_ints("nodes_falsenodeids");
  a.true_leaf = ctx.attr_ints("nodes_trueleafs");
  a.false_leaf = ctx.attr_ints("nodes_falseleafs");
  size_t n = a.features.size();
  a.missing_true = ctx.attr_ints("nodes_missing_value_tracks_true", Ints(n, 0));
  for (const Ints* v : {&a.modes, &a.true_ids, &a.false_ids, &a.true_leaf, &a.false_leaf, &a.missing_true})
    if (v->size() != n) ctx.fail("the nodes_* attributes have different lengths");
  if (a.splits.size() != n) ctx.fail("nodes_splits has ", a.splits.size(), " values for ", n, " nodes");
  // Members of each set-membership node, in node order, separated by NaN.
  std::vector<double> members = floats_attr(ctx, "membership_values");
  a.sets.resize(n);
  size_t pos = 0;
  for (size_t i = 0; i < n; ++i) {
    if (a.modes[i] < kLeq || a.modes[i] > kMember) ctx.fail("unknown node mode ", a.modes[i]);
    if (a.modes[i] != kMember) continue;
    if (pos >= members.size()) ctx.fail("membership_values has too few sets");
    while (pos < members.size() && !std::isnan(members[pos])) a.sets[i].push_back(members[pos++]);
    ++pos;
  }
  return a;
}

// The leaves of every tree with their paths (a tree whose root's branches
// are the same leaf is that leaf).
std::vector<LeafPath> tree_leaves(Context& ctx, const TreeAttrs& a, const Ints& roots, int64_t num_leaves) {
  std::vector<LeafPath> out;
  int64_t n = int64_t(a.features.size());
  std::function<void(int64_t, std::vector<std::pair<int64_t, bool>>&)> walk;
  walk = [&](int64_t node, std::vector<std::pair<int64_t, bool>>& path) {
    if (node < 0 || node >= n) ctx.fail("node id ", node, " out of range");
    if (int64_t(path.size()) > n) ctx.fail("the trees have a cycle");
    for (bool branch : {true, false}) {
      int64_t next = branch ? a.true_ids[size_t(node)] : a.false_ids[size_t(node)];
      bool leaf = (branch ? a.true_leaf[size_t(node)] : a.false_leaf[size_t(node)]) != 0;
      path.push_back({node, branch});
      if (leaf) {
        if (next < 0 || next >= num_leaves) ctx.fail("leaf id ", next, " out of range");
        out.push_back({next, path});
      } else {
        walk(next, path);
      }
      path.pop_back();
    }
  };
  for (int64_t r : roots) {
    if (r < 0 || r >= n) ctx.fail("tree root ", r, " out of range");
    std::vector<std::pair<int64_t, bool>> path;
    size_t i = size_t(r);
    if (a.true_leaf[i] && a.false_leaf[i] && a.true_ids[i] == a.false_ids[i]) {
      if (a.true_ids[i] < 0 || a.true_ids[i] >= num_leaves) ctx.fail("leaf id out of range");
      out.push_back({a.true_ids[i], {}});
    } else {
      walk(r, path);
    }
  }
  return out;
}

// The (N, m) bool decisions of `nodes` (all of one mode) on the rows of x.
Expr node_decisions(Context& ctx, const TreeAttrs& a, Expr x, DataType dt, int64_t mode, const Ints& nodes) {
  int64_t m = int64_t(nodes.size());
  Ints feats;
  std::vector<int64_t> missing;
  for (int64_t i : nodes) feats.push_back(a.features[size_t(i)]), missing.push_back(a.missing_true[size_t(i)] != 0);
  Expr xf =
      op(ctx, "take", {x, ctx.constant(HostTensor::from_ints(kI64, {m}, feats), "features")}, {{"axis", int64_t(1)}});
  Expr d;
  if (mode == kMember) {
    size_t width = 1;
    for (int64_t i : nodes) width = std::max(width, a.sets[size_t(i)].size());
    std::vector<double> sets(size_t(m) * width, std::nan(""));  // NaN never matches
    for (size_t j = 0; j < nodes.size(); ++j) {
      const auto& s = a.sets[size_t(nodes[j])];
      std::copy(s.begin(), s.end(), sets.begin() + long(j * width));
    }
    Expr table = ctx.constant(HostTensor::from_floats(dt, {m, int64_t(width)}, sets), "members");
    Expr eq = op(ctx, "equal", {op(ctx, "expand_dims", {xf}, {{"axis", Ints{2}}}), table});
    Expr hits = op(ctx, "max", {cast_to(ctx, eq, DataType::i32())}, {{"axis", Ints{2}}});
    d = op(ctx, "greater", {hits, ctx.scalar(DataType::i32(), 0)});
  } else {
    static const char* kCompare[] = {"less_equal", "less", "greater_equal", "greater", "equal", "not_equal"};
    std::vector<double> splits;
    for (int64_t i : nodes) splits.push_back(a.splits[size_t(i)]);
    d = op(ctx, kCompare[mode], {xf, ctx.constant(HostTensor::from_floats(dt, {m}, splits), "splits")});
  }
  if (std::count(missing.begin(), missing.end(), 1)) {
    Expr tracks = ctx.constant(HostTensor::from_ints(kBool, {m}, missing), "missing_tracks_true");
    d = op(ctx, "logical_or", {d, op(ctx, "logical_and", {op(ctx, "isnan", {xf}), tracks})});
  }
  return d;
}

std::vector<Value> convert_tree_ensemble(Context& ctx) {
  if (ctx.ndim(0) != 2) ctx.fail("X must have rank 2");
  DataType dt = ctx.dtype(0);
  if (!dt.is_float()) ctx.unsupported(cat("TreeEnsemble on ", dt.str()));
  Expr x = ctx.expr(0);
  TreeAttrs a = read_tree_attrs(ctx);
  std::vector<double> weights = floats_attr(ctx, "leaf_weights");
  Ints targets = ctx.attr_ints("leaf_targetids"), roots = ctx.attr_ints("tree_roots");
  int64_t n_targets = ctx.attr_int("n_targets", 0), agg = ctx.attr_int("aggregate_function", 1);
  int64_t post = ctx.attr_int("post_transform", 0);
  if (targets.size() != weights.size()) ctx.fail("leaf_targetids and leaf_weights differ in length");
  if (n_targets < 1 || roots.empty()) ctx.fail("needs n_targets and tree_roots");
  for (int64_t t : targets)
    if (t < 0 || t >= n_targets) ctx.fail("leaf target ", t, " out of range");
  if (post > 2) ctx.unsupported(cat("post_transform ", post));
  if (agg < 0 || agg > 3) ctx.fail("unknown aggregate_function ", agg);
  std::vector<LeafPath> leaves = tree_leaves(ctx, a, roots, int64_t(weights.size()));
  int64_t num = int64_t(leaves.size());

  // Columns of the decision matrix: the nodes used, grouped by mode.
  std::map<int64_t, Ints> by_mode;
  std::map<int64_t, bool> used;
  for (const LeafPath& l : leaves)
    for (auto [node, branch] : l.path) used[node] = true;
  for (auto [node, yes] : used) by_mode[a.modes[size_t(node)]].push_back(node);
  std::map<int64_t, int64_t> column;
  std::vector<Expr> parts;
  for (auto& [mode, nodes] : by_mode) {
    for (int64_t node : nodes) column[node] = int64_t(column.size());
    parts.push_back(node_decisions(ctx, a, x, dt, mode, nodes));
  }
  SymExpr rows = dims_of(ctx, x)[0];
  Expr reached;
  if (parts.empty()) {  // every tree is a single leaf
    reached = op(ctx, "ones", {make_shape({rows, SymExpr(num)})}, {{"dtype", kBool}});
  } else {
    Expr d = parts.size() == 1 ? parts[0] : op(ctx, "concat", {make_tuple(parts)}, {{"axis", int64_t(1)}});
    int64_t m = int64_t(column.size());
    std::vector<double> dirs(size_t(m * num), 0.0), need(size_t(num), 0.0);
    for (int64_t l = 0; l < num; ++l)
      for (auto [node, branch] : leaves[size_t(l)].path) {
        dirs[size_t(column[node] * num + l)] += branch ? 1.0 : -1.0;
        need[size_t(l)] += branch ? 1.0 : 0.0;
      }
    Expr score =
        op(ctx, "matmul", {cast_to(ctx, d, dt), ctx.constant(HostTensor::from_floats(dt, {m, num}, dirs), "paths")});
    reached = op(ctx, "equal", {score, ctx.constant(HostTensor::from_floats(dt, {num}, need), "path_lengths")});
  }
  // Aggregation per target.
  std::vector<double> table(size_t(num * n_targets), 0.0);
  Ints onehot(size_t(num * n_targets), 0);
  double share = agg == 0 ? 1.0 / double(roots.size()) : 1.0;
  for (int64_t l = 0; l < num; ++l) {
    int64_t leaf = leaves[size_t(l)].leaf, t = targets[size_t(leaf)];
    table[size_t(l * n_targets + t)] = weights[size_t(leaf)] * share;
    onehot[size_t(l * n_targets + t)] = 1;
  }
  Expr w = ctx.constant(HostTensor::from_floats(dt, {num, n_targets}, table), "leaf_weights");
  Expr y;
  if (agg <= 1) {
    y = op(ctx, "matmul", {cast_to(ctx, reached, dt), w});
  } else {
    bool is_min = agg == 2;
    double extreme = dt.bits == 64   ? std::numeric_limits<double>::max()
                     : dt.bits == 16 ? 65504.0
                                     : double(std::numeric_limits<float>::max());
    Expr hot = ctx.constant(HostTensor::from_ints(kBool, {num, n_targets}, onehot), "leaf_targets");
    Expr sel = op(ctx, "logical_and", {op(ctx, "expand_dims", {reached}, {{"axis", Ints{2}}}), hot});
    Expr vals = op(ctx, "where", {sel, w, fscalar(ctx, dt, is_min ? extreme : -extreme)});
    y = op(ctx, is_min ? "min" : "max", {vals}, {{"axis", Ints{1}}});
  }
  if (post == 1) y = op(ctx, "softmax", {y}, {{"axis", int64_t(-1)}});
  if (post == 2) y = op(ctx, "sigmoid", {y});
  return {expr_value(y)};
}

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
  Expr inner = add(ctx, x, mul(ctx, cube, fscalar(ctx, dt, 0.044715)));
  Expr t = op(ctx, "tanh", {mul(ctx, inner, fscalar(ctx, dt, std::sqrt(2.0 / M_PI)))});
  Expr half_x = mul(ctx, x, fscalar(ctx, dt, 0.5));
  return {expr_value(mul(ctx, half_x, add(ctx, t, fscalar(ctx, dt, 1.0))))};
}

// x * sigmoid(alpha x).
std::vector<Value> convert_quick_gelu(Context& ctx) {
  Expr x = ctx.expr(0);
  Expr s = op(ctx, "sigmoid", {mul(ctx, x, fscalar(ctx, ctx.dtype(0), ctx.attr_float("alpha", 1.702f)))});
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
  if (alpha != 1.0) y = mul(ctx, y, fscalar(ctx, ctx.dtype(0), alpha));
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
  n.inv_std = op(ctx, "rsqrt", {add(ctx, var, fscalar(ctx, dt, eps))});
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
  Expr scores = mul(ctx, op(ctx, "matmul", {q, permute(ctx, k, {0, 1, 3, 2})}), fscalar(ctx, dt, scale));
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
    Expr filter = fscalar(ctx, dt, ctx.attr_float("mask_filter_value", -10000.0f));
    scores = add(ctx, scores, op(ctx, "where", {*allowed, fscalar(ctx, dt, 0.0), filter}));
  }
  Expr probs = op(ctx, "softmax", {scores}, {{"axis", int64_t(-1)}});
  return {expr_value(merge_heads(ctx, op(ctx, "matmul", {probs, v}))), expr_value(present)};
}

}  // namespace

void register_extra_converters(ConverterRegistry& r) {
  r.add("SwiGLU", 28, convert_swiglu);
  r.add("TensorScatter", 24, convert_tensor_scatter);
  r.add("LinearAttention", 27, convert_linear_attention);
  r.add("ai.onnx.preview", "FlexAttention", 1, convert_flex_attention);

  const std::string ml = "ai.onnx.ml";
  r.add(ml, "Binarizer", 1, convert_binarizer);
  r.add(ml, "ArrayFeatureExtractor", 1, convert_array_feature_extractor);
  r.add(ml, "LabelEncoder", 2, convert_label_encoder);
  r.add(ml, "TreeEnsemble", 5, convert_tree_ensemble);

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
