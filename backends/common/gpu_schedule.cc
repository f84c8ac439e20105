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
      SymExpr iterations = f->extent;  // a reduction's whole nest (split flat over the threads)
      if (step.kind == GpuRowStep::Kind::Reduce)
        for (const auto* g = tir::as<tir::ForNode>(f->body); g; g = tir::as<tir::ForNode>(g->body))
          iterations = iterations * g->extent;
      rows.work = rows.work + iterations;
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
    std::set<const tir::BufferNode*> stored;
    tir::visit_stmts(rows.steps[i].stmt, [&](const tir::Stmt& x) {
      if (const auto* st = tir::as<tir::StoreNode>(x)) stored.insert(st->buffer.get());
    });
    for (size_t j = i + 1; j < rows.steps.size(); ++j)
      for (const tir::BufferNode* b : stored) rows.steps[i].barrier_after |= tir::reads_buffer(rows.steps[j].stmt, b);
  }
  return rows;
}

namespace {

bool depends_on(const tir::TExpr& e, const SymExpr& v) {
  bool found = false;
  tir::visit_exprs(e, [&](const tir::TExpr& x) {
    if (const auto* s = tir::as<tir::SymNodeT>(x))
      for (const SymExpr& f : free_vars(s->value))
        if (f == v) found = true;
  });
  return found;
}

// Stores to global memory under `cond`.
tir::Stmt guard_stores(const tir::Stmt& s, const tir::TExpr& cond) {
  switch (s->kind) {
    case tir::SKind::Store: {
      const auto* st = tir::as<tir::StoreNode>(s);
      return st->buffer->scope == tir::Scope::Global ? tir::make_if(cond, s) : s;
    }
    case tir::SKind::For: {
      const auto* f = tir::as<tir::ForNode>(s);
      return tir::make_for(f->var, f->extent, f->loop_kind, guard_stores(f->body, cond));
    }
    case tir::SKind::Seq: {
      std::vector<tir::Stmt> out;
      for (const tir::Stmt& x : tir::as<tir::SeqNode>(s)->stmts) out.push_back(guard_stores(x, cond));
      return tir::make_seq(out);
    }
    case tir::SKind::IfThenElse: {
      const auto* i = tir::as<tir::IfThenElseNode>(s);
      return tir::make_if(i->cond, guard_stores(i->then_case, cond),
                          i->else_case ? guard_stores(i->else_case, cond) : nullptr);
    }
    case tir::SKind::Allocate: {
      const auto* a = tir::as<tir::AllocateNode>(s);
      return tir::make_allocate(a->buffer, guard_stores(a->body, cond));
    }
    case tir::SKind::Barrier:
      return s;
  }
  return s;
}

// Copies of one body, merged loop by loop: loops (same variable and
// extent) become one loop around the jammed bodies, sequences jam
// position by position, allocations nest, anything else runs copy after
// copy. False when the copies' structure differs.
bool jam(const std::vector<tir::Stmt>& copies, tir::Stmt& out) {
  const tir::Stmt& first = copies[0];
  for (const tir::Stmt& c : copies)
    if (c->kind != first->kind) return false;
  switch (first->kind) {
    case tir::SKind::For: {
      const auto* f = tir::as<tir::ForNode>(first);
      std::vector<tir::Stmt> bodies;
      for (const tir::Stmt& c : copies) {
        const auto* g = tir::as<tir::ForNode>(c);
        if (!(g->var == f->var) || !(g->extent == f->extent) || g->loop_kind != f->loop_kind) return false;
        bodies.push_back(g->body);
      }
      tir::Stmt body;
      if (!jam(bodies, body)) return false;
      out = tir::make_for(f->var, f->extent, f->loop_kind, body);
      return true;
    }
    case tir::SKind::Seq: {
      size_t n = tir::as<tir::SeqNode>(first)->stmts.size();
      for (const tir::Stmt& c : copies)
        if (tir::as<tir::SeqNode>(c)->stmts.size() != n) return false;
      std::vector<tir::Stmt> seq;
      for (size_t i = 0; i < n; ++i) {
        std::vector<tir::Stmt> at;
        for (const tir::Stmt& c : copies) at.push_back(tir::as<tir::SeqNode>(c)->stmts[i]);
        tir::Stmt j;
        if (!jam(at, j)) return false;
        seq.push_back(j);
      }
      out = tir::make_seq(seq);
      return true;
    }
    case tir::SKind::Allocate: {
      std::vector<tir::Stmt> bodies;
      for (const tir::Stmt& c : copies) bodies.push_back(tir::as<tir::AllocateNode>(c)->body);
      tir::Stmt body;
      if (!jam(bodies, body)) return false;
      for (size_t i = copies.size(); i-- > 0;) body = tir::make_allocate(tir::as<tir::AllocateNode>(copies[i])->buffer, body);
      out = body;
      return true;
    }
    default: {
      // Leaves run copy after copy; loops under a condition cannot jam.
      bool loops = false;
      for (const tir::Stmt& c : copies)
        tir::visit_stmts(c, [&](const tir::Stmt& x) { loops = loops || x->kind == tir::SKind::For; });
      if (loops) return false;
      out = tir::make_seq(copies);
      return true;
    }
  }
}

}  // namespace

// The most expression nodes the copies of a tiled body may hold together.
constexpr int64_t kMaxTiledNodes = 4096;

