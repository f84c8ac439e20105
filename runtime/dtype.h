// Element types at run time. A DType is a type code, a bit width and a lane
// count, with the same numbers as the compiler's relax::DataType (ir/dtype.h)
// so the two convert by copying fields, and the same text names (f32, i64,
// bool, bf16, f8e4m3fn, i4, f32x8). The runtime keeps its own copy so that it
// never includes the compiler's headers.
//
// Storage: bool is one byte; types narrower than a byte (i4, u4, f4e2m1, i2,
// u2) are packed, several per byte, the first element in the low bits.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

namespace relax::rt {

struct DType {
  // Must match relax::TypeCode value for value.
  enum Code : uint8_t {
    kVoid = 0,
    kBool = 1,
    kInt = 2,
    kUInt = 3,
    kFloat = 4,
    kBFloat = 5,
    kFloat8E4M3FN = 6,
    kFloat8E4M3FNUZ = 7,
    kFloat8E5M2 = 8,
    kFloat8E5M2FNUZ = 9,
    kFloat8E8M0 = 10,
    kFloat4E2M1 = 11,
    kHandle = 12,
  };

  uint8_t code = kVoid;
  uint8_t bits = 0;
  uint16_t lanes = 1;

  constexpr DType() = default;
  constexpr DType(uint8_t c, int b, int l = 1) : code(c), bits(uint8_t(b)), lanes(uint16_t(l)) {}

  static constexpr DType boolean() { return {kBool, 8}; }
  static constexpr DType i(int bits) { return {kInt, bits}; }
  static constexpr DType u(int bits) { return {kUInt, bits}; }
  static constexpr DType f(int bits) { return {kFloat, bits}; }
  static constexpr DType f32() { return f(32); }
  static constexpr DType f16() { return f(16); }
  static constexpr DType bf16() { return {kBFloat, 16}; }
  static constexpr DType i64() { return i(64); }
  static constexpr DType i32() { return i(32); }

  bool is_void() const { return code == kVoid; }
  bool is_bool() const { return code == kBool; }
  bool is_int() const { return code == kInt; }
  bool is_uint() const { return code == kUInt; }
  bool is_float() const { return code >= kFloat && code <= kFloat4E2M1; }
  // Bits one element occupies in memory (bool: 8, whatever `bits` says).
  int storage_bits() const { return (code == kBool ? 8 : bits) * lanes; }
  // Bytes for `numel` elements; sub-byte types round the last byte up.
  int64_t storage_bytes(int64_t numel) const;

  // The compiler's packing into an int64 (bytecode constants, the C API).
  int64_t pack() const { return int64_t(code) | int64_t(bits) << 8 | int64_t(lanes) << 16; }
  static DType unpack(int64_t v) { return DType(uint8_t(v & 0xff), int((v >> 8) & 0xff), int((v >> 16) & 0xffff)); }

  bool operator==(const DType&) const = default;

  std::string str() const;
  // Parses a text name ("f32", "i64", "f32x8", "bool"); nullopt if unknown.
  static std::optional<DType> parse(std::string_view s);
};

std::ostream& operator<<(std::ostream& os, const DType& t);

}  // namespace relax::rt
