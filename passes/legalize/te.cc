#include "passes/legalize/te.h"

#include <cmath>
#include <limits>

#include "ir/error.h"

namespace relax::te {

// ---- scalars ---------------------------------------------------------------------

TExpr const_of(DataType dtype, double v) {
  if (dtype.is_float()) return tir::imm(dtype, v);
  return tir::imm_int(dtype, int64_t(v));
}
TExpr zero(DataType dtype) { return const_of(dtype, 0); }
TExpr one(DataType dtype) { return const_of(dtype, 1); }

TExpr max_value(DataType dtype) {
  if (dtype.is_float()) return tir::imm(dtype, std::numeric_limits<double>::infinity());
  if (dtype.is_bool()) return tir::imm_int(dtype, 1);
  if (dtype.is_uint())
    return tir::imm_int(dtype, dtype.bits >= 64 ? int64_t(-1) : int64_t((uint64_t(1) << dtype.bits) - 1));
  if (dtype.bits >= 64) return tir::imm_int(dtype, std::numeric_limits<int64_t>::max());
  return tir::imm_int(dtype, (int64_t(1) << (dtype.bits - 1)) - 1);
}

TExpr min_value(DataType dtype) {
  if (dtype.is_float()) return tir::imm(dtype, -std::numeric_limits<double>::infinity());
  if (dtype.is_bool() || dtype.is_uint()) return tir::imm_int(dtype, 0);
  if (dtype.bits >= 64) return tir::imm_int(dtype, std::numeric_limits<int64_t>::min());
  return tir::imm_int(dtype, -(int64_t(1) << (dtype.bits - 1)));
}

TExpr idx(const SymExpr& v) { return tir::sym(v); }
TExpr as_index(const TExpr& e) { return tir::cast(DataType::i64(), e); }
TExpr from_index(DataType dtype, const SymExpr& v) {
  if (v.is_const()) return const_of(dtype, double(v.const_value()));
  return tir::cast(dtype, idx(v));
}

TExpr operator+(const TExpr& a, const TExpr& b) { return tir::binary(tir::BinOp::Add, a, b); }
TExpr operator-(const TExpr& a, const TExpr& b) { return tir::binary(tir::BinOp::Sub, a, b); }
TExpr operator*(const TExpr& a, const TExpr& b) { return tir::binary(tir::BinOp::Mul, a, b); }
TExpr operator/(const TExpr& a, const TExpr& b) { return tir::binary(tir::BinOp::Div, a, b); }
TExpr operator-(const TExpr& a) { return tir::unary(tir::UnOp::Neg, a); }
TExpr eq(const TExpr& a, const TExpr& b) { return tir::binary(tir::BinOp::EQ, a, b); }
TExpr ne(const TExpr& a, const TExpr& b) { return tir::binary(tir::BinOp::NE, a, b); }
TExpr lt(const TExpr& a, const TExpr& b) { return tir::binary(tir::BinOp::LT, a, b); }
TExpr le(const TExpr& a, const TExpr& b) { return tir::binary(tir::BinOp::LE, a, b); }
TExpr gt(const TExpr& a, const TExpr& b) { return tir::binary(tir::BinOp::GT, a, b); }
TExpr ge(const TExpr& a, const TExpr& b) { return tir::binary(tir::BinOp::GE, a, b); }
TExpr and_(const TExpr& a, const TExpr& b) { return tir::binary(tir::BinOp::And, a, b); }
TExpr or_(const TExpr& a, const TExpr& b) { return tir::binary(tir::BinOp::Or, a, b); }
TExpr not_(const TExpr& a) { return tir::unary(tir::UnOp::Not, a); }
TExpr min_(const TExpr& a, const TExpr& b) { return tir::binary(tir::BinOp::Min, a, b); }
TExpr max_(const TExpr& a, const TExpr& b) { return tir::binary(tir::BinOp::Max, a, b); }

TExpr intrin(tir::Intrinsic fn, const TExpr& a) { return tir::call(fn, {a}); }
TExpr intrin(tir::Intrinsic fn, const TExpr& a, const TExpr& b) { return tir::call(fn, {a, b}); }

DataType compute_dtype(DataType dtype) {
  if (dtype.is_float() && dtype.bits < 32) return DataType::f32();
  return dtype;
}

TExpr round_half_even(const TExpr& x) {
  DataType t = x->dtype;
  // f32 and f64: the round intrinsic, which every backend lowers to its
  // own round-to-nearest-even (llvm.roundeven: one vrndscaleps or roundps
  // on x86, cvt.rni on NVPTX; GLSL roundEven), so a quantize loop is not
  // two floors and five compares per element.
  if (t == DataType::f32() || t == DataType::f(64)) return intrin(tir::Intrinsic::round, x);
  TExpr f = intrin(tir::Intrinsic::floor, x);
  TExpr d = x - f;
  TExpr half = const_of(t, 0.5);
  // f is odd when f - 2 * floor(f / 2) is not 0 (exact for every float
  // integer; NaN for an infinite f, as fmod(f, 2) is): no call to fmod,
  // so loops of it vectorise.
  TExpr odd = ne(f - const_of(t, 2) * intrin(tir::Intrinsic::floor, f * half), zero(t));
  return select(or_(gt(d, half), and_(eq(d, half), odd)), f + one(t), f);
}

double narrow_float_max(DataType dtype) {
  switch (dtype.code) {
    case TypeCode::Float8E4M3FN:
      return 448;
    case TypeCode::Float8E4M3FNUZ:
      return 240;
    case TypeCode::Float8E5M2:
    case TypeCode::Float8E5M2FNUZ:
      return 57344;
    case TypeCode::Float4E2M1:
      return 6;
    default:
      return 0;
  }
}

TExpr saturate_to(const TExpr& x, DataType to) {
  DataType t = x->dtype;
  double mx = narrow_float_max(to);
  TExpr clamped = min_(max_(x, const_of(t, -mx)), const_of(t, mx));
  return select(intrin(tir::Intrinsic::isnan, x), x, clamped);
}

TExpr wrap_clamp_index(const TExpr& i, const SymExpr& dim) {
  TExpr v = as_index(i);
  TExpr d = idx(dim);
  TExpr wrapped = select(lt(v, idx(0)), v + d, v);
  return max_(min_(wrapped, d - idx(1)), idx(0));
}

// ---- loops -------------------------------------------------------------------------

namespace {

bool any_mentions(const Index& es, const SymExpr& v) {
  for (const TExpr& e : es)
    if (texpr_mentions(e, v)) return true;
  return false;
}

}  // namespace

bool texpr_mentions(const TExpr& e, const SymExpr& v) {
  using namespace tir;
  switch (e->kind) {
    case TKind::Sym:
      return mentions(as<SymNodeT>(e)->value, v);
    case TKind::Imm:
      return false;
    case TKind::Load:
      return any_mentions(as<LoadNode>(e)->indices, v);
    case TKind::Binary:
      return texpr_mentions(as<BinaryNode>(e)->a, v) || texpr_mentions(as<BinaryNode>(e)->b, v);
    case TKind::Unary:
      return texpr_mentions(as<UnaryNode>(e)->a, v);
    case TKind::Call:
      return any_mentions(as<CallNodeT>(e)->args, v);
    case TKind::Cast:
      return texpr_mentions(as<CastNode>(e)->a, v);
    case TKind::Select: {
      auto* s = as<SelectNode>(e);
      return texpr_mentions(s->cond, v) || texpr_mentions(s->a, v) || texpr_mentions(s->b, v);
    }
  }
  return true;
}

namespace {

bool is_var_index(const TExpr& e, const SymExpr& v) {
  auto* s = tir::as<tir::SymNodeT>(e);
  return s && s->value == v;
}

// The index that steps through memory contiguously: the last one, or the
// one before trailing dims of size 1 read at 0 (a [n, c, 0, 0] access of
// an (n, c, 1, 1) buffer steps with c).
size_t contiguous_axis(const tir::Buffer& b, const std::vector<TExpr>& idx) {
  size_t k = idx.size() - 1;
  while (k > 0 && k < b->shape.size() && b->shape[k].is_const(1)) {
    auto* s = tir::as<tir::SymNodeT>(idx[k]);
    auto* i = tir::as<tir::ImmNode>(idx[k]);
    if (!(s && s->value.is_const(0)) && !(i && i->int_value == 0)) break;
    --k;
  }
  return k;
}

// Plain elementwise in `v`: every access has `v` alone as its contiguous
// index or does not depend on `v`; no other use of `v`.
bool plain_in(const TExpr& e, const SymExpr& v) {
  using namespace tir;
  switch (e->kind) {
    case TKind::Sym:
      return !mentions(as<SymNodeT>(e)->value, v);
    case TKind::Imm:
      return true;
    case TKind::Load: {
      auto* l = as<LoadNode>(e);
      const size_t axis = l->indices.empty() ? 0 : contiguous_axis(l->buffer, l->indices);
      for (size_t k = 0; k < l->indices.size(); ++k) {
        if (k == axis && is_var_index(l->indices[k], v)) continue;
        if (texpr_mentions(l->indices[k], v)) return false;
      }
      return true;
    }
    case TKind::Binary:
      return plain_in(as<BinaryNode>(e)->a, v) && plain_in(as<BinaryNode>(e)->b, v);
    case TKind::Unary:
      return plain_in(as<UnaryNode>(e)->a, v);
    case TKind::Call:
      for (const TExpr& a : as<CallNodeT>(e)->args)
        if (!plain_in(a, v)) return false;
      return true;
    case TKind::Cast:
      return plain_in(as<CastNode>(e)->a, v);
    case TKind::Select: {
      auto* s = as<SelectNode>(e);
      return plain_in(s->cond, v) && plain_in(s->a, v) && plain_in(s->b, v);
    }
  }
  return false;
}

}  // namespace

bool plain_store(const Stmt& s, const SymExpr& v) {
  auto* st = tir::as<tir::StoreNode>(s);
  if (!st || st->indices.empty()) return false;
  const size_t axis = contiguous_axis(st->buffer, st->indices);
  if (!is_var_index(st->indices[axis], v)) return false;
  for (size_t k = 0; k < st->indices.size(); ++k)
    if (k != axis && texpr_mentions(st->indices[k], v)) return false;
  return plain_in(st->value, v);
}

namespace {

bool large(const SymExpr& work) { return !work.is_const() || work.const_value() >= kParallelWork; }

}  // namespace

Stmt loop_nest(const std::vector<SymExpr>& extents, const std::function<Stmt(const Index&)>& body,
               const LoopHints& hints, const std::string& prefix) {
  Index index;
  std::vector<SymExpr> vars;
  for (size_t k = 0; k < extents.size(); ++k) {
    vars.push_back(SymExpr::var(prefix + std::to_string(k)));
    index.push_back(idx(vars.back()));
  }
  Stmt s = body(index);
  if (extents.empty()) return s;
  size_t n = extents.size();
  bool parallel = hints.parallel && large(num_elements(extents) * hints.work);
  const SymExpr& inner = extents.back();
  // Constant extents: a multiple of 8, or 16 and more (a vector loop and its remainder).
  bool vector_extent =
      !inner.is_const() || (inner.const_value() > 0 && (inner.const_value() % 8 == 0 || inner.const_value() >= 16));
  // The parallel loop: the outermost one whose extent is not 1.
  size_t par = 0;
  while (par + 1 < n && extents[par].is_const(1)) ++par;
  bool vectorize = (hints.vectorize || hints.vectorize_gathers) && vector_extent && (par + 1 < n || !parallel) &&
                   (hints.vectorize_gathers || plain_store(s, vars.back()));
  for (size_t k = n; k-- > 0;) {
    tir::LoopKind kind = tir::LoopKind::Serial;
    if (k == par && parallel) kind = tir::LoopKind::Parallel;
    if (k == n - 1 && vectorize) kind = tir::LoopKind::Vectorized;
    s = tir::make_for(vars[k], extents[k], kind, s);
  }
  return s;
}

Stmt compute(const Buffer& out, const std::function<TExpr(const Index&)>& f, const LoopHints& hints) {
  return loop_nest(
      out->shape, [&](const Index& i) { return tir::make_store(out, i, f(i)); }, hints);
}

// ---- broadcasting --------------------------------------------------------------------

Index broadcast_index(const Buffer& in, const Index& i, const std::vector<SymExpr>& out_shape) {
  return broadcast_index(in->shape, i, out_shape);
}

Index broadcast_index(const std::vector<SymExpr>& in_shape, const Index& i, const std::vector<SymExpr>& out_shape) {
  size_t r = in_shape.size(), n = out_shape.size();
  RELAX_CHECK(r <= n, "broadcast of rank ", r, " to rank ", n);
  Analyzer ana;
  Index out;
  for (size_t k = 0; k < r; ++k) {
    const SymExpr& d = in_shape[k];
    const SymExpr& od = out_shape[k + n - r];
    const TExpr& ik = i[k + n - r];
    if (d.is_const(1) && !od.is_const(1)) {
      out.push_back(idx(0));
    } else if (d == od || ana.can_prove_equal(d, od) || ana.can_prove_not_equal(d, 1)) {
      out.push_back(ik);
    } else {
      out.push_back(select(eq(idx(d), idx(1)), idx(0), ik));
    }
  }
  return out;
}

TExpr load_bcast(const Buffer& in, const Index& i, const std::vector<SymExpr>& out_shape) {
  return load(in, broadcast_index(in, i, out_shape));
}
TExpr load_bcast(const Buffer& in, const Index& i, const Buffer& out) { return load_bcast(in, i, out->shape); }

// ---- locals and reductions ------------------------------------------------------------

TExpr Local::get() const { return tir::load(buf, {idx(0)}); }
Stmt Local::set(const TExpr& v) const { return tir::make_store(buf, {idx(0)}, v); }

Local local(const std::string& name, DataType dtype) {
  return Local{tir::make_buffer(name, dtype, {SymExpr(1)}, tir::Scope::Local)};
}

Stmt with_locals(const std::vector<Local>& locals, Stmt body) {
  for (size_t k = locals.size(); k-- > 0;) body = tir::make_allocate(locals[k].buf, body);
  return body;
}

Reducer sum_reducer(DataType t) {
  return {t, zero(t), [](const TExpr& a, const TExpr& v) { return a + v; }};
}
Reducer prod_reducer(DataType t) {
  return {t, one(t), [](const TExpr& a, const TExpr& v) { return a * v; }};
}
Reducer max_reducer(DataType t) {
  return {t, min_value(t), [](const TExpr& a, const TExpr& v) { return max_(a, v); }};
}
Reducer min_reducer(DataType t) {
  return {t, max_value(t), [](const TExpr& a, const TExpr& v) { return min_(a, v); }};
}

Stmt accumulate(const Local& acc, const std::vector<SymExpr>& extents,
                const std::function<TExpr(const Index& r)>& value,
                const std::function<TExpr(const TExpr& acc, const TExpr& v)>& combine, const std::string& prefix) {
  LoopHints serial{false, false, 1};
  return loop_nest(
      extents, [&](const Index& r) { return acc.set(combine(acc.get(), value(r))); }, serial, prefix);
}

Stmt compute_reduce(const Buffer& out, const std::vector<SymExpr>& extents, const Reducer& red,
                    const std::function<TExpr(const Index& i, const Index& r)>& value,
                    const std::function<TExpr(const Index& i, const TExpr& acc)>& finalize) {
  LoopHints hints{true, false, num_elements(extents)};
  return loop_nest(
      out->shape,
      [&](const Index& i) {
        Local acc = local("acc", red.acc_dtype);
        Stmt body = tir::make_seq({acc.set(red.init),
                                   accumulate(
                                       acc, extents, [&](const Index& r) { return value(i, r); }, red.combine),
                                   tir::make_store(out, i, finalize(i, acc.get()))});
        return with_locals({acc}, body);
      },
      hints);
}

SymExpr num_elements(const std::vector<SymExpr>& shape) {
  SymExpr p = 1;
  for (const SymExpr& d : shape) p = p * d;
  return p;
}

TExpr flat_index(const Index& i, const std::vector<SymExpr>& shape) {
  TExpr f = idx(0);
  for (size_t k = 0; k < shape.size(); ++k) f = f * idx(shape[k]) + i[k];
  return f;
}

Index unflatten(const TExpr& flat, const std::vector<SymExpr>& shape) {
  Index out(shape.size());
  TExpr rest = flat;
  for (size_t k = shape.size(); k-- > 0;) {
    if (k == 0) {
      out[k] = rest;
      break;
    }
    out[k] = tir::binary(tir::BinOp::FloorMod, rest, idx(shape[k]));
    rest = tir::binary(tir::BinOp::FloorDiv, rest, idx(shape[k]));
  }
  return out;
}

}  // namespace relax::te
