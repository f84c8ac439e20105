#include "backends/common/gpu_schedule.h"

#include <cmath>
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
  if (!b ||
      !(b->op == tir::BinOp::Add || b->op == tir::BinOp::Mul || b->op == tir::BinOp::Min || b->op == tir::BinOp::Max))
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

// A row body as its scalar locals and its statements in order (sequences
// flattened); false when it allocates anything else.
bool row_statements(const tir::Stmt& s, std::vector<tir::Buffer>& locals, std::vector<tir::Stmt>& stmts) {
  if (const auto* a = tir::as<tir::AllocateNode>(s)) {
    if (!is_scalar_local(a->buffer)) return false;
    locals.push_back(a->buffer);
    return row_statements(a->body, locals, stmts);
  }
  if (const auto* q = tir::as<tir::SeqNode>(s)) {
    for (const tir::Stmt& x : q->stmts)
      if (!row_statements(x, locals, stmts)) return false;
    return true;
  }
  stmts.push_back(s);
  return true;
}

}  // namespace

std::optional<GpuRows> gpu_rows(const GpuStage& st) {
  if (st.vars.empty()) return std::nullopt;
  GpuRows rows;
  rows.work = SymExpr(int64_t(0));
  std::vector<tir::Stmt> stmts;
  if (!row_statements(st.body, rows.locals, stmts)) return std::nullopt;
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
      for (size_t i = copies.size(); i-- > 0;)
        body = tir::make_allocate(tir::as<tir::AllocateNode>(copies[i])->buffer, body);
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

namespace {

// `flat` as indices of `vars` over `extents` (row-major, the last fastest).
void unflatten_into(SymExpr flat, const std::vector<SymExpr>& vars, const std::vector<SymExpr>& extents,
                    SymMap<SymExpr>& map) {
  for (size_t k = vars.size(); k-- > 0;) {
    map[vars[k]] = k == 0 ? flat : floormod(flat, extents[k]);
    flat = floordiv(flat, extents[k]);
  }
}

// The identity of `op` on `t`: what a thread with no iterations contributes.
tir::TExpr reduce_identity(tir::BinOp op, DataType t) {
  switch (op) {
    case tir::BinOp::Add:
      return t.is_float() ? tir::imm(t, 0) : tir::imm_int(t, 0);
    case tir::BinOp::Mul:
      return t.is_float() ? tir::imm(t, 1) : tir::imm_int(t, 1);
    case tir::BinOp::Max:
    case tir::BinOp::Min: {
      bool mx = op == tir::BinOp::Max;
      if (t.is_float()) return tir::imm(t, mx ? -HUGE_VAL : HUGE_VAL);
      if (t.is_uint()) return tir::imm_int(t, mx ? 0 : (t.bits >= 64 ? -1 : int64_t((uint64_t(1) << t.bits) - 1)));
      int64_t lo = t.bits >= 64 ? INT64_MIN : -(int64_t(1) << (t.bits - 1));
      return tir::imm_int(t, mx ? lo : -(lo + 1));
    }
    default:
      fail("a workgroup reduction of this kind");
  }
}

// `for v in range(extent) body`, its iterations split over the threads:
// thread t runs v = t, t + T, ... below the extent.
tir::Stmt strided_loop(const std::vector<SymExpr>& vars, const std::vector<SymExpr>& extents, const tir::Stmt& body,
                       const SymExpr& thread, int64_t threads, int& fresh) {
  SymExpr total(int64_t(1));
  for (const SymExpr& e : extents) total = total * e;
  SymExpr j = SymExpr::var("j" + std::to_string(fresh++));
  SymExpr index = j * SymExpr(threads) + thread;
  SymMap<SymExpr> map;
  unflatten_into(index, vars, extents, map);
  return tir::make_for(
      j, floordiv(total + SymExpr(threads - 1), SymExpr(threads)), tir::LoopKind::Serial,
      tir::make_if(tir::binary(tir::BinOp::LT, tir::sym(index), tir::sym(total)), tir::substitute(body, map)));
}

}  // namespace

GpuBlockStage gpu_row_block(const GpuStage& st, const GpuRows& rows, int64_t threads, int64_t warp) {
  if (threads < 1 || (threads & (threads - 1)) != 0 || (warp > 1 && (warp & (warp - 1)) != 0))
    fail("gpu_row_block: threads (", threads, ") and warp (", warp, ") must be powers of two");
  GpuBlockStage out;
  out.vars = st.vars;
  out.extents = st.extents;
  out.threads = threads;
  out.thread = SymExpr::var("tid");
  const SymExpr& t = out.thread;
  auto at0 = [] { return std::vector<tir::TExpr>{tir::sym(SymExpr(int64_t(0)))}; };
  std::vector<tir::Stmt> body;
  std::vector<tir::Buffer> scratch;  // shared arrays and the reductions' saved initial values
  int fresh = 0;
  auto barrier = [&] { body.push_back(tir::make_barrier()); };
  for (const GpuRowStep& step : rows.steps) {
    switch (step.kind) {
      case GpuRowStep::Kind::Serial:
        body.push_back(step.stmt);
        break;
      case GpuRowStep::Kind::Global:
        body.push_back(
            tir::make_if(tir::binary(tir::BinOp::EQ, tir::sym(t), tir::sym(SymExpr(int64_t(0)))), step.stmt));
        break;
      case GpuRowStep::Kind::Spread: {
        const auto* f = tir::as<tir::ForNode>(step.stmt);
        body.push_back(strided_loop({f->var}, {f->extent}, f->body, t, threads, fresh));
        break;
      }
      case GpuRowStep::Kind::Reduce: {
        // Each thread folds its share of the nest's iterations into acc,
        // from the identity; the partials meet (a warp's lanes by shuffles,
        // then the warps' partials in shared memory, or a shared tree), and
        // every thread ends with init op (all of them).
        const tir::Buffer& acc = step.acc;
        DataType dt = acc->dtype;
        auto a = [&] { return tir::load(acc, at0()); };
        auto combine = [&](tir::TExpr x, tir::TExpr y) { return tir::binary(step.op, std::move(x), std::move(y)); };
        std::string k = std::to_string(fresh++);
        tir::Buffer init = tir::make_buffer("init" + k, dt, {SymExpr(int64_t(1))}, tir::Scope::Local);
        scratch.push_back(init);
        body.push_back(tir::make_store(init, at0(), a()));
        body.push_back(tir::make_store(acc, at0(), reduce_identity(step.op, dt)));
        std::vector<SymExpr> vars, extents;
        tir::Stmt inner = step.stmt;
        for (const auto* f = tir::as<tir::ForNode>(inner); f; f = tir::as<tir::ForNode>(inner)) {
          vars.push_back(f->var);
          extents.push_back(f->extent);
          inner = f->body;
        }
        body.push_back(strided_loop(vars, extents, inner, t, threads, fresh));
        bool shuffle = warp > 1 && threads % warp == 0 && dt.bits == 32 && dt.is_scalar();
        int64_t parts = shuffle ? threads / warp : threads;
        tir::Buffer red = tir::make_buffer("red" + k, dt, {SymExpr(parts)}, tir::Scope::Shared);
        scratch.push_back(red);
        if (shuffle) {
          for (int64_t off = warp / 2; off > 0; off /= 2)
            body.push_back(tir::make_store(
                acc, at0(),
                combine(a(), tir::call(tir::Intrinsic::shfl_xor, {a(), tir::imm_int(DataType::i32(), off)}))));
          body.push_back(tir::make_if(
              tir::binary(tir::BinOp::EQ, tir::sym(floormod(t, SymExpr(warp))), tir::sym(SymExpr(int64_t(0)))),
              tir::make_store(red, {tir::sym(floordiv(t, SymExpr(warp)))}, a())));
          barrier();
          body.push_back(tir::make_store(acc, at0(), tir::load(init, at0())));
          SymExpr g = SymExpr::var("g" + k);
          body.push_back(tir::make_for(g, SymExpr(parts), tir::LoopKind::Serial,
                                       tir::make_store(acc, at0(), combine(a(), tir::load(red, {tir::sym(g)})))));
        } else {
          body.push_back(tir::make_store(red, {tir::sym(t)}, a()));
          barrier();
          for (int64_t half = threads / 2; half > 0; half /= 2) {
            body.push_back(tir::make_if(tir::binary(tir::BinOp::LT, tir::sym(t), tir::sym(SymExpr(half))),
                                        tir::make_store(red, {tir::sym(t)},
                                                        combine(tir::load(red, {tir::sym(t)}),
                                                                tir::load(red, {tir::sym(t + SymExpr(half))})))));
            barrier();
          }
          body.push_back(tir::make_store(acc, at0(), combine(tir::load(init, at0()), tir::load(red, at0()))));
        }
        barrier();  // the shared array is free again
        break;
      }
    }
    if (step.barrier_after) barrier();
  }
  tir::Stmt s = tir::make_seq(std::move(body));
  for (size_t i = scratch.size(); i-- > 0;) s = tir::make_allocate(scratch[i], s);
  for (size_t i = rows.locals.size(); i-- > 0;) s = tir::make_allocate(rows.locals[i], s);
  out.body = s;
  return out;
}

namespace {

bool depends_on_any(const tir::TExpr& e, const std::vector<SymExpr>& vars) {
  for (const SymExpr& v : vars)
    if (depends_on(e, v)) return true;
  return false;
}

// Bytes a value of `t` takes in shared memory (narrow types are held
// widened, as the code generators compute them).
int64_t shared_bytes(DataType t) { return t.bits > 32 ? 8 : 4; }

}  // namespace

// The most shared memory a tiled stage may use: Vulkan's guaranteed
// minimum (maxComputeSharedMemorySize), and CUDA's static limit is larger.
constexpr int64_t kMaxSharedBytes = 16384;

std::optional<GpuBlockStage> gpu_shared_tile(const GpuStage& st, int64_t tr, int64_t tc, int64_t threads, int64_t tk) {
  constexpr int64_t tx = 16;  // threads along a row of the block
  size_t n = st.vars.size();
  if (n < 2 || tr < 1 || tc < 1 || tk < 1 || threads % tx != 0) return std::nullopt;
  const int64_t ty = threads / tx, tm = ty * tr, tn = tx * tc;
  if ((tk * tm) % threads != 0 || (tk * tn) % threads != 0) return std::nullopt;
  // The body: scalar locals, statements without loops, and one reduction nest.
  std::vector<tir::Buffer> locals;
  std::vector<tir::Stmt> stmts;
  if (!row_statements(st.body, locals, stmts)) return std::nullopt;
  int red = -1;
  tir::Buffer acc;
  tir::BinOp op = tir::BinOp::Add;
  for (size_t i = 0; i < stmts.size(); ++i) {
    bool loops = false;
    tir::visit_stmts(stmts[i], [&](const tir::Stmt& x) {
      loops = loops || x->kind == tir::SKind::For || x->kind == tir::SKind::Barrier;
    });
    if (!loops) continue;
    if (red >= 0 || !reduction_nest(stmts[i], acc, op)) return std::nullopt;
    red = int(i);
  }
  if (red < 0) return std::nullopt;
  std::vector<SymExpr> kv, ke;
  const tir::StmtNode* at = stmts[size_t(red)].get();
  for (; at->kind == tir::SKind::For; at = static_cast<const tir::ForNode*>(at)->body.get()) {
    const auto* f = static_cast<const tir::ForNode*>(at);
    kv.push_back(f->var);
    ke.push_back(f->extent);
  }
  for (const SymExpr& e : ke)
    for (const SymExpr& v : free_vars(e))
      for (const std::vector<SymExpr>* list : {&st.vars, static_cast<const std::vector<SymExpr>*>(&kv)})
        for (const SymExpr& w : *list)
          if (v == w) return std::nullopt;  // a triangular nest
  const auto* update = static_cast<const tir::StoreNode*>(at);
  const auto* b = tir::as<tir::BinaryNode>(update->value);
  auto is_acc = [&](const tir::TExpr& e) {
    const auto* l = tir::as<tir::LoadNode>(e);
    return l && l->buffer == acc;
  };
  const tir::TExpr x = is_acc(b->a) ? b->b : b->a;
  std::set<const tir::BufferNode*> written;
  tir::visit_stmts(st.body, [&](const tir::Stmt& s) {
    if (const auto* t = tir::as<tir::StoreNode>(s)) written.insert(t->buffer.get());
  });
  // The row var: the innermost whose rows and columns (the vars after it,
  // flattened) each have a staged value, one reading global memory that
  // depends on the rows or on the columns but not both; outer vars are
  // fixed per workgroup.
  int r = -1;
  std::vector<tir::TExpr> staged_a, staged_b;
  std::vector<SymExpr> cols;
  for (int c = int(n) - 2; c >= 0 && r < 0; --c) {
    staged_a.clear();
    staged_b.clear();
    cols.assign(st.vars.begin() + c + 1, st.vars.end());
    std::function<void(const tir::TExpr&)> walk = [&](const tir::TExpr& e) {
      bool global = false, other = false;
      tir::visit_exprs(e, [&](const tir::TExpr& y) {
        if (const auto* l = tir::as<tir::LoadNode>(y))
          (l->buffer->scope == tir::Scope::Global && !written.count(l->buffer.get()) ? global : other) = true;
      });
      bool dr = depends_on(e, st.vars[size_t(c)]), dc = depends_on_any(e, cols);
      if (global && !other && dr != dc) {
        (dr ? staged_a : staged_b).push_back(e);
        return;
      }
      switch (e->kind) {
        case tir::TKind::Binary:
          walk(tir::as<tir::BinaryNode>(e)->a);
          walk(tir::as<tir::BinaryNode>(e)->b);
          break;
        case tir::TKind::Unary:
          walk(tir::as<tir::UnaryNode>(e)->a);
          break;
        case tir::TKind::Cast:
          walk(tir::as<tir::CastNode>(e)->a);
          break;
        case tir::TKind::Call:
          for (const tir::TExpr& a : tir::as<tir::CallNodeT>(e)->args) walk(a);
          break;
        case tir::TKind::Select:
          walk(tir::as<tir::SelectNode>(e)->cond);
          walk(tir::as<tir::SelectNode>(e)->a);
          walk(tir::as<tir::SelectNode>(e)->b);
          break;
        default:
          break;  // loads read directly, indices, immediates
      }
    };
    walk(x);
    if (!staged_a.empty() && !staged_b.empty()) r = c;
  }
  if (r < 0) return std::nullopt;
  int64_t bytes = 0;
  for (const tir::TExpr& e : staged_a) bytes += shared_bytes(e->dtype) * tk * tm;
  for (const tir::TExpr& e : staged_b) bytes += shared_bytes(e->dtype) * tk * tn;
  if (bytes > kMaxSharedBytes) return std::nullopt;
  int64_t nodes = 0;
  tir::visit_exprs(st.body, [&](const tir::TExpr&) { ++nodes; });
  if (nodes * tr * tc > kMaxTiledNodes) return std::nullopt;

  std::vector<SymExpr> col_ext(st.extents.begin() + r + 1, st.extents.end());
  SymExpr rows = st.extents[size_t(r)], ncols(int64_t(1)), depth(int64_t(1));
  for (const SymExpr& e : col_ext) ncols = ncols * e;
  for (const SymExpr& e : ke) depth = depth * e;
  GpuBlockStage out;
  out.threads = threads;
  out.rows = rows;
  out.cols = ncols;
  out.depth = depth;
  out.block_rows = tm;
  out.block_cols = tn;
  out.block_depth = tk;
  out.vars.assign(st.vars.begin(), st.vars.begin() + r);
  out.extents.assign(st.extents.begin(), st.extents.begin() + r);
  SymExpr br = SymExpr::var(st.vars[size_t(r)].name() + "_b"), bc = SymExpr::var("cols_b");
  out.vars.push_back(br);
  out.extents.push_back(floordiv(rows + (tm - 1), SymExpr(tm)));
  out.vars.push_back(bc);
  out.extents.push_back(floordiv(ncols + (tn - 1), SymExpr(tn)));
  out.thread = SymExpr::var("tid");
  const SymExpr ity = floordiv(out.thread, SymExpr(tx)), itx = floormod(out.thread, SymExpr(tx));
  const SymExpr kc = SymExpr::var("kc"), kk = SymExpr::var("kk");
  const SymExpr& rv = st.vars[size_t(r)];

  // Fills: each thread loads its share of a chunk of `tk` reduction steps
  // of every staged value into shared memory. A value whose innermost
  // index runs along the reduction is read with the reduction fastest
  // between neighbouring threads (contiguous), otherwise along the tile.
  std::vector<tir::Buffer> shared;
  std::vector<tir::Stmt> fills;
  auto fill = [&](const tir::TExpr& e, bool is_a) {
    int64_t width = is_a ? tm : tn;
    tir::Buffer sh = tir::make_buffer("sh" + std::to_string(shared.size()), e->dtype, {SymExpr(tk), SymExpr(width)},
                                      tir::Scope::Shared);
    shared.push_back(sh);
    bool k_fastest = false;
    tir::visit_exprs(e, [&](const tir::TExpr& y) {
      const auto* l = tir::as<tir::LoadNode>(y);
      if (l && !l->indices.empty() && depends_on_any(l->indices.back(), kv) && !depends_on(l->indices.back(), rv) &&
          !depends_on_any(l->indices.back(), cols))
        k_fastest = true;
    });
    SymExpr q = SymExpr::var("f" + std::to_string(shared.size() - 1));
    SymExpr idx = q * threads + out.thread;
    SymExpr step = k_fastest ? floormod(idx, SymExpr(tk)) : floordiv(idx, SymExpr(width));
    SymExpr along = k_fastest ? floordiv(idx, SymExpr(tk)) : floormod(idx, SymExpr(width));
    SymMap<SymExpr> map;
    unflatten_into(min(kc * tk + step, depth - 1), kv, ke, map);
    if (is_a)
      map[rv] = min(br * tm + along, rows - 1);
    else
      unflatten_into(min(bc * tn + along, ncols - 1), cols, col_ext, map);
    tir::Stmt store = tir::make_store(sh, {tir::sym(step), tir::sym(along)}, tir::substitute(e, map));
    fills.push_back(tir::make_for(q, SymExpr(tk * width / threads), tir::LoopKind::Serial, store));
  };
  for (const tir::TExpr& e : staged_a) fill(e, true);
  for (const tir::TExpr& e : staged_b) fill(e, false);

  // The thread's tile: row i at br*tm + i*ty + ity, column j at
  // bc*tn + j*tx + itx (neighbouring threads, neighbouring columns).
  std::vector<tir::Buffer> regs;  // the staged values of one step, per row or column
  std::vector<tir::Stmt> loads;
  std::vector<std::vector<tir::Buffer>> reg_a(staged_a.size()), reg_b(staged_b.size());
  auto reg = [&](size_t s, int64_t at, SymExpr lane) {
    const tir::TExpr& e = s < staged_a.size() ? staged_a[s] : staged_b[s - staged_a.size()];
    tir::Buffer b = tir::make_buffer("r" + std::to_string(s) + "_" + std::to_string(at), e->dtype,
                                     {SymExpr(int64_t(1))}, tir::Scope::Local);
    regs.push_back(b);
    loads.push_back(
        tir::make_store(b, {tir::sym(SymExpr(int64_t(0)))}, tir::load(shared[s], {tir::sym(kk), tir::sym(lane)})));
    return b;
  };
  for (size_t s = 0; s < staged_a.size(); ++s)
    for (int64_t i = 0; i < tr; ++i) reg_a[s].push_back(reg(s, i, SymExpr(i * ty) + ity));
  for (size_t s = 0; s < staged_b.size(); ++s)
    for (int64_t j = 0; j < tc; ++j) reg_b[s].push_back(reg(staged_a.size() + s, j, SymExpr(j * tx) + itx));

  std::vector<tir::Stmt> prologue, updates, epilogue;
  std::vector<tir::Buffer> copies_locals;
  for (int64_t i = 0; i < tr; ++i)
    for (int64_t j = 0; j < tc; ++j) {
      SymExpr row = br * tm + (SymExpr(i * ty) + ity), col = bc * tn + (SymExpr(j * tx) + itx);
      SymMap<SymExpr> map;
      map[rv] = min(row, rows - 1);
      unflatten_into(min(col, ncols - 1), cols, col_ext, map);
      tir::TExpr valid = tir::binary(tir::BinOp::And, tir::binary(tir::BinOp::LT, tir::sym(row), tir::sym(rows)),
                                     tir::binary(tir::BinOp::LT, tir::sym(col), tir::sym(ncols)));
      std::string suffix = "_" + std::to_string(i) + "_" + std::to_string(j);
      std::vector<std::pair<tir::Buffer, tir::Buffer>> renamed;
      for (const tir::Buffer& l : locals) {
        renamed.push_back({l, tir::make_buffer(l->name + suffix, l->dtype, l->shape, l->scope)});
        copies_locals.push_back(renamed.back().second);
      }
      tir::TirRewriter rw;
      SymMap<SymExpr> m = map;
      rw.sym = [m](const SymExpr& e) { return substitute(e, m); };
      rw.buffer = [renamed](const tir::Buffer& b) -> tir::Buffer {
        for (const auto& [from, to] : renamed)
          if (from == b) return to;
        return nullptr;
      };
      for (int k = 0; k < red; ++k) prologue.push_back(guard_stores(rw.stmt(stmts[size_t(k)]), valid));
      for (size_t k = size_t(red) + 1; k < stmts.size(); ++k)
        epilogue.push_back(guard_stores(rw.stmt(stmts[k]), valid));
      // The update, staged values read from the registers, the reduction
      // vars at the chunk's step.
      SymMap<SymExpr> km = map;
      unflatten_into(kc * tk + kk, kv, ke, km);
      tir::TirRewriter up;
      up.sym = [km](const SymExpr& e) { return substitute(e, km); };
      up.buffer = rw.buffer;
      up.pre = [&](const tir::TExpr& e) -> tir::TExpr {
        for (size_t s = 0; s < staged_a.size(); ++s)
          if (e == staged_a[s]) return tir::load(reg_a[s][size_t(i)], {tir::sym(SymExpr(int64_t(0)))});
        for (size_t s = 0; s < staged_b.size(); ++s)
          if (e == staged_b[s]) return tir::load(reg_b[s][size_t(j)], {tir::sym(SymExpr(int64_t(0)))});
        return nullptr;
      };
      std::vector<tir::TExpr> idx;
      for (const tir::TExpr& e : update->indices) idx.push_back(up.expr(e));
      updates.push_back(tir::make_store(up.buf(update->buffer), idx, up.expr(update->value)));
    }
  std::vector<tir::Stmt> step_body = loads;
  step_body.insert(step_body.end(), updates.begin(), updates.end());
  SymExpr steps = min(SymExpr(tk), depth - kc * tk);
  std::vector<tir::Stmt> chunk{tir::make_barrier()};
  chunk.insert(chunk.end(), fills.begin(), fills.end());
  chunk.push_back(tir::make_barrier());
  chunk.push_back(tir::make_for(kk, steps, tir::LoopKind::Serial, tir::make_seq(step_body)));
  std::vector<tir::Stmt> body = prologue;
  body.push_back(
      tir::make_for(kc, floordiv(depth + (tk - 1), SymExpr(tk)), tir::LoopKind::Serial, tir::make_seq(chunk)));
  body.insert(body.end(), epilogue.begin(), epilogue.end());
  tir::Stmt all = tir::make_seq(body);
  for (const auto* list : {&regs, &copies_locals, &shared})
    for (size_t k = list->size(); k-- > 0;) all = tir::make_allocate((*list)[k], all);
  out.body = all;
  return out;
}

}  // namespace relax
