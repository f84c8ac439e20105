#include "runtime/dtype.h"

#include <charconv>

namespace relax::rt {
namespace {

// Every named format, listed once (the same table as ir/dtype.cc): its text
// prefix, code and fixed width (0 when the width follows the prefix, as in
// i32). `void` is handled on its own. Longer prefixes come first so that f8e4m3fnuz is not read as f8e4m3fn.
struct Named {
  std::string_view name;
  uint8_t code;
  int bits;
};
constexpr Named kNamed[] = {
    {"bool", DType::kBool, 8},
    {"bf16", DType::kBFloat, 16},
    {"f8e4m3fnuz", DType::kFloat8E4M3FNUZ, 8},
    {"f8e4m3fn", DType::kFloat8E4M3FN, 8},
    {"f8e5m2fnuz", DType::kFloat8E5M2FNUZ, 8},
    {"f8e5m2", DType::kFloat8E5M2, 8},
    {"f8e8m0", DType::kFloat8E8M0, 8},
    {"f4e2m1", DType::kFloat4E2M1, 4},
    {"handle", DType::kHandle, 64},
    {"i", DType::kInt, 0},
    {"u", DType::kUInt, 0},
    {"f", DType::kFloat, 0},
};

bool valid_width(uint8_t code, int bits) {
  switch (code) {
    case DType::kInt:
    case DType::kUInt:
      return bits == 2 || bits == 4 || bits == 8 || bits == 16 || bits == 32 || bits == 64;
    case DType::kFloat:
      return bits == 16 || bits == 32 || bits == 64;
    default:
      return true;
  }
}

}  // namespace

int64_t DType::storage_bytes(int64_t numel) const {
  int64_t b = storage_bits();
  if (b >= 8) return numel * (b / 8);
  // Packed: 8 / b elements per byte, the last byte possibly partly used.
  return (numel * b + 7) / 8;
}

std::string DType::str() const {
  std::string s = code == kVoid ? "void" : "";
  for (const Named& n : kNamed) {
    if (n.code != code) continue;
    s = std::string(n.name);
    if (n.bits == 0) s += std::to_string(bits);
    break;
  }
  if (s.empty()) s = "dtype(" + std::to_string(code) + ")";
  if (lanes != 1) s += "x" + std::to_string(lanes);
  return s;
}

std::optional<DType> DType::parse(std::string_view s) {
  if (s == "void") return DType();
  int lanes = 1;
  if (auto x = s.rfind('x'); x != std::string_view::npos && x + 1 < s.size()) {
    std::string_view tail = s.substr(x + 1);
    int l = 0;
    auto [p, ec] = std::from_chars(tail.data(), tail.data() + tail.size(), l);
    if (ec == std::errc() && p == tail.data() + tail.size() && l > 1 && l < 65536) {
      lanes = l;
      s = s.substr(0, x);
    }
  }
  for (const Named& n : kNamed) {
    if (n.bits != 0) {
      if (s == n.name) return DType(n.code, n.bits, lanes);
      continue;
    }
    if (s.size() <= n.name.size() || s.substr(0, n.name.size()) != n.name) continue;
    std::string_view digits = s.substr(n.name.size());
    int bits = 0;
    auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), bits);
    if (ec != std::errc() || p != digits.data() + digits.size()) return std::nullopt;
    if (!valid_width(n.code, bits)) return std::nullopt;
    return DType(n.code, bits, lanes);
  }
  return std::nullopt;
}

std::ostream& operator<<(std::ostream& os, const DType& t) { return os << t.str(); }

}  // namespace relax::rt
