#include "backends/gpu/rule_util.h"

#include <algorithm>
#include <set>

#include "ir/tir_functor.h"
#include "passes/analysis/op_pattern.h"

namespace relax::gpu {

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
// Whether index `i` is `v` plus terms free of `v` (v, v + 24, 8 - v is not):
// distinct values of v give distinct values of i.
bool offset_of(const tir::TExpr& i, const SymExpr& v) {
  if (const auto* s = tir::as<tir::SymNodeT>(i)) {  // a symbolic index: v + (terms free of v)?
    std::vector<SymExpr> rest = free_vars(s->value - v);
    return std::find(rest.begin(), rest.end(), v) == rest.end();
  }
  const auto* b = tir::as<tir::BinaryNode>(i);
  if (!b) return false;
  if (b->op == tir::BinOp::Add)
    return (offset_of(b->a, v) && !depends_on(b->b, v)) || (offset_of(b->b, v) && !depends_on(b->a, v));
  if (b->op == tir::BinOp::Sub) return offset_of(b->a, v) && !depends_on(b->b, v);
  return false;
}

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
      if (offset_of(i, f.var)) by_var = true;
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

// `flat` as indices of `vars` over `extents` (row-major, the last fastest).
void unflatten_into(SymExpr flat, const std::vector<SymExpr>& vars, const std::vector<SymExpr>& extents,
                    SymMap<SymExpr>& map) {
  for (size_t k = vars.size(); k-- > 0;) {
    map[vars[k]] = k == 0 ? flat : floormod(flat, extents[k]);
    flat = floordiv(flat, extents[k]);
  }
}

bool depends_on_any(const tir::TExpr& e, const std::vector<SymExpr>& vars) {
  for (const SymExpr& v : vars)
    if (depends_on(e, v)) return true;
  return false;
}

}  // namespace relax::gpu
