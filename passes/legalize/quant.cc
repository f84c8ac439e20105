// Legalisers of quantize / dequantize (ir/ops/quant.cc). quantize rounds
// half to even and saturates in f32 (f64 for an f64 scale or precision);
// 4-bit and float8 results are reached by a final cast, which the code
// generator packs.
#include "ir/ops/common.h"
#include "passes/legalize/legalize.h"
#include "passes/legalize/te.h"

namespace relax {
namespace {

using namespace te;

// ---- quantize / dequantize -------------------------------------------------------------

// A scale or zero point: a buffer read per tensor, per axis or per block,
// or a scalar.
struct QParam {
  Buffer buf;
  TExpr scalar;
  int axis = 0;
  int64_t block = 0;
  bool per_tensor = true;
  TExpr at(const Index& i) const {
    if (!buf) return scalar;
    if (per_tensor) return buf->shape.empty() ? load(buf, {}) : load(buf, {idx(0)});
    if (block == 0) return load(buf, {i[size_t(axis)]});
    Index bi = i;
    bi[size_t(axis)] = tir::binary(tir::BinOp::FloorDiv, i[size_t(axis)], idx(block));
    return load(buf, bi);
  }
};

std::optional<QParam> qparam(ProgramBuilder& pb, const Expr& arg, const std::string& name, int axis, int64_t block) {
  QParam q;
  q.axis = axis;
  q.block = block;
  if (as<TensorSI>(arg->sinfo)) {
    q.buf = pb.input(arg, name);
    if (!q.buf) return std::nullopt;
    q.per_tensor = q.buf->shape.empty() || (block == 0 && q.buf->shape.size() == 1 && q.buf->shape[0].is_const(1));
    return q;
  }
  const auto* p = as<PrimSI>(arg->sinfo);
  if (!p || p->dtype.is_void()) return std::nullopt;
  std::optional<TExpr> s = pb.scalar(arg, p->dtype);
  if (!s) return std::nullopt;
  q.scalar = *s;
  return q;
}

int quant_axis(const Attrs& attrs, int ndim) {
  int64_t a = attrs.get_int("axis");
  if (a < 0) a += ndim;
  return int(std::max<int64_t>(0, std::min<int64_t>(a, std::max(ndim - 1, 0))));
}

// quantize(x, scale[, zero_point]) and dequantize: x, the scale and zero
// point along x's axis (or blocks of it), the result; nullopt when one
// has no known shape.
struct QuantCall {
  Buffer x, y;
  std::optional<QParam> scale, zp;
};

std::optional<QuantCall> quant_call(ProgramBuilder& pb, const CallNode& call, const Attrs& attrs) {
  QuantCall q;
  q.x = pb.arg(0, "x");
  if (!q.x) return std::nullopt;
  int axis = quant_axis(attrs, int(q.x->shape.size()));
  int64_t block = attrs.get_int("block_size");
  q.scale = qparam(pb, call.args[1], "scale", axis, block);
  q.zp = call.args.size() > 2 ? qparam(pb, call.args[2], "zero_point", axis, block) : std::nullopt;
  q.y = pb.result("y");
  if (!q.scale || !q.y || (call.args.size() > 2 && !q.zp)) return std::nullopt;
  return q;
}

std::optional<Expr> legalize_quantize(LegalizeContext& ctx, const CallNode& call) {
  Attrs attrs = ops::attrs_of(call);
  ProgramBuilder pb(ctx, call, "quantize");
  std::optional<QuantCall> q = quant_call(pb, call, attrs);
  if (!q) return pb.unknown();
  const Buffer &x = q->x, &y = q->y;
  const std::optional<QParam>&scale = q->scale, &zp = q->zp;
  DataType out = y->dtype;
  DataType prec = attrs.get_dtype("precision");
  if (prec.is_void()) prec = scale->buf ? scale->buf->dtype : scale->scalar->dtype;
  if (!prec.is_float()) prec = DataType::f32();
  DataType t = prec.bits >= 64 ? DataType::f(64) : DataType::f32();
  bool saturate = attrs.get_bool("saturate");
  return pb.finish(compute(y, [&](const Index& i) {
    TExpr q = cast(t, load(x, i)) / cast(t, scale->at(i));
    if (prec.bits < 32) q = cast(t, cast(prec, q));  // the division's rounding in a narrow precision
    if (out.is_integer()) {
      TExpr v = round_half_even(q);
      if (zp) v = v + cast(t, zp->at(i));
      v = min_(max_(v, cast(t, min_value(out))), cast(t, max_value(out)));
      return cast(out, cast(DataType::i32(), v));
    }
    if (out.code == TypeCode::Float4E2M1 && zp) q = q + cast(t, zp->at(i));
    if ((saturate || out.code == TypeCode::Float4E2M1) && narrow_float_max(out) > 0) q = saturate_to(q, out);
    return cast(out, q);
  }));
}

std::optional<Expr> legalize_dequantize(LegalizeContext& ctx, const CallNode& call) {
  Attrs attrs = ops::attrs_of(call);
  ProgramBuilder pb(ctx, call, "dequantize");
  std::optional<QuantCall> q = quant_call(pb, call, attrs);
  if (!q) return pb.unknown();
  const Buffer &x = q->x, &y = q->y;
  const std::optional<QParam>&scale = q->scale, &zp = q->zp;
  DataType sd = scale->buf ? scale->buf->dtype : scale->scalar->dtype;
  DataType t = sd.is_float() && sd.bits >= 64 ? DataType::f(64) : DataType::f32();
  bool use_zp = zp && !x->dtype.is_float();
  return pb.finish(compute(y, [&](const Index& i) {
    TExpr v = cast(t, load(x, i));
    if (use_zp) v = v - cast(t, zp->at(i));
    return cast(y->dtype, v * cast(t, scale->at(i)));
  }));
}

}  // namespace

void register_quant_legalizers(LegalizerRegistry& reg) {
  reg.add("quantize", legalize_quantize);
  reg.add("dequantize", legalize_dequantize);
}

}  // namespace relax
