// Helpers shared by the nn-family converters (convert_nn.cc,
// convert_resize.cc, convert_attention.cc): reading shapes, emitting the
// common ops, and shape-like inputs known only at run time. The general ones
// (op, reshape, scalar_like, cast_to, dims_of, ...) are in compose.h.
#pragma once

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "frontends/onnx/compose.h"
#include "frontends/onnx/context.h"

namespace relax::onnx_fe::nn {

constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- Small helpers -------------------------------------------------------------

inline int known_rank(Context& ctx, size_t i) {
  int r = ctx.ndim(i);
  if (r < 0) ctx.unsupported(cat("input ", i, " of unknown rank"));
  return r;
}


inline Ints range_ints(int64_t begin, int64_t end) {
  Ints v;
  for (int64_t i = begin; i < end; ++i) v.push_back(i);
  return v;
}


inline Expr concat(Context& ctx, std::vector<Expr> xs, int64_t axis) {
  return op(ctx, "concat", {make_tuple(std::move(xs))}, {{"axis", axis}});
}

// A per-channel vector (C,) reshaped to (C, 1, ..., 1) so that it broadcasts
// against an (N, C, spatial...) tensor of rank `nd`.
inline Expr per_channel(Context& ctx, Expr v, int nd) {
  if (nd <= 2) return v;
  return op(ctx, "expand_dims", {v}, {{"axis", range_ints(1, nd - 1)}});
}

// Adds an optional per-channel bias (input `i`) to y of rank `nd`.
inline Expr add_bias(Context& ctx, Expr y, size_t i, int nd) {
  if (!ctx.has_input(i)) return y;
  return op(ctx, "add", {y, per_channel(ctx, ctx.expr(i), nd)});
}

// A rank-1 f32 constant.
inline Expr float_vector(Context& ctx, const std::vector<double>& v, const std::string& hint) {
  return ctx.constant(HostTensor::from_floats(DataType::f32(), {int64_t(v.size())}, v), hint);
}

// The dims a shape-like input (sizes, output_shape, ...) holds: its symbolic
// values when known at import time, else fresh variables bound at run time by
// a match_cast of the tensor converted to a shape.
inline Dims shape_input(Context& ctx, size_t i, const std::string& hint) {
  if (auto v = ctx.sym_values(i)) return *v;
  auto s = ctx.shape(i);
  if (!s || s->size() != 1 || !(*s)[0].is_const()) ctx.unsupported(cat("input ", i, " of unknown length"));
  Dims syms;
  for (int64_t k = 0; k < (*s)[0].const_value(); ++k) syms.push_back(ctx.fresh_sym(cat(hint, k)));
  Expr shape = op(ctx, "tensor_to_shape", {ctx.expr(i)});
  ctx.emit_match_cast(shape, shape_si(syms));
  return syms;
}

// x (of dtype `from`) as `to`; x itself when they agree or `to` is unknown.
inline Expr cast_to(Context& ctx, Expr x, DataType from, DataType to) {
  if (from == to || to.is_void()) return x;
  return op(ctx, "astype", {x}, {{"dtype", to}});
}

}  // namespace relax::onnx_fe::nn
