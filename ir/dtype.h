// Element types. A DataType is a code, a bit width and a lane count
// (lanes > 1 only inside tensor programs, for vectorized values). The text
// names are short: f32, f16, bf16, i64, u8, bool, f8e4m3fn, i4, f4e2m1,
// f32x8 for a vector of eight f32. `void` marks an unknown dtype.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace relax {

enum class TypeCode : uint8_t {
  Void,  // unknown / no value
  Bool,
  Int,
  UInt,
  Float,
  BFloat,
  Float8E4M3FN,
  Float8E4M3FNUZ,
  Float8E5M2,
  Float8E5M2FNUZ,
  Float8E8M0,
  Float4E2M1,
  Handle,  // an opaque pointer (runtime objects inside tensor programs)
};

struct DataType {
  TypeCode code = TypeCode::Void;
  uint8_t bits = 0;
  uint16_t lanes = 1;

  constexpr DataType() = default;
  constexpr DataType(TypeCode c, int b, int l = 1) : code(c), bits(uint8_t(b)), lanes(uint16_t(l)) {}

  static constexpr DataType void_() { return {}; }
  static constexpr DataType boolean() { return {TypeCode::Bool, 8}; }
  static constexpr DataType i(int bits) { return {TypeCode::Int, bits}; }
  static constexpr DataType u(int bits) { return {TypeCode::UInt, bits}; }
  static constexpr DataType f(int bits) { return {TypeCode::Float, bits}; }
  static constexpr DataType i64() { return i(64); }
  static constexpr DataType i32() { return i(32); }
  static constexpr DataType f32() { return f(32); }
  static constexpr DataType f16() { return f(16); }
  static constexpr DataType bf16() { return {TypeCode::BFloat, 16}; }

  bool is_void() const { return code == TypeCode::Void; }
  bool is_bool() const { return code == TypeCode::Bool; }
  bool is_int() const { return code == TypeCode::Int; }
  bool is_uint() const { return code == TypeCode::UInt; }
  bool is_integer() const { return is_int() || is_uint(); }
  // Any floating-point format, the narrow float8/float4 ones included.
  bool is_float() const { return code >= TypeCode::Float && code <= TypeCode::Float4E2M1; }
  bool is_scalar() const { return lanes == 1; }
  DataType element_of() const { return {code, bits, 1}; }
  DataType with_lanes(int l) const { return {code, bits, l}; }
  // Storage bits of one element (bool is stored as a byte).
  int storage_bits() const { return bits * lanes; }

  bool operator==(const DataType& o) const = default;

  std::string str() const;
  // Parses a text name ("f32", "i64", "f32x8", "bool"); nullopt if unknown.
  static std::optional<DataType> parse(std::string_view s);
};

std::ostream& operator<<(std::ostream& os, const DataType& t);

}  // namespace relax
