// simplify-tir: index arithmetic in every tensor program, simplified under
// the bounds its loops give their variables. Inlining composes index maps
// (a reshape of a transpose of a split), whose divisions and remainders
// mostly cancel once the loop bounds are known. On the cpu target, before
// that, in order:
// - loops of one iteration go (their variable is 0);
// - a broadcast's select on a shape-only condition is unswitched;
// - a loop over a flattened symbolic extent read back by divisions by a
//   symbolic dim splits into the loops it flattened (delinearize);
// - a serial loop testing its variable against padding bounds splits
//   around the iterations where every test holds (partition_loops);
// - an innermost serial loop around one store that simplification made
//   plain (contiguous reads) becomes a vector loop;
// - a parallel loop over a symbolic extent (a batch, often 1 at run time)
//   around a serial loop of constant extent, or of symbolic extent (a
//   sequence) whose iterations are independent, becomes one parallel loop
//   over both, so that one image or one sequence still spreads across the
//   cores;
// - a serial loop over a plane's rows around a short vector loop along
//   them becomes one vector loop over the plane where every access steps
//   through whole rows (flatten_planes);
// - innermost serial loops of 2 to 4 iterations (nests of them up to 16)
//   are unrolled, so that the loop around them vectorises.
#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "ir/target_traits.h"
#include "ir/analyzer.h"
#include "ir/tir_functor.h"
#include "passes/legalize/te.h"
#include "passes/passes.h"

