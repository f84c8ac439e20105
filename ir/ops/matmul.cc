// Matrix multiplication with numpy semantics.
#include <algorithm>

#include "ir/ops/common.h"

namespace relax {
namespace {

using namespace ops;

StructInfo infer_matmul(const CallNode& call, const InferContext& ctx) {
  Attrs attrs = attrs_of(call);
  const std::string& op = op_name(call);
  TensorInfo a = tensor_arg(call, 0), b = tensor_arg(call, 1);
  DataType dtype = common_dtype(op, a.dtype, b.dtype);
  DataType out_dtype = attrs.get_dtype("out_dtype");
  if (!out_dtype.is_void()) dtype = out_dtype;
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
}

}  // namespace relax
