// canonicalize-bindings:
//  - `y = x` where x is a variable: uses of y become x, when x's struct
//    info is at least as specific as y's and no dataflow variable would
//    escape its block (y an output of a dataflow block bound to a dataflow
//    variable stays);
//  - `y = match_cast(x, S)` where x's struct info is provably S already and
//    S defines no new symbolic variable: treated as an alias;
//  - `t[i]` where t is a literal tuple (or a variable bound to one): the field.
// The now-unused bindings are left for dead-code-elimination.
#include <unordered_map>

#include "ir/mutator.h"
#include "passes/passes.h"

namespace relax {
namespace {

class Canonicalizer : public ExprMutator {
 public:
  explicit Canonicalizer(const IRModule& mod) : ExprMutator(&mod) {}

  void visit_binding(const Binding& b, std::vector<Binding>& out) override {
    Expr value = visit(b.value);
    if (auto* t = as<TupleNode>(value)) tuples_[b.var.get()] = t;
    if (is_var(value) && can_alias(b, value)) {
      var_remap_[b.var.get()] = value;
      out.push_back(Binding{b.var, value, nullptr});
      return;
    }
    out.push_back(value == b.value ? b : Binding{b.var, value, b.cast});
  }

 protected:
  Expr visit_tuple_get_item(const Expr& e) override {
    Expr folded = ExprMutator::visit_tuple_get_item(e);
    auto* g = as<TupleGetItemNode>(folded);
    if (!g) return folded;
    const TupleNode* t = as<TupleNode>(g->tuple);
    if (!t)
      if (auto* v = as<VarNode>(g->tuple); v && tuples_.count(v)) t = tuples_[v];
    if (!t || g->index < 0 || size_t(g->index) >= t->fields.size()) return folded;
    return t->fields[g->index];
  }

 private:
  bool can_alias(const Binding& b, const Expr& value) const {
    if (!is_dataflow_var(b.var) && is_dataflow_var(value)) return false;
    const StructInfo& target = b.is_match_cast() ? b.cast : b.var->sinfo;
    if (!value->sinfo || !target) return false;
    if (struct_info_same(target, value->sinfo)) return true;
    // x must be at least as specific as y, and equal where y is specific.
    return is_base_of(target, value->sinfo, ana_) == Tri::Yes && !b.is_match_cast();
  }

  std::unordered_map<const VarNode*, const TupleNode*> tuples_;
};

}  // namespace

IRModule canonicalize_bindings(const IRModule& mod) {
  return map_functions(mod,
                       [&](const std::string&, const Function& f) { return Canonicalizer(mod).visit_function(f); });
}

}  // namespace relax
