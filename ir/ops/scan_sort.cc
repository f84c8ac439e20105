// Cumulative ops, top-k and hardmax: ops along one axis.
//
// topk's k is a Sym attribute: a frontend that only knows it at run time
// binds it to a fresh variable first (match_cast of tensor_to_shape). An
// axis known only at run time is an optional scalar operand instead (cumsum,
// cumprod): the result keeps the dims no choice of axis can change.
#include <string>

#include "ir/ops/common.h"

namespace relax {
namespace {

using namespace ops;

// ---- topk, cumulative ops, hardmax ----------------------------------------------------

StructInfo infer_topk(const CallNode& call, const InferContext& ctx) {
  Attrs attrs = attrs_of(call);
  const std::string& op = op_name(call);
  TensorInfo x = tensor_arg(call, 0);
  SymExpr k = get_sym(attrs, "k");
  check_count(op, "k", k, ctx.ana, false);
  auto result = [&](StructInfo values) {
    const auto* t = as<TensorSI>(values);
    StructInfo indices = t->shape ? tensor_si(DataType::i64(), *t->shape) : tensor_si_ndim(DataType::i64(), t->ndim);
    return tuple_si({values, indices});
  };
  if (x.unknown_rank()) return result(tensor_si_ndim(x.dtype, -1));
  if (x.ndim == 0) fail(op, ": needs a tensor of rank >= 1");
  int ax = normalize_axis(op, attrs.get_int("axis"), x.ndim);
  if (!x.shape) return result(tensor_si_ndim(x.dtype, x.ndim));
  Dims out = *x.shape;
  if (ctx.ana.prove_less(out[ax], k) == Tri::Yes) fail(op, ": k = ", k, " exceeds dim ", out[ax], " at axis ", ax);
  out[ax] = k;
  return result(tensor_si(x.dtype, std::move(out)));
}

// Ops whose result has the operand's struct info; `axis` must be valid.
StructInfo infer_same_along_axis(const CallNode& call, const InferContext&) {
  int64_t axis = attrs_of(call).get_int("axis");
  const std::string& op = op_name(call);
  StructInfo si = arg_sinfo(call, 0);
  TensorInfo x = tensor_info(op, si, "argument 0", false);
  if (!x.unknown_rank()) {
    if (x.ndim == 0) fail(op, ": needs a tensor of rank >= 1");
    normalize_axis(op, axis, x.ndim);
  }
  return si;
}

// cumsum / cumprod: the result has the operand's struct info. The axis is
// the attribute, or the operand 1 when given (then only the rank is checked).
StructInfo infer_cumulative(const CallNode& call, const InferContext& ctx) {
  if (call.args.size() < 2) return infer_same_along_axis(call, ctx);
  attrs_of(call);
  const std::string& op = op_name(call);
  StructInfo si = arg_sinfo(call, 0);
  TensorInfo x = tensor_info(op, si, "argument 0", false);
  if (x.ndim == 0) fail(op, ": needs a tensor of rank >= 1");
  check_axis_arg(call, 1, ctx.ana);
  return si;
}

}  // namespace

void register_sequence_ops(OpRegistry& reg) {
  using T = AttrType;
  reg.add("topk")
      .doc(
          "topk(x, k=K, axis=a, largest=b, sorted=s): a tuple (values, indices i64) of the K largest (or, "
          "with largest=false, smallest) elements along axis a, in descending (ascending) order when "
          "sorted; ties keep the lower index first.")
      .args(1)
      .attr("k", T::Sym)
      .attr("axis", T::Int, int64_t(-1))
      .attr("largest", T::Bool, true)
      .attr("sorted", T::Bool, true)
      .infer(infer_topk);
  for (const char* name : {"cumsum", "cumprod"}) {
    bool sum = std::string(name) == "cumsum";
    reg.add(name)
        .doc(cat(name, "(x, [axis_value], axis=a, exclusive=e, reverse=r): the running ", sum ? "sum" : "product",
                 " along axis a: element i combines elements 0..i (exclusive: 0..i-1, the first being ",
                 sum ? "0" : "1",
                 "); reverse runs from the end. Same shape and dtype as x. When the integer scalar "
                 "axis_value is given, the axis is its value, read at run time (in [-rank, rank)), and the "
                 "attribute a is unused."))
        .args(1, 2)
        .attr("axis", T::Int, int64_t(0))
        .attr("exclusive", T::Bool, false)
        .attr("reverse", T::Bool, false)
        .infer(infer_cumulative);
  }
  reg.add("hardmax")
      .doc(
          "hardmax(x, axis=a): 1 where x holds the first largest element along axis a, else 0; same shape "
          "and dtype as x.")
      .args(1)
      .attr("axis", T::Int, int64_t(-1))
      .infer(infer_same_along_axis);
}

}  // namespace relax
