#include "ir/tir_functor.h"

#include <algorithm>

#include "ir/analyzer.h"

namespace relax::tir {

Buffer TirRewriter::buf(const Buffer& b) const {
  if (auto it = buffers_.find(b.get()); it != buffers_.end()) return it->second;
  if (buffer)
    if (Buffer r = buffer(b)) {
      buffers_.emplace(b.get(), r);
      return r;
    }
  Buffer out = b;
  if (sym) {
    std::vector<SymExpr> shape;
    bool changed = false;
    for (const SymExpr& d : b->shape) {
      shape.push_back(sym(d));
      changed |= shape.back() != d;
    }
    if (changed) out = make_buffer(b->name, b->dtype, std::move(shape), b->scope);
  }
  buffers_.emplace(b.get(), out);
  return out;
}

namespace {

std::vector<TExpr> rewrite_all(const TirRewriter& r, const std::vector<TExpr>& in, bool& changed) {
  std::vector<TExpr> out;
  out.reserve(in.size());
  for (const TExpr& e : in) {
    out.push_back(r.expr(e));
    changed |= out.back() != e;
  }
  return out;
}

}  // namespace

TExpr TirRewriter::expr(const TExpr& e) const {
  if (pre)
    if (TExpr r = pre(e)) return r;
  switch (e->kind) {
    case TKind::Sym: {
      if (!sym) return e;
      SymExpr v = sym(as<SymNodeT>(e)->value);
      return v == as<SymNodeT>(e)->value ? e : tir::sym(v);
    }
    case TKind::Imm:
      return e;
    case TKind::Load: {
      const auto* n = as<LoadNode>(e);
      bool changed = false;
      std::vector<TExpr> idx = rewrite_all(*this, n->indices, changed);
      Buffer b = buf(n->buffer);
      changed |= b != n->buffer;
      if (load)
        if (TExpr r = load(b, idx)) return r;
      return changed ? tir::load(b, std::move(idx)) : e;
    }
    case TKind::Binary: {
      const auto* n = as<BinaryNode>(e);
      TExpr a = expr(n->a), b = expr(n->b);
      return a == n->a && b == n->b ? e : binary(n->op, a, b);
    }
    case TKind::Unary: {
      const auto* n = as<UnaryNode>(e);
      TExpr a = expr(n->a);
      return a == n->a ? e : unary(n->op, a);
    }
    case TKind::Call: {
      const auto* n = as<CallNodeT>(e);
      bool changed = false;
      std::vector<TExpr> args = rewrite_all(*this, n->args, changed);
      return changed ? call(n->fn, std::move(args)) : e;
    }
    case TKind::Cast: {
      const auto* n = as<CastNode>(e);
      TExpr a = expr(n->a);
      return a == n->a ? e : cast(n->dtype, a);
    }
    case TKind::Select: {
      const auto* n = as<SelectNode>(e);
      TExpr c = expr(n->cond), a = expr(n->a), b = expr(n->b);
      return c == n->cond && a == n->a && b == n->b ? e : select(c, a, b);
    }
  }
  return e;
}

Stmt TirRewriter::stmt(const Stmt& s) const {
  if (!s) return s;
  switch (s->kind) {
    case SKind::For: {
      const auto* n = as<ForNode>(s);
      SymExpr var = sym ? sym(n->var) : n->var;
      SymExpr ext = sym ? sym(n->extent) : n->extent;
      Stmt body = stmt(n->body);
      if (var == n->var && ext == n->extent && body == n->body) return s;
      return make_for(var, ext, n->loop_kind, body);
    }
    case SKind::Store: {
      const auto* n = as<StoreNode>(s);
      bool changed = false;
      std::vector<TExpr> idx = rewrite_all(*this, n->indices, changed);
      TExpr v = expr(n->value);
      Buffer b = buf(n->buffer);
      if (!changed && v == n->value && b == n->buffer) return s;
      return make_store(b, std::move(idx), v);
    }
    case SKind::Seq: {
      const auto* n = as<SeqNode>(s);
      std::vector<Stmt> out;
      bool changed = false;
      for (const Stmt& x : n->stmts) {
        out.push_back(stmt(x));
        changed |= out.back() != x;
      }
      return changed ? make_seq(std::move(out)) : s;
    }
    case SKind::IfThenElse: {
      const auto* n = as<IfThenElseNode>(s);
      TExpr c = expr(n->cond);
      Stmt t = stmt(n->then_case), e = stmt(n->else_case);
      return c == n->cond && t == n->then_case && e == n->else_case ? s : make_if(c, t, e);
    }
    case SKind::Allocate: {
      const auto* n = as<AllocateNode>(s);
      Buffer b = buf(n->buffer);
      Stmt body = stmt(n->body);
      return b == n->buffer && body == n->body ? s : make_allocate(b, body);
    }
    case SKind::Barrier:
      return s;
  }
  return s;
}

void for_each_operand(const TExpr& e, const std::function<void(const TExpr&)>& f) {
  switch (e->kind) {
    case TKind::Sym:
    case TKind::Imm:
      return;
    case TKind::Load:
      for (const TExpr& i : as<LoadNode>(e)->indices) f(i);
      return;
    case TKind::Binary:
      f(as<BinaryNode>(e)->a);
      f(as<BinaryNode>(e)->b);
      return;
    case TKind::Unary:
      return f(as<UnaryNode>(e)->a);
    case TKind::Call:
      for (const TExpr& a : as<CallNodeT>(e)->args) f(a);
      return;
    case TKind::Cast:
      return f(as<CastNode>(e)->a);
    case TKind::Select:
      f(as<SelectNode>(e)->cond);
      f(as<SelectNode>(e)->a);
      f(as<SelectNode>(e)->b);
      return;
  }
}

void visit_exprs(const TExpr& e, const std::function<void(const TExpr&)>& f) {
  f(e);
  for_each_operand(e, [&](const TExpr& x) { visit_exprs(x, f); });
}

void visit_stmts(const Stmt& s, const std::function<void(const Stmt&)>& f) {
  if (!s) return;
  f(s);
  switch (s->kind) {
    case SKind::For:
      visit_stmts(as<ForNode>(s)->body, f);
      return;
    case SKind::Seq:
      for (const Stmt& x : as<SeqNode>(s)->stmts) visit_stmts(x, f);
      return;
    case SKind::IfThenElse:
      visit_stmts(as<IfThenElseNode>(s)->then_case, f);
      visit_stmts(as<IfThenElseNode>(s)->else_case, f);
      return;
    case SKind::Allocate:
      visit_stmts(as<AllocateNode>(s)->body, f);
      return;
    case SKind::Store:
    case SKind::Barrier:
      return;
  }
}

void visit_exprs(const Stmt& s, const std::function<void(const TExpr&)>& f) {
  visit_stmts(s, [&](const Stmt& x) {
    if (const auto* st = as<StoreNode>(x)) {
      for (const TExpr& i : st->indices) visit_exprs(i, f);
      visit_exprs(st->value, f);
    } else if (const auto* i = as<IfThenElseNode>(x)) {
      visit_exprs(i->cond, f);
    }
  });
}

bool reads_buffer(const Stmt& s, const BufferNode* b) {
  bool found = false;
  visit_exprs(s, [&](const TExpr& e) {
    if (const auto* l = as<LoadNode>(e); l && l->buffer.get() == b) found = true;
  });
  return found;
}

bool writes_buffer(const Stmt& s, const BufferNode* b) {
  bool found = false;
  visit_stmts(s, [&](const Stmt& x) {
    if (const auto* st = as<StoreNode>(x); st && st->buffer.get() == b) found = true;
  });
  return found;
}

std::optional<SymExpr> sym_operand(const TExpr& e) {
  if (auto* s = as<SymNodeT>(e)) return s->value;
  if (auto* i = as<ImmNode>(e); i && i->dtype.is_integer() && i->dtype.is_scalar()) return SymExpr(i->int_value);
  return std::nullopt;
}

Clamps guarded_clamps(const std::vector<const BinaryNode*>& tests) {
  std::vector<SymExpr> at_least_0;
  std::vector<std::pair<SymExpr, SymExpr>> below;  // (e, n): e < n
  for (const BinaryNode* b : tests) {
    std::optional<SymExpr> x = sym_operand(b->a), y = sym_operand(b->b);
    if (!x || !y) continue;
    if (b->op == BinOp::GE && y->is_const(0)) at_least_0.push_back(*x);
    if (b->op == BinOp::LT) below.push_back({*x, *y});
  }
  Clamps out;
  for (const auto& [e, n] : below)
    if (std::find(at_least_0.begin(), at_least_0.end(), e) != at_least_0.end())
      out.push_back({max(min(e, n - SymExpr(1)), SymExpr(0)), e});
  return out;
}

SymExpr unclamp(const SymExpr& e, const Clamps& clamps) {
  SymExpr out = e;
  for (const auto& [clamp, at] : clamps) out = replace_subexpr(out, clamp, at);
  return out;
}

Stmt substitute(const Stmt& s, const SymMap<SymExpr>& map) {
  if (map.empty()) return s;
  TirRewriter r;
  r.sym = [&](const SymExpr& e) { return relax::substitute(e, map); };
  return r.stmt(s);
}

TExpr substitute(const TExpr& e, const SymMap<SymExpr>& map) {
  if (map.empty()) return e;
  TirRewriter r;
  r.sym = [&](const SymExpr& x) { return relax::substitute(x, map); };
  return r.expr(e);
}

namespace {

Stmt simplify_in(const Stmt& s, const Analyzer& ana) {
  if (!s) return s;
  switch (s->kind) {
    case SKind::For: {
      const auto* f = as<ForNode>(s);
      Analyzer inner = ana;
      SymExpr ext = ana.simplify(f->extent);
      if (ext.is_const())
        inner.bind(f->var, 0, std::max<int64_t>(ext.const_value() - 1, 0));
      else
        inner.bind_below(f->var, ext);
      Stmt body = simplify_in(f->body, inner);
      return body == f->body && ext == f->extent ? s : make_for(f->var, ext, f->loop_kind, body);
    }
    case SKind::Seq: {
      std::vector<Stmt> out;
      bool changed = false;
      for (const Stmt& x : as<SeqNode>(s)->stmts) {
        out.push_back(simplify_in(x, ana));
        changed |= out.back() != x;
      }
      return changed ? make_seq(std::move(out)) : s;
    }
    case SKind::IfThenElse: {
      const auto* n = as<IfThenElseNode>(s);
      TirRewriter r;
      r.sym = [&](const SymExpr& e) { return ana.simplify(e); };
      TExpr c = r.expr(n->cond);
      Stmt t = simplify_in(n->then_case, ana), e = simplify_in(n->else_case, ana);
      return c == n->cond && t == n->then_case && e == n->else_case ? s : make_if(c, t, e);
    }
    case SKind::Allocate: {
      const auto* n = as<AllocateNode>(s);
      Stmt body = simplify_in(n->body, ana);
      return body == n->body ? s : make_allocate(n->buffer, body);
    }
    case SKind::Store: {
      // Buffers keep their shapes (they are the program's signature).
      TirRewriter r;
      r.sym = [&](const SymExpr& e) { return ana.simplify(e); };
      r.buffer = [](const Buffer& b) { return b; };
      return r.stmt(s);
    }
    case SKind::Barrier:
      return s;
  }
  return s;
}

}  // namespace

Stmt simplify_indices(const Stmt& s) { return simplify_in(s, Analyzer()); }

}  // namespace relax::tir
