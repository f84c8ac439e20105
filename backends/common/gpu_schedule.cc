#include "backends/common/gpu_schedule.h"

#include <functional>
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

// The store of a reduction nest: acc[0] = op(acc[0], x) (or op(x,
// acc[0])) with acc a local scalar and x not reading acc; the nest's only
// statements are loops around it.
bool reduction_nest(const tir::Stmt& s, tir::Buffer& acc, tir::BinOp& op) {
  const tir::StmtNode* at = s.get();
  while (at->kind == tir::SKind::For) at = static_cast<const tir::ForNode*>(at)->body.get();
  const auto* st = at->kind == tir::SKind::Store ? static_cast<const tir::StoreNode*>(at) : nullptr;
  if (!st || st->buffer->scope != tir::Scope::Local || st->indices.size() != 1) return false;
  const auto* b = tir::as<tir::BinaryNode>(st->value);
  if (!b || !(b->op == tir::BinOp::Add || b->op == tir::BinOp::Mul || b->op == tir::BinOp::Min ||
              b->op == tir::BinOp::Max))
    return false;
  if (!(st->buffer->dtype.is_float() || st->buffer->dtype.is_int() || st->buffer->dtype.is_uint())) return false;
  auto is_acc = [&](const tir::TExpr& e) {
    const auto* l = tir::as<tir::LoadNode>(e);
    return l && l->buffer == st->buffer && same_indices(l->indices, st->indices);
  };
  const tir::TExpr& x = is_acc(b->a) ? b->b : b->a;
  if (!is_acc(b->a) && !is_acc(b->b)) return false;
  bool reads_acc = false;
  tir::visit_exprs(x, [&](const tir::TExpr& e) {
    if (const auto* l = tir::as<tir::LoadNode>(e); l && l->buffer == st->buffer) reads_acc = true;
  });
  if (reads_acc) return false;
  acc = st->buffer;
  op = b->op;
  return true;
}

bool is_scalar_local(const tir::Buffer& b) {
  if (b->scope != tir::Scope::Local) return false;
  for (const SymExpr& d : b->shape)
    if (!d.is_const() || d.const_value() != 1) return false;
  return true;
}

// Buffers a statement stores to and loads from.
void buffers_of(const tir::Stmt& s, std::set<const tir::BufferNode*>* stored, std::set<const tir::BufferNode*>* loaded) {
  tir::visit_stmts(s, [&](const tir::Stmt& x) {
    if (const auto* st = tir::as<tir::StoreNode>(x); st && stored) stored->insert(st->buffer.get());
  });
  tir::visit_exprs(s, [&](const tir::TExpr& e) {
    if (const auto* l = tir::as<tir::LoadNode>(e); l && loaded) loaded->insert(l->buffer.get());
  });
}

}  // namespace

std::optional<GpuRows> gpu_rows(const GpuStage& st) {
  if (st.vars.empty()) return std::nullopt;
  GpuRows rows;
  rows.work = SymExpr(int64_t(0));
  // Peel the row's scalar locals and flatten its statements.
  std::vector<tir::Stmt> stmts;
  std::function<bool(const tir::Stmt&)> flatten = [&](const tir::Stmt& s) {
    if (const auto* a = tir::as<tir::AllocateNode>(s)) {
      if (!is_scalar_local(a->buffer)) return false;
      rows.locals.push_back(a->buffer);
      return flatten(a->body);
    }
    if (const auto* q = tir::as<tir::SeqNode>(s)) {
      for (const tir::Stmt& x : q->stmts)
        if (!flatten(x)) return false;
      return true;
    }
    stmts.push_back(s);
    return true;
  };
  if (!flatten(st.body)) return std::nullopt;
  bool any_loop = false;
  for (const tir::Stmt& s : stmts) {
    GpuRowStep step;
    step.kind = GpuRowStep::Kind::Serial;
    step.stmt = s;
    if (const auto* store = tir::as<tir::StoreNode>(s)) {
      if (store->buffer->scope == tir::Scope::Global)
        step.kind = GpuRowStep::Kind::Global;
      else if (!is_scalar_local(store->buffer))
        return std::nullopt;
    } else if (const auto* f = tir::as<tir::ForNode>(s)) {
      if (f->loop_kind >= tir::LoopKind::BlockX) return std::nullopt;
      if (reduction_nest(s, step.acc, step.op)) {
        step.kind = GpuRowStep::Kind::Reduce;
      } else if (f->loop_kind == tir::LoopKind::Parallel || f->loop_kind == tir::LoopKind::Vectorized ||
                 independent(*f)) {
        // Its stores must all be global (a thread's locals would diverge).
        bool local_store = false;
        tir::visit_stmts(f->body, [&](const tir::Stmt& x) {
          if (tir::as<tir::AllocateNode>(x)) local_store = true;  // per-iteration arrays: keep it simple
          if (const auto* t = tir::as<tir::StoreNode>(x); t && t->buffer->scope != tir::Scope::Global)
            local_store = true;
        });
        if (local_store) return std::nullopt;
        step.kind = GpuRowStep::Kind::Spread;
      } else {
        return std::nullopt;
      }
      rows.work = rows.work + f->extent;
      any_loop = true;
    } else {
      return std::nullopt;  // conditions, barriers
    }
    rows.steps.push_back(std::move(step));
  }
  if (!any_loop) return std::nullopt;
  // Barriers where a later step reads global memory an earlier one wrote.
  for (size_t i = 0; i < rows.steps.size(); ++i) {
    if (rows.steps[i].kind != GpuRowStep::Kind::Global && rows.steps[i].kind != GpuRowStep::Kind::Spread) continue;
    std::set<const tir::BufferNode*> stored, loaded;
    buffers_of(rows.steps[i].stmt, &stored, nullptr);
    for (size_t j = i + 1; j < rows.steps.size(); ++j) buffers_of(rows.steps[j].stmt, nullptr, &loaded);
    for (const tir::BufferNode* b : stored)
      if (loaded.count(b)) rows.steps[i].barrier_after = true;
  }
  return rows;
}

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
