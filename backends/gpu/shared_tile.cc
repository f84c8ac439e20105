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

// Builds the block stage of gpu_shared_tile once the stage's row and its
// staged values are known (schedule.h describes the form).
class SharedTiler {
 public:
  SharedTiler(const GpuStage& st, const ReductionRow& row, const Staging& staging, int64_t tr, int64_t tc,
              int64_t threads, int64_t tk)
      : st_(st),
        row_(row),
        a_(staging.a),
        b_(staging.b),
        cols_(staging.cols),
        r_(staging.row_var),
        tr_(tr),
        tc_(tc),
        threads_(threads),
        tk_(tk),
        ty_(threads / kTx),
        tm_(ty_ * tr),
        tn_(kTx * tc),
        rv_(st.vars[size_t(r_)]) {
    col_ext_.assign(st.extents.begin() + r_ + 1, st.extents.end());
    rows_ = st.extents[size_t(r_)];
    for (const SymExpr& e : col_ext_) ncols_ = ncols_ * e;
    for (const SymExpr& e : row.ke) depth_ = depth_ * e;
    br_ = SymExpr::var(rv_.name() + "_b");
    thread_ = SymExpr::var("tid");
    ity_ = floordiv(thread_, SymExpr(kTx));
    itx_ = floormod(thread_, SymExpr(kTx));
  }

  GpuBlockStage run() {
    GpuBlockStage out = grid();
    for (const tir::TExpr& e : a_) fill(e, true);
    for (const tir::TExpr& e : b_) fill(e, false);
    registers();
    for (int64_t i = 0; i < tr_; ++i)
      for (int64_t j = 0; j < tc_; ++j) tile_element(i, j);
    out.body = assemble();
    return out;
  }

  static constexpr int64_t kTx = 16;  // threads along a row of the block

 private:
  // The block grid: the outer vars, then a block of rows and one of columns.
  GpuBlockStage grid() const {
    GpuBlockStage out;
    out.threads = threads_;
    out.rows = rows_;
    out.cols = ncols_;
    out.depth = depth_;
    out.block_rows = tm_;
    out.block_cols = tn_;
    out.block_depth = tk_;
    out.vars.assign(st_.vars.begin(), st_.vars.begin() + r_);
    out.extents.assign(st_.extents.begin(), st_.extents.begin() + r_);
    out.vars.push_back(br_);
    out.extents.push_back(floordiv(rows_ + (tm_ - 1), SymExpr(tm_)));
    out.vars.push_back(bc_);
    out.extents.push_back(floordiv(ncols_ + (tn_ - 1), SymExpr(tn_)));
    out.thread = thread_;
    return out;
  }

  // Fills: each thread loads its share of a chunk of `tk` reduction steps
  // of every staged value into shared memory. A value whose innermost
  // index runs along the reduction is read with the reduction fastest
  // between neighbouring threads (contiguous), otherwise along the tile.
  void fill(const tir::TExpr& e, bool is_a) {
    int64_t width = is_a ? tm_ : tn_;
    tir::Buffer sh = tir::make_buffer("sh" + std::to_string(shared_.size()), e->dtype, {SymExpr(tk_), SymExpr(width)},
                                      tir::Scope::Shared);
    shared_.push_back(sh);
    bool k_fastest = false;
    tir::visit_exprs(e, [&](const tir::TExpr& y) {
      const auto* l = tir::as<tir::LoadNode>(y);
      if (l && !l->indices.empty() && depends_on_any(l->indices.back(), row_.kv) &&
          !depends_on(l->indices.back(), rv_) && !depends_on_any(l->indices.back(), cols_))
        k_fastest = true;
    });
    SymExpr q = SymExpr::var("f" + std::to_string(shared_.size() - 1));
    SymExpr idx = q * threads_ + thread_;
    SymExpr step = k_fastest ? floormod(idx, SymExpr(tk_)) : floordiv(idx, SymExpr(width));
    SymExpr along = k_fastest ? floordiv(idx, SymExpr(tk_)) : floormod(idx, SymExpr(width));
    SymMap<SymExpr> map;
    unflatten_into(min(kc_ * tk_ + step, depth_ - 1), row_.kv, row_.ke, map);
    if (is_a)
      map[rv_] = min(br_ * tm_ + along, rows_ - 1);
    else
      unflatten_into(min(bc_ * tn_ + along, ncols_ - 1), cols_, col_ext_, map);
    tir::Stmt store = tir::make_store(sh, {tir::sym(step), tir::sym(along)}, tir::substitute(e, map));
    fills_.push_back(tir::make_for(q, SymExpr(tk_ * width / threads_), tir::LoopKind::Serial, store));
  }

