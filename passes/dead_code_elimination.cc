// dead-code-elimination: inside functions, drop bindings whose variable is
// never used and whose value has no side effect (match_casts stay: they
// are run-time checks); in the module, drop functions, tensor programs and
// extern declarations that no public function reaches. A function is public
// unless its attributes say private=true; a module without public functions
// keeps all its items.
#include <unordered_set>

#include "ir/mutator.h"
#include "ir/op.h"
#include "passes/analysis/graph_util.h"
#include "passes/passes.h"

namespace relax {
namespace {

class DeadBindings : public ExprMutator {
 public:
  explicit DeadBindings(const IRModule& mod) : ExprMutator(&mod), mod_ref_(mod) {}

  SeqExpr visit_seq(const SeqExpr& seq) override {
    // Walk backwards: a binding is live if later code uses its variable.
    std::unordered_set<const VarNode*> used;
    collect_used_vars(seq->body, used);
    std::vector<BindingBlock> blocks(seq->blocks.size());
    bool changed = false;
    for (size_t bi = seq->blocks.size(); bi-- > 0;) {
      const BindingBlock& block = seq->blocks[bi];
      std::vector<Binding> kept;
      for (size_t i = block.bindings.size(); i-- > 0;) {
        const Binding& b = block.bindings[i];
        bool live = used.count(b.var.get()) || b.is_match_cast() || has_side_effect(b.value, mod_ref_);
        if (!live) {
          changed = true;
          continue;
        }
        Expr value = visit(b.value);
        changed |= value != b.value;
        collect_used_vars(value, used);
        kept.push_back(Binding{b.var, value, b.cast});
      }
      blocks[bi] = BindingBlock{block.dataflow, {kept.rbegin(), kept.rend()}};
    }
    if (!changed) return seq;
    std::vector<BindingBlock> nonempty;
    for (BindingBlock& b : blocks)
      if (!b.bindings.empty()) nonempty.push_back(std::move(b));
    SeqExpr out = make_seq(std::move(nonempty), seq->body);
    out->sinfo = seq->sinfo;
    return out;
  }

 private:
  const IRModule& mod_ref_;
};

// The names of module items that `e` refers to.
void collect_refs(const Expr& e, std::vector<std::string>& out) {
  visit_exprs(e, [&](const Expr& x) {
    if (auto* g = as<GlobalVarNode>(x)) out.push_back(g->name);
    if (auto* c = as<CallNode>(x);
        c && c->op() && (c->op()->name == "call_library" || c->op()->name == "call_library_dps") && !c->args.empty())
      if (auto* s = as<StringImmNode>(c->args[0])) out.push_back(s->value);
  });
}

IRModule drop_unreachable(const IRModule& mod) {
  std::vector<std::string> work;
  for (const auto& [name, item] : mod.items())
    if (auto* f = std::get_if<Function>(&item); f && !(*f)->attrs.get_bool("private", false)) work.push_back(name);
  if (work.empty()) return mod;
  std::unordered_set<std::string> reached;
  while (!work.empty()) {
    std::string n = work.back();
    work.pop_back();
    if (!reached.insert(n).second) continue;
    if (Function f = mod.function(n)) collect_refs(f, work);
  }
  IRModule out = mod;
  for (const auto& [name, item] : mod.items())
    if (!reached.count(name)) out.remove(name);
  return out;
}

}  // namespace

IRModule dead_code_elimination(const IRModule& mod) {
  IRModule out =
      map_functions(mod, [&](const std::string&, const Function& f) { return DeadBindings(mod).visit_function(f); });
  return drop_unreachable(out);
}

}  // namespace relax
