// Struct info: what is statically known about a value.
//
//   Object                   anything; nothing known.
//   Prim(dtype, value?)      a scalar; for integers the value may be a SymExpr.
//   Shape(values | ndim)     a shape value (a list of symbolic integers).
//   Tensor(dtype, shape | ndim | unknown rank)
//                            dtype may be Void (unknown); shape dims are
//                            SymExprs; ndim == -1 means unknown rank.
//   Tuple(fields)            a tuple of values.
//   List(elem)               a list of any length whose values all fit
//                            `elem` (ONNX sequences); `elem` is a tensor
//                            whose dims are constants or unknown (null:
//                            nothing known yet, the empty list's).
//   Func(params? -> ret)     a function; params unknown for opaque callees.
//
// Deduction degrades gracefully: when a rule cannot prove something it
// answers with a coarser struct info (known rank but unknown dims, unknown
// rank, Object), never with one that may be wrong.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/analyzer.h"
#include "ir/dtype.h"
#include "ir/sym.h"

namespace relax {

enum class SIKind : uint8_t { Object, Prim, Shape, Tensor, Tuple, Func, List };

struct StructInfoNode {
  explicit StructInfoNode(SIKind k) : kind(k) {}
  virtual ~StructInfoNode() = default;
  const SIKind kind;
};
using StructInfo = std::shared_ptr<const StructInfoNode>;

struct ObjectSI : StructInfoNode {
  ObjectSI() : StructInfoNode(SIKind::Object) {}
};

struct PrimSI : StructInfoNode {
  PrimSI(DataType d, SymExpr v) : StructInfoNode(SIKind::Prim), dtype(d), value(v) {}
  DataType dtype;
  SymExpr value;  // undefined when unknown; only for integer dtypes
};

struct ShapeSI : StructInfoNode {
  ShapeSI(int nd, std::optional<std::vector<SymExpr>> v)
      : StructInfoNode(SIKind::Shape), ndim(nd), values(std::move(v)) {}
  int ndim;  // -1: unknown
  std::optional<std::vector<SymExpr>> values;
};

struct TensorSI : StructInfoNode {
  TensorSI(DataType d, int nd, std::optional<std::vector<SymExpr>> s)
      : StructInfoNode(SIKind::Tensor), dtype(d), ndim(nd), shape(std::move(s)) {}
  DataType dtype;  // Void: unknown
  int ndim;        // -1: unknown rank
  std::optional<std::vector<SymExpr>> shape;
  bool unknown_rank() const { return ndim < 0; }
};

struct TupleSI : StructInfoNode {
  explicit TupleSI(std::vector<StructInfo> f) : StructInfoNode(SIKind::Tuple), fields(std::move(f)) {}
  std::vector<StructInfo> fields;
};

struct ListSI : StructInfoNode {
  explicit ListSI(StructInfo e) : StructInfoNode(SIKind::List), elem(std::move(e)) {}
  StructInfo elem;  // null: nothing known (no element seen yet)
};

struct FuncSI : StructInfoNode {
  FuncSI(std::optional<std::vector<StructInfo>> p, StructInfo r, bool pure)
      : StructInfoNode(SIKind::Func), params(std::move(p)), ret(std::move(r)), pure(pure) {}
  std::optional<std::vector<StructInfo>> params;  // nullopt: opaque
  StructInfo ret;
  bool pure;
};

// Constructors.
StructInfo object_si();
StructInfo prim_si(DataType dtype, SymExpr value = {});
StructInfo shape_si(std::vector<SymExpr> values);
StructInfo shape_si_ndim(int ndim);  // ndim -1: unknown
StructInfo tensor_si(DataType dtype, std::vector<SymExpr> shape);
StructInfo tensor_si_ndim(DataType dtype, int ndim);  // ndim -1: unknown rank
StructInfo tuple_si(std::vector<StructInfo> fields);
// A list of `elem`s; `elem` is made free of symbolic variables (a tensor
// keeps its dims only when all are constants), so that a list's struct info
// never depends on a scope: its values' shapes differ from one to the next.
StructInfo list_si(StructInfo elem);
StructInfo func_si(std::vector<StructInfo> params, StructInfo ret, bool pure = true);
StructInfo opaque_func_si(StructInfo ret, bool pure = false);

// Typed views; nullptr when `si` is of another kind.
template <typename T>
const T* as(const StructInfo& si);
template <>
inline const ObjectSI* as<ObjectSI>(const StructInfo& si) {
  return si && si->kind == SIKind::Object ? static_cast<const ObjectSI*>(si.get()) : nullptr;
}
template <>
inline const PrimSI* as<PrimSI>(const StructInfo& si) {
  return si && si->kind == SIKind::Prim ? static_cast<const PrimSI*>(si.get()) : nullptr;
}
template <>
inline const ShapeSI* as<ShapeSI>(const StructInfo& si) {
  return si && si->kind == SIKind::Shape ? static_cast<const ShapeSI*>(si.get()) : nullptr;
}
template <>
inline const TensorSI* as<TensorSI>(const StructInfo& si) {
  return si && si->kind == SIKind::Tensor ? static_cast<const TensorSI*>(si.get()) : nullptr;
}
template <>
inline const TupleSI* as<TupleSI>(const StructInfo& si) {
  return si && si->kind == SIKind::Tuple ? static_cast<const TupleSI*>(si.get()) : nullptr;
}
template <>
inline const ListSI* as<ListSI>(const StructInfo& si) {
  return si && si->kind == SIKind::List ? static_cast<const ListSI*>(si.get()) : nullptr;
}
template <>
inline const FuncSI* as<FuncSI>(const StructInfo& si) {
  return si && si->kind == SIKind::Func ? static_cast<const FuncSI*>(si.get()) : nullptr;
}

// Queries.

// Yes when the two are provably the same, No when provably different (other
// kinds, dtypes, ranks, or dims the analyser separates), else Unknown.
Tri struct_info_equal(const StructInfo& a, const StructInfo& b, const Analyzer& ana);

// Is `base` at least as coarse as `derived`, i.e. does every value described
// by `derived` also fit `base`? (Object is the base of everything; a tensor of
// unknown rank is the base of a tensor of rank 2; Tensor[(n, 4)] is the base
// of Tensor[(n, 4)] only if the dims are provably equal.)
Tri is_base_of(const StructInfo& base, const StructInfo& derived, const Analyzer& ana);

// The most specific struct info that is a base of both (for If branches).
StructInfo unify(const StructInfo& a, const StructInfo& b, const Analyzer& ana);

// Coarsens `si` so that it mentions only symbolic variables for which
// `in_scope` holds: a dim that uses another variable becomes unknown (the
// tensor keeps its rank but loses its dims), a prim value becomes unknown.
StructInfo erase_vars(const StructInfo& si, const std::function<bool(const SymExpr&)>& in_scope);

// Replaces symbolic variables in dims and values.
StructInfo substitute(const StructInfo& si, const SymMap<SymExpr>& map);

// Appends the symbolic variables that `si` mentions, each once.
void collect_vars(const StructInfo& si, std::vector<SymExpr>& out);

// The fields of a tuple struct info, or `si` alone: the outputs a call's
// out=... describes.
std::vector<StructInfo> fields_or_self(const StructInfo& si);

// The variables that `si` can define when it annotates a function parameter
// or a match_cast: those appearing alone as a dim or a prim value.
void collect_definable_vars(const StructInfo& si, std::vector<SymExpr>& out);

// Structural equality of the text form (same kinds, dtypes and identical
// SymExpr nodes): what the printer would print identically.
bool struct_info_same(const StructInfo& a, const StructInfo& b);

}  // namespace relax
