// library-offload: graph ops that a library does better than a generated
// loop nest become call_library calls, before legalisation sees them.
// Today: f32/f64 matmul -> OpenBLAS (runtime/builtins_blas.cc), when both
// operands and the result have known shapes (the VM allocates the result).
#include "ir/mutator.h"
#include "ir/op.h"
#include "passes/passes.h"

namespace relax {
namespace {

class Offloader : public ExprMutator {
 public:
  explicit Offloader(const IRModule& mod) : ExprMutator(&mod) {}
  bool used = false;

 protected:
  Expr visit_call(const Expr& e) override {
    Expr visited = ExprMutator::visit_call(e);
    const auto* c = as<CallNode>(visited);
    const OpInfo* op = c->op();
    if (!op || op->name != "matmul" || c->args.size() != 2) return visited;
    const auto* out = as<TensorSI>(visited->sinfo);
    if (!out || !out->shape || !(out->dtype == DataType::f32() || out->dtype == DataType::f(64))) return visited;
    for (const Expr& a : c->args) {
      const auto* t = as<TensorSI>(a->sinfo);
      if (!t || !t->shape || t->dtype != out->dtype || t->shape->empty()) return visited;
    }
    used = true;
    Expr r = make_op_call("call_library", {make_string("blas.matmul"), make_tuple({c->args[0], c->args[1]})}, {},
                          {visited->sinfo});
    r->sinfo = visited->sinfo;
    return r;
  }
};

}  // namespace

IRModule library_offload(const IRModule& mod) {
  bool used = false;
  IRModule out = map_functions(mod, [&](const std::string&, const Function& f) {
    Offloader o(mod);
    Function r = o.visit_function(f);
    used = used || o.used;
    return r;
  });
  if (used && !out.extern_decl("blas.matmul")) out.add_extern("blas.matmul");
  return out;
}

}  // namespace relax
