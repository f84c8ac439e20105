// eliminate-common-subexpr: inside each binding block, a pure binding whose
// value is structurally the same as an earlier one's (same op or callee,
// same arguments by identity, same attributes and declared struct info)
// becomes an alias of the earlier variable, for canonicalize-bindings and
// dead-code-elimination to finish. Match_casts, impure calls and the
// random ops (whose repeated calls the model may mean as fresh draws) are
// never merged. Blocks do not share their tables, so an alias never reaches
// a dataflow variable of another block.
#include <map>
#include <sstream>

#include "ir/mutator.h"
#include "ir/op.h"
#include "passes/analysis/graph_util.h"
#include "passes/passes.h"

namespace relax {
namespace {

bool is_random(const CallNode& c) {
  const OpInfo* op = c.op();
  if (!op) return false;
  return op->name.rfind("random", 0) == 0 || op->name == "multinomial" || op->name == "bernoulli";
}

// A key for structural equality of an A-normal-form value: variables by
// identity, symbolic expressions by their (hash-consed) node, the rest by
// value. Attributes and struct info arguments are compared separately.
bool key_of(const Expr& e, std::ostringstream& k) {
  switch (e->kind) {
    case ExprKind::Var:
    case ExprKind::DataflowVar:
      k << "v" << static_cast<const void*>(e.get());
      return true;
    case ExprKind::GlobalVar:
      k << "@" << static_cast<const GlobalVarNode*>(e.get())->name;
      return true;
    case ExprKind::Constant:
      k << "c(" << static_cast<const ConstantNode*>(e.get())->name << ")";
      return true;
    case ExprKind::PrimValue: {
      const auto* p = static_cast<const PrimValueNode*>(e.get());
      k << "p(" << p->dtype.str() << ",";
      if (p->dtype.is_float())
        k << p->float_value;
      else
        k << static_cast<const void*>(p->int_value.get());
      k << ")";
      return true;
    }
    case ExprKind::StringImm:
      k << "s" << static_cast<const StringImmNode*>(e.get())->value.size() << ":"
        << static_cast<const StringImmNode*>(e.get())->value;
      return true;
    case ExprKind::ShapeExpr:
      k << "shape(";
      for (const SymExpr& d : static_cast<const ShapeExprNode*>(e.get())->values) k << d.get() << ",";
      k << ")";
      return true;
    case ExprKind::Tuple:
      k << "(";
      for (const Expr& f : static_cast<const TupleNode*>(e.get())->fields) {
        if (!key_of(f, k)) return false;
        k << ",";
      }
      k << ")";
      return true;
    case ExprKind::TupleGetItem: {
      const auto* g = static_cast<const TupleGetItemNode*>(e.get());
      if (!key_of(g->tuple, k)) return false;
      k << "[" << g->index << "]";
      return true;
    }
    case ExprKind::OpRef:
      k << "op:" << static_cast<const OpRefNode*>(e.get())->op->name;
      return true;
    case ExprKind::Call: {
      const auto* c = static_cast<const CallNode*>(e.get());
      if (!key_of(c->callee, k)) return false;
      k << "(";
      for (const Expr& a : c->args) {
        if (!key_of(a, k)) return false;
        k << ",";
      }
      k << ")";
      return true;
    }
    default:
      return false;  // If, functions, extern functions: not merged
  }
}

class Eliminator : public ExprMutator {
 public:
  explicit Eliminator(const IRModule& mod) : ExprMutator(&mod), mod_ref_(mod) {}

  SeqExpr visit_seq(const SeqExpr& seq) override {
    auto saved = std::move(seen_);
    seen_.clear();
    // Each block starts afresh: visit them one at a time.
    bool changed = false;
    std::vector<BindingBlock> blocks;
    for (const BindingBlock& block : seq->blocks) {
      seen_.clear();
      BindingBlock nb{block.dataflow, {}};
      for (const Binding& b : block.bindings) visit_binding(b, nb.bindings);
      for (size_t i = 0; i < nb.bindings.size(); ++i) changed |= nb.bindings[i].value != block.bindings[i].value;
      blocks.push_back(std::move(nb));
    }
    Expr body = visit(seq->body);
    changed |= body != seq->body;
    seen_ = std::move(saved);
    if (!changed) return seq;
    SeqExpr out = make_seq(std::move(blocks), body);
    out->sinfo = seq->sinfo;
    return out;
  }

  void visit_binding(const Binding& b, std::vector<Binding>& out) override {
    Expr value = visit(b.value);
    Binding nb = value == b.value ? b : Binding{b.var, value, b.cast};
    const auto* call = as<CallNode>(value);
    bool candidate =
        !b.is_match_cast() && !is_var(value) && !has_side_effect(value, mod_ref_) && !(call && is_random(*call));
    std::ostringstream k;
    if (!candidate || !key_of(value, k)) {
      out.push_back(nb);
      return;
    }
    for (const auto& [prev_value, prev_var] : seen_[k.str()]) {
      if (!same_details(prev_value, value) || !struct_info_same(prev_var->sinfo, b.var->sinfo)) continue;
      out.push_back(Binding{b.var, prev_var, nullptr});
      // Later uses read the first variable, so what they compute can match
      // too; not for a block output that would then name a dataflow variable.
      if (is_dataflow_var(b.var) || !is_dataflow_var(prev_var)) var_remap_[b.var.get()] = prev_var;
      return;
    }
    seen_[k.str()].push_back({value, b.var});
    out.push_back(nb);
  }

 private:
  // What the key leaves out: the call's attributes and declared struct info.
  static bool same_details(const Expr& a, const Expr& b) {
    const auto* x = as<CallNode>(a);
    const auto* y = as<CallNode>(b);
    if (!x || !y) return true;
    if (!(x->attrs == y->attrs) || x->sinfo_args.size() != y->sinfo_args.size()) return false;
    for (size_t i = 0; i < x->sinfo_args.size(); ++i)
      if (!struct_info_same(x->sinfo_args[i], y->sinfo_args[i])) return false;
    return true;
  }

  const IRModule& mod_ref_;
  std::map<std::string, std::vector<std::pair<Expr, Var>>> seen_;
};

}  // namespace

IRModule eliminate_common_subexpr(const IRModule& mod) {
  return map_functions(mod, [&](const std::string&, const Function& f) { return Eliminator(mod).visit_function(f); });
}

}  // namespace relax
