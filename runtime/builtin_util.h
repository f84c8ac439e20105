// Helpers shared by the builtins (runtime/builtins_*.cc): scalar operands,
// element sizes, axes.
#pragma once

#include <cstdint>
#include <variant>
#include <vector>

#include "runtime/compare.h"
#include "runtime/error.h"
#include "runtime/vm.h"

namespace relax::rt {

// Bytes per element of `t`; an error naming `what` for sub-byte dtypes,
// whose elements cannot be moved one by one.
inline size_t elem_bytes(const Tensor& t, const char* what) {
  if (t.dtype().storage_bits() % 8) rt_fail(what, ": ", t.dtype().str(), " elements cannot be moved one by one");
  return size_t(t.dtype().storage_bits() / 8);
}

// A scalar operand as an integer: a VM number or a tensor of one element.
inline int64_t scalar_int(const Value& v, const char* what) {
  if (v.is_int()) return v.int_value();
  if (std::holds_alternative<double>(v.v)) return int64_t(v.float_value());
  const Tensor& t = v.tensor(what);
  if (t.numel() != 1) rt_fail(what, " must hold one value, got ", t.type_str());
  return element_as_int64(t, 0);
}

// `axis` in [-ndim, ndim) -> [0, ndim); out of range is an error naming `what`.
inline int normalize_axis(int64_t axis, int ndim, const char* what) {
  if (axis < -ndim || axis >= ndim) rt_fail(what, ": axis ", axis, " is out of range for rank ", ndim);
  return int(axis < 0 ? axis + ndim : axis);
}

// The sizes before, along and after `axis`.
struct AxisSplit {
  int64_t outer = 1, len = 1, inner = 1;
};
inline AxisSplit split_at(const std::vector<int64_t>& shape, int axis) {
  AxisSplit s;
  for (int i = 0; i < axis; ++i) s.outer *= shape[size_t(i)];
  s.len = shape[size_t(axis)];
  for (size_t i = size_t(axis) + 1; i < shape.size(); ++i) s.inner *= shape[i];
  return s;
}

}  // namespace relax::rt
