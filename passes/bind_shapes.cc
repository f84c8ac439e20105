// bind-shapes: gives every tensor an op reads a symbolic shape.
//
// A value whose rank is known but whose dims are not (the result of a
// Reshape to a runtime shape, a loop-carried value, a Shape built from
// tensor data) is bound once with `match_cast(v, Tensor[(v_d0, v_d1, ...)])`
// before its first use by an op; the op's struct info is deduced again from
// the bound operand, so shapes become symbolic expressions downstream and a
// legaliser always sees dims it can name (the legalize pass runs this one
// first). The check happens at run time, where the VM binds the fresh
// variables. The ops the VM handles itself are left alone.
#include <unordered_map>

#include "ir/mutator.h"
#include "ir/op.h"
#include "passes/passes.h"

namespace relax {
namespace {

class ShapeBinder : public ExprMutator {
 public:
  explicit ShapeBinder(const IRModule& mod) : ExprMutator(&mod) {}

  // Bindings made inside a branch are not visible after it.
  SeqExpr visit_seq(const SeqExpr& seq) override {
    auto saved = var_remap_;
    SeqExpr r = ExprMutator::visit_seq(seq);
    var_remap_ = std::move(saved);
    return r;
  }

  void visit_binding(const Binding& b, std::vector<Binding>& out) override {
    std::vector<Binding>* saved = pending_;
    pending_ = &out;
    Expr value = visit(b.value);
    pending_ = saved;
    Var var = b.var;
    // The op's result may now be more specific than the variable says.
    if (!b.is_match_cast() && as<CallNode>(value) && value->sinfo && var->sinfo &&
        !struct_info_same(value->sinfo, var->sinfo) && is_base_of(var->sinfo, value->sinfo, ana_) == Tri::Yes) {
      var = is_dataflow_var(b.var) ? make_dataflow_var(b.var->name, value->sinfo) : make_var(b.var->name, value->sinfo);
      var_remap_[b.var.get()] = var;
    }
    out.push_back(Binding{var, value, b.cast});
  }

 protected:
  Expr visit_call(const Expr& e) override {
    Expr visited = ExprMutator::visit_call(e);
    const auto* c = as<CallNode>(visited);
    const OpInfo* op = c->op();
    if (!op || op->lowered_by_vm() || !pending_) return visited;
    bool changed = false;
    std::vector<Expr> args;
    for (const Expr& a : c->args) {
      Expr bound = bind(a);
      if (const auto* t = as<TupleNode>(a)) {  // concat((x, y)): each field
        std::vector<Expr> fields;
        for (const Expr& f : t->fields) fields.push_back(bind(f));
        if (fields != t->fields) bound = make_tuple(std::move(fields));
      }
      changed |= bound != a;
      args.push_back(bound);
    }
    if (!changed) return visited;
    return renormalize(make_call(c->callee, std::move(args), c->attrs, c->sinfo_args), visited);
  }

 private:
  // A variable bound to a fresh-shaped copy of `a`, or `a` itself.
  Expr bind(const Expr& a) {
    const auto* v = as<VarNode>(a);
    if (!v || !a->sinfo) return a;
    StructInfo shaped;
    auto fresh_dims = [&](int ndim) {
      std::vector<SymExpr> dims;
      for (int i = 0; i < ndim; ++i) dims.push_back(SymExpr::var(v->name + "_d" + std::to_string(i)));
      return dims;
    };
    if (const auto* t = as<TensorSI>(a->sinfo); t && t->ndim >= 0 && !t->shape) {
      shaped = tensor_si(t->dtype, fresh_dims(t->ndim));
    } else if (const auto* s = as<ShapeSI>(a->sinfo); s && s->ndim >= 0 && !s->values) {
      shaped = shape_si(fresh_dims(s->ndim));
    } else {
      return a;
    }
    Var nv = is_dataflow_var(a) ? make_dataflow_var(v->name, shaped) : make_var(v->name, shaped);
    pending_->push_back(Binding{nv, a, shaped});
    var_remap_[v] = nv;
    return nv;
  }

  std::vector<Binding>* pending_ = nullptr;
};

}  // namespace

IRModule bind_shapes(const IRModule& mod) {
  return map_functions(mod, [&](const std::string&, const Function& f) { return ShapeBinder(mod).visit_function(f); });
}

}  // namespace relax
