// Reductions along axes (fixed, or read at run time), arg-reductions, softmax
// and layer normalisation.
#include <algorithm>
#include <iterator>

#include "ir/ops/common.h"

namespace relax {
namespace {

using namespace ops;

struct ReduceDef {
  const char* name;
  const char* doc;
};

constexpr ReduceDef kReduce[] = {
    {"sum", "sum(x, axis=[...], keepdims=b): the sum of x's elements over the listed axes (all when none)."},
    {"mean", "mean(x, axis=[...], keepdims=b): the arithmetic mean over the listed axes (all when none)."},
    {"max", "max(x, axis=[...], keepdims=b): the largest element over the listed axes (all when none)."},
    {"min", "min(x, axis=[...], keepdims=b): the smallest element over the listed axes (all when none)."},
    {"prod", "prod(x, axis=[...], keepdims=b): the product of the elements over the listed axes (all when none)."},
};

constexpr const char* kKeepdimsDoc = " With keepdims the reduced dims stay as 1s, else they are dropped.";

// The shape after reducing `axes` (none: every axis) of x.
StructInfo reduced(const std::string& op, const TensorInfo& x, DataType dtype, const std::vector<int64_t>& axes,
                   bool keepdims) {
  if (x.unknown_rank()) {
    if (axes.empty() && !keepdims) return tensor_si(dtype, {});
    return tensor_si_ndim(dtype, -1);
  }
  std::vector<bool> is_reduced(x.ndim, axes.empty());
  for (int ax : normalize_axes(op, axes, x.ndim)) is_reduced[ax] = true;
  Dims out;
  int ndim = 0;
  for (int i = 0; i < x.ndim; ++i) {
    if (is_reduced[i] && !keepdims) continue;
    ++ndim;
    if (x.shape) out.push_back(is_reduced[i] ? SymExpr(1) : (*x.shape)[i]);
  }
  if (!x.shape) return tensor_si_ndim(dtype, ndim);
  return tensor_si(dtype, std::move(out));
}

StructInfo infer_reduce(const CallNode& call, const InferContext&) {
  Attrs attrs = attrs_of(call);
  TensorInfo x = tensor_arg(call, 0);
  return reduced(op_name(call), x, x.dtype, attrs.get_ints("axis"), attrs.get_bool("keepdims"));
}

StructInfo infer_arg_reduce(const CallNode& call, const InferContext&) {
  Attrs attrs = attrs_of(call);
  const std::string& op = op_name(call);
  TensorInfo x = tensor_arg(call, 0);
  int64_t axis = attrs.get_int("axis");
  if (!x.unknown_rank()) normalize_axis(op, axis, x.ndim);
  return reduced(op, x, DataType::i64(), {axis}, attrs.get_bool("keepdims"));
}

StructInfo infer_softmax(const CallNode& call, const InferContext&) {
  int64_t axis = attrs_of(call).get_int("axis");
  const std::string& op = op_name(call);
  StructInfo si = arg_sinfo(call, 0);
  TensorInfo x = tensor_info(op, si, "argument 0", false);
  require_float(op, x.dtype, "the operand");
  if (!x.unknown_rank()) normalize_axis(op, axis, x.ndim);
  return si;
}

StructInfo infer_layer_norm(const CallNode& call, const InferContext& ctx) {
  Attrs attrs = attrs_of(call);
  const std::string& op = op_name(call);
  StructInfo si = arg_sinfo(call, 0);
  TensorInfo x = tensor_info(op, si, "argument 0", false);
  require_float(op, x.dtype, "the operand");
  std::vector<int64_t> axes = attrs.get_ints("axes");
  if (axes.empty()) fail(op, ": needs at least one axis");
  const char* names[] = {"gamma", "beta"};
  for (size_t i = 1; i <= 2; ++i) {
    TensorInfo p = tensor_arg(call, i);
    common_dtype(op, x.dtype, p.dtype);
    if (!p.unknown_rank() && p.ndim != int(axes.size()))
      fail(op, ": ", names[i - 1], " has rank ", p.ndim, " but ", axes.size(), " axes are normalized");
    if (x.unknown_rank()) continue;
    std::vector<int> norm = normalize_axes(op, axes, x.ndim);
    if (!x.shape || !p.shape) continue;
    for (size_t j = 0; j < norm.size(); ++j) {
      const SymExpr &pd = (*p.shape)[j], &xd = (*x.shape)[norm[j]];
      if (ctx.ana.can_prove_not_equal(pd, xd))
        fail(op, ": ", names[i - 1], " dim ", j, " is ", pd, " but x has ", xd, " at axis ", norm[j]);
    }
  }
  return si;
}

// ---- reductions over run-time axes ----------------------------------------------

constexpr const char* kReduceKinds[] = {"sum", "mean", "max", "min", "prod"};

// reduce_dynamic(x, axes): the axes are a 1-D integer tensor read at run
// time, so only the rank of the result is known, and only when the number
// of axes is (the axes being distinct and in range).
StructInfo infer_reduce_dynamic(const CallNode& call, const InferContext&) {
  Attrs attrs = attrs_of(call);
  const std::string& op = op_name(call);
  std::string kind = attrs.get_string("kind");
  if (std::find(std::begin(kReduceKinds), std::end(kReduceKinds), kind) == std::end(kReduceKinds))
    fail(op, ": unknown kind '", kind, "' (sum, mean, max, min or prod)");
  StructInfo xsi = arg_sinfo(call, 0);
  TensorInfo x = tensor_info(op, xsi, "argument 0", false);
  TensorInfo axes = tensor_arg(call, 1);
  require_integer(op, axes.dtype, "the axes", false);
  if (!axes.unknown_rank() && axes.ndim != 1) fail(op, ": the axes must be a 1-D tensor, got rank ", axes.ndim);
  bool keepdims = attrs.get_bool("keepdims");
  std::optional<int64_t> n;
  if (axes.shape && (*axes.shape)[0].is_const()) n = (*axes.shape)[0].const_value();
  if (n && *n == 0) {
    if (attrs.get_bool("noop_with_empty_axes")) return xsi;
    return reduced(op, x, x.dtype, {}, keepdims);  // every axis
  }
  if (x.unknown_rank()) return tensor_si_ndim(x.dtype, -1);
  if (n && *n > x.ndim) fail(op, ": ", *n, " distinct axes for a rank-", x.ndim, " tensor");
  if (n && *n == x.ndim) return reduced(op, x, x.dtype, {}, keepdims);  // every axis
  if (keepdims) return tensor_si_ndim(x.dtype, x.ndim);
  return tensor_si_ndim(x.dtype, n ? x.ndim - int(*n) : -1);
}

}  // namespace

void register_reduce_ops(OpRegistry& reg) {
  using T = AttrType;
  for (const ReduceDef& d : kReduce) {
    reg.add(d.name)
        .doc(std::string(d.doc) + kKeepdimsDoc)
        .args(1)
        .attr("axis", T::Ints, std::vector<int64_t>{})
        .attr("keepdims", T::Bool, false)
        .infer(infer_reduce);
  }
  for (const char* name : {"argmax", "argmin"}) {
    reg.add(name)
        .doc(cat(name, "(x, axis=a, keepdims=b): the index (i64) of the first ",
                 std::string(name) == "argmax" ? "largest" : "smallest", " element along axis a.", kKeepdimsDoc))
        .args(1)
        .attr("axis", T::Int)
        .attr("keepdims", T::Bool, false)
        .infer(infer_arg_reduce);
  }
  reg.add("softmax")
      .doc(
          "softmax(x, axis=a): exp(x) / sum(exp(x)) along axis a (default the last), computed stably by "
          "subtracting the max first.")
      .args(1)
      .attr("axis", T::Int, int64_t(-1))
      .infer(infer_softmax);
  reg.add("log_softmax")
      .doc("log_softmax(x, axis=a): x - max - log(sum(exp(x - max))) along axis a (default the last).")
      .args(1)
      .attr("axis", T::Int, int64_t(-1))
      .infer(infer_softmax);
  reg.add("layer_norm")
      .doc(
          "layer_norm(x, gamma, beta, axes=[...], epsilon=e): (x - mean) / sqrt(var + e) * gamma + beta, the "
          "mean and (biased) variance taken over the listed axes; gamma and beta have the shape of those "
          "axes.")
      .args(3)
      .attr("axes", T::Ints)
      .attr("epsilon", T::Float, 1e-5)
      .infer(infer_layer_norm);
  reg.add("reduce_dynamic")
      .doc(
          "reduce_dynamic(x, axes, kind=k, keepdims=b, noop_with_empty_axes=e): the reduction k (sum, mean, "
          "max, min or prod, as the op of that name) of x over the axes listed in the 1-D integer tensor "
          "`axes`, read at run time: distinct, each in [-rank, rank), negative ones counting from the end. "
          "No axes means every axis, or, with noop_with_empty_axes, no reduction (the result is x). With "
          "keepdims the reduced dims stay as 1s, else they are dropped.")
      .args(2)
      .attr("kind", T::String)
      .attr("keepdims", T::Bool, false)
      .attr("noop_with_empty_axes", T::Bool, false)
      .infer(infer_reduce_dynamic);
}

}  // namespace relax
