#include "ir/mutator.h"

#include "ir/error.h"
#include "ir/normalize.h"

namespace relax {

Expr ExprMutator::visit(const Expr& e) {
  if (!e) return e;
  switch (e->kind) {
    case ExprKind::Var:
    case ExprKind::DataflowVar:
      return visit_var(e);
    case ExprKind::Call:
      return visit_call(e);
    case ExprKind::Tuple:
      return visit_tuple(e);
    case ExprKind::TupleGetItem:
      return visit_tuple_get_item(e);
    case ExprKind::If:
      return visit_if(e);
    case ExprKind::SeqExpr:
      return visit_seq(std::static_pointer_cast<const SeqExprNode>(e));
    case ExprKind::Function:
      return visit_function(std::static_pointer_cast<const FunctionNode>(e));
    default:
      return visit_leaf(e);
  }
}

Expr ExprMutator::visit_var(const Expr& e) {
  auto it = var_remap_.find(as<VarNode>(e));
  return it == var_remap_.end() ? e : it->second;
}

Expr ExprMutator::renormalize(const Expr& rebuilt, const Expr& old) {
  try {
    rebuilt->sinfo = infer_struct_info(rebuilt, InferContext{ana_, mod_});
  } catch (const Error&) {
    rebuilt->sinfo = old->sinfo;
  }
  return rebuilt;
}

Expr ExprMutator::visit_call(const Expr& e) {
  auto* c = as<CallNode>(e);
  bool changed = false;
  std::vector<Expr> args;
  args.reserve(c->args.size());
  for (const Expr& a : c->args) {
    args.push_back(visit(a));
    changed |= args.back() != a;
  }
  Expr callee = visit(c->callee);
  changed |= callee != c->callee;
  if (!changed) return e;
  return renormalize(make_call(callee, std::move(args), c->attrs, c->sinfo_args), e);
}

Expr ExprMutator::visit_tuple(const Expr& e) {
  auto* t = as<TupleNode>(e);
  bool changed = false;
  std::vector<Expr> fields;
  for (const Expr& f : t->fields) {
    fields.push_back(visit(f));
    changed |= fields.back() != f;
  }
  if (!changed) return e;
  return renormalize(make_tuple(std::move(fields)), e);
}

Expr ExprMutator::visit_tuple_get_item(const Expr& e) {
  auto* t = as<TupleGetItemNode>(e);
  Expr tuple = visit(t->tuple);
  if (tuple == t->tuple) return e;
  return renormalize(make_tuple_get_item(tuple, t->index), e);
}

Expr ExprMutator::visit_if(const Expr& e) {
  auto* n = as<IfNode>(e);
  Expr cond = visit(n->cond);
  SeqExpr t = visit_seq(n->then_branch);
  SeqExpr f = visit_seq(n->else_branch);
  if (cond == n->cond && t == n->then_branch && f == n->else_branch) return e;
  return renormalize(make_if(cond, t, f), e);
}

void ExprMutator::visit_binding(const Binding& b, std::vector<Binding>& out) {
  Expr value = visit(b.value);
  if (value == b.value) {
    out.push_back(b);
    return;
  }
  out.push_back(Binding{b.var, value, b.cast});
}

SeqExpr ExprMutator::visit_seq(const SeqExpr& seq) {
  bool changed = false;
  std::vector<BindingBlock> blocks;
  bool saved = in_dataflow_;
  for (const BindingBlock& block : seq->blocks) {
    in_dataflow_ = block.dataflow;
    BindingBlock nb{block.dataflow, {}};
    for (const Binding& b : block.bindings) visit_binding(b, nb.bindings);
    if (nb.bindings.size() != block.bindings.size()) {
      changed = true;
    } else {
      for (size_t i = 0; i < nb.bindings.size(); ++i) {
        const Binding &x = nb.bindings[i], &y = block.bindings[i];
        changed |= x.var != y.var || x.value != y.value || x.cast != y.cast;
      }
    }
    if (!nb.bindings.empty())
      blocks.push_back(std::move(nb));
    else
      changed = true;
  }
  in_dataflow_ = saved;
  Expr body = visit(seq->body);
  changed |= body != seq->body;
  if (!changed) return seq;
  SeqExpr out = make_seq(std::move(blocks), body);
  if (!out->sinfo) out->sinfo = seq->sinfo;
  return out;
}

Function ExprMutator::visit_function(const Function& f) {
  SeqExpr body = visit_seq(f->body);
  if (body == f->body) return f;
  return make_function(f->params, body, f->ret, f->attrs);
}

IRModule map_functions(const IRModule& mod, const std::function<Function(const std::string&, const Function&)>& fn) {
  IRModule out = mod;
  for (const auto& [name, item] : mod.items()) {
    if (auto* f = std::get_if<Function>(&item)) {
      Function nf = fn(name, *f);
      if (nf != *f) out.add_function(name, nf);
    }
  }
  return out;
}

}  // namespace relax
