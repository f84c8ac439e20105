// legalize: every graph op call with a registered legaliser
// (passes/legalize/legalize.h) becomes a call_tir of a tensor program added
// to the module, preceded by the bindings the legaliser needs (match_casts
// that name unknown dims, tuple items). The bind-shapes pass runs first, so
// operands whose rank is known but whose dims are not are bound to fresh
// variables and each call's struct info is deduced from them. Calls without
// a legaliser, and the ops the VM lowering handles (OpInfo::lowering), stay
// as they are.
#include "passes/legalize/legalize.h"

#include "ir/error.h"
#include "ir/explain.h"
#include "ir/mutator.h"
#include "ir/normalize.h"
#include "ir/op.h"
#include "passes/passes.h"

namespace relax {
namespace {

class Legalizer : public ExprMutator {
 public:
  Legalizer(IRModule& out, const LegalizerRegistry& reg) : ExprMutator(&out), out_(out), reg_(reg), ctx_(out, ana_) {}

  void visit_binding(const Binding& b, std::vector<Binding>& out) override {
    Expr value = visit(b.value);
    if (!b.is_match_cast()) {
      if (std::optional<Expr> r = legalize_call(value, b.var->name, out)) value = *r;
    }
    if (value == b.value) {
      out.push_back(b);
      return;
    }
    out.push_back(Binding{b.var, value, b.cast});
  }

 private:
  std::optional<Expr> legalize_call(const Expr& e, const std::string& name, std::vector<Binding>& out) {
    const auto* c = as<CallNode>(e);
    if (!c || !c->op() || c->op()->lowered_by_vm()) return std::nullopt;
    const LegalizeFn* fn = reg_.find(c->op()->name);
    if (!fn) return std::nullopt;
    ctx_.begin_call(in_dataflow_, name);
    std::optional<Expr> r;
    try {
      r = (*fn)(ctx_, *c);
    } catch (const Error& err) {
      fail("legalize ", c->op()->name, ": ", err.what());
    }
    std::vector<Binding> pending = ctx_.take_pending();
    if (!r) {
      if (explaining("legalize"))
        explain("legalize", c->op()->name + " '" + name + "' left as it is: " +
                                (ctx_.declined().empty() ? "its legaliser gives no reason" : ctx_.declined()));
      return std::nullopt;
    }
    out.insert(out.end(), pending.begin(), pending.end());
    return r;
  }

  IRModule& out_;
  const LegalizerRegistry& reg_;
  LegalizeContext ctx_;
};

}  // namespace

IRModule legalize(const IRModule& mod) {
  const IRModule bound = bind_shapes(mod);
  IRModule out = bound;
  Legalizer lg(out, LegalizerRegistry::global());
  for (const auto& [name, item] : bound.items()) {
    if (auto* f = std::get_if<Function>(&item)) {
      Function nf = lg.visit_function(*f);
      if (nf != *f) out.add_function(name, nf);
    }
  }
  return out;
}

}  // namespace relax
