#include "passes/analysis.h"

#include "ir/op.h"

namespace relax {

void visit_exprs(const Expr& e, const std::function<void(const Expr&)>& f) {
  if (!e) return;
  f(e);
  switch (e->kind) {
    case ExprKind::Tuple:
      for (const Expr& x : as<TupleNode>(e)->fields) visit_exprs(x, f);
      return;
    case ExprKind::TupleGetItem:
      return visit_exprs(as<TupleGetItemNode>(e)->tuple, f);
    case ExprKind::Call: {
      auto* c = as<CallNode>(e);
      visit_exprs(c->callee, f);
      for (const Expr& x : c->args) visit_exprs(x, f);
      return;
    }
    case ExprKind::If: {
      auto* i = as<IfNode>(e);
      visit_exprs(i->cond, f);
      visit_exprs(i->then_branch, f);
      return visit_exprs(i->else_branch, f);
    }
    case ExprKind::SeqExpr: {
      auto* s = as<SeqExprNode>(e);
      for (const BindingBlock& b : s->blocks)
        for (const Binding& x : b.bindings) visit_exprs(x.value, f);
      return visit_exprs(s->body, f);
    }
    case ExprKind::Function:
      return visit_exprs(as<FunctionNode>(e)->body, f);
    default:
      return;
  }
}

bool has_side_effect(const Expr& e, const IRModule& mod) {
  bool effect = false;
  visit_exprs(e, [&](const Expr& x) {
    if (effect || x->kind != ExprKind::Call) return;
    auto* c = as<CallNode>(x);
    if (const OpInfo* op = c->op()) {
      effect = !op->pure;
    } else if (auto* g = as<GlobalVarNode>(c->callee)) {
      Function f = mod.function(g->name);
      effect = !f || !f->pure();
    } else {
      auto* fsi = as<FuncSI>(c->callee->sinfo);
      effect = !fsi || !fsi->pure;
    }
  });
  return effect;
}

const CallNode* as_op_call(const Expr& e, std::string_view op) {
  const auto* c = as<CallNode>(e);
  return c && c->op() && c->op()->name == op ? c : nullptr;
}

void collect_used_vars(const Expr& e, std::unordered_set<const VarNode*>& out) {
  visit_exprs(e, [&](const Expr& x) {
    if (auto* v = as<VarNode>(x)) out.insert(v);
  });
}

}  // namespace relax
