// Helpers shared by the shape-family converters (convert_shape.cc and
// convert_tensor.cc): ranked inputs, axes, shape operands known at import
// time or only at run time.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "frontends/onnx/context.h"

namespace relax::onnx_fe::shape {

using Dims = std::vector<SymExpr>;
using Ints = std::vector<int64_t>;

// ---- Small helpers ------------------------------------------------------------------

inline Attrs one(const std::string& name, AttrValue v) {
  Attrs a;
  a.set(name, std::move(v));
  return a;
}

// Input i as a tensor with known dims; when only its rank is known it is
// match_cast to fresh dims (Context::bound_shape). Unknown rank is
// unsupported. The expression is materialized only when asked for (Shape
// needs only the dims).
struct Ranked {
  size_t index;
  DataType dtype;
  Dims dims;
  int ndim() const { return int(dims.size()); }
  Expr expr(Context& ctx) const { return ctx.expr(index); }
};

inline Ranked ranked(Context& ctx, size_t i) {
  int ndim = ctx.ndim(i);
  if (ndim < 0) ctx.unsupported(cat("input ", i, " of unknown rank"));
  DataType dtype = ctx.dtype(i);
  if (auto s = ctx.shape(i)) return Ranked{i, dtype, *s};
  return Ranked{i, dtype, ctx.bound_shape(i)};
}

// Gives a tensor whose dims are known only at run time the dims `want`
// (undefined entries become fresh variables); unchanged when its dims are
// already known.
inline Expr settle(Context& ctx, Expr e, Dims want = {}) {
  const auto* t = as<TensorSI>(sinfo_of(e));
  if (!t || t->shape || t->ndim < 0) return e;
  want.resize(t->ndim);
  for (SymExpr& d : want)
    if (!d.defined()) d = ctx.fresh_sym("n");
  return ctx.emit_match_cast(e, tensor_si(t->dtype, want));
}

// Normalizes an axis of a rank-`ndim` tensor, failing when out of range.
inline int axis_of(Context& ctx, int64_t axis, int ndim) {
  if (axis < -ndim || axis >= ndim) ctx.fail("axis ", axis, " is out of range for rank ", ndim);
  return int(axis < 0 ? axis + ndim : axis);
}

// Integer constants from attribute `attr` (older opsets) or input `i`.
// nullopt when neither is given; an input known only at run time is
// unsupported (`what` names it).
inline std::optional<Ints> attr_or_input_ints(Context& ctx, const std::string& attr, size_t i,
                                              const std::string& what) {
  if (ctx.has_attr(attr)) return ctx.attr_ints(attr);
  if (!ctx.has_input(i)) return std::nullopt;
  auto v = ctx.const_ints(i);
  if (!v) ctx.unsupported(what + " known only at run time");
  return v;
}

// A rank-1 i64 tensor of the input `i` (converted when it has another
// integer dtype).
inline Expr as_i64(Context& ctx, Expr e) {
  const auto* t = as<TensorSI>(sinfo_of(e));
  if (t && t->dtype == DataType::i64()) return e;
  return ctx.emit_op("astype", {e}, one("dtype", DataType::i64()));
}

inline Expr i64_const(Context& ctx, const Ints& v) {
  return ctx.constant(HostTensor::from_ints(DataType::i64(), {int64_t(v.size())}, v));
}

// A shape value as a rank-1 i64 tensor.
inline Expr dims_tensor(Context& ctx, const Dims& d) { return ctx.emit_op("shape_to_tensor", {make_shape(d)}); }

// A shape operand: the values when known symbolically, else the run-time
// tensor converted by tensor_to_shape.
inline Expr shape_operand(Context& ctx, size_t i, const std::optional<Dims>& values) {
  if (values) return make_shape(*values);
  return ctx.emit_op("tensor_to_shape", {as_i64(ctx, ctx.expr(i))});
}

// The length of a rank-1 input when known as a constant.
inline std::optional<int64_t> const_length(Context& ctx, size_t i) {
  auto s = ctx.shape(i);
  if (!s || s->size() != 1 || !(*s)[0].is_const()) return std::nullopt;
  return (*s)[0].const_value();
}

// Whether every element is a constant.
inline bool all_const(const Dims& v) {
  return std::all_of(v.begin(), v.end(), [](const SymExpr& e) { return e.is_const(); });
}

// The product of the dims.
inline SymExpr product(const Dims& d) {
  SymExpr p = 1;
  for (const SymExpr& e : d) p = p * e;
  return p;
}

// Axes known only at run time, normalized against rank `r`: where(a < 0, a + r, a).
inline Expr runtime_axes(Context& ctx, size_t i, int64_t r) {
  DataType i64 = DataType::i64();
  Expr axes = as_i64(ctx, ctx.expr(i));
  Expr negative = ctx.emit_op("less", {axes, ctx.scalar(i64, 0)});
  return ctx.emit_op("where", {negative, ctx.emit_op("add", {axes, ctx.scalar(i64, double(r))}), axes});
}

}  // namespace relax::onnx_fe::shape
