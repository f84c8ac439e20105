#include "ir/visitor.h"

namespace relax {

void ExprVisitor::visit(const Expr& e) {
  if (!e) return;
  switch (e->kind) {
    case ExprKind::Var:
    case ExprKind::DataflowVar:
      return visit_var(*static_cast<const VarNode*>(e.get()));
    case ExprKind::Call:
      return visit_call(*static_cast<const CallNode*>(e.get()));
    case ExprKind::Tuple:
      return visit_tuple(*static_cast<const TupleNode*>(e.get()));
    case ExprKind::TupleGetItem:
      return visit_tuple_get_item(*static_cast<const TupleGetItemNode*>(e.get()));
    case ExprKind::If:
      return visit_if(*static_cast<const IfNode*>(e.get()));
    case ExprKind::SeqExpr:
      return visit_seq(*static_cast<const SeqExprNode*>(e.get()));
    case ExprKind::Function:
      return visit_function(*static_cast<const FunctionNode*>(e.get()));
    default:
      return visit_leaf(e);
  }
}

void ExprVisitor::visit_call(const CallNode& c) {
  visit(c.callee);
  for (const Expr& a : c.args) visit(a);
}

void ExprVisitor::visit_tuple(const TupleNode& t) {
  for (const Expr& f : t.fields) visit(f);
}

void ExprVisitor::visit_tuple_get_item(const TupleGetItemNode& t) { visit(t.tuple); }

void ExprVisitor::visit_if(const IfNode& n) {
  visit(n.cond);
  visit(n.then_branch);
  visit(n.else_branch);
}

void ExprVisitor::visit_binding(const Binding& b) { visit(b.value); }

void ExprVisitor::visit_seq(const SeqExprNode& seq) {
  for (const BindingBlock& block : seq.blocks)
    for (const Binding& b : block.bindings) visit_binding(b);
  visit(seq.body);
}

void ExprVisitor::visit_function(const FunctionNode& f) { visit(f.body); }

namespace {

class PreOrder : public ExprVisitor {
 public:
  explicit PreOrder(const std::function<void(const Expr&)>& f) : f_(f) {}
  void visit(const Expr& e) override {
    if (!e) return;
    f_(e);
    ExprVisitor::visit(e);
  }

 private:
  const std::function<void(const Expr&)>& f_;
};

}  // namespace

void visit_exprs(const Expr& e, const std::function<void(const Expr&)>& f) { PreOrder(f).visit(e); }

}  // namespace relax
