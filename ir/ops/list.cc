// List ops: ONNX sequences, lists of tensors whose length is known only at
// run time (a Python list in an exported model's code, often carried
// through a loop).
//
// A list is a value of struct info List(elem) (ir/struct_info.h); a tuple
// of tensors is accepted wherever a list is, so that a list built from
// known values (SequenceConstruct) stays a tuple and keeps its shapes until
// something makes its length dynamic. Every op here is pure and returns a
// new list; the legaliser calls the runtime's builtins (relax.list_*).
//
// Positions are integer scalars (rank 0, or rank 1 of one element) that
// count from the end when negative; out of range is a run-time error.
#include "ir/ops/common.h"

namespace relax {
namespace {

using namespace ops;

// What argument i's values fit: a list's element, or the unification of a
// tuple's fields (null: nothing known, the empty list's).
StructInfo element_of(const CallNode& call, size_t i, const Analyzer& ana) {
  StructInfo si = arg_sinfo(call, i);
  if (const auto* l = as<ListSI>(si)) return l->elem;
  if (const auto* t = as<TupleSI>(si)) {
    StructInfo e;
    for (const StructInfo& f : t->fields) {
      if (!as<TensorSI>(f)) fail(op_name(call), ": argument ", i, " is a tuple with a ", kind_name(f), " field");
      e = e ? unify(e, f, ana) : f;
    }
    return e;
  }
  if (as<ObjectSI>(si)) return tensor_si_ndim(DataType::void_(), -1);
  fail(op_name(call), ": argument ", i, " must be a list, got ", kind_name(si));
}

// Checks that argument i is an integer scalar (a position).
void position_arg(const CallNode& call, size_t i) {
  TensorInfo p = tensor_arg(call, i, true);
  require_integer(op_name(call), p.dtype, "the position", false);
  // Rank 0, or rank 1 of one element (when its length is known).
  if (p.ndim > 1 || (p.shape && p.ndim == 1 && p.shape->at(0).is_const() && !p.shape->at(0).is_const(1)))
    fail(op_name(call), ": the position must be a scalar, got rank ", p.ndim);
}

StructInfo infer_list_at(const CallNode& call, const InferContext& ctx) {
  StructInfo e = element_of(call, 0, ctx.ana);
  position_arg(call, 1);
  return e ? e : tensor_si_ndim(DataType::void_(), -1);
}

StructInfo infer_list_insert(const CallNode& call, const InferContext& ctx) {
  StructInfo e = element_of(call, 0, ctx.ana);
  TensorInfo t = tensor_arg(call, 1);
  if (call.args.size() > 2) position_arg(call, 2);
  StructInfo ts = arg_sinfo(call, 1);
  if (e) {
    const auto* et = as<TensorSI>(e);
    if (et && !et->dtype.is_void() && !t.dtype.is_void() && et->dtype != t.dtype)
      fail(op_name(call), ": inserting a ", t.dtype, " tensor into a list of ", et->dtype);
  }
  return list_si(e ? unify(e, ts, ctx.ana) : ts);
}

StructInfo infer_list_erase(const CallNode& call, const InferContext& ctx) {
  StructInfo e = element_of(call, 0, ctx.ana);
  if (call.args.size() > 1) position_arg(call, 1);
  return list_si(e);
}

StructInfo infer_list_length(const CallNode& call, const InferContext& ctx) {
  element_of(call, 0, ctx.ana);
  return tensor_si(DataType::i64(), {});
}

StructInfo infer_list_split(const CallNode& call, const InferContext&) {
  Attrs attrs = attrs_of(call);
  TensorInfo x = tensor_arg(call, 0);
  bool has_split = call.args.size() > 1, split_scalar = false;
  if (has_split) {
    TensorInfo s = tensor_arg(call, 1);
    require_integer(op_name(call), s.dtype, "split", false);
    if (s.ndim > 1) fail(op_name(call), ": split must be a scalar or a 1-D tensor, got rank ", s.ndim);
    if (s.ndim < 0) fail(op_name(call), ": split must be of known rank");
    split_scalar = s.ndim == 0;
  }
  if (x.unknown_rank()) return list_si(tensor_si_ndim(x.dtype, -1));
  if (x.ndim == 0) fail(op_name(call), ": cannot split a scalar");
  int axis = normalize_axis(op_name(call), attrs.get_int("axis"), x.ndim);
  bool drop = (!has_split || split_scalar) && !attrs.get_bool("keepdims");
  // The parts' length along the axis is known only without split.
  if (!x.shape || has_split) return list_si(tensor_si_ndim(x.dtype, drop ? x.ndim - 1 : x.ndim));
  Dims d = *x.shape;
  if (drop)
    d.erase(d.begin() + axis);
  else
    d[size_t(axis)] = 1;
  return list_si(tensor_si(x.dtype, std::move(d)));
}

StructInfo infer_list_concat(const CallNode& call, const InferContext& ctx) {
  Attrs attrs = attrs_of(call);
  StructInfo e = element_of(call, 0, ctx.ana);
  const auto* t = as<TensorSI>(e);
  if (!t) return tensor_si_ndim(DataType::void_(), -1);
  bool new_axis = attrs.get_bool("new_axis");
  if (t->ndim < 0) return tensor_si_ndim(t->dtype, -1);
  int rank = t->ndim + (new_axis ? 1 : 0);
  if (rank == 0) fail(op_name(call), ": cannot concatenate scalars without new_axis");
  normalize_axis(op_name(call), attrs.get_int("axis"), rank);
  return tensor_si_ndim(t->dtype, rank);
}

}  // namespace

void register_list_ops(OpRegistry& reg) {
  using T = AttrType;
  reg.add("list_at")
      .doc("list_at(l, i): the tensor at position i of list l (negative from the end).")
      .args(2)
      .infer(infer_list_at);
  reg.add("list_insert")
      .doc("list_insert(l, t[, i]): l with t inserted before position i (at the end without i; i may equal the "
           "length). t's dtype must be the list's.")
      .args(2, 3)
      .infer(infer_list_insert);
  reg.add("list_erase")
      .doc("list_erase(l[, i]): l without its tensor at position i (the last without i).")
      .args(1, 2)
      .infer(infer_list_erase);
  reg.add("list_length")
      .doc("list_length(l): the number of tensors in l, as an i64 scalar tensor.")
      .args(1)
      .infer(infer_list_length);
  reg.add("list_split")
      .doc("list_split(x[, split], axis, keepdims): ONNX SplitToSequence. x split along axis into parts of "
           "split's lengths (a 1-D tensor), or of length split (a scalar; the last part may be shorter); without "
           "split, into parts of length 1. When keepdims is false and split is absent or a scalar (then it must be 1), the "
           "axis is removed (ONNX Runtime's reading, which torch.onnx's unbind relies on; the ONNX text ignores "
           "keepdims whenever split is given).")
      .args(1, 2)
      .attr("axis", T::Int, int64_t(0))
      .attr("keepdims", T::Bool, true)
      .infer(infer_list_split);
  reg.add("list_concat")
      .doc("list_concat(l, axis, new_axis): ONNX ConcatFromSequence. The tensors of l joined along axis, or "
           "stacked along a new axis at position axis when new_axis (axis counts in the result's rank). l must "
           "not be empty.")
      .args(1)
      .attr("axis", T::Int)
      .attr("new_axis", T::Bool, false)
      .infer(infer_list_concat);
}

}  // namespace relax
