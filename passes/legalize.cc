// legalize: every graph op call with a registered legaliser
// (backends/common/legalize.h) becomes a call_tir of a tensor program added
// to the module, preceded by the bindings the legaliser needs (match_casts
// that name unknown dims, tuple items). Operands whose rank is known but
// whose dims are not are bound to fresh variables first, and the call's
// struct info is deduced again from them. Calls without a legaliser, and
// the cross-level and VM-handled ops, stay as they are.
#include "backends/common/legalize.h"

#include "ir/error.h"
#include "ir/mutator.h"
#include "ir/normalize.h"
#include "ir/op.h"

namespace relax {
namespace {

bool left_to_vm(const std::string& op) {
  static const char* kOps[] = {"call_tir",        "call_library",    "call_builtin", "call_pure_builtin", "shape_of",
                               "tensor_to_shape", "shape_to_tensor", "loop",         "scan"};
  for (const char* o : kOps)
    if (op == o) return true;
  return false;
}

class Legalizer : public ExprMutator {
 public:
  Legalizer(IRModule& out, const LegalizerRegistry& reg) : ExprMutator(&out), out_(out), reg_(reg), ctx_(out, ana_) {}

  SeqExpr visit_seq(const SeqExpr& seq) override {
    bool changed = false;
    std::vector<BindingBlock> blocks;
    bool saved = in_dataflow_;
    for (const BindingBlock& block : seq->blocks) {
      in_dataflow_ = block.dataflow;
      BindingBlock nb{block.dataflow, {}};
      for (const Binding& b : block.bindings) visit_binding(b, nb.bindings);
      changed |= nb.bindings.size() != block.bindings.size();
      for (size_t i = 0; !changed && i < nb.bindings.size(); ++i) {
        const Binding &x = nb.bindings[i], &y = block.bindings[i];
        changed |= x.var != y.var || x.value != y.value || x.cast != y.cast;
      }
      if (!nb.bindings.empty()) blocks.push_back(std::move(nb));
    }
    in_dataflow_ = saved;
    Expr body = visit(seq->body);
    changed |= body != seq->body;
    if (!changed) return seq;
    SeqExpr out = make_seq(std::move(blocks), body);
    if (!out->sinfo) out->sinfo = seq->sinfo;
    return out;
  }

  void visit_binding(const Binding& b, std::vector<Binding>& out) override {
    Expr value = visit(b.value);
    if (!b.is_match_cast()) {
      if (std::optional<Expr> r = legalize_call(value, out)) value = *r;
    }
    if (value == b.value) {
      out.push_back(b);
      return;
    }
    out.push_back(Binding{b.var, value, b.cast});
  }

 private:
  // The call with its operands of unknown dims bound (into ctx's pending
  // bindings) and its struct info deduced again; the call itself when none.
  Expr bind_operands(const Expr& e) {
    const auto* c = as<CallNode>(e);
    bool changed = false;
    std::vector<Expr> args;
    for (const Expr& a : c->args) {
      Expr na = a;
      if (const auto* t = as<TensorSI>(a->sinfo); t && t->ndim >= 0 && !t->shape && is_var(a)) {
        na = ctx_.bind_tensor(a).value_or(a);
      } else if (const auto* s = as<ShapeSI>(a->sinfo); s && s->ndim >= 0 && !s->values && is_var(a)) {
        if (auto dims = ctx_.bind_shape(a)) na = make_shape(*dims);
      } else if (const auto* tup = as<TupleNode>(a)) {
        std::vector<Expr> fields;
        bool fc = false;
        for (const Expr& f : tup->fields) {
          Expr nf = f;
          if (const auto* t = as<TensorSI>(f->sinfo); t && t->ndim >= 0 && !t->shape && is_var(f))
            nf = ctx_.bind_tensor(f).value_or(f);
          fc |= nf != f;
          fields.push_back(nf);
        }
        if (fc) na = make_tuple(std::move(fields));
      }
      changed |= na != a;
      args.push_back(na);
    }
    if (!changed) return e;
    Expr nc = make_call(c->callee, std::move(args), c->attrs, c->sinfo_args);
    try {
      nc->sinfo = infer_struct_info(nc, InferContext{ana_, &out_});
    } catch (const Error&) {
      nc->sinfo = e->sinfo;
    }
    return nc;
  }

  std::optional<Expr> legalize_call(const Expr& e, std::vector<Binding>& out) {
    const auto* c = as<CallNode>(e);
    if (!c || !c->op() || left_to_vm(c->op()->name)) return std::nullopt;
    const LegalizeFn* fn = reg_.find(c->op()->name);
    if (!fn) return std::nullopt;
    ctx_.begin_call(in_dataflow_);
    Expr call = bind_operands(e);
    std::optional<Expr> r;
    try {
      r = (*fn)(ctx_, *as<CallNode>(call));
    } catch (const Error& err) {
      fail("legalize ", c->op()->name, ": ", err.what());
    }
    std::vector<Binding> pending = ctx_.take_pending();
    if (!r) return std::nullopt;
    out.insert(out.end(), pending.begin(), pending.end());
    return r;
  }

  IRModule& out_;
  const LegalizerRegistry& reg_;
  LegalizeContext ctx_;
  bool in_dataflow_ = false;
};

}  // namespace

IRModule legalize(const IRModule& mod) {
  IRModule out = mod;
  Legalizer lg(out, LegalizerRegistry::global());
  for (const auto& [name, item] : mod.items()) {
    if (auto* f = std::get_if<Function>(&item)) {
      Function nf = lg.visit_function(*f);
      if (nf != *f) out.add_function(name, nf);
    }
  }
  return out;
}

}  // namespace relax
