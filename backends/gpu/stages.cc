// The stage rule (gpu_stages): a program as kernel launches, each with its
// loops spread over threads.
#include <functional>
#include <set>

#include "backends/gpu/rule_util.h"
#include "ir/error.h"
#include "ir/tir_functor.h"
#include "passes/analysis/op_pattern.h"  // StoreNest

namespace relax {

using namespace gpu;

std::vector<GpuStage> gpu_stages(const tir::Program& p) {
  if (const auto* a = tir::as<tir::AllocateNode>(p->body); a && a->buffer->scope == tir::Scope::Global)
    fail("gpu schedule: program @", p->name, " allocates the workspace '", a->buffer->name,
         "' itself; a GPU kernel cannot (run lift-workspaces first)");
  std::vector<tir::Stmt> top;
  if (const auto* s = tir::as<tir::SeqNode>(p->body))
    top = s->stmts;
  else
    top = {p->body};
  std::vector<GpuStage> out;
  for (const tir::Stmt& s : top) {
    GpuStage st;
    if (std::optional<StoreNest> nest = as_store_nest(s)) {
      tir::Stmt body = s;
      while (const auto* f = tir::as<tir::ForNode>(body)) {
        st.vars.push_back(f->var);
        st.extents.push_back(f->extent);
        body = f->body;
      }
      st.body = body;
    } else {
      tir::Stmt body = s;
      while (const auto* f = tir::as<tir::ForNode>(body)) {
        bool marked = f->loop_kind == tir::LoopKind::Parallel || f->loop_kind == tir::LoopKind::Vectorized;
        if (!marked && !independent(*f)) break;
        st.vars.push_back(f->var);
        st.extents.push_back(f->extent);
        body = f->body;
      }
      st.body = body;
    }
    out.push_back(std::move(st));
  }
  return out;
}

}  // namespace relax
