#include "ir/dtype.h"

#include <ostream>

#include "runtime/dtype.h"

// The text names are the runtime's (runtime/dtype.cc holds the one table):
// the two types have the same fields and codes, so packages, bytecode and
// IR text spell a dtype the same way.
namespace relax {

static_assert(uint8_t(TypeCode::Void) == rt::DType::kVoid && uint8_t(TypeCode::Bool) == rt::DType::kBool &&
                  uint8_t(TypeCode::Int) == rt::DType::kInt && uint8_t(TypeCode::UInt) == rt::DType::kUInt &&
                  uint8_t(TypeCode::Float) == rt::DType::kFloat && uint8_t(TypeCode::BFloat) == rt::DType::kBFloat &&
                  uint8_t(TypeCode::Float8E4M3FN) == rt::DType::kFloat8E4M3FN &&
                  uint8_t(TypeCode::Float8E4M3FNUZ) == rt::DType::kFloat8E4M3FNUZ &&
                  uint8_t(TypeCode::Float8E5M2) == rt::DType::kFloat8E5M2 &&
                  uint8_t(TypeCode::Float8E5M2FNUZ) == rt::DType::kFloat8E5M2FNUZ &&
                  uint8_t(TypeCode::Float8E8M0) == rt::DType::kFloat8E8M0 &&
                  uint8_t(TypeCode::Float4E2M1) == rt::DType::kFloat4E2M1 &&
                  uint8_t(TypeCode::Handle) == rt::DType::kHandle,
              "relax::TypeCode and rt::DType codes must agree");

std::string DataType::str() const { return rt::DType(uint8_t(code), bits, lanes).str(); }

std::optional<DataType> DataType::parse(std::string_view s) {
  std::optional<rt::DType> d = rt::DType::parse(s);
  if (!d) return std::nullopt;
  return DataType(TypeCode(d->code), d->bits, d->lanes);
}

std::ostream& operator<<(std::ostream& os, const DataType& t) { return os << t.str(); }

}  // namespace relax
