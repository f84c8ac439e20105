// ONNX converters: the ai.onnx.ml domain. Binarizer, ArrayFeatureExtractor
// (take), LabelEncoder (a comparison against the keys; no string keys or
// values) and TreeEnsemble (every split evaluated at once, leaves found by a
// matmul against the constant paths), composed from existing graph ops.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>

#include "frontends/onnx/compose.h"
#include "frontends/onnx/onnx_proto.h"

namespace relax::onnx_fe {
namespace {

const DataType kI64 = DataType::i64();
const DataType kF32 = DataType::f32();
const DataType kBool = DataType::boolean();

// ---- ai.onnx.ml: Binarizer, ArrayFeatureExtractor, LabelEncoder ---------------------

std::vector<Value> convert_binarizer(Context& ctx) {
  Expr above = op(ctx, "greater", {ctx.expr(0), scalar_like(ctx, ctx.dtype(0), ctx.attr_float("threshold", 0.0f))});
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
    Expr vals = op(ctx, "where", {sel, w, scalar_like(ctx, dt, is_min ? extreme : -extreme)});
    y = op(ctx, is_min ? "min" : "max", {vals}, {{"axis", Ints{1}}});
  }
  if (post == 1) y = op(ctx, "softmax", {y}, {{"axis", int64_t(-1)}});
  if (post == 2) y = op(ctx, "sigmoid", {y});
  return {expr_value(y)};
}

}  // namespace

void register_ml_converters(ConverterRegistry& r) {
  const std::string ml = "ai.onnx.ml";
  r.add(ml, "Binarizer", 1, convert_binarizer);
  r.add(ml, "ArrayFeatureExtractor", 1, convert_array_feature_extractor);
  r.add(ml, "LabelEncoder", 2, convert_label_encoder);
  r.add(ml, "TreeEnsemble", 5, convert_tree_ensemble);
}

}  // namespace relax::onnx_fe
