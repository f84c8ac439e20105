#include "backends/common/gpu_schedule.h"

#include <set>

#include "ir/error.h"
#include "ir/tir_functor.h"
#include "passes/op_pattern.h"

namespace relax {
namespace {

bool same_indices(const std::vector<tir::TExpr>& a, const std::vector<tir::TExpr>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i]) continue;
    const auto* x = tir::as<tir::SymNodeT>(a[i]);
    const auto* y = tir::as<tir::SymNodeT>(b[i]);
    if (!x || !y || x->value != y->value) return false;
  }
  return true;
}

// Whether the iterations of `f` are independent although it is not marked
// so: every store inside to a buffer not allocated inside indexes some
// dimension by f's variable itself (so iterations write disjoint
// elements) and is to a global buffer; every load of a buffer stored
// inside reads at exactly an index stored inside (its own iteration's
// element); no barrier.
bool independent(const tir::ForNode& f) {
  std::set<const tir::BufferNode*> inner;  // allocated inside: private to an iteration
  std::vector<const tir::StoreNode*> stores;
  bool ok = true;
  tir::visit_stmts(f.body, [&](const tir::Stmt& s) {
    if (const auto* a = tir::as<tir::AllocateNode>(s)) inner.insert(a->buffer.get());
    if (s->kind == tir::SKind::Barrier) ok = false;
    if (const auto* st = tir::as<tir::StoreNode>(s)) stores.push_back(st);
  });
  if (!ok) return false;
  std::set<const tir::BufferNode*> stored;
  for (const tir::StoreNode* st : stores) {
    if (inner.count(st->buffer.get())) continue;
    if (st->buffer->scope != tir::Scope::Global) return false;
    bool by_var = false;
    for (const tir::TExpr& i : st->indices)
      if (const auto* v = tir::as<tir::SymNodeT>(i); v && v->value == f.var) by_var = true;
    if (!by_var) return false;
    stored.insert(st->buffer.get());
  }
  tir::visit_exprs(f.body, [&](const tir::TExpr& e) {
    const auto* l = tir::as<tir::LoadNode>(e);
    if (!ok || !l || !stored.count(l->buffer.get())) return;
    bool at_store = false;
    for (const tir::StoreNode* st : stores)
      if (st->buffer == l->buffer && same_indices(st->indices, l->indices)) at_store = true;
    if (!at_store) ok = false;
  });
  return ok;
}

}  // namespace

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
