// The register-tile rule (gpu_register_tile): each thread computes a tile
// of rows, the copies of the body jammed loop by loop.
#include <functional>
#include <set>

#include "backends/gpu/rule_util.h"
#include "ir/error.h"
#include "ir/tir_functor.h"

namespace relax {

using namespace gpu;

namespace {

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

}  // namespace relax
