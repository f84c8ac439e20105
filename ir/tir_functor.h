// Walking and rewriting tensor programs (ir/tir.h).
//
// A TirRewriter rebuilds expressions and statements bottom-up through the
// tir builders, so rewritten index arithmetic stays canonical. Each hook is
// optional; an unset hook keeps what it would have seen:
//   sym     maps every symbolic expression: Sym values, loop variables and
//           extents, store and load indices, buffer shapes;
//   buffer  replaces a buffer (seen as it was) by another, used as given;
//           return null to keep it, with its shape through `sym`;
//   load    replaces a load, seen with its buffer and indices already
//           rewritten; return null to keep it;
//   pre     replaces a whole expression, seen as it was, before anything
//           under it is rewritten; return null to rewrite it as usual.
// Unchanged subtrees are returned as they were (pointer-equal).
#pragma once

#include <functional>
#include <optional>
#include <unordered_map>

#include "ir/tir.h"

namespace relax::tir {

struct TirRewriter {
  std::function<SymExpr(const SymExpr&)> sym;
  std::function<Buffer(const Buffer&)> buffer;
  std::function<TExpr(const Buffer&, const std::vector<TExpr>&)> load;
  std::function<TExpr(const TExpr&)> pre;

  TExpr expr(const TExpr& e) const;
  Stmt stmt(const Stmt& s) const;
  // The mapped buffer; one buffer maps to one object however often it is met.
  Buffer buf(const Buffer& b) const;

 private:
  mutable std::unordered_map<const BufferNode*, Buffer> buffers_;
};

// Calls `f` on each operand of `e`: a load's indices, a binary's two sides,
// a call's arguments, a select's condition and values, ... (not deeper).
void for_each_operand(const TExpr& e, const std::function<void(const TExpr&)>& f);
// Calls `f` on every expression under `s` (pre-order, each node once per
// occurrence), including indices and values of stores.
void visit_exprs(const Stmt& s, const std::function<void(const TExpr&)>& f);
void visit_exprs(const TExpr& e, const std::function<void(const TExpr&)>& f);
// Calls `f` on every statement under `s`, pre-order.
void visit_stmts(const Stmt& s, const std::function<void(const Stmt&)>& f);

// The buffers a statement reads and writes (global, local and shared).
bool reads_buffer(const Stmt& s, const BufferNode* b);
bool writes_buffer(const Stmt& s, const BufferNode* b);

// Substitutes symbolic variables everywhere in `s` (see TirRewriter::sym).
Stmt substitute(const Stmt& s, const SymMap<SymExpr>& map);
TExpr substitute(const TExpr& e, const SymMap<SymExpr>& map);

// An integer operand as a symbolic value: a Sym node's, or an integer
// immediate's; nullopt for anything else.
std::optional<SymExpr> sym_operand(const TExpr& e);

// Padding's clamps: for every e that `tests` bound on both sides (e >= 0
// and e < n), the clamp max(min(e, n - 1), 0) that keeps a read in bounds
// where they fail, paired with e. `unclamp` reads each such clamp at its e:
// valid where the tests hold.
using Clamps = std::vector<std::pair<SymExpr, SymExpr>>;
Clamps guarded_clamps(const std::vector<const BinaryNode*>& tests);
SymExpr unclamp(const SymExpr& e, const Clamps& clamps);

// Simplifies index arithmetic under the bounds loops give their variables
// (0 <= v < extent, constant or symbolic): (i*16 + j) // 32 -> 0 for i < 2,
// j < 16; (b*s + i) // s -> b for i < s. Shape variables are non-negative.
Stmt simplify_indices(const Stmt& s);

}  // namespace relax::tir
