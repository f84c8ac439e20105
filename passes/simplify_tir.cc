// simplify-tir: index arithmetic in every tensor program, simplified under
// the bounds its loops give their variables. Inlining composes index maps
// (a reshape of a transpose of a split), whose divisions and remainders
// mostly cancel once the loop bounds are known. On the cpu target, a
// parallel loop over a symbolic extent (a batch, often 1 at run time)
// around a serial loop of constant extent becomes one parallel loop over
// both, so that one image still spreads across the cores; and an innermost
// serial loop around one store that simplification made plain (contiguous
// reads) becomes a vector loop first, which is not fused.
#include "ir/tir_functor.h"
#include "passes/legalize/te.h"
#include "passes/passes.h"

namespace relax {
namespace {

using namespace tir;

// The outermost parallel loops of `s`, each with the loop inside it fused
// into it where the rule above holds.
Stmt spread_parallel(const Stmt& s) {
  switch (s->kind) {
    case SKind::Seq: {
      std::vector<Stmt> stmts;
      for (const Stmt& t : static_cast<const SeqNode*>(s.get())->stmts) stmts.push_back(spread_parallel(t));
      return make_seq(std::move(stmts));
    }
    case SKind::Allocate: {
      auto* a = static_cast<const AllocateNode*>(s.get());
      Stmt body = spread_parallel(a->body);
      return body == a->body ? s : make_allocate(a->buffer, body);
    }
    case SKind::For: {
      auto* outer = static_cast<const ForNode*>(s.get());
      if (outer->loop_kind != LoopKind::Parallel) {
        Stmt body = spread_parallel(outer->body);
        return body == outer->body ? s : make_for(outer->var, outer->extent, outer->loop_kind, body);
      }
      auto* inner = outer->body->kind == SKind::For ? static_cast<const ForNode*>(outer->body.get()) : nullptr;
      if (outer->extent.is_const() || !inner || inner->loop_kind != LoopKind::Serial || !inner->extent.is_const() ||
          inner->extent.const_value() < 2)
        return s;
      SymExpr f = SymExpr::var(outer->var.name() + "_" + inner->var.name());
      SymMap<SymExpr> map;
      map.emplace(outer->var, floordiv(f, inner->extent));
      map.emplace(inner->var, floormod(f, inner->extent));
      return make_for(f, outer->extent * inner->extent, LoopKind::Parallel, substitute(inner->body, map));
    }
    default:
      return s;
  }
}

// Innermost serial loops around one plain store (legalisers leave them
// serial when their indices only become plain once simplified: a reshape's
// `x[(i0 + i1 // 32) // s, ..., i1 % 32]` is `x[.., i1]` for i1 < 32)
// marked vectorized, with the extents loop_nest would vectorise.
Stmt mark_vector_loops(const Stmt& s) {
  switch (s->kind) {
    case SKind::Seq: {
      std::vector<Stmt> stmts;
      bool changed = false;
      for (const Stmt& t : static_cast<const SeqNode*>(s.get())->stmts) {
        stmts.push_back(mark_vector_loops(t));
        changed = changed || stmts.back() != t;
      }
      return changed ? make_seq(std::move(stmts)) : s;
    }
    case SKind::Allocate: {
      auto* a = static_cast<const AllocateNode*>(s.get());
      Stmt body = mark_vector_loops(a->body);
      return body == a->body ? s : make_allocate(a->buffer, body);
    }
    case SKind::For: {
      auto* f = static_cast<const ForNode*>(s.get());
      if (f->loop_kind == LoopKind::Serial && f->body->kind == SKind::Store &&
          (!f->extent.is_const() || f->extent.const_value() % 8 == 0 || f->extent.const_value() >= 16) &&
          !f->extent.is_const(0) && te::plain_store(f->body, f->var))
        return make_for(f->var, f->extent, LoopKind::Vectorized, f->body);
      Stmt body = mark_vector_loops(f->body);
      return body == f->body ? s : make_for(f->var, f->extent, f->loop_kind, body);
    }
    default:
      return s;
  }
}

}  // namespace

IRModule simplify_tir(const IRModule& mod) {
  IRModule out = mod;
  for (const std::string& name : mod.program_names()) {
    tir::Program p = mod.program(name);
    tir::Stmt body = p->body;
    if (mod.attrs.get_string("target", "cpu") == "cpu") {
      body = mark_vector_loops(tir::simplify_indices(body));
      body = spread_parallel(body);
    }
    body = tir::simplify_indices(body);
    if (body != p->body)
      out.add_program(name, tir::make_program(p->name, p->inputs, p->outputs, p->sym_params, body, p->attrs));
  }
  return out;
}

}  // namespace relax
