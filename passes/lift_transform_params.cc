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
// results of @transform_params; the others move there whole. Run again
// after legalisation (the O2 pipeline does), it adds what the legalisers
// made of constants (the direct convolution's packed weights) to the
// @transform_params it made before, and drops the results @main no longer
// reads.
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
      case ExprKind::GlobalVar:  // a tensor program (a legaliser's weight transform), not a function
        return mod_ && mod_->program(static_cast<const GlobalVarNode*>(e.get())->name) != nullptr;
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
    mod_ = &mod;
    Function main = mod.function("main");
    if (!main) return mod;
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

    // A second run (after legalisation) adds to the @transform_params the
    // first made: its results keep their numbers, the new ones follow, and
    // a lifted binding that reads __lifted_K reads its field K there.
    Function old = mod.function("transform_params");
    std::vector<BindingBlock> blocks_before;
    std::vector<Expr> fields;
    std::vector<StructInfo> result_si;
    if (old) {
      blocks_before = old->body->blocks;
      if (const auto* t = as<TupleNode>(old->body->body))
        fields = t->fields;
      else
        fields = {old->body->body};
      for (const Expr& f : fields) result_si.push_back(f->sinfo);
    }
    const size_t old_count = fields.size();

    // Uses of a result in @main become the constant __lifted_K.
    struct Remap : ExprMutator {
      using ExprMutator::ExprMutator;
      using ExprMutator::var_remap_;
      // __lifted_K -> the previous @transform_params' field K.
      const std::vector<Expr>* fields = nullptr;
      Expr visit_leaf(const Expr& e) override {
        if (fields && e->kind == ExprKind::Constant)
          if (std::optional<size_t> k = lifted_constant_index(static_cast<const ConstantNode*>(e.get())->name);
              k && *k < fields->size())
            return (*fields)[*k];
        return e;
      }
    } remap(&mod), rename(&mod);
    rename.fields = &fields;
    for (const Binding& b : lifted) {
      if (!used_outside.count(b.var.get())) continue;
      remap.var_remap_[b.var.get()] = make_constant(lifted_constant_name(result_si.size()), b.var->sinfo);
      result_si.push_back(b.var->sinfo);
    }
    if (result_si.size() == old_count) return mod;  // nothing outside reads them: dead code, left to DCE

    // @transform_params: the lifted bindings in one dataflow block (the
    // results bound to block outputs), returning the results as a tuple.
    std::vector<Binding> moved;
    for (const Binding& b : lifted) {
      bool result = used_outside.count(b.var.get()) != 0;
      Var v = result ? make_var(b.var->name, b.var->sinfo) : make_dataflow_var(b.var->name, b.var->sinfo);
      moved.push_back(Binding{v, rename.visit(b.value), nullptr});
      rename.var_remap_[b.var.get()] = v;
      if (result) fields.push_back(v);
    }

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

    // Earlier results that @main no longer reads (a weight now read only by
    // its packed form) leave the result, and the others are renumbered.
    std::vector<bool> read(fields.size(), false);
    struct Reads : ExprMutator {
      using ExprMutator::ExprMutator;
      std::vector<bool>* read = nullptr;
      const std::vector<size_t>* renumber = nullptr;
      Expr visit_leaf(const Expr& e) override {
        if (e->kind != ExprKind::Constant) return e;
        const auto* c = static_cast<const ConstantNode*>(e.get());
        std::optional<size_t> k = lifted_constant_index(c->name);
        if (!k || *k >= read->size()) return e;
        (*read)[*k] = true;
        return renumber ? make_constant(lifted_constant_name((*renumber)[*k]), c->sinfo) : e;
      }
    } reads(&mod), renumbered(&mod);
    reads.read = &read;
    reads.visit_seq(body);
    std::vector<size_t> renumber(fields.size());
    std::vector<Expr> kept_fields;
    std::vector<StructInfo> kept_si;
    for (size_t k = 0; k < fields.size(); ++k) {
      if (!read[k]) continue;
      renumber[k] = kept_fields.size();
      kept_fields.push_back(fields[k]);
      kept_si.push_back(result_si[k]);
    }
    if (kept_fields.size() != fields.size()) {
      renumbered.read = &read;
      renumbered.renumber = &renumber;
      body = renumbered.visit_seq(body);
    }

    blocks_before.push_back(BindingBlock{true, std::move(moved)});
    SeqExpr tbody = make_seq(std::move(blocks_before), make_tuple(kept_fields));
    Function transform = make_function({}, tbody, tuple_si(kept_si));
    IRModule out = mod;
    out.add_function("main", make_function(main->params, body, main->ret, main->attrs));
    out.add_function("transform_params", transform);
    return out;
  }

 private:
  std::unordered_set<const VarNode*> lifted_;
  const IRModule* mod_ = nullptr;
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
