// Matrix multiplication with numpy semantics.
#include <algorithm>

#include "ir/ops/common.h"

namespace relax {
namespace {

using namespace ops;

// The result of a matmul of a and b (numpy rules) with elements of `dtype`.
StructInfo matmul_result(const CallNode& call, const InferContext& ctx, DataType dtype) {
  const std::string& op = op_name(call);
  TensorInfo a = tensor_arg(call, 0), b = tensor_arg(call, 1);
  if (a.ndim == 0 || b.ndim == 0) fail(op, ": operands must have rank >= 1, got a rank-0 tensor");
  if (a.unknown_rank() || b.unknown_rank()) return tensor_si_ndim(dtype, -1);

  // A 1-D operand is a row (left) or column (right) vector whose unit dim is
  // dropped from the result.
  bool a_vec = a.ndim == 1, b_vec = b.ndim == 1;
  int a_batch = a_vec ? 0 : a.ndim - 2, b_batch = b_vec ? 0 : b.ndim - 2;
  int out_ndim = std::max(a_batch, b_batch) + (a_vec ? 0 : 1) + (b_vec ? 0 : 1);
  if (!a.shape || !b.shape) return tensor_si_ndim(dtype, out_ndim);

  const Dims& as = *a.shape;
  const Dims& bs = *b.shape;
  SymExpr ka = as.back(), kb = b_vec ? bs[0] : bs[b.ndim - 2];
  if (ctx.ana.can_prove_not_equal(ka, kb)) fail(op, ": inner dims ", ka, " and ", kb, " differ");

  TensorInfo abatch{DataType(), a_batch, Dims(as.begin(), as.begin() + a_batch)};
  TensorInfo bbatch{DataType(), b_batch, Dims(bs.begin(), bs.begin() + b_batch)};
  TensorInfo batch = broadcast(op, abatch, bbatch, ctx.ana);
  if (!batch.shape) return tensor_si_ndim(dtype, out_ndim);
  Dims out = *batch.shape;
  if (!a_vec) out.push_back(as[a.ndim - 2]);
  if (!b_vec) out.push_back(bs.back());
  return tensor_si(dtype, std::move(out));
}

StructInfo infer_matmul(const CallNode& call, const InferContext& ctx) {
  DataType dtype = common_dtype(op_name(call), tensor_arg(call, 0).dtype, tensor_arg(call, 1).dtype);
  DataType out_dtype = attrs_of(call).get_dtype("out_dtype");
  return matmul_result(call, ctx, out_dtype.is_void() ? dtype : out_dtype);
}

// matmul_integer(a, b, a_zp, b_zp): 8-bit operands, zero points of their
// operand's dtype that do not vary along the reduction: a_zp broadcasts
// against a with a last dim of 1, b_zp against b with a second-to-last
// dim of 1 (a scalar, or a vector along b's columns).
StructInfo infer_matmul_integer(const CallNode& call, const InferContext& ctx) {
  const std::string& op = op_name(call);
  TensorInfo a = tensor_arg(call, 0), b = tensor_arg(call, 1), za = tensor_arg(call, 2), zb = tensor_arg(call, 3);
  check_8bit_operand(op, a, "a", za, "a_zp");
  check_8bit_operand(op, b, "b", zb, "b_zp");
  if (a.ndim == 1 || b.ndim == 1) fail(op, ": operands must have rank >= 2");
  if (za.shape && !za.shape->empty() && !za.shape->back().is_const(1))
    fail(op, ": a_zp must have a last dim of 1 (one zero point per row), got ", za.shape->back());
  if (zb.shape && zb.shape->size() >= 2 && !(*zb.shape)[zb.shape->size() - 2].is_const(1))
    fail(op, ": b_zp must not vary along the reduction (a second-to-last dim of 1)");
  return matmul_result(call, ctx, DataType::i32());
}

}  // namespace

void register_matmul_ops(OpRegistry& reg) {
  reg.add("matmul")
      .doc(
          "matmul(a, b): the matrix product over the last two dims, numpy style: leading batch dims "
          "broadcast, a 1-D a is a row vector and a 1-D b a column vector whose unit dim is dropped. "
          "a's last dim must equal b's second-to-last. out_dtype, when set, is the result's dtype "
          "(accumulation happens in it).")
      .args(2)
      .attr("out_dtype", AttrType::DType, DataType::void_())
      .infer(infer_matmul);
  reg.add("matmul_integer")
      .doc(
          "matmul_integer(a, b, a_zp, b_zp): the i32 product (a - a_zp) @ (b - b_zp) of u8 or i8 operands of "
          "rank >= 2, matmul's batch broadcasting, in i32 arithmetic (ONNX MatMulInteger). Each zero point has "
          "its operand's dtype and broadcasts against it without varying along the reduction: a_zp a scalar or "
          "one per row (a last dim of 1), b_zp a scalar or one per column (a vector of b's columns, or a "
          "second-to-last dim of 1).")
      .args(4)
      .infer(infer_matmul_integer);
}

}  // namespace relax
