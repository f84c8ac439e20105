// Helpers shared by the GPU schedule rules (backends/gpu/*.cc): what a
// loop nest looks like (independent iterations, a reduction, a row of
// scalar statements) and the rewrites several rules make.
#pragma once

#include <vector>

#include "backends/gpu/schedule.h"

namespace relax::gpu {

// The most expression nodes the copies of a tiled body may hold together.
constexpr int64_t kMaxTiledNodes = 4096;

// Whether two index lists are the same expressions.
bool same_indices(const std::vector<tir::TExpr>& a, const std::vector<tir::TExpr>& b);

// Whether the iterations of `f` are independent although it is not marked
// so: every store inside to a buffer not allocated inside indexes some
// dimension by f's variable itself (so iterations write disjoint
// elements) and is to a global buffer; every load of a buffer stored
// inside reads at exactly an index stored inside (its own iteration's
// element); no barrier.
bool independent(const tir::ForNode& f);

// The store of a reduction nest: acc[0] = op(acc[0], x) (or op(x,
// acc[0])) with acc a local scalar and x not reading acc; the nest's only
// statements are loops around it.
bool reduction_nest(const tir::Stmt& s, tir::Buffer& acc, tir::BinOp& op);

// A one-element buffer in local memory (a scalar of the thread).
bool is_scalar_local(const tir::Buffer& b);

// A row body as its scalar locals and its statements in order (sequences
// flattened); false when it allocates anything else.
bool row_statements(const tir::Stmt& s, std::vector<tir::Buffer>& locals, std::vector<tir::Stmt>& stmts);

bool depends_on(const tir::TExpr& e, const SymExpr& v);

// Stores to global memory under `cond`.
tir::Stmt guard_stores(const tir::Stmt& s, const tir::TExpr& cond);

// `flat` as indices of `vars` over `extents` (row-major, the last fastest).
void unflatten_into(SymExpr flat, const std::vector<SymExpr>& vars, const std::vector<SymExpr>& extents,
                    SymMap<SymExpr>& map);

bool depends_on_any(const tir::TExpr& e, const std::vector<SymExpr>& vars);

}  // namespace relax::gpu
