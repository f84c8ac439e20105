// Quantization and integer arithmetic.
//
// quantize / dequantize carry ONNX's linear quantization exactly (the
// granularity follows from the scale's shape); the integer matmul and
// convolution forms are compositions of astype, subtract and matmul / conv
// with an i32 result, built by the frontend.
#include "ir/ops/common.h"

namespace relax {
namespace {

using namespace ops;

// ---- quantize / dequantize ------------------------------------------------------

// The dtypes a quantized tensor may have.
bool is_quant_dtype(DataType t) {
  if (t.is_integer()) return t.bits == 2 || t.bits == 4 || t.bits == 8 || t.bits == 16;
  switch (t.code) {
    case TypeCode::Float8E4M3FN:
    case TypeCode::Float8E4M3FNUZ:
    case TypeCode::Float8E5M2:
    case TypeCode::Float8E5M2FNUZ:
    case TypeCode::Float4E2M1:
      return true;
    default:
      return false;
  }
}

// Checks a scale or zero point `q` against x for the granularity its shape
// selects: one element (per tensor), a vector along `axis` (per axis), or, with
// block_size > 0, x's shape with ceil(D / block_size) at `axis` (blocked).
void check_qparam(const std::string& op, const TensorInfo& x, const TensorInfo& q, int64_t axis, int64_t block_size,
                  const std::string& what, const Analyzer& ana) {
  if (block_size < 0) fail(op, ": block_size must not be negative, got ", block_size);
  if (q.unknown_rank()) return;
  if (block_size > 0) {
    if (x.unknown_rank()) return;
    if (q.ndim != x.ndim) fail(op, ": blocked ", what, " must have x's rank ", x.ndim, ", got rank ", q.ndim);
    int ax = normalize_axis(op, axis, x.ndim);
    if (!x.shape || !q.shape) return;
    for (int i = 0; i < x.ndim; ++i) {
      SymExpr d = (*x.shape)[i];
      SymExpr want = i == ax ? ana.simplify(floordiv(d + (block_size - 1), SymExpr(block_size))) : d;
      check_dims_equal(op, (*q.shape)[i], want, cat("dim ", i, " of ", what), ana);
    }
    return;
  }
  if (q.ndim == 0) return;
  if (q.ndim != 1) fail(op, ": ", what, " must be a scalar or a vector without block_size, got rank ", q.ndim);
  if (q.shape && (*q.shape)[0].is_const(1)) return;  // one element: per tensor
  if (x.unknown_rank()) return;
  int ax = normalize_axis(op, axis, x.ndim);
  if (x.shape && q.shape) check_dims_equal(op, (*q.shape)[0], (*x.shape)[ax], cat("the length of ", what), ana);
}

struct QuantOperands {
  TensorInfo x, scale;
  std::optional<TensorInfo> zero_point;
};

QuantOperands quant_operands(const CallNode& call, const Attrs& attrs, const Analyzer& ana) {
  const std::string& op = op_name(call);
  QuantOperands q{tensor_arg(call, 0), tensor_arg(call, 1, true), std::nullopt};
  int64_t axis = attrs.get_int("axis"), block = attrs.get_int("block_size");
  check_qparam(op, q.x, q.scale, axis, block, "the scale", ana);
  if (call.args.size() > 2) {
    q.zero_point = tensor_arg(call, 2, true);
    check_qparam(op, q.x, *q.zero_point, axis, block, "the zero point", ana);
  }
  if (q.scale.dtype.is_bool()) fail(op, ": the scale must be a float or integer tensor");
  return q;
}

StructInfo infer_quantize(const CallNode& call, const InferContext& ctx) {
  Attrs attrs = attrs_of(call);
  const std::string& op = op_name(call);
  QuantOperands q = quant_operands(call, attrs, ctx.ana);
  DataType out = attrs.get_dtype("out_dtype");
  if (!is_quant_dtype(out)) fail(op, ": out_dtype ", out, " is not a quantized dtype");
  if (q.zero_point) common_dtype(op, q.zero_point->dtype, out);
  if (q.x.dtype.is_bool()) fail(op, ": x must be a float or integer tensor");
  return make_tensor(out, q.x.ndim, q.x.shape);
}

StructInfo infer_dequantize(const CallNode& call, const InferContext& ctx) {
  Attrs attrs = attrs_of(call);
  const std::string& op = op_name(call);
  QuantOperands q = quant_operands(call, attrs, ctx.ana);
  if (!q.x.dtype.is_void() && !is_quant_dtype(q.x.dtype) && q.x.dtype != DataType::i32())
    fail(op, ": x has dtype ", q.x.dtype, ", not a quantized dtype");
  if (q.zero_point) common_dtype(op, q.x.dtype, q.zero_point->dtype);
  DataType out = attrs.get_dtype("out_dtype");
  if (out.is_void()) out = q.scale.dtype;
  require_float(op, out, "the result");
  return make_tensor(out, q.x.ndim, q.x.shape);
}

}  // namespace

void register_quant_ops(OpRegistry& reg) {
  using T = AttrType;
  const char* granularity =
      " The scale (and zero point) shape selects the granularity: one element (rank 0 or (1,)): per tensor; a "
      "vector of length x.shape[axis]: per axis; with block_size > 0, x's shape except ceil(D / block_size) at "
      "`axis`: each scale serves block_size consecutive elements along `axis`. The scale and the zero point may be "
      "Prim scalars.";
  reg.add("quantize")
      .doc(cat("quantize(x, scale, zero_point?, axis, block_size, out_dtype, saturate, precision): ONNX "
               "QuantizeLinear. For integer out_dtype: y = clamp(round(x / scale) + zero_point, min, max) of "
               "out_dtype, round to nearest with ties to even. For float8 out_dtype: y = x / scale converted "
               "with ties to even, the zero point ignored; out-of-range values become the largest finite value "
               "of that sign with saturate, else inf (or NaN where the format has no inf). For f4e2m1: y = x / "
               "scale + zero_point converted with ties to even, saturating. The division happens in "
               "`precision` (void: the scale's dtype). A missing zero point is 0.",
               granularity))
      .args(2, 3)
      .attr("axis", T::Int, int64_t(1))
      .attr("block_size", T::Int, int64_t(0))
      .attr("out_dtype", T::DType, DataType::u(8))
      .attr("saturate", T::Bool, true)
      .attr("precision", T::DType, DataType::void_())
      .infer(infer_quantize);
  reg.add("dequantize")
      .doc(cat("dequantize(x, scale, zero_point?, axis, block_size, out_dtype): ONNX DequantizeLinear: y = "
               "(f32(x) - f32(zero_point)) * scale computed in f32 (f64 for an f64 scale) and converted to "
               "out_dtype (void: the scale's dtype). The zero point is ignored for float8 and f4e2m1 x; a "
               "missing one is 0.",
               granularity))
      .args(2, 3)
      .attr("axis", T::Int, int64_t(1))
      .attr("block_size", T::Int, int64_t(0))
      .attr("out_dtype", T::DType, DataType::void_())
      .infer(infer_dequantize);

}

}  // namespace relax
