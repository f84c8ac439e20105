// normalize: A-normal form. Every call, tuple-get-item, `if` and function
// that appears nested inside another expression is bound to a fresh
// variable first, so each binding does one thing; and every expression gets
// its deduced struct info. Fresh variables inside dataflow blocks are
// dataflow variables.
#include "ir/normalize.h"

#include <unordered_set>

#include "ir/mutator.h"
#include "passes/passes.h"

namespace relax {
namespace {

bool is_leaf(const Expr& e) {
  switch (e->kind) {
    case ExprKind::Call:
    case ExprKind::TupleGetItem:
    case ExprKind::If:
    case ExprKind::SeqExpr:
    case ExprKind::Function:
      return false;
    case ExprKind::Tuple:
      for (const Expr& f : as<TupleNode>(e)->fields)
        if (!is_leaf(f)) return false;
      return true;
    default:
      return true;
  }
}

void collect_names(const Expr& e, std::unordered_set<std::string>& names);

void collect_seq_names(const SeqExprNode& seq, std::unordered_set<std::string>& names) {
  for (const BindingBlock& b : seq.blocks)
    for (const Binding& x : b.bindings) {
      names.insert(x.var->name);
      collect_names(x.value, names);
    }
}

void collect_names(const Expr& e, std::unordered_set<std::string>& names) {
  if (auto* f = as<FunctionNode>(e)) {
    for (const Var& p : f->params) names.insert(p->name);
    collect_seq_names(*f->body, names);
  } else if (auto* i = as<IfNode>(e)) {
    collect_seq_names(*i->then_branch, names);
    collect_seq_names(*i->else_branch, names);
  }
}

class Normalizer : public ExprMutator {
 public:
  Normalizer(const IRModule* mod, const Function& fn) : ExprMutator(mod) { collect_names(fn, names_); }

  SeqExpr visit_seq(const SeqExpr& seq) override {
    std::vector<BindingBlock> blocks;
    bool changed = false;
    for (const BindingBlock& block : seq->blocks) {
      BindingBlock* saved = cur_;
      BindingBlock nb{block.dataflow, {}};
      cur_ = &nb;
      for (const Binding& b : block.bindings) {
        Expr value = normalize_value(b.value);
        changed |= value != b.value;
        nb.bindings.push_back(Binding{b.var, value, b.cast});
      }
      changed |= nb.bindings.size() != block.bindings.size();
      blocks.push_back(std::move(nb));
      cur_ = saved;
    }
    // A non-leaf result is bound in a trailing ordinary block.
    BindingBlock tail{false, {}};
    BindingBlock* saved = cur_;
    cur_ = &tail;
    Expr body = to_leaf(seq->body);
    cur_ = saved;
    if (!tail.bindings.empty()) blocks.push_back(std::move(tail));
    changed |= body != seq->body;
    if (!changed) {
      ensure_struct_info(seq, ctx());
      return seq;
    }
    SeqExpr out = make_seq(std::move(blocks), body);
    ensure_struct_info(out, ctx());
    return out;
  }

 private:
  InferContext ctx() const { return InferContext{ana_, mod_}; }

  // Rewrites the operands of `e` into leaves; `e` itself may stay compound.
  Expr normalize_value(const Expr& e) {
    Expr out = e;
    if (auto* c = as<CallNode>(e)) {
      std::vector<Expr> args;
      bool changed = false;
      for (const Expr& a : c->args) {
        args.push_back(to_leaf(a));
        changed |= args.back() != a;
      }
      if (changed) out = make_call(c->callee, std::move(args), c->attrs, c->sinfo_args);
    } else if (auto* t = as<TupleNode>(e)) {
      std::vector<Expr> fields;
      bool changed = false;
      for (const Expr& f : t->fields) {
        fields.push_back(to_leaf(f));
        changed |= fields.back() != f;
      }
      if (changed) out = make_tuple(std::move(fields));
    } else if (auto* g = as<TupleGetItemNode>(e)) {
      Expr tuple = to_leaf(g->tuple);
      if (tuple != g->tuple) out = make_tuple_get_item(tuple, g->index);
    } else if (auto* i = as<IfNode>(e)) {
      Expr cond = to_leaf(i->cond);
      SeqExpr t = visit_seq(i->then_branch), f = visit_seq(i->else_branch);
      if (cond != i->cond || t != i->then_branch || f != i->else_branch) out = make_if(cond, t, f);
    } else {
      out = visit(e);
    }
    ensure_struct_info(out, ctx());
    return out;
  }

  Expr to_leaf(const Expr& e) {
    Expr value = normalize_value(e);
    if (is_leaf(value)) return value;
    std::string name = fresh_name();
    Var v = cur_->dataflow ? make_dataflow_var(name, value->sinfo) : make_var(name, value->sinfo);
    cur_->bindings.push_back(Binding{v, value, nullptr});
    return v;
  }

  std::string fresh_name() {
    for (;; ++counter_) {
      std::string n = "lv" + std::to_string(counter_);
      if (names_.insert(n).second) return n;
    }
  }

  std::unordered_set<std::string> names_;
  int counter_ = 0;
  BindingBlock* cur_ = nullptr;
};

}  // namespace

IRModule normalize(const IRModule& mod) {
  return map_functions(mod,
                       [&](const std::string&, const Function& f) { return Normalizer(&mod, f).visit_function(f); });
}

}  // namespace relax