  // The thread's tile: row i at br*tm + i*ty + ity, column j at
  // bc*tn + j*tx + itx (neighbouring threads, neighbouring columns). Each
  // staged value of one step goes into a register per row or column.
  void registers() {
    reg_a_.resize(a_.size());
    reg_b_.resize(b_.size());
    auto reg = [&](size_t s, int64_t at, SymExpr lane) {
      const tir::TExpr& e = s < a_.size() ? a_[s] : b_[s - a_.size()];
      tir::Buffer b = tir::make_buffer("r" + std::to_string(s) + "_" + std::to_string(at), e->dtype,
                                       {SymExpr(int64_t(1))}, tir::Scope::Local);
      regs_.push_back(b);
      loads_.push_back(
          tir::make_store(b, {tir::sym(SymExpr(int64_t(0)))}, tir::load(shared_[s], {tir::sym(kk_), tir::sym(lane)})));
      return b;
    };
    for (size_t s = 0; s < a_.size(); ++s)
      for (int64_t i = 0; i < tr_; ++i) reg_a_[s].push_back(reg(s, i, SymExpr(i * ty_) + ity_));
    for (size_t s = 0; s < b_.size(); ++s)
      for (int64_t j = 0; j < tc_; ++j) reg_b_[s].push_back(reg(a_.size() + s, j, SymExpr(j * kTx) + itx_));
  }

  // Output (i, j) of the thread's tile: its copies of the row's statements
  // before and after the reduction (locals renamed, stores guarded), and
  // its update.
  void tile_element(int64_t i, int64_t j) {
    SymExpr row = br_ * tm_ + (SymExpr(i * ty_) + ity_), col = bc_ * tn_ + (SymExpr(j * kTx) + itx_);
    SymMap<SymExpr> map;
    map[rv_] = min(row, rows_ - 1);
    unflatten_into(min(col, ncols_ - 1), cols_, col_ext_, map);
    tir::TExpr valid = tir::binary(tir::BinOp::And, tir::binary(tir::BinOp::LT, tir::sym(row), tir::sym(rows_)),
                                   tir::binary(tir::BinOp::LT, tir::sym(col), tir::sym(ncols_)));
    std::string suffix = "_" + std::to_string(i) + "_" + std::to_string(j);
    std::vector<std::pair<tir::Buffer, tir::Buffer>> renamed;
    for (const tir::Buffer& l : row_.locals) {
      renamed.push_back({l, tir::make_buffer(l->name + suffix, l->dtype, l->shape, l->scope)});
      copies_locals_.push_back(renamed.back().second);
    }
    tir::TirRewriter rw;
    SymMap<SymExpr> m = map;
    rw.sym = [m](const SymExpr& e) { return substitute(e, m); };
    rw.buffer = [renamed](const tir::Buffer& b) -> tir::Buffer {
      for (const auto& [from, to] : renamed)
        if (from == b) return to;
      return nullptr;
    };
    const std::vector<tir::Stmt>& stmts = row_.stmts;
    for (int k = 0; k < row_.red; ++k) prologue_.push_back(guard_stores(rw.stmt(stmts[size_t(k)]), valid));
    for (size_t k = size_t(row_.red) + 1; k < stmts.size(); ++k)
      epilogue_.push_back(guard_stores(rw.stmt(stmts[k]), valid));
    // The update, staged values read from the registers, the reduction
    // vars at the chunk's step.
    SymMap<SymExpr> km = map;
    unflatten_into(kc_ * tk_ + kk_, row_.kv, row_.ke, km);
    tir::TirRewriter up;
    up.sym = [km](const SymExpr& e) { return substitute(e, km); };
    up.buffer = rw.buffer;
    up.pre = [&](const tir::TExpr& e) -> tir::TExpr {
      for (size_t s = 0; s < a_.size(); ++s)
        if (e == a_[s]) return tir::load(reg_a_[s][size_t(i)], {tir::sym(SymExpr(int64_t(0)))});
      for (size_t s = 0; s < b_.size(); ++s)
        if (e == b_[s]) return tir::load(reg_b_[s][size_t(j)], {tir::sym(SymExpr(int64_t(0)))});
      return nullptr;
    };
    std::vector<tir::TExpr> idx;
    for (const tir::TExpr& e : row_.update->indices) idx.push_back(up.expr(e));
    updates_.push_back(tir::make_store(up.buf(row_.update->buffer), idx, up.expr(row_.update->value)));
  }

