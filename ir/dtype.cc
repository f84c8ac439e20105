#include "ir/dtype.h"

#include <charconv>
#include <ostream>

namespace relax {
namespace {

// Every named format, listed once: its text prefix, code and fixed width
// (0 when the width follows the prefix, as in i32 or u8).
struct Named {
  std::string_view name;
  TypeCode code;
  int bits;
};
constexpr Named kNamed[] = {
    {"void", TypeCode::Void, 0},
    {"bool", TypeCode::Bool, 8},
    {"bf16", TypeCode::BFloat, 16},
    {"f8e4m3fnuz", TypeCode::Float8E4M3FNUZ, 8},
    {"f8e4m3fn", TypeCode::Float8E4M3FN, 8},
    {"f8e5m2fnuz", TypeCode::Float8E5M2FNUZ, 8},
    {"f8e5m2", TypeCode::Float8E5M2, 8},
    {"f8e8m0", TypeCode::Float8E8M0, 8},
    {"f4e2m1", TypeCode::Float4E2M1, 4},
    {"handle", TypeCode::Handle, 64},
    {"i", TypeCode::Int, 0},
    {"u", TypeCode::UInt, 0},
    {"f", TypeCode::Float, 0},
};

bool valid_width(TypeCode c, int bits) {
  switch (c) {
    case TypeCode::Int:
    case TypeCode::UInt:
      return bits == 2 || bits == 4 || bits == 8 || bits == 16 || bits == 32 || bits == 64;
    case TypeCode::Float:
      return bits == 16 || bits == 32 || bits == 64;
    default:
      return true;
  }
}

}  // namespace

std::string DataType::str() const {
  std::string s;
  for (const Named& n : kNamed) {
    if (n.code != code) continue;
    s = std::string(n.name);
    if (n.bits == 0) s += std::to_string(bits);
    break;
  }
  if (lanes != 1) s += "x" + std::to_string(lanes);
  return s;
}

std::optional<DataType> DataType::parse(std::string_view s) {
  int lanes = 1;
  if (auto x = s.rfind('x'); x != std::string_view::npos && x + 1 < s.size() && s != "void") {
    std::string_view tail = s.substr(x + 1);
    int l = 0;
    auto [p, ec] = std::from_chars(tail.data(), tail.data() + tail.size(), l);
    if (ec == std::errc() && p == tail.data() + tail.size() && l > 1) {
      lanes = l;
      s = s.substr(0, x);
    }
  }
  for (const Named& n : kNamed) {
    if (n.bits != 0) {
      if (s == n.name) return DataType(n.code, n.bits, lanes);
      continue;
    }
    if (s.size() <= n.name.size() || s.substr(0, n.name.size()) != n.name) continue;
    std::string_view digits = s.substr(n.name.size());
    int bits = 0;
    auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), bits);
    if (ec != std::errc() || p != digits.data() + digits.size()) return std::nullopt;
    if (!valid_width(n.code, bits)) return std::nullopt;
    return DataType(n.code, bits, lanes);
  }
  return std::nullopt;
}

std::ostream& operator<<(std::ostream& os, const DataType& t) { return os << t.str(); }

}  // namespace relax
