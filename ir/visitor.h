// Reading graph IR. ExprVisitor walks an expression and everything nested
// in it, in evaluation order (a call's callee and arguments before the
// call's own visit_call returns, a sequence's bindings in order, then its
// body), recursing by default; subclasses override the visit_* they care
// about and call the base to keep descending. It is the read-only
// counterpart of ExprMutator (ir/mutator.h): nothing is rebuilt.
#pragma once

#include <functional>

#include "ir/expr.h"

namespace relax {

class ExprVisitor {
 public:
  virtual ~ExprVisitor() = default;

  // Dispatches on the node's kind; a null expression is skipped.
  virtual void visit(const Expr& e);
  virtual void visit_seq(const SeqExprNode& seq);
  // The binding's value (visit).
  virtual void visit_binding(const Binding& b);
  virtual void visit_function(const FunctionNode& f);

 protected:
  virtual void visit_var(const VarNode& v) {}
  virtual void visit_call(const CallNode& c);
  virtual void visit_tuple(const TupleNode& t);
  virtual void visit_tuple_get_item(const TupleGetItemNode& t);
  virtual void visit_if(const IfNode& n);
  // Constants, shapes, prim values, strings, global vars, ops.
  virtual void visit_leaf(const Expr& e) {}
};

// Calls `f` on every expression reachable from `e`, pre-order: tuples'
// fields, calls' callees and arguments, ifs, sequences' binding values and
// bodies, nested functions' bodies.
void visit_exprs(const Expr& e, const std::function<void(const Expr&)>& f);

}  // namespace relax
