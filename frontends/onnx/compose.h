// Small helpers for converters that compose graph ops: emitting ops, casts
// and scalars, reading the dims of emitted expressions, and the multi-head
// attention layouts. Used by convert_elementwise.cc, convert_tensor.cc,
// convert_attention.cc, convert_ml.cc and convert_contrib.cc, and by the nn
// family through nn_util.h.
#pragma once

#include <string>
#include <vector>

#include "frontends/onnx/context.h"
#include "frontends/onnx/shape_util.h"

namespace relax::onnx_fe {

using Dims = std::vector<SymExpr>;
using Ints = std::vector<int64_t>;

// ---- Emitting ops --------------------------------------------------------------------

// Emits the graph op `name` on `args`; returns the bound variable.
inline Expr op(Context& ctx, const std::string& name, std::vector<Expr> args, Attrs attrs = {}) {
  return ctx.emit_op(name, std::move(args), std::move(attrs));
}

// x reshaped to `shape`.
inline Expr reshape(Context& ctx, Expr x, Dims shape) { return op(ctx, "reshape", {x, make_shape(std::move(shape))}); }

// x with its dims permuted to `axes`.
inline Expr permute(Context& ctx, Expr x, Ints axes) { return op(ctx, "permute_dims", {x}, {{"axes", axes}}); }

// x[begin:end] along `axis`.
inline Expr slice_axis(Context& ctx, Expr x, int64_t axis, SymExpr begin, SymExpr end) {
  return op(ctx, "strided_slice", {x}, {{"axes", Ints{axis}}, {"begin", Dims{begin}}, {"end", Dims{end}}});
}

// A broadcasting op whose operands' dims are not provably equal (an FPN's
// upsampled (((h + 1) // 2 + 1) // 2) * 2 beside its skip's (h + 1) // 2)
// keeps dims anyway: per axis, the dim of the operands that is not 1, the
// shorter where two differ; the match_cast that gives them checks them at
// run time, where the op would have failed.
inline Expr broadcast_op(Context& ctx, const std::string& op, std::vector<Expr> args) {
  Expr r = ctx.emit_op(op, args);
  const auto* t = as<TensorSI>(sinfo_of(r));
  if (!t || t->shape || t->ndim < 0) return r;
  std::vector<SymExpr> want(size_t(t->ndim));
  for (const Expr& a : args) {
    const auto* at = as<TensorSI>(sinfo_of(a));
    if (!at || !at->shape || at->ndim > t->ndim) return r;
    size_t off = size_t(t->ndim - at->ndim);
    for (size_t k = 0; k < at->shape->size(); ++k) {
      SymExpr& w = want[off + k];
      const SymExpr& d = (*at->shape)[k];
      if (!w.defined() || w.is_const(1) || (!d.is_const(1) && to_string(d).size() < to_string(w).size())) w = d;
    }
  }
  for (SymExpr& w : want)
    if (!w.defined()) w = 1;
  return shape::settle(ctx, r, want);
}

// a * b (broadcasting).
inline Expr mul(Context& ctx, Expr a, Expr b) { return broadcast_op(ctx, "multiply", {a, b}); }

// a + b (broadcasting).
inline Expr add(Context& ctx, Expr a, Expr b) { return broadcast_op(ctx, "add", {a, b}); }

// ---- Dtypes and scalars --------------------------------------------------------------

// The dtype of a tensor expression; void when unknown or not a tensor.
inline DataType expr_dtype(const Expr& e) {
  const auto* t = as<TensorSI>(sinfo_of(e));
  return t ? t->dtype : DataType::void_();
}

// x as `to`; x itself when it already has that dtype or `to` is void.
inline Expr cast_to(Context& ctx, Expr x, DataType to) {
  if (to.is_void() || expr_dtype(x) == to) return x;
  return op(ctx, "astype", {x}, {{"dtype", to}});
}

// The float scalar `v` in `dtype` (f32 when unknown).
inline Expr scalar_like(Context& ctx, DataType dtype, double v) {
  return ctx.scalar(dtype.is_void() ? DataType::f32() : dtype, v);
}

// ---- Dims ------------------------------------------------------------------------------

// The dims of a tensor expression; unsupported when they are unknown.
inline const Dims& dims_of(Context& ctx, const Expr& e) {
  const auto* t = as<TensorSI>(sinfo_of(e));
  if (!t || !t->shape) ctx.unsupported("an operand of unknown shape");
  return *t->shape;
}

// `e` simplified by the import's analyzer.
inline SymExpr simplify(Context& ctx, const SymExpr& e) { return ctx.ana().simplify(e); }

// The value of a dim that must be a constant (`what` names it otherwise).
inline int64_t const_dim(Context& ctx, const SymExpr& d, const char* what) {
  if (!d.is_const()) ctx.unsupported(cat("a symbolic ", what));
  return d.const_value();
}

// The scalar i64 tensor holding the dim `d` (known at run time only when
// symbolic).
inline Expr dim_scalar(Context& ctx, const SymExpr& d) {
  if (d.is_const()) return ctx.scalar(DataType::i64(), double(d.const_value()));
  return ctx.expr_of(sym_value({d}, true));
}

// 0, 1, ..., n - 1 as an i64 vector (a constant when n is).
inline Expr iota(Context& ctx, const SymExpr& n) {
  if (n.is_const()) {
    Ints v(size_t(n.const_value()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = int64_t(i);
    return ctx.constant(HostTensor::from_ints(DataType::i64(), {n.const_value()}, v), "iota");
  }
  return op(ctx, "arange", {make_shape({n}), ctx.scalar(DataType::i64(), 0), ctx.scalar(DataType::i64(), 1)});
}

// ---- Attention heads -----------------------------------------------------------------

// (B, T, H * D) -> (B, H, T, D).
inline Expr split_heads(Context& ctx, Expr x, int64_t heads) {
  const Dims& d = dims_of(ctx, x);
  if (d.size() != 3) ctx.fail("expected a rank-3 (batch, sequence, heads * size) operand");
  Expr r = reshape(ctx, x, {d[0], d[1], SymExpr(heads), simplify(ctx, floordiv(d[2], SymExpr(heads)))});
  return permute(ctx, r, {0, 2, 1, 3});
}

// (B, H, T, D) -> (B, T, H * D).
inline Expr merge_heads(Context& ctx, Expr x) {
  Dims d = dims_of(ctx, x);
  return reshape(ctx, permute(ctx, x, {0, 2, 1, 3}), {d[0], d[2], simplify(ctx, d[1] * d[3])});
}

// ---- Rotary position embedding -----------------------------------------------------

// x (B, S, H, D) with the first `rot` features of each head rotated by the
// angles cos and sin (B or 1, S, rot / 2): pairs (x1, x2) become (x1 cos -
// x2 sin, x1 sin + x2 cos), pairs adjacent (interleaved) or the two halves;
// the other features kept. ONNX's RotaryEmbedding and com.microsoft's
// RotaryEmbedding and GroupQueryAttention (convert_attention.cc).
Expr rotate_heads(Context& ctx, Expr x, Expr cos, Expr sin, SymExpr rot, bool interleaved);

}  // namespace relax::onnx_fe