  // prologue; per chunk kc: barrier, fills, barrier, per step kk the
  // register loads and the updates; epilogue.
  tir::Stmt assemble() const {
    std::vector<tir::Stmt> step_body = loads_;
    step_body.insert(step_body.end(), updates_.begin(), updates_.end());
    SymExpr steps = min(SymExpr(tk_), depth_ - kc_ * tk_);
    std::vector<tir::Stmt> chunk{tir::make_barrier()};
    chunk.insert(chunk.end(), fills_.begin(), fills_.end());
    chunk.push_back(tir::make_barrier());
    chunk.push_back(tir::make_for(kk_, steps, tir::LoopKind::Serial, tir::make_seq(step_body)));
    std::vector<tir::Stmt> body = prologue_;
    body.push_back(
        tir::make_for(kc_, floordiv(depth_ + (tk_ - 1), SymExpr(tk_)), tir::LoopKind::Serial, tir::make_seq(chunk)));
    body.insert(body.end(), epilogue_.begin(), epilogue_.end());
    tir::Stmt all = tir::make_seq(body);
    for (const auto* list : {&regs_, &copies_locals_, &shared_})
      for (size_t k = list->size(); k-- > 0;) all = tir::make_allocate((*list)[k], all);
    return all;
  }

  const GpuStage& st_;
  const ReductionRow& row_;
  const std::vector<tir::TExpr>&a_, &b_;  // staged along the rows, along the columns
  const std::vector<SymExpr>& cols_;
  const int r_;
  const int64_t tr_, tc_, threads_, tk_, ty_, tm_, tn_;
  const SymExpr rv_;
  std::vector<SymExpr> col_ext_;
  SymExpr rows_, ncols_{int64_t(1)}, depth_{int64_t(1)};
  SymExpr br_, bc_ = SymExpr::var("cols_b"), thread_, ity_, itx_;
  const SymExpr kc_ = SymExpr::var("kc"), kk_ = SymExpr::var("kk");
  std::vector<tir::Buffer> shared_, regs_, copies_locals_;
  std::vector<tir::Stmt> fills_, loads_, prologue_, updates_, epilogue_;
  std::vector<std::vector<tir::Buffer>> reg_a_, reg_b_;
};

}  // namespace

std::optional<GpuBlockStage> gpu_shared_tile(const GpuStage& st, int64_t tr, int64_t tc, int64_t threads, int64_t tk,
                                             int64_t max_shared_bytes) {
  constexpr int64_t tx = SharedTiler::kTx;
  if (st.vars.size() < 2 || tr < 1 || tc < 1 || tk < 1 || threads % tx != 0) return std::nullopt;
  const int64_t tm = threads / tx * tr, tn = tx * tc;
  if ((tk * tm) % threads != 0 || (tk * tn) % threads != 0) return std::nullopt;
  std::optional<ReductionRow> row = reduction_row(st);
  if (!row) return std::nullopt;
  std::optional<Staging> staging = find_staging(st, row->x);
  if (!staging) return std::nullopt;
  int64_t bytes = 0;
  for (const tir::TExpr& e : staging->a) bytes += shared_bytes(e->dtype) * tk * tm;
  for (const tir::TExpr& e : staging->b) bytes += shared_bytes(e->dtype) * tk * tn;
  if (bytes > max_shared_bytes) return std::nullopt;
  int64_t nodes = 0;
  tir::visit_exprs(st.body, [&](const tir::TExpr&) { ++nodes; });
  if (nodes * tr * tc > kMaxTiledNodes) return std::nullopt;
  return SharedTiler(st, *row, *staging, tr, tc, threads, tk).run();
}

}  // namespace relax
