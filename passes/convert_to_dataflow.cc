// convert-to-dataflow: groups each run of at least two consecutive pure
// bindings of an ordinary block into a dataflow block, the region later
// passes (fusion, memory planning) work on. A binding is pure when its
// value has no side effect and is not control flow (if, a sequence, a
// function). Inside the new block, variables used only there become
// dataflow variables; those used after it stay variables (the block's
// outputs). Importers emit ordinary blocks and rely on this pass.
#include <limits>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "ir/mutator.h"
#include "passes/analysis/graph_util.h"
#include "passes/passes.h"

namespace relax {
namespace {

constexpr size_t kMinRun = 2;

// Rewrites uses of variables that have been replaced.
class Renamer : public ExprMutator {
 public:
  using ExprMutator::ExprMutator;
  void add(const Var& from, const Var& to) { var_remap_[from.get()] = to; }
};

class ToDataflow : public ExprMutator {
 public:
  explicit ToDataflow(const IRModule& mod) : ExprMutator(&mod), mod_ref_(mod) {}

  SeqExpr visit_seq(const SeqExpr& seq) override {
    SeqExpr inner = ExprMutator::visit_seq(seq);  // nested sequences first
    std::vector<const Binding*> flat;
    for (const BindingBlock& b : inner->blocks)
      for (const Binding& x : b.bindings) flat.push_back(&x);
    compute_last_uses(*inner, flat);

    std::vector<BindingBlock> blocks;
    bool changed = false;
    size_t pos = 0;
    for (const BindingBlock& block : inner->blocks) {
      if (block.dataflow) {
        blocks.push_back(block);
        pos += block.bindings.size();
        continue;
      }
      BindingBlock plain{false, {}};
      size_t i = 0;
      while (i < block.bindings.size()) {
        size_t j = i;
        while (j < block.bindings.size() && eligible(block.bindings[j])) ++j;
        if (j - i >= kMinRun) {
          if (!plain.bindings.empty()) blocks.push_back(std::exchange(plain, BindingBlock{false, {}}));
          blocks.push_back(make_dataflow(block.bindings, i, j, pos + j - 1));
          changed = true;
          i = j;
          continue;
        }
        size_t end = std::max(j, i + 1);  // a short run, or one ineligible binding
        for (size_t k = i; k < end; ++k) plain.bindings.push_back(block.bindings[k]);
        i = end;
      }
      if (!plain.bindings.empty()) blocks.push_back(std::move(plain));
      pos += block.bindings.size();
    }
    if (!changed) return inner;
    // Uses in the body of escaping variables are unchanged: they stay Vars.
    SeqExpr out = make_seq(std::move(blocks), inner->body);
    out->sinfo = inner->sinfo;
    return out;
  }

 private:
  bool eligible(const Binding& b) const {
    switch (b.value->kind) {
      case ExprKind::If:
      case ExprKind::SeqExpr:
      case ExprKind::Function:
        return false;
      default:
        return !is_dataflow_var(b.var) && !has_side_effect(b.value, mod_ref_);
    }
  }

  // The position of the last binding that uses each variable (the body and
  // anything after the sequence count as "never ends").
  void compute_last_uses(const SeqExprNode& seq, const std::vector<const Binding*>& flat) {
    last_use_.clear();
    for (size_t p = 0; p < flat.size(); ++p) {
      std::unordered_set<const VarNode*> used;
      collect_used_vars(flat[p]->value, used);
      for (const VarNode* v : used) last_use_[v] = p;
    }
    std::unordered_set<const VarNode*> used;
    collect_used_vars(seq.body, used);
    for (const VarNode* v : used) last_use_[v] = std::numeric_limits<size_t>::max();
  }

  // bindings[i, j) as a dataflow block; `last` is the flat position of its
  // last binding.
  BindingBlock make_dataflow(const std::vector<Binding>& bindings, size_t i, size_t j, size_t last) {
    Renamer rename(mod_);
    BindingBlock out{true, {}};
    for (size_t k = i; k < j; ++k) {
      const Binding& b = bindings[k];
      Expr value = rename.visit(b.value);
      Var var = b.var;
      auto it = last_use_.find(b.var.get());
      bool escapes = it != last_use_.end() && it->second > last;
      if (!escapes) {
        var = make_dataflow_var(b.var->name, b.var->sinfo);
        rename.add(b.var, var);
      }
      out.bindings.push_back(Binding{var, value, b.cast});
    }
    return out;
  }

  const IRModule& mod_ref_;
  std::unordered_map<const VarNode*, size_t> last_use_;
};

}  // namespace

IRModule convert_to_dataflow(const IRModule& mod) {
  return map_functions(mod, [&](const std::string&, const Function& f) { return ToDataflow(mod).visit_function(f); });
}

}  // namespace relax
