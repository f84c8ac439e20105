#include "runtime/compare.h"

#include <cmath>
#include <cstring>

#include "runtime/error.h"

namespace relax::rt {
namespace {

double half_bits_to_double(uint16_t h) {
  uint32_t sign = uint32_t(h >> 15) << 31, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while (!(mant & 0x400));
      bits = sign | uint32_t(127 - 15 - e) << 23 | (mant & 0x3ff) << 13;
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

bool readable(DType d) {
  if (d.lanes != 1) return false;
  switch (d.code) {
    case DType::kBool:
      return true;
    case DType::kInt:
    case DType::kUInt:
      return d.bits == 8 || d.bits == 16 || d.bits == 32 || d.bits == 64;
    case DType::kFloat:
      return d.bits == 16 || d.bits == 32 || d.bits == 64;
    case DType::kBFloat:
      return d.bits == 16;
  }
  return false;
}

}  // namespace

double element_as_double(const Tensor& t, int64_t i) {
  const char* p = static_cast<const char*>(t.data());
  DType d = t.dtype();
  auto rd = [&](auto v) {
    std::memcpy(&v, p + i * int64_t(sizeof(v)), sizeof(v));
    return v;
  };
  if (d.is_uint() && d.bits == 64) return double(rd(uint64_t()));
  if (d.is_bool() || d.is_int() || d.is_uint()) return double(element_as_int64(t, i));
  switch (d.code) {
    case DType::kFloat:
      switch (d.bits) {
        case 16:
          return half_bits_to_double(rd(uint16_t()));
        case 32:
          return rd(float());
        case 64:
          return rd(double());
      }
      break;
    case DType::kBFloat: {
      uint32_t bits = uint32_t(rd(uint16_t())) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
  }
  rt_fail("cannot read elements of dtype ", d.str());
}

int64_t element_as_int64(const Tensor& t, int64_t i) {
  const char* p = static_cast<const char*>(t.data());
  DType d = t.dtype();
  auto rd = [&](auto v) {
    std::memcpy(&v, p + i * int64_t(sizeof(v)), sizeof(v));
    return int64_t(v);
  };
  if (d.lanes == 1 && (d.is_bool() || d.is_int() || d.is_uint())) {
    bool s = d.is_int();
    switch (d.is_bool() ? 8 : d.bits) {
      case 8:
        return d.is_bool() ? rd(uint8_t()) != 0 : s ? rd(int8_t()) : rd(uint8_t());
      case 16:
        return s ? rd(int16_t()) : rd(uint16_t());
      case 32:
        return s ? rd(int32_t()) : rd(uint32_t());
      case 64:
        return rd(int64_t());
    }
  }
  rt_fail("cannot read elements of dtype ", d.str(), " as integers");
}

bool scalar_truth(const Tensor& t, const char* what) {
  if (t.numel() != 1) rt_fail(what, " must be a single value, got ", t.type_str());
  DType d = t.dtype();
  if (d.is_float()) return element_as_double(t, 0) != 0;
  return element_as_int64(t, 0) != 0;
}

Comparison compare_tensors(const Tensor& actual, const Tensor& expected, const Tolerance& tol) {
  Comparison c;
  if (!(actual.dtype() == expected.dtype())) {
    c.detail = rt_str("dtype ", actual.dtype().str(), ", expected ", expected.dtype().str());
    return c;
  }
  if (actual.shape() != expected.shape()) {
    c.detail = rt_str("shape ", shape_str(actual.shape()), ", expected ", shape_str(expected.shape()));
    return c;
  }
  int64_t n = actual.numel();
  DType d = actual.dtype();
  if (!readable(d)) {  // narrow floats and packed types: the bytes must agree
    if (actual.nbytes() != expected.nbytes() || std::memcmp(actual.data(), expected.data(), actual.nbytes()) != 0) {
      c.mismatches = 1;
      c.detail = rt_str("the bytes of the ", d.str(), " tensor differ");
      return c;
    }
    c.ok = true;
    return c;
  }
  bool exact = !(d.is_float() || d.code == DType::kBFloat);
  for (int64_t i = 0; i < n; ++i) {
    double a = element_as_double(actual, i), e = element_as_double(expected, i);
    bool good;
    double abs_err = 0, rel_err = 0;
    if (std::isnan(e) || std::isnan(a)) {
      good = std::isnan(e) && std::isnan(a);
      if (!good) abs_err = rel_err = INFINITY;
    } else if (std::isinf(e) || std::isinf(a)) {
      good = a == e;
      if (!good) abs_err = rel_err = INFINITY;
    } else {
      abs_err = std::fabs(a - e);
      rel_err = e != 0 ? abs_err / std::fabs(e) : (abs_err == 0 ? 0 : INFINITY);
      good = exact ? a == e : abs_err <= tol.atol + tol.rtol * std::fabs(e);
    }
    c.max_abs_error = std::max(c.max_abs_error, abs_err);
    if (!(abs_err == 0)) c.max_rel_error = std::max(c.max_rel_error, rel_err);
    if (!good) {
      if (c.mismatches == 0) c.detail = rt_str("element ", i, ": ", a, ", expected ", e);
      ++c.mismatches;
    }
  }
  c.ok = c.mismatches == 0;
  if (!c.ok) c.detail = rt_str(c.mismatches, " of ", n, " elements differ; first: ", c.detail);
  return c;
}

}  // namespace relax::rt