std::optional<GpuStage> gpu_register_tile(const GpuStage& st, int64_t rows, int64_t cols) {
  size_t n = st.vars.size();
  if (n == 0) return std::nullopt;
  if (n == 1) rows = 1;
  if (rows * cols <= 1) return std::nullopt;
  bool loop = false, unsupported = false;
  tir::visit_stmts(st.body, [&](const tir::Stmt& x) {
    loop = loop || x->kind == tir::SKind::For;
    if (x->kind == tir::SKind::Barrier) unsupported = true;
    if (const auto* a = tir::as<tir::AllocateNode>(x); a && a->buffer->scope != tir::Scope::Local) unsupported = true;
  });
  if (!loop || unsupported) return std::nullopt;
  // Copies of a large body make a shader the driver compiles for minutes
  // (a cubic resize's weights), for no gain.
  int64_t nodes = 0;
  tir::visit_exprs(st.body, [&](const tir::TExpr&) { ++nodes; });
  if (nodes * rows * cols > kMaxTiledNodes) return std::nullopt;
  // The loads accumulated into a thread's registers inside loops (a
  // matmul's A and B, a conv's input and weight), not in-place nests over
  // global memory: each as the set of stage vars its indices use.
  std::vector<std::vector<bool>> uses;
  tir::visit_stmts(st.body, [&](const tir::Stmt& x) {
    const auto* f = tir::as<tir::ForNode>(x);
    if (!f) return;
    tir::visit_stmts(f->body, [&](const tir::Stmt& y) {
      const auto* acc = tir::as<tir::StoreNode>(y);
      if (!acc || acc->buffer->scope != tir::Scope::Local) return;
      tir::visit_exprs(acc->value, [&](const tir::TExpr& e) {
        const auto* l = tir::as<tir::LoadNode>(e);
        if (!l || l->buffer->scope != tir::Scope::Global) return;
        std::vector<bool> u(n, false);
        for (size_t v = 0; v < n; ++v)
          for (const tir::TExpr& i : l->indices) u[v] = u[v] || depends_on(i, st.vars[v]);
        uses.push_back(u);
      });
    });
  });
  if (uses.empty()) return std::nullopt;
  // The pair of vars (a row var, a column var) whose tile makes the fewest
  // loads per output, counting the waste of a tile wider than a constant
  // extent; the last var alone when there is one var.
  auto waste = [&](size_t v, int64_t t) {
    const SymExpr& e = st.extents[v];
    if (!e.is_const()) return 1.0;
    int64_t x = std::max<int64_t>(e.const_value(), 1);
    return double((x + t - 1) / t * t) / double(x);
  };
  double best = 1.0;  // a thread per output: one load of each per output
  int best_r = -1, best_c = -1;
  for (int c = int(n) - 1; c >= 0; --c)
    for (int r = c - 1; r >= -1; --r) {
      int64_t tr = r < 0 ? 1 : rows;
      double loads = 0;
      for (const std::vector<bool>& u : uses)
        loads += double((r >= 0 && u[size_t(r)] ? tr : 1) * (u[size_t(c)] ? cols : 1));
      double per_output = loads / double(uses.size() * size_t(tr * cols));
      per_output *= waste(size_t(c), cols) * (r < 0 ? 1.0 : waste(size_t(r), tr));
      if (per_output < best - 1e-9) {
        best = per_output;
        best_r = r;
        best_c = c;
      }
    }
  if (best_c < 0 || best > 0.75) return std::nullopt;  // too little shared to pay for fewer threads
  if (best_r < 0) rows = 1;

  GpuStage out;
  out.vars = st.vars;
  out.extents = st.extents;
  const SymExpr vc = st.vars[size_t(best_c)];
  SymExpr wc = SymExpr::var(vc.name() + "_t");
  SymExpr ec = st.extents[size_t(best_c)];
  out.vars[size_t(best_c)] = wc;
  out.extents[size_t(best_c)] = floordiv(ec + (cols - 1), SymExpr(cols));
  std::optional<SymExpr> vr;
  SymExpr wr, er;
  if (best_r >= 0) {
    vr = st.vars[size_t(best_r)];
    wr = SymExpr::var(vr->name() + "_t");
    er = st.extents[size_t(best_r)];
    out.vars[size_t(best_r)] = wr;
    out.extents[size_t(best_r)] = floordiv(er + (rows - 1), SymExpr(rows));
  }
  // The buffers the body allocates: each copy gets its own.
  std::vector<tir::Buffer> inner;
  tir::visit_stmts(st.body, [&](const tir::Stmt& x) {
    if (const auto* a = tir::as<tir::AllocateNode>(x)) inner.push_back(a->buffer);
  });
  std::vector<tir::Stmt> copies;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      SymMap<SymExpr> map;
      SymExpr ic = wc * cols + c;
      map[vc] = min(ic, ec - 1);
      tir::TExpr valid = tir::binary(tir::BinOp::LT, tir::sym(ic), tir::sym(ec));
      if (vr) {
        SymExpr ir = wr * rows + r;
        map[*vr] = min(ir, er - 1);
        valid = tir::binary(tir::BinOp::And, tir::binary(tir::BinOp::LT, tir::sym(ir), tir::sym(er)), valid);
      }
      tir::TirRewriter rw;
      SymMap<SymExpr> m = map;
      rw.sym = [m](const SymExpr& e) { return substitute(e, m); };
      std::string suffix = "_" + std::to_string(r) + "_" + std::to_string(c);
      rw.buffer = [&inner, suffix](const tir::Buffer& b) -> tir::Buffer {
        for (const tir::Buffer& x : inner)
          if (x == b) return tir::make_buffer(b->name + suffix, b->dtype, b->shape, b->scope);
        return nullptr;
      };
      copies.push_back(guard_stores(rw.stmt(st.body), valid));
    }
  tir::Stmt body;
  if (!jam(copies, body)) return std::nullopt;
  out.body = body;
  return out;
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
