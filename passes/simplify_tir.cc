// simplify-tir: index arithmetic in every tensor program, simplified under
// the bounds its loops give their variables. Inlining composes index maps
// (a reshape of a transpose of a split), whose divisions and remainders
// mostly cancel once the loop bounds are known.
#include "ir/tir_functor.h"
#include "passes/passes.h"

namespace relax {

IRModule simplify_tir(const IRModule& mod) {
  IRModule out = mod;
  for (const std::string& name : mod.program_names()) {
    tir::Program p = mod.program(name);
    tir::Stmt body = tir::simplify_indices(p->body);
    if (body != p->body)
      out.add_program(name, tir::make_program(p->name, p->inputs, p->outputs, p->sym_params, body, p->attrs));
  }
  return out;
}

}  // namespace relax