namespace relax {
namespace {

using namespace tir;

// `s` with `f` applied to each statement directly under it (a sequence's
// items, an allocation's body, an if's branches, a loop's body), rebuilt
// only where something changed; other statements as they are.
template <class F>
Stmt map_children(const Stmt& s, F&& f) {
  switch (s->kind) {
    case SKind::Seq: {
      std::vector<Stmt> stmts;
      bool changed = false;
      for (const Stmt& t : static_cast<const SeqNode*>(s.get())->stmts) {
        stmts.push_back(f(t));
        changed = changed || stmts.back() != t;
      }
      return changed ? make_seq(std::move(stmts)) : s;
    }
    case SKind::Allocate: {
      auto* a = static_cast<const AllocateNode*>(s.get());
      Stmt body = f(a->body);
      return body == a->body ? s : make_allocate(a->buffer, body);
    }
    case SKind::IfThenElse: {
      auto* i = static_cast<const IfThenElseNode*>(s.get());
      Stmt t = f(i->then_case), e = i->else_case ? f(i->else_case) : nullptr;
      return t == i->then_case && e == i->else_case ? s : make_if(i->cond, t, e);
    }
    case SKind::For: {
      auto* l = static_cast<const ForNode*>(s.get());
      Stmt body = f(l->body);
      return body == l->body ? s : make_for(l->var, l->extent, l->loop_kind, body);
    }
    default:
      return s;
  }
}

// A buffer access's indices as integer expressions (nullopt: one is not).
std::optional<std::vector<SymExpr>> sym_indices(const std::vector<TExpr>& indices) {
  std::vector<SymExpr> out;
  for (const TExpr& e : indices) {
    std::optional<SymExpr> v = sym_operand(e);
    if (!v) return std::nullopt;
    out.push_back(*v);
  }
  return out;
}

// Whether the iterations of `loop` are independent, so that they may run
// in parallel: every buffer its body stores to, unless allocated inside
// the body, is stored at indices that mention the loop's variable, and
// read there only at an index it is stored at (an accumulation into its
// own element). A recurrence's state (stored at a batch index, read back
// the next step) or a scan (read at i - 1) fails it. That an index which
// mentions the variable differs between iterations rests on how stores
// are written: loop nests over the stored buffer's own dims (composed or
// delinearized maps stay one-to-one); a scatter's data-dependent index is
// not an integer expression and fails.
bool independent_iterations(const ForNode& loop) {
  std::set<const BufferNode*> inside;
  visit_stmts(loop.body, [&](const Stmt& s) {
    if (s->kind == SKind::Allocate) inside.insert(static_cast<const AllocateNode*>(s.get())->buffer.get());
  });
  std::map<const BufferNode*, std::vector<std::vector<SymExpr>>> stored;
  bool ok = true;
  visit_stmts(loop.body, [&](const Stmt& s) {
    if (s->kind != SKind::Store) return;
    auto* st = static_cast<const StoreNode*>(s.get());
    if (inside.count(st->buffer.get())) return;
    std::optional<std::vector<SymExpr>> idx = sym_indices(st->indices);
    if (!idx || std::none_of(idx->begin(), idx->end(), [&](const SymExpr& e) { return mentions(e, loop.var); }))
      ok = false;
    else
      stored[st->buffer.get()].push_back(*idx);
  });
  if (!ok) return false;
  visit_exprs(loop.body, [&](const TExpr& e) {
    auto* ld = as<LoadNode>(e);
    if (!ld) return;
    auto it = stored.find(ld->buffer.get());
    if (it == stored.end()) return;
    std::optional<std::vector<SymExpr>> idx = sym_indices(ld->indices);
    if (!idx || std::find(it->second.begin(), it->second.end(), *idx) == it->second.end()) ok = false;
  });
  return ok;
}

// The outermost parallel loops of `s`, each with the loop inside it fused
// into it where the rule above holds: a constant inner extent, or a
// symbolic one (a batch of one spread over the sequence) whose iterations
// are independent.
Stmt spread_parallel(const Stmt& s) {
  auto* outer = s->kind == SKind::For ? static_cast<const ForNode*>(s.get()) : nullptr;
  if (!outer || outer->loop_kind != LoopKind::Parallel) return map_children(s, spread_parallel);
  auto* inner = outer->body->kind == SKind::For ? static_cast<const ForNode*>(outer->body.get()) : nullptr;
  if (outer->extent.is_const() || !inner || inner->loop_kind != LoopKind::Serial || inner->extent.is_const(0) ||
      inner->extent.is_const(1) || (!inner->extent.is_const() && !independent_iterations(*inner)))
    return s;
  SymExpr f = SymExpr::var(outer->var.name() + "_" + inner->var.name());
  SymMap<SymExpr> map;
  map.emplace(outer->var, floordiv(f, inner->extent));
  map.emplace(inner->var, floormod(f, inner->extent));
  return make_for(f, outer->extent * inner->extent, LoopKind::Parallel, substitute(inner->body, map));
}

// ---- Loop partitioning (cpu) ----------------------------------------------

// A comparison of integers as g >= 0 (a < b is b - a - 1 >= 0).
std::optional<SymExpr> as_nonnegative(const BinaryNode& b) {
  std::optional<SymExpr> x = sym_operand(b.a), y = sym_operand(b.b);
  if (!x || !y) return std::nullopt;
  switch (b.op) {
    case BinOp::GE:
      return *x - *y;
    case BinOp::GT:
      return *x - *y - SymExpr(1);
    case BinOp::LE:
      return *y - *x;
    case BinOp::LT:
      return *y - *x - SymExpr(1);
    default:
      return std::nullopt;
  }
}

bool is_bool_const(const TExpr& e, bool value) {
  auto* i = as<ImmNode>(e);
  return i && i->dtype.is_bool() && i->dtype.is_scalar() && (i->int_value != 0) == value;
}

// Selects, conjunctions and ifs on constant conditions, resolved.
Stmt fold_conditions(const Stmt& s) {
  TirRewriter r;
  r.pre = [&](const TExpr& x) -> TExpr {
    if (auto* sel = as<SelectNode>(x)) {
      TExpr c = r.expr(sel->cond);
      if (is_bool_const(c, true)) return r.expr(sel->a);
      if (is_bool_const(c, false)) return r.expr(sel->b);
      return select(c, r.expr(sel->a), r.expr(sel->b));
    }
    if (auto* b = as<BinaryNode>(x); b && b->op == BinOp::And) {
      TExpr p = r.expr(b->a), q = r.expr(b->b);
      if (is_bool_const(p, true)) return q;
      if (is_bool_const(q, true)) return p;
      return binary(BinOp::And, p, q);
    }
    return nullptr;
  };
  std::function<Stmt(const Stmt&)> walk = [&](const Stmt& t) -> Stmt {
    if (auto* i = t->kind == SKind::IfThenElse ? static_cast<const IfThenElseNode*>(t.get()) : nullptr) {
      TExpr c = r.expr(i->cond);
      if (is_bool_const(c, true)) return walk(i->then_case);
      if (is_bool_const(c, false) && i->else_case) return walk(i->else_case);
      return make_if(c, walk(i->then_case), i->else_case ? walk(i->else_case) : nullptr);
    }
    if (t->kind == SKind::Store) return r.stmt(t);
    return map_children(t, walk);
  };
  return walk(s);
}

// A serial loop whose body tests its variable against bounds, as padding
// does (0 <= i*s + k - p < n for every tap k of a pooling window or a
// convolution), splits into three: the iterations before the first where
// every such test holds for every value of the loops inside, those where
// they all hold, and the rest. In the middle the tests are true, their
// selects and ifs go, and the clamps max(min(e, n - 1), 0) that kept the
// reads of untaken select arms in bounds read at e; the middle's own loops
// split the same way. A pooling window's rows and columns become plain
// strided reads. Tests on loops of symbolic extent inside are left alone;
// loops of fewer than 8 iterations (a window's taps) are not split.
Stmt partition_loops(const Stmt& s) {
  auto* f = s->kind == SKind::For ? static_cast<const ForNode*>(s.get()) : nullptr;
  // Not a window's own taps (3, 5, 7): those unroll whole as they are.
  if (!f || f->loop_kind != LoopKind::Serial || (f->extent.is_const() && f->extent.const_value() < 8))
    return map_children(s, partition_loops);
  const SymExpr& v = f->var;
  // The loops inside: constant ranges bound; symbolic ones rule a test out.
  Analyzer inner;
  std::vector<SymExpr> bounded, unbounded;
  visit_stmts(f->body, [&](const Stmt& t) {
    if (t->kind != SKind::For) return;
    auto* l = static_cast<const ForNode*>(t.get());
    if (l->extent.is_const() && l->extent.const_value() >= 1) {
      inner.bind(l->var, 0, l->extent.const_value() - 1);
      bounded.push_back(l->var);
    } else {
      unbounded.push_back(l->var);
    }
  });
  auto in = [](const std::vector<SymExpr>& vs, const SymExpr& x) { return std::find(vs.begin(), vs.end(), x) != vs.end(); };
  std::vector<const BinaryNode*> proven;
  std::vector<SymExpr> lower{SymExpr(0)}, upper{f->extent};
  visit_exprs(f->body, [&](const TExpr& x) {
    auto* b = as<BinaryNode>(x);
    if (!b || std::find(proven.begin(), proven.end(), b) != proven.end()) return;
    std::optional<SymExpr> g = as_nonnegative(*b);
    if (!g || !mentions(*g, v)) return;
    // g = c*v + S + T: S free of the loops inside, T of bounded ones only.
    int64_t c = 0;
    SymExpr S(g->kind() == SymKind::Sum ? (*g)->constant : 0), T(0);
    std::vector<SymTerm> terms = g->kind() == SymKind::Sum ? (*g)->terms : std::vector<SymTerm>{{1, *g}};
    for (const SymTerm& t : terms) {
      if (t.term == v) {
        c += t.coeff;
        continue;
      }
      bool inner_term = false;
      for (const SymExpr& fv : free_vars(t.term)) {
        if (fv == v || in(unbounded, fv)) return;
        if (in(bounded, fv)) inner_term = true;
      }
      (inner_term ? T : S) = (inner_term ? T : S) + SymExpr(t.coeff) * t.term;
    }
    if (c == 0) return;
    Interval tr = inner.bound(T);
    if (tr.lo == Interval::kNegInf || tr.hi == Interval::kPosInf) return;
    // For every value of T: c*v + S + T.lo >= 0.
    SymExpr rest = S + SymExpr(tr.lo);
    if (c > 0)
      lower.push_back(floordiv(SymExpr(c - 1) - rest, SymExpr(c)));
    else
      upper.push_back(floordiv(rest, SymExpr(-c)) + SymExpr(1));
    proven.push_back(b);
  });
  if (proven.empty()) return map_children(s, partition_loops);
  Analyzer an;
  SymExpr lo = lower[0], hi = upper[0];
  for (size_t i = 1; i < lower.size(); ++i) lo = max(lo, lower[i]);
  for (size_t i = 1; i < upper.size(); ++i) hi = min(hi, upper[i]);
  lo = an.simplify(min(lo, f->extent));
  hi = an.simplify(max(lo, hi));
  // The middle: the tests true, the clamps they guard gone.
  const Clamps clamps = guarded_clamps(proven);
  TirRewriter r;
  r.pre = [&](const TExpr& x) -> TExpr {
    auto* b = as<BinaryNode>(x);
    if (b && std::find(proven.begin(), proven.end(), b) != proven.end()) return imm_int(DataType::boolean(), 1);
    return nullptr;
  };
  r.sym = [&](const SymExpr& x) { return unclamp(x, clamps); };
  Stmt middle = fold_conditions(r.stmt(f->body));
  auto piece = [&](const std::string& suffix, const SymExpr& from, const SymExpr& to, const Stmt& body) {
    SymExpr w = SymExpr::var(v.name() + suffix);
    SymMap<SymExpr> map;
    map.emplace(v, w + from);
    return make_for(w, an.simplify(to - from), LoopKind::Serial, substitute(body, map));
  };
  Stmt mid = piece("m", lo, hi, middle);
  auto* m = static_cast<const ForNode*>(mid.get());
  mid = make_for(m->var, m->extent, m->loop_kind, partition_loops(m->body));
  return make_seq({piece("h", SymExpr(0), lo, f->body), mid, piece("t", hi, f->extent, f->body)});
}

// Loops of one iteration, gone: their variable is 0. Legalisers keep the
// dims of size 1 (a squeeze-and-excite block's 1x1 planes) as loops, which
// would hide the channel loop around them from mark_vector_loops.
Stmt drop_unit_loops(const Stmt& s) {
  if (auto* f = s->kind == SKind::For ? static_cast<const ForNode*>(s.get()) : nullptr; f && f->extent.is_const(1)) {
    SymMap<SymExpr> map;
    map.emplace(f->var, SymExpr(0));
    return drop_unit_loops(substitute(f->body, map));
  }
  return map_children(s, drop_unit_loops);
}

// Innermost serial loops around one plain store (legalisers leave them
// serial when their indices only become plain once simplified: a reshape's
// `x[(i0 + i1 // 32) // s, ..., i1 % 32]` is `x[.., i1]` for i1 < 32)
// marked vectorized, with the extents loop_nest would vectorise.
Stmt mark_vector_loops(const Stmt& s) {
  if (s->kind == SKind::For) {
    auto* f = static_cast<const ForNode*>(s.get());
    if (f->loop_kind == LoopKind::Serial && f->body->kind == SKind::Store &&
        (!f->extent.is_const() || f->extent.const_value() % 8 == 0 || f->extent.const_value() >= 16) &&
        !f->extent.is_const(0) && te::plain_store(f->body, f->var))
      return make_for(f->var, f->extent, LoopKind::Vectorized, f->body);
  }
  return map_children(s, mark_vector_loops);
}

// Whether every access of `st` that mentions a or b indexes with them
// alone as its last two indices, over a buffer whose last two dims are A
// and B: rows of a plane, contiguous one after the other.
bool plane_accesses(const StoreNode& st, const SymExpr& a, const SymExpr& b, const SymExpr& A, const SymExpr& B) {
  auto check = [&](const Buffer& buf, const std::vector<TExpr>& idx) {
    bool any = false;
    for (const TExpr& i : idx) any = any || te::texpr_mentions(i, a) || te::texpr_mentions(i, b);
    if (!any) return true;
    const size_t n = idx.size();
    if (n < 2 || buf->shape.size() != n || !(buf->shape[n - 2] == A) || !(buf->shape[n - 1] == B)) return false;
    auto *ia = as<SymNodeT>(idx[n - 2]), *ib = as<SymNodeT>(idx[n - 1]);
    if (!ia || !ib || !(ia->value == a) || !(ib->value == b)) return false;
    for (size_t k = 0; k + 2 < n; ++k)
      if (te::texpr_mentions(idx[k], a) || te::texpr_mentions(idx[k], b)) return false;
    return true;
  };
  bool ok = check(st.buffer, st.indices);
  visit_exprs(st.value, [&](const TExpr& x) {
    if (auto* l = as<LoadNode>(x)) ok = ok && check(l->buffer, l->indices);
  });
  return ok;
}

// A serial loop over a plane's rows around a vector loop of fewer than 64
// along them (or a serial one too short to vectorise alone), whose
// accesses all step through whole rows of their buffers
// (plane_accesses), becomes one vector loop over the plane: t = a * B + b.
// The code generator's offsets simplify [.., t // B, t % B] back to t, so
// LLVM sees one long contiguous loop, which it unrolls and interleaves: a
// SiLU over 16x16 planes ran one 16-lane vector per row, its exp and
// division a chain of 25 dependent steps the core mostly waited on.
Stmt flatten_planes(const Stmt& s) {
  Stmt r = map_children(s, flatten_planes);
  if (r->kind != SKind::For) return r;
  auto* f = static_cast<const ForNode*>(r.get());
  if (f->loop_kind != LoopKind::Serial || f->body->kind != SKind::For) return r;
  auto* g = static_cast<const ForNode*>(f->body.get());
  if (!g->extent.is_const() || g->extent.const_value() >= 64 || g->body->kind != SKind::Store) return r;
  // A serial inner loop too short for mark_vector_loops (a row of 14 or 7)
  // too, where the plane it walks is long enough to be a vector loop: an
  // SE block's scale over 14x14 planes ran as 196 scalar steps per channel.
  const bool short_rows = g->loop_kind == LoopKind::Serial && f->extent.is_const() &&
                          f->extent.const_value() * g->extent.const_value() >= 16;
  if (g->loop_kind != LoopKind::Vectorized && !short_rows) return r;
  if (!plane_accesses(*static_cast<const StoreNode*>(g->body.get()), f->var, g->var, f->extent, g->extent)) return r;
  SymExpr t = SymExpr::var(f->var.name() + g->var.name());
  SymMap<SymExpr> map;
  map.emplace(f->var, floordiv(t, g->extent));
  map.emplace(g->var, floormod(t, g->extent));
  return make_for(t, f->extent * g->extent, LoopKind::Vectorized, substitute(g->body, map));
}

// The iterations of the loops in `s` if every one is unrolled (1 when
// there are none), else 0.
int64_t unrolled_iterations(const Stmt& s) {
  int64_t n = 1;
  visit_stmts(s, [&](const Stmt& x) {
    if (x->kind != SKind::For) return;
    auto* f = static_cast<const ForNode*>(x.get());
    n = f->loop_kind == LoopKind::Unrolled && f->extent.is_const() ? n * f->extent.const_value() : 0;
  });
  return n;
}

// Innermost serial loops of 2 to 4 iterations (the 2x2 planes of a CNN's
// last stages, a squeeze-and-excite scale over them) marked unrolled: LLVM
// unrolls them whole before it vectorises, so the loop around them becomes
// the innermost and is vectorised across the channels, where their copies
// share what depends on the channel only (EfficientNet's SE scale,
// sigmoid(s[c]) * x[c, h, w] over 2x2: one scalar sigmoid per channel
// before, 16 channels a vector after); nests of them too, up to 16
// copies of the body.
Stmt unroll_short_loops(const Stmt& s) {
  Stmt r = map_children(s, unroll_short_loops);
  if (r->kind != SKind::For) return r;
  auto* f = static_cast<const ForNode*>(r.get());
  if (f->loop_kind != LoopKind::Serial || !f->extent.is_const() || f->extent.const_value() < 2 ||
      f->extent.const_value() > 4)
    return r;
  const int64_t inner = unrolled_iterations(f->body);
  if (inner == 0 || inner * f->extent.const_value() > 16) return r;
  return make_for(f->var, f->extent, LoopKind::Unrolled, f->body);
}

// `f` on every node of every symbolic index, extent aside, in `s`.
void visit_sym_nodes(const Stmt& s, const std::function<void(const SymExpr&)>& f) {
  std::function<void(const SymExpr&)> walk = [&](const SymExpr& e) {
    f(e);
    if (e.is_const() || e.is_var()) return;
    for (const SymTerm& t : e->terms) walk(t.term);
    for (const SymExpr& o : e->operands) walk(o);
  };
  visit_exprs(s, [&](const TExpr& x) {
    if (auto* v = as<SymNodeT>(x)) walk(v->value);
  });
}

bool symbolic_division(const SymExpr& e) {
  return (e.kind() == SymKind::FloorDiv || e.kind() == SymKind::FloorMod) && !e->operands[1].is_const();
}

// The floor divisions and remainders by a symbolic divisor (an idiv each
// at run time: LLVM strength-reduces only constant divisors) whose
// dividend mentions one of `vars`, counted per occurrence.
size_t symbolic_divisions(const Stmt& s, const std::vector<SymExpr>& vars) {
  size_t n = 0;
  visit_sym_nodes(s, [&](const SymExpr& e) {
    if (!symbolic_division(e)) return;
    for (const SymExpr& v : free_vars(e->operands[0]))
      if (std::find(vars.begin(), vars.end(), v) != vars.end()) {
        ++n;
        return;
      }
  });
  return n;
}

// A loop over a flattened symbolic extent whose body reads the parts back
// by division: a reshape of (h, w, 12) into h*w*3 rows of 4, read through
// the permute before it as t // (w*3) and (t // 3) % w. Each such division
// by a symbolic dim is an idiv per element. The loop becomes two, t = a*D +
// b with a < E/D and b < D, for the divisor D of its extent E that leaves
// the fewest symbolic divisions once simplified (there, a and (b // 3) % w
// -> b // 3); repeated while the count falls. cpu only.
Stmt delinearize(const Stmt& s) {
  auto* f = s->kind == SKind::For ? static_cast<const ForNode*>(s.get()) : nullptr;
  if (!f || f->extent.is_const() || f->loop_kind == LoopKind::Vectorized) return map_children(s, delinearize);
  size_t best = symbolic_divisions(f->body, {f->var});
  if (best == 0) return map_children(s, delinearize);
  std::vector<SymExpr> divisors;
  visit_sym_nodes(f->body, [&](const SymExpr& e) {
    if (symbolic_division(e) && std::find(divisors.begin(), divisors.end(), e->operands[1]) == divisors.end())
      divisors.push_back(e->operands[1]);
  });
  Stmt chosen;
  Analyzer an;
  for (const SymExpr& d : divisors) {
    SymExpr outer = an.simplify(floordiv(f->extent, d));
    if (outer * d != f->extent && an.prove_equal(outer * d, f->extent) != Tri::Yes) continue;
    SymExpr a = SymExpr::var(f->var.name() + "o"), b = SymExpr::var(f->var.name() + "i");
    SymMap<SymExpr> map;
    map.emplace(f->var, a * d + b);
    Stmt cand = simplify_indices(make_for(a, outer, f->loop_kind, make_for(b, d, LoopKind::Serial, substitute(f->body, map))));
    size_t n = symbolic_divisions(cand, {a, b});
    if (n < best) best = n, chosen = cand;
  }
  return chosen ? delinearize(chosen) : map_children(s, delinearize);
}

// A condition of shape variables only (no loop variable, no load or call):
// the same for every iteration of every loop in the program.
bool shape_only(const TExpr& e, const std::vector<SymExpr>& loop_vars) {
  bool ok = true;
  visit_exprs(e, [&](const TExpr& x) {
    if (x->kind == TKind::Load || x->kind == TKind::Call) ok = false;
    if (x->kind == TKind::Sym)
      for (const SymExpr& v : free_vars(static_cast<const SymNodeT*>(x.get())->value))
        for (const SymExpr& l : loop_vars)
          if (v == l) ok = false;
  });
  return ok;
}

// Whether two shape-only conditions are the same expression (symbolic
// values compared as expressions, so two variables of one name differ).
bool same_cond(const TExpr& x, const TExpr& y) {
  if (x.get() == y.get()) return true;
  if (x->kind != y->kind || !(x->dtype == y->dtype)) return false;
  switch (x->kind) {
    case TKind::Sym:
      return static_cast<const SymNodeT*>(x.get())->value == static_cast<const SymNodeT*>(y.get())->value;
    case TKind::Imm: {
      auto *a = static_cast<const ImmNode*>(x.get()), *b = static_cast<const ImmNode*>(y.get());
      return a->int_value == b->int_value && (a->float_value == b->float_value);
    }
    case TKind::Binary: {
      auto *a = static_cast<const BinaryNode*>(x.get()), *b = static_cast<const BinaryNode*>(y.get());
      return a->op == b->op && same_cond(a->a, b->a) && same_cond(a->b, b->b);
    }
    default:
      return false;  // anything else: only itself
  }
}

// Broadcasting over a symbolic dim that may be 1 indexes with
// `select(d == 1, 0, k)`: the same choice in every iteration, but a select
// in an index makes every read of that operand a gather (GPT-2's causal
// mask under its softmax). The program is split on the first such
// condition: if (c) { body, c true } else { body, c false }, each with
// plain indices. One condition only, so a program at most doubles.
Stmt unswitch_index_selects(const Stmt& body) {
  // The program's workspaces (allocations at its root) stay at the root,
  // where lift-workspaces finds them.
  if (body->kind == SKind::Allocate) {
    auto* a = static_cast<const AllocateNode*>(body.get());
    Stmt inner = unswitch_index_selects(a->body);
    return inner == a->body ? body : make_allocate(a->buffer, inner);
  }
  std::vector<SymExpr> loop_vars;
  visit_stmts(body, [&](const Stmt& s) {
    if (s->kind == SKind::For) loop_vars.push_back(static_cast<const ForNode*>(s.get())->var);
  });
  TExpr cond;
  visit_exprs(body, [&](const TExpr& e) {
    if (cond || e->kind != TKind::Load) return;
    // The last index first: its select is the one that stops vectorisation.
    const std::vector<TExpr>& idx = static_cast<const LoadNode*>(e.get())->indices;
    for (auto it = idx.rbegin(); it != idx.rend(); ++it)
      visit_exprs(*it, [&](const TExpr& x) {
        if (cond || x->kind != TKind::Select) return;
        const TExpr& c = static_cast<const SelectNode*>(x.get())->cond;
        if (shape_only(c, loop_vars)) cond = c;
      });
  });
  if (!cond) return body;
  auto fixed = [&](bool value) {
    TirRewriter r;
    r.pre = [&](const TExpr& x) -> TExpr {
      if (x->kind != TKind::Select) return nullptr;
      auto* sel = static_cast<const SelectNode*>(x.get());
      if (!same_cond(sel->cond, cond)) return nullptr;
      return r.expr(value ? sel->a : sel->b);
    };
    return r.stmt(body);
  };
  return make_if(cond, fixed(true), fixed(false));
}

}  // namespace

IRModule simplify_tir(const IRModule& mod) {
  IRModule out = mod;
  // Host kernels are loops on this process's threads: unit loops dropped,
  // vector loops marked, planes flattened, parallel loops spread. A GPU's
  // schedule (backends/gpu) wants the nests as the legalisers wrote them.
  const bool host = !TargetTraits::of(mod).gpu;
  for (const std::string& name : mod.program_names()) {
    tir::Program p = mod.program(name);
    tir::Stmt body = p->body;
    if (host) {
      body = delinearize(tir::simplify_indices(unswitch_index_selects(drop_unit_loops(body))));
      body = mark_vector_loops(tir::simplify_indices(partition_loops(body)));
      body = unroll_short_loops(spread_parallel(flatten_planes(body)));
    }
    body = tir::simplify_indices(body);
    if (body != p->body)
      out.add_program(name, tir::make_program(p->name, p->inputs, p->outputs, p->sym_params, body, p->attrs));
  }
  return out;
}

}  // namespace relax
