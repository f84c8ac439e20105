// NumPy .npy files: how test inputs and expected outputs travel between the
// runtime, the command-line tools and Python. Format versions 1.0, 2.0 and
// 3.0 are read; little-endian, C order only. dtypes: <f2 <f4 <f8, <i1..<i8,
// <u1..<u8, |b1 (and the byte-order-free |i1 |u1). Writes are atomic and use
// version 1.0 unless the header needs 2.0.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "runtime/tensor.h"

namespace relax::rt {

// Throws rt::Error naming the file on a malformed or unsupported file.
Tensor read_npy(const std::string& path);
// `label` names the bytes in messages.
Tensor parse_npy(std::span<const uint8_t> bytes, std::string_view label);

// Throws rt::Error for a dtype .npy cannot hold (bf16, the float8 and 4-bit
// types).
void write_npy(const std::string& path, const Tensor& t);
std::string encode_npy(const Tensor& t);

// The numpy descr of a dtype ("<f4"); nullopt when numpy has none.
std::optional<std::string> npy_descr(DType dtype);

}  // namespace relax::rt
