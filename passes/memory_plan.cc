#include "passes/memory_plan.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "ir/error.h"
#include "ir/op.h"
#include "passes/analysis.h"

namespace relax {
namespace {

// The op a binding's value calls ("" when it is not an op call).
const std::string& called_op(const Expr& e) {
  static const std::string none;
  auto* c = as<CallNode>(e);
  return c && c->op() ? c->op()->name : none;
}

// Union-find over variables.
class AliasSets {
 public:
  const VarNode* find(const VarNode* v) {
    auto it = parent_.find(v);
    if (it == parent_.end() || it->second == v) return v;
    const VarNode* root = find(it->second);
    parent_[v] = root;
    return root;
  }
  void unite(const VarNode* a, const VarNode* b) {
    a = find(a);
    b = find(b);
    if (a != b) parent_[a] = b;
  }

 private:
  std::unordered_map<const VarNode*, const VarNode*> parent_;
};

}  // namespace

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
    for (const Binding& b : block.bindings) m.bindings.push_back(b);

  // Alias sets first, then the last use of each set. A kernel call's
  // outputs are fresh; a destination-passing call returns its
  // destinations; anything else may return any of its operands.
  AliasSets alias;
  for (const Binding& b : m.bindings) {
    const std::string& op = called_op(b.value);
    if (op == "call_tir" || op == "call_library" || op == "alloc_storage" || op == "alloc_tensor" ||
        op == "shape_of")
      continue;
    bool dps = op == "call_tir_dps" || op == "call_library_dps";
    std::unordered_set<const VarNode*> operands;
    collect_used_vars(dps ? as<CallNode>(b.value)->args[2] : b.value, operands);
    for (const VarNode* u : operands) alias.unite(b.var.get(), u);
  }
  std::unordered_map<const VarNode*, size_t> last;
  for (size_t i = 0; i < m.bindings.size(); ++i) {
    std::unordered_set<const VarNode*> used;
    collect_used_vars(m.bindings[i].value, used);
    used.insert(m.bindings[i].var.get());  // defined here: lives at least through i
    for (const VarNode* u : used) {
      size_t& l = last[alias.find(u)];
      l = std::max(l, i);
    }
  }
  std::unordered_set<const VarNode*> escaping;
  {
    std::unordered_set<const VarNode*> used;
    collect_used_vars(f->body->body, used);
    for (const VarNode* u : used) escaping.insert(alias.find(u));
  }

  std::unordered_map<const VarNode*, int> storage_of;
  for (size_t i = 0; i < m.bindings.size(); ++i) {
    const Binding& b = m.bindings[i];
    const VarNode* root = alias.find(b.var.get());
    auto add = [&](const StructInfo& si, size_t field, bool tuple, int storage) {
      const auto* t = as<TensorSI>(si);
      if (!t || !t->shape) return;
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
