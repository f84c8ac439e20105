#include "passes/analysis/graph_util.h"

#include "ir/error.h"
#include "ir/op.h"
#include "ir/visitor.h"

namespace relax {

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

void match_dims(const std::vector<SymExpr>& pattern, const std::vector<SymExpr>& actual, SymMap<SymExpr>& map) {
  for (size_t i = 0; i < pattern.size() && i < actual.size(); ++i)
    if (pattern[i].is_var() && !map.count(pattern[i])) map[pattern[i]] = actual[i];
}

SymMap<SymExpr> program_vars_at(const tir::Program& prog, const CallNode& call) {
  SymMap<SymExpr> map;
  auto match = [&](const tir::Buffer& b, const StructInfo& si) {
    const auto* t = as<TensorSI>(si);
    if (t && t->shape) match_dims(b->shape, *t->shape, map);
  };
  if (const auto* in = call.args.size() > 1 ? as<TupleNode>(call.args[1]) : nullptr)
    for (size_t i = 0; i < prog->inputs.size() && i < in->fields.size(); ++i)
      match(prog->inputs[i], in->fields[i]->sinfo);
  if (!call.sinfo_args.empty()) {
    std::vector<StructInfo> outs = fields_or_self(call.sinfo_args[0]);
    for (size_t k = 0; k < prog->outputs.size() && k < outs.size(); ++k) match(prog->outputs[k], outs[k]);
  }
  if (const auto* s = call.args.size() > 2 ? as<ShapeExprNode>(call.args[2]) : nullptr)
    for (size_t j = 0; j < prog->sym_params.size() && j < s->values.size(); ++j)
      if (!map.count(prog->sym_params[j])) map[prog->sym_params[j]] = s->values[j];
  return map;
}

std::vector<Binding> bind_leading_outputs(const Var& var, const Expr& call, size_t kept) {
  const auto* all_si = as<TupleSI>(call->sinfo);
  RELAX_CHECK(all_si && kept < all_si->fields.size(), "bind_leading_outputs: '", var->name,
              "' is bound to a call without extra outputs");
  bool dataflow = var->kind == ExprKind::DataflowVar;
  auto fresh = [&](const std::string& name, const StructInfo& si) {
    return dataflow ? make_dataflow_var(name, si) : make_var(name, si);
  };
  std::vector<Binding> out;
  Var all = fresh(var->name + "_all", call->sinfo);
  out.push_back(Binding{all, call, nullptr});
  auto item = [&](size_t k) {
    Expr e = make_tuple_get_item(all, int(k));
    e->sinfo = all_si->fields[k];
    return e;
  };
  if (!as<TupleSI>(var->sinfo)) {
    RELAX_CHECK(kept == 1, "bind_leading_outputs: '", var->name, "' is one tensor, not ", kept);
    out.push_back(Binding{var, item(0), nullptr});
    return out;
  }
  std::vector<Expr> items;
  for (size_t k = 0; k < kept; ++k) {
    Var iv = fresh(var->name + "_" + std::to_string(k), all_si->fields[k]);
    out.push_back(Binding{iv, item(k), nullptr});
    items.push_back(iv);
  }
  Expr t = make_tuple(items);
  t->sinfo = var->sinfo;
  out.push_back(Binding{var, t, nullptr});
  return out;
}

}  // namespace relax
