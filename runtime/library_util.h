// Helpers shared by the library kernels' builtins: the products
// (runtime/builtins_matmul.cc) and the convolutions
// (runtime/builtins_blas.cc).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "runtime/error.h"
#include "runtime/tensor.h"
#include "runtime/thread_pool.h"

namespace relax::rt {

// Column slices of a product with `cols` columns for `threads` workers:
// whole panels of `panel` columns each (16: a vector's), one slice when the product is too
// small to split. Each slice is one single-threaded BLAS call on the
// runtime's pool (OpenBLAS's own threads stay off: two pools spinning on
// two cores take turns instead of working).
struct Slices {
  int64_t count = 1, width = 0;
};
inline Slices column_slices(int64_t cols, int64_t wanted, double work, int64_t panel = 16) {
  Slices s;
  if (work >= double(1 << 17)) s.count = std::max<int64_t>(1, std::min(wanted, (cols + panel - 1) / panel));
  s.width = ((cols + s.count - 1) / s.count + panel - 1) / panel * panel;
  s.count = s.width > 0 ? (cols + s.width - 1) / s.width : 1;
  return s;
}

// Runs body(begin, end) over [0, n) on the pool, or inline when one item
// or one thread would do.
template <typename F>
inline void for_items(ThreadPool& pool, int64_t n, bool split, F&& body) {
  if (split && n > 1 && pool.num_threads() > 1)
    pool.parallel_for(n, body);
  else
    body(0, n);
}

// 8-bit integer tensors (u8 or i8): the integer products' operands.
inline bool is_8bit(const Tensor& t) { return (t.dtype().is_int() || t.dtype().is_uint()) && t.dtype().bits == 8; }

// A zero point's values as i32: `count` of them (1, or `many`).
inline std::vector<int32_t> zero_points(const Tensor& zp, const char* what, const char* name, int64_t many) {
  if (!is_8bit(zp) || (zp.numel() != 1 && zp.numel() != many))
    rt_fail(what, ": ", name, " must be u8 or i8 with 1 or ", many, " elements, got ", zp.type_str());
  std::vector<int32_t> v(size_t(zp.numel()));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = zp.dtype().is_int() ? int32_t(static_cast<const int8_t*>(zp.data())[i])
                               : int32_t(static_cast<const uint8_t*>(zp.data())[i]);
  return v;
}

}  // namespace relax::rt
