#include "passes/analysis/memory_plan.h"

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "ir/error.h"
#include "ir/op.h"
#include "passes/analysis/graph_util.h"

namespace relax {
namespace {

// The op a binding's value calls ("" when it is not an op call).
const std::string& called_op(const Expr& e) {
  static const std::string none;
  auto* c = as<CallNode>(e);
  return c && c->op() ? c->op()->name : none;
}

// Union-find over the values of variables: one node per variable, and one
// per field of a variable bound to a kernel call with several outputs
// (taking one item of such a tuple aliases that output alone, so a fused
// kernel's internal results and workspaces die at the call).
class AliasSets {
 public:
  int node(const VarNode* v, int field = -1) {
    auto [it, fresh] = ids_.try_emplace({v, field}, int(parent_.size()));
    if (fresh) parent_.push_back(it->second);
    return it->second;
  }
  int find(int n) {
    while (parent_[size_t(n)] != n) n = parent_[size_t(n)] = parent_[size_t(parent_[size_t(n)])];
    return n;
  }
  void unite(int a, int b) { parent_[size_t(find(a))] = find(b); }

  // A variable's nodes: its fields when it is split, else itself.
  void split(const VarNode* v, size_t fields) {
    for (size_t k = 0; k < fields; ++k) node(v, int(k));
    fields_[v] = fields;
  }
  size_t fields(const VarNode* v) const {
    auto it = fields_.find(v);
    return it == fields_.end() ? 0 : it->second;
  }
  std::vector<int> nodes(const VarNode* v) {
    size_t n = fields(v);
    if (n == 0) return {node(v)};
    std::vector<int> out;
    for (size_t k = 0; k < n; ++k) out.push_back(node(v, int(k)));
    return out;
  }

