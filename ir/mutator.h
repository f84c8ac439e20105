// Rewriting graph IR. ExprMutator recurses by default and rebuilds a node
// only when one of its parts changed, so "did this pass do anything" is a
// pointer comparison. Subclasses override the visit_* they care about.
// Its read-only counterpart is ExprVisitor (ir/visitor.h).
// A rebuilt call gets its struct info deduced again (the old one is kept if
// deduction fails, which the verifier then reports).
#pragma once

#include <unordered_map>
#include <vector>

#include "ir/analyzer.h"
#include "ir/module.h"

namespace relax {

class ExprMutator {
 public:
  explicit ExprMutator(const IRModule* mod = nullptr) : mod_(mod) {}
  virtual ~ExprMutator() = default;

  virtual Expr visit(const Expr& e);
  virtual SeqExpr visit_seq(const SeqExpr& seq);
  // Appends the rewritten binding(s) of `b` to `out` (none drops it).
  virtual void visit_binding(const Binding& b, std::vector<Binding>& out);
  Function visit_function(const Function& f);

 protected:
  virtual Expr visit_var(const Expr& e);
  virtual Expr visit_call(const Expr& e);
  virtual Expr visit_tuple(const Expr& e);
  virtual Expr visit_tuple_get_item(const Expr& e);
  virtual Expr visit_if(const Expr& e);
  virtual Expr visit_leaf(const Expr& e) { return e; }

  // Rebuilds a node's struct info after its operands changed.
  Expr renormalize(const Expr& rebuilt, const Expr& old);

  const IRModule* mod_;
  Analyzer ana_;
  // Uses of a variable are replaced by the mapped expression.
  std::unordered_map<const VarNode*, Expr> var_remap_;
  // While visit_seq visits the bindings of a dataflow block.
  bool in_dataflow_ = false;
};

// Applies `fn` to every graph function of `mod`, returning a module that
// shares all unchanged items.
IRModule map_functions(const IRModule& mod, const std::function<Function(const std::string&, const Function&)>& fn);

}  // namespace relax
