// The shared-memory tile rule (gpu_shared_tile) for matmul-like stages.
#include <functional>
#include <set>

#include "backends/gpu/rule_util.h"
#include "ir/error.h"
#include "ir/tir_functor.h"

namespace relax {

using namespace gpu;

namespace {

// Bytes a value of `t` takes in shared memory (narrow types are held
// widened, as the code generators compute them).
int64_t shared_bytes(DataType t) { return t.bits > 32 ? 8 : 4; }

// A stage's row: scalar locals, statements without loops, and one
// reduction nest acc = op(acc, x) over `kv` (extents `ke`, none depending
// on the stage's vars or on each other).
struct ReductionRow {
  std::vector<tir::Buffer> locals;
  std::vector<tir::Stmt> stmts;
  int red = -1;  // the reduction nest's index in stmts
  std::vector<SymExpr> kv, ke;
  const tir::StoreNode* update = nullptr;  // the nest's store
  tir::TExpr x;                            // what it accumulates
};

std::optional<ReductionRow> reduction_row(const GpuStage& st) {
  ReductionRow row;
  if (!row_statements(st.body, row.locals, row.stmts)) return std::nullopt;
  tir::Buffer acc;
  tir::BinOp op = tir::BinOp::Add;
  for (size_t i = 0; i < row.stmts.size(); ++i) {
    bool loops = false;
    tir::visit_stmts(row.stmts[i], [&](const tir::Stmt& x) {
      loops = loops || x->kind == tir::SKind::For || x->kind == tir::SKind::Barrier;
    });
    if (!loops) continue;
    if (row.red >= 0 || !reduction_nest(row.stmts[i], acc, op)) return std::nullopt;
    row.red = int(i);
  }
  if (row.red < 0) return std::nullopt;
  const tir::StmtNode* at = row.stmts[size_t(row.red)].get();
  for (; at->kind == tir::SKind::For; at = static_cast<const tir::ForNode*>(at)->body.get()) {
    const auto* f = static_cast<const tir::ForNode*>(at);
    row.kv.push_back(f->var);
    row.ke.push_back(f->extent);
  }
  for (const SymExpr& e : row.ke)
    for (const SymExpr& v : free_vars(e))
      for (const std::vector<SymExpr>* list : {&st.vars, static_cast<const std::vector<SymExpr>*>(&row.kv)})
        for (const SymExpr& w : *list)
          if (v == w) return std::nullopt;  // a triangular nest
  row.update = static_cast<const tir::StoreNode*>(at);
  const auto* b = tir::as<tir::BinaryNode>(row.update->value);
  auto is_acc = [&](const tir::TExpr& e) {
    const auto* l = tir::as<tir::LoadNode>(e);
    return l && l->buffer == acc;
  };
  row.x = is_acc(b->a) ? b->b : b->a;
  return row;
}

// What goes through shared memory: the largest subexpressions of x that
// read global memory (nothing the stage writes) and depend on the row var
// or on the columns (the vars after it), not both.
struct Staging {
  int row_var = -1;              // the index of the row var in the stage's vars
  std::vector<tir::TExpr> a, b;  // staged along the rows, along the columns
  std::vector<SymExpr> cols;     // the column vars
};

// The innermost row var that stages values on both sides; nullopt: none.
std::optional<Staging> find_staging(const GpuStage& st, const tir::TExpr& x) {
  std::set<const tir::BufferNode*> written;
  tir::visit_stmts(st.body, [&](const tir::Stmt& s) {
    if (const auto* t = tir::as<tir::StoreNode>(s)) written.insert(t->buffer.get());
  });
  Staging out;
  for (int c = int(st.vars.size()) - 2; c >= 0; --c) {
    out.a.clear();
    out.b.clear();
    out.cols.assign(st.vars.begin() + c + 1, st.vars.end());
    std::function<void(const tir::TExpr&)> walk = [&](const tir::TExpr& e) {
      bool global = false, other = false;
      tir::visit_exprs(e, [&](const tir::TExpr& y) {
        if (const auto* l = tir::as<tir::LoadNode>(y))
          (l->buffer->scope == tir::Scope::Global && !written.count(l->buffer.get()) ? global : other) = true;
      });
      bool dr = depends_on(e, st.vars[size_t(c)]), dc = depends_on_any(e, out.cols);
      if (global && !other && dr != dc)
        (dr ? out.a : out.b).push_back(e);
      else if (e->kind != tir::TKind::Load)  // a load is read directly, its indices too
        tir::for_each_operand(e, walk);
    };
    walk(x);
    if (!out.a.empty() && !out.b.empty()) {
      out.row_var = c;
      return out;
    }
  }
  return std::nullopt;
}

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
  std::optional<ReductionRow> row = reduction_row(st);
  if (!row) return std::nullopt;
  const std::vector<tir::Buffer>& locals = row->locals;
  const std::vector<tir::Stmt>& stmts = row->stmts;
  const int red = row->red;
  const std::vector<SymExpr>& kv = row->kv;
  const std::vector<SymExpr>& ke = row->ke;
  const tir::StoreNode* update = row->update;
  std::optional<Staging> staging = find_staging(st, row->x);
  if (!staging) return std::nullopt;
  const int r = staging->row_var;
  const std::vector<tir::TExpr>& staged_a = staging->a;
  const std::vector<tir::TExpr>& staged_b = staging->b;
  const std::vector<SymExpr>& cols = staging->cols;
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
