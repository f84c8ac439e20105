// lift-transform-params: computations of @main that depend only on weights
// (a transposed weight, a reshaped bias, a range of constant scalars, any
// constant subgraph) move to a function @transform_params that the runtime
// runs once when it loads the package; @main reads their results as
// constants named "__lifted_K" (K = the field of @transform_params' result).
//
// A top-level binding of @main is liftable when its value is a call of a
// pure op (the random ops count: their values depend only on the seed)
// whose arguments are constants, liftable variables or literals without
// symbolic variables, at least one of them data, and its result has a
// fully constant shape. The liftable bindings that the rest of @main reads become the
// results of @transform_params; the others move there whole.
#include <unordered_set>

#include "ir/mutator.h"
#include "ir/op.h"
#include "passes/analysis/graph_util.h"
#include "passes/passes.h"

namespace relax {
namespace {

bool constant_sinfo(const StructInfo& si) {
  const auto* t = as<TensorSI>(si);
  if (!t || !t->shape || t->dtype.is_void()) return false;
  for (const SymExpr& d : *t->shape)
    if (!d.is_const()) return false;
  return true;
}

class Lifter {
 public:
  bool liftable_arg(const Expr& e) const {
    switch (e->kind) {
      case ExprKind::Constant:
      case ExprKind::StringImm:
        return true;
      case ExprKind::Var:
      case ExprKind::DataflowVar:
        return lifted_.count(static_cast<const VarNode*>(e.get())) != 0;
      case ExprKind::PrimValue: {
        const auto* p = static_cast<const PrimValueNode*>(e.get());
        return p->dtype.is_float() || p->int_value.is_const();
      }
      case ExprKind::ShapeExpr:
        for (const SymExpr& d : static_cast<const ShapeExprNode*>(e.get())->values)
          if (!d.is_const()) return false;
        return true;
      case ExprKind::Tuple:
        for (const Expr& f : static_cast<const TupleNode*>(e.get())->fields)
          if (!liftable_arg(f)) return false;
        return true;
      default:
        return false;
    }
  }

  // Whether an operand carries data (a constant or a lifted variable)
  // rather than a literal.
  static bool reads_data(const Expr& e) {
    if (e->kind == ExprKind::Constant || is_var(e)) return true;
    if (const auto* t = as<TupleNode>(e))
      for (const Expr& f : t->fields)
        if (reads_data(f)) return true;
    return false;
  }

  bool liftable(const Binding& b) const {
    if (b.is_match_cast() || !constant_sinfo(b.var->sinfo)) return false;
    const auto* c = as<CallNode>(b.value);
    const OpInfo* op = c ? c->op() : nullptr;
    if (!op || !op->pure) return false;
    bool data = false;
    for (const Expr& a : c->args) {
      if (!liftable_arg(a)) return false;
      data = data || reads_data(a);
    }
    return data;
  }

  IRModule run(const IRModule& mod) {
    Function main = mod.function("main");
    if (!main || mod.contains("transform_params")) return mod;
    std::vector<Binding> lifted;
    for (const BindingBlock& block : main->body->blocks)
      for (const Binding& b : block.bindings)
        if (liftable(b)) {
          lifted_.insert(b.var.get());
          lifted.push_back(b);
        }
    if (lifted.empty()) return mod;

    // The lifted variables the rest of @main reads: the results.
    std::unordered_set<const VarNode*> used_outside;
    for (const BindingBlock& block : main->body->blocks)
      for (const Binding& b : block.bindings)
        if (!lifted_.count(b.var.get())) collect_used_vars(b.value, used_outside);
    collect_used_vars(main->body->body, used_outside);

    // Uses of a result in @main become the constant __lifted_K.
    struct Remap : ExprMutator {
      using ExprMutator::ExprMutator;
      using ExprMutator::var_remap_;
    } remap(&mod), rename(&mod);
    std::vector<StructInfo> result_si;
    for (const Binding& b : lifted) {
      if (!used_outside.count(b.var.get())) continue;
      remap.var_remap_[b.var.get()] = make_constant(lifted_constant_name(result_si.size()), b.var->sinfo);
      result_si.push_back(b.var->sinfo);
    }
    if (result_si.empty()) return mod;  // nothing outside reads them: dead code, left to DCE

    // @transform_params: the lifted bindings in one dataflow block (the
    // results bound to block outputs), returning the results as a tuple.
    std::vector<Binding> moved;
    std::vector<Expr> fields;
    for (const Binding& b : lifted) {
      bool result = used_outside.count(b.var.get()) != 0;
      Var v = result ? make_var(b.var->name, b.var->sinfo) : make_dataflow_var(b.var->name, b.var->sinfo);
      moved.push_back(Binding{v, rename.visit(b.value), nullptr});
      rename.var_remap_[b.var.get()] = v;
      if (result) fields.push_back(v);
    }
    SeqExpr tbody = make_seq({BindingBlock{true, std::move(moved)}}, make_tuple(fields));
    Function transform = make_function({}, tbody, tuple_si(result_si));

    // @main without them.
    std::vector<BindingBlock> blocks;
    for (const BindingBlock& block : main->body->blocks) {
      std::vector<Binding> kept;
      for (const Binding& b : block.bindings) {
        if (lifted_.count(b.var.get())) continue;
        Expr value = remap.visit(b.value);
        kept.push_back(value == b.value ? b : Binding{b.var, value, b.cast});
      }
      if (!kept.empty()) blocks.push_back(BindingBlock{block.dataflow, std::move(kept)});
    }
    SeqExpr body = make_seq(std::move(blocks), remap.visit(main->body->body));
    IRModule out = mod;
    out.add_function("main", make_function(main->params, body, main->ret, main->attrs));
    out.add_function("transform_params", transform);
    return out;
  }

 private:
  std::unordered_set<const VarNode*> lifted_;
};

}  // namespace

std::string lifted_constant_name(size_t k) { return "__lifted_" + std::to_string(k); }

std::optional<size_t> lifted_constant_index(const std::string& name) {
  static const std::string prefix = "__lifted_";
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  size_t k = 0;
  for (size_t i = prefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    k = k * 10 + size_t(name[i] - '0');
  }
  return k;
}

IRModule lift_transform_params(const IRModule& mod) { return Lifter().run(mod); }

}  // namespace relax
