// A tensor held in host memory: dtype, concrete shape and the raw bytes in
// row-major order. Sub-byte types (int4, uint4, float4e2m1, int2, uint2) are
// packed as ONNX packs them: low bits first within each byte.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace relax {

struct HostTensor {
  DataType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;

  int64_t numel() const;
  // Multiplies the element count `n` by a dim read from a file: false when
  // the product overflows or passes kMaxElements (2^56: its bits fit int64).
  static constexpr int64_t kMaxElements = int64_t(1) << 56;
  static bool count_dim(int64_t& n, int64_t dim) {
    return !__builtin_mul_overflow(n, dim, &n) && n <= kMaxElements;
  }
  // Bytes that `numel` elements of `dtype` occupy (rounded up for packed types).
  static size_t storage_bytes(DataType dtype, int64_t numel);

  // Element i as an int64 (integer and bool dtypes) or a double (float
  // dtypes incl. f16/bf16); nullopt for other dtypes.
  std::optional<int64_t> int_at(int64_t i) const;
  std::optional<double> float_at(int64_t i) const;
  // All elements as int64 when the dtype is integer or bool.
  std::optional<std::vector<int64_t>> to_ints() const;
  std::optional<std::vector<double>> to_floats() const;

  static HostTensor from_ints(DataType dtype, std::vector<int64_t> shape, const std::vector<int64_t>& values);
  static HostTensor from_floats(DataType dtype, std::vector<int64_t> shape, const std::vector<double>& values);
};

// f16 / bf16 conversions (round to nearest even).
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bfloat_to_float(uint16_t b);
uint16_t float_to_bfloat(float f);

}  // namespace relax