 private:
  struct Hash {
    size_t operator()(const std::pair<const VarNode*, int>& k) const {
      return std::hash<const void*>()(k.first) * 31 + size_t(k.second);
    }
  };
  std::unordered_map<std::pair<const VarNode*, int>, int, Hash> ids_;
  std::vector<int> parent_;
  std::unordered_map<const VarNode*, size_t> fields_;
};

}  // namespace

Expr to_dps(const CallNode& c, std::vector<Expr> dests) {
  const std::string& op = c.op()->name;
  std::vector<Expr> args{c.args[0], c.args[1], make_tuple(std::move(dests))};
  if (op == "call_tir" && c.args.size() == 3) args.push_back(c.args[2]);
  return make_op_call(op == "call_tir" ? "call_tir_dps" : "call_library_dps", std::move(args));
}

SymExpr tensor_nbytes(DataType dtype, const std::vector<SymExpr>& shape) {
  int bits = dtype.storage_bits();
  if (bits <= 0 || bits % 8 != 0) return {};
  SymExpr n = SymExpr(int64_t(bits / 8));
  for (const SymExpr& d : shape) n = n * d;
  return Analyzer().simplify(n);
}

MemoryAnalysis analyze_memory(const Function& f) {
  MemoryAnalysis m;
  for (const BindingBlock& block : f->body->blocks)
    for (const Binding& b : block.bindings) {
      // A CUDA graph region (passes/rewrite_cuda_graph.cc) counts as its
      // launches, in place.
      const auto* region = as<FunctionNode>(b.value);
      if (region && region->attrs.has("cuda_graph")) {
        for (const BindingBlock& inner : region->body->blocks)
          m.bindings.insert(m.bindings.end(), inner.bindings.begin(), inner.bindings.end());
        continue;
      }
      m.bindings.push_back(b);
    }

  // Alias sets first, then the last use of each set. A kernel call's
  // outputs are fresh; a destination-passing call returns its
  // destinations; anything else may return any of its operands.
  AliasSets alias;
  auto is_kernel = [](const std::string& op) { return op == "call_tir" || op == "call_library"; };
  auto is_dps = [](const std::string& op) { return op == "call_tir_dps" || op == "call_library_dps"; };
  for (const Binding& b : m.bindings) {
    const std::string& op = called_op(b.value);
    size_t n = 0;
    if (is_kernel(op)) {
      const auto* c = as<CallNode>(b.value);
      n = fields_or_self(c->sinfo_args.empty() ? b.var->sinfo : c->sinfo_args[0]).size();
    } else if (is_dps(op)) {
      if (const auto* d = as<TupleNode>(as<CallNode>(b.value)->args[2])) n = d->fields.size();
    }
    if (n > 1 && as<TupleSI>(b.var->sinfo)) alias.split(b.var.get(), n);
  }
  // The item of a split variable that a binding takes, if it is one.
  auto item_of = [&](const Expr& e) -> std::optional<int> {
    const auto* g = as<TupleGetItemNode>(e);
    const auto* v = g ? as<VarNode>(g->tuple) : nullptr;
    if (!v || alias.fields(v) == 0 || g->index < 0 || size_t(g->index) >= alias.fields(v)) return std::nullopt;
    return alias.node(v, g->index);
  };
  for (const Binding& b : m.bindings) {
    const std::string& op = called_op(b.value);
    if (is_kernel(op) || op == "alloc_storage" || op == "alloc_tensor" || op == "shape_of") continue;
    std::vector<int> self = alias.nodes(b.var.get());
    if (is_dps(op)) {
      const auto* dests = as<TupleNode>(as<CallNode>(b.value)->args[2]);
      if (dests && self.size() == dests->fields.size()) {
        for (size_t k = 0; k < self.size(); ++k)
          if (const auto* d = as<VarNode>(dests->fields[k])) alias.unite(self[k], alias.node(d));
        continue;
      }
    }
    if (std::optional<int> item = item_of(b.value)) {
      for (int s : self) alias.unite(s, *item);
      continue;
    }
    std::unordered_set<const VarNode*> operands;
    collect_used_vars(is_dps(op) ? as<CallNode>(b.value)->args[2] : b.value, operands);
    for (const VarNode* u : operands)
      for (int n : alias.nodes(u))
        for (int s : self) alias.unite(s, n);
  }
  std::unordered_map<int, size_t> last;
  auto touch = [&](int n, size_t i) {
    size_t& l = last[alias.find(n)];
    l = std::max(l, i);
  };
  for (size_t i = 0; i < m.bindings.size(); ++i) {
    for (int n : alias.nodes(m.bindings[i].var.get())) touch(n, i);  // defined here: lives at least through i
    if (std::optional<int> item = item_of(m.bindings[i].value)) {
      touch(*item, i);
      continue;
    }
    std::unordered_set<const VarNode*> used;
    collect_used_vars(m.bindings[i].value, used);
    for (const VarNode* u : used)
      for (int n : alias.nodes(u)) touch(n, i);
  }
  std::unordered_set<int> escaping;
  {
    std::unordered_set<const VarNode*> used;
    collect_used_vars(f->body->body, used);
    for (const VarNode* u : used)
      for (int n : alias.nodes(u)) escaping.insert(alias.find(n));
  }

  std::unordered_map<const VarNode*, int> storage_of;
  for (size_t i = 0; i < m.bindings.size(); ++i) {
    const Binding& b = m.bindings[i];
    auto add = [&](const StructInfo& si, size_t field, bool tuple, int storage) {
      const auto* t = as<TensorSI>(si);
      if (!t || !t->shape) return;
      int root = alias.find(alias.fields(b.var.get()) ? alias.node(b.var.get(), int(field)) : alias.node(b.var.get()));
      ActivationTensor a;
      a.name = tuple ? b.var->name + "." + std::to_string(field) : b.var->name;
      a.binding = i;
      a.field = field;
      a.dtype = t->dtype;
      a.shape = *t->shape;
      a.nbytes = tensor_nbytes(t->dtype, *t->shape);
      a.last_use = last[root];
      a.escapes = escaping.count(root) != 0;
      a.storage = storage;
      m.tensors.push_back(std::move(a));
    };
    const std::string& op = called_op(b.value);
    const auto* c = as<CallNode>(b.value);
    if (op == "call_tir" || op == "call_library") {
      std::vector<StructInfo> outs = fields_or_self(c->sinfo_args.empty() ? b.var->sinfo : c->sinfo_args[0]);
      for (size_t k = 0; k < outs.size(); ++k) add(outs[k], k, outs.size() > 1, -1);
    } else if (op == "alloc_storage") {
      const auto* sh = as<ShapeExprNode>(c->args[0]);
      if (!sh || sh->values.size() != 1) fail("alloc_storage of '", b.var->name, "': the size must be shape(bytes)");
      storage_of[b.var.get()] = int(m.storages.size());
      m.storages.push_back(PlannedStorage{i, sh->values[0]});
    } else if (op == "alloc_tensor") {
      int storage = -1;
      if (auto* v = as<VarNode>(c->args[0]); v && storage_of.count(v)) storage = storage_of[v];
      add(b.var->sinfo, 0, false, storage);
    }
  }
  std::vector<int> users(m.storages.size(), 0), escaping_users(m.storages.size(), 0);
  for (const ActivationTensor& t : m.tensors)
    if (t.storage >= 0) {
      ++users[size_t(t.storage)];
      if (t.escapes) ++escaping_users[size_t(t.storage)];
    }
  for (size_t s = 0; s < m.storages.size(); ++s) m.storages[s].escapes = users[s] > 0 && users[s] == escaping_users[s];
  return m;
}

std::pair<std::string, Interval> parse_bound(const std::string& s, const std::string& what) {
  size_t eq = s.find('='), dots = s.find("..");
  if (eq == std::string::npos || dots == std::string::npos || dots < eq || eq == 0)
    fail(what, " expects NAME=LO..HI, got '", s, "'");
  Interval b;
  try {
    size_t end1 = 0, end2 = 0;
    std::string lo = s.substr(eq + 1, dots - eq - 1), hi = s.substr(dots + 2);
    b.lo = std::stoll(lo, &end1);
    b.hi = std::stoll(hi, &end2);
    if (end1 != lo.size() || end2 != hi.size()) throw std::invalid_argument("trailing");
  } catch (const std::exception&) {
    fail(what, " expects NAME=LO..HI with integer bounds, got '", s, "'");
  }
  if (b.lo > b.hi) fail(what, " '", s, "': the lower bound is above the upper one");
  return {s.substr(0, eq), b};
}

std::map<std::string, Interval> function_bounds(const Function& f) {
  std::map<std::string, Interval> out;
  const AttrValue* v = f->attrs.find("sym_bounds");
  if (!v) return out;
  const auto* list = std::get_if<std::vector<std::string>>(v);
  if (!list) fail("the attribute sym_bounds must be a list of \"NAME=LO..HI\" strings");
  for (const std::string& s : *list) out.insert(parse_bound(s, "sym_bounds"));
  return out;
}

std::vector<std::string> bounds_attr(const std::map<std::string, Interval>& bounds) {
  std::vector<std::string> out;
  for (const auto& [name, b] : bounds) out.push_back(name + "=" + std::to_string(b.lo) + ".." + std::to_string(b.hi));
  return out;
}

}  // namespace relax
