// simplify-shapes: rewrites every symbolic expression of a function (in the
// struct info of its variables, shape values, prim values and call output
// annotations) with Analyzer::simplify. Variables whose struct info changes
// are rebuilt and their uses redirected.
#include "ir/mutator.h"
#include "passes/passes.h"

namespace relax {
namespace {

class ShapeSimplifier : public ExprMutator {
 public:
  explicit ShapeSimplifier(const IRModule& mod) : ExprMutator(&mod) {}

  Function run(const Function& f) {
    std::vector<Var> params;
    bool changed = false;
    for (const Var& p : f->params) {
      params.push_back(rebuild_var(p));
      changed |= params.back() != p;
    }
    SeqExpr body = visit_seq(f->body);
    StructInfo ret = simplify(f->ret);
    changed |= body != f->body || ret != f->ret;
    if (!changed) return f;
    return make_function(params, body, ret, f->attrs);
  }

  void visit_binding(const Binding& b, std::vector<Binding>& out) override {
    Expr value = visit(b.value);
    StructInfo cast = simplify(b.cast);
    Var var = rebuild_var(b.var);
    if (value == b.value && cast == b.cast && var == b.var) return out.push_back(b);
    out.push_back(Binding{var, value, cast});
  }

 protected:
  Expr visit_leaf(const Expr& e) override {
    if (auto* s = as<ShapeExprNode>(e)) {
      std::vector<SymExpr> vals;
      bool changed = false;
      for (const SymExpr& v : s->values) {
        vals.push_back(ana_.simplify(v));
        changed |= vals.back() != v;
      }
      return changed ? make_shape(vals) : e;
    }
    if (auto* p = as<PrimValueNode>(e); p && p->int_value.defined()) {
      SymExpr v = ana_.simplify(p->int_value);
      return v == p->int_value ? e : make_prim_int(v, p->dtype);
    }
    return e;
  }

  Expr visit_call(const Expr& e) override {
    Expr out = ExprMutator::visit_call(e);
    auto* c = as<CallNode>(out);
    std::vector<StructInfo> sargs;
    bool changed = false;
    for (const StructInfo& si : c->sinfo_args) {
      sargs.push_back(simplify(si));
      changed |= sargs.back() != si;
    }
    if (!changed) return out;
    return renormalize(make_call(c->callee, c->args, c->attrs, sargs), out);
  }

 private:
  // Applies Analyzer::simplify to every symbolic expression in `si`;
  // returns `si` itself when nothing changes.
  StructInfo simplify(const StructInfo& si) {
    if (!si) return si;
    auto dims = [&](const std::optional<std::vector<SymExpr>>& in, bool& changed) {
      std::optional<std::vector<SymExpr>> out;
      if (!in) return out;
      out.emplace();
      for (const SymExpr& d : *in) {
        out->push_back(ana_.simplify(d));
        changed |= out->back() != d;
      }
      return out;
    };
    bool changed = false;
    switch (si->kind) {
      case SIKind::Tensor: {
        auto* t = as<TensorSI>(si);
        auto shape = dims(t->shape, changed);
        if (!changed) return si;
        return tensor_si(t->dtype, *shape);
      }
      case SIKind::Shape: {
        auto* s = as<ShapeSI>(si);
        auto values = dims(s->values, changed);
        if (!changed) return si;
        return shape_si(*values);
      }
      case SIKind::Prim: {
        auto* p = as<PrimSI>(si);
        if (!p->value.defined()) return si;
        SymExpr v = ana_.simplify(p->value);
        return v == p->value ? si : prim_si(p->dtype, v);
      }
      case SIKind::Tuple: {
        std::vector<StructInfo> fields;
        for (const StructInfo& f : as<TupleSI>(si)->fields) {
          fields.push_back(simplify(f));
          changed |= fields.back() != f;
        }
        return changed ? tuple_si(fields) : si;
      }
      case SIKind::Func: {
        auto* f = as<FuncSI>(si);
        StructInfo ret = simplify(f->ret);
        std::optional<std::vector<StructInfo>> params;
        if (f->params) {
          params.emplace();
          for (const StructInfo& p : *f->params) {
            params->push_back(simplify(p));
            changed |= params->back() != p;
          }
        }
        if (!changed && ret == f->ret) return si;
        return std::make_shared<FuncSI>(params, ret, f->pure);
      }
      case SIKind::Object:
      case SIKind::List:
        return si;
    }
    return si;
  }

  Var rebuild_var(const Var& v) {
    StructInfo si = simplify(v->sinfo);
    if (si == v->sinfo) return v;
    Var nv = is_dataflow_var(v) ? make_dataflow_var(v->name, si) : make_var(v->name, si);
    var_remap_[v.get()] = nv;
    return nv;
  }
};

}  // namespace

IRModule simplify_shapes(const IRModule& mod) {
  return map_functions(mod, [&](const std::string&, const Function& f) { return ShapeSimplifier(mod).run(f); });
}

}  // namespace relax
