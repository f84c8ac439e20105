#include "frontends/onnx/host_tensor.h"

#include <cmath>
#include <cstring>

#include "ir/error.h"

namespace relax {

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

size_t HostTensor::storage_bytes(DataType dtype, int64_t numel) {
  int64_t bits = int64_t(dtype.bits) * dtype.lanes;
  return size_t((numel * bits + 7) / 8);
}

float half_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: renormalize
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while (!(man & 0x400));
      bits = sign | uint32_t(127 - 15 - e) << 23 | (man & 0x3ff) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | man << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | man << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  int32_t exp = int32_t((x >> 23) & 0xff) - 127 + 15;
  uint32_t man = x & 0x7fffff;
  if (((x >> 23) & 0xff) == 0xff) return uint16_t(sign | 0x7c00 | (man ? 0x200 : 0));
  if (exp >= 31) return uint16_t(sign | 0x7c00);
  if (exp <= 0) {
    if (exp < -10) return uint16_t(sign);
    man |= 0x800000;
    uint32_t shift = uint32_t(14 - exp);
    uint32_t half = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return uint16_t(sign | half);
  }
  uint32_t half = sign | uint32_t(exp) << 10 | man >> 13;
  uint32_t rem = man & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;
  return uint16_t(half);
}

float bfloat_to_float(uint16_t b) {
  uint32_t bits = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_bfloat(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if (std::isnan(f)) return uint16_t((x >> 16) | 0x40);
  uint32_t rounding = 0x7fff + ((x >> 16) & 1);
  return uint16_t((x + rounding) >> 16);
}

namespace {

template <typename T>
T read(const std::vector<uint8_t>& b, int64_t i) {
  T v;
  std::memcpy(&v, b.data() + i * sizeof(T), sizeof(T));
  return v;
}

template <typename T>
void write(std::vector<uint8_t>& b, int64_t i, T v) {
  std::memcpy(b.data() + i * sizeof(T), &v, sizeof(T));
}

}  // namespace

std::optional<int64_t> HostTensor::int_at(int64_t i) const {
  if (dtype.lanes != 1) return std::nullopt;
  if (dtype.is_bool()) return bytes[i] != 0;
  if (dtype.is_int()) {
    switch (dtype.bits) {
      case 8:
        return read<int8_t>(bytes, i);
      case 16:
        return read<int16_t>(bytes, i);
      case 32:
        return read<int32_t>(bytes, i);
      case 64:
        return read<int64_t>(bytes, i);
      case 4: {
        int v = (bytes[i / 2] >> (4 * (i % 2))) & 0xf;
        return v >= 8 ? v - 16 : v;
      }
      case 2: {
        int v = (bytes[i / 4] >> (2 * (i % 4))) & 0x3;
        return v >= 2 ? v - 4 : v;
      }
    }
  }
  if (dtype.is_uint()) {
    switch (dtype.bits) {
      case 8:
        return read<uint8_t>(bytes, i);
      case 16:
        return read<uint16_t>(bytes, i);
      case 32:
        return read<uint32_t>(bytes, i);
      case 64:
        return int64_t(read<uint64_t>(bytes, i));
      case 4:
        return (bytes[i / 2] >> (4 * (i % 2))) & 0xf;
      case 2:
        return (bytes[i / 4] >> (2 * (i % 4))) & 0x3;
    }
  }
  return std::nullopt;
}

std::optional<double> HostTensor::float_at(int64_t i) const {
  if (dtype.lanes != 1) return std::nullopt;
  switch (dtype.code) {
    case TypeCode::Float:
      if (dtype.bits == 32) return read<float>(bytes, i);
      if (dtype.bits == 64) return read<double>(bytes, i);
      if (dtype.bits == 16) return half_to_float(read<uint16_t>(bytes, i));
      return std::nullopt;
    case TypeCode::BFloat:
      return bfloat_to_float(read<uint16_t>(bytes, i));
    default:
      if (auto v = int_at(i)) return double(*v);
      return std::nullopt;
  }
}

std::optional<std::vector<int64_t>> HostTensor::to_ints() const {
  if (!(dtype.is_integer() || dtype.is_bool())) return std::nullopt;
  std::vector<int64_t> out;
  int64_t n = numel();
  out.reserve(size_t(n));
  for (int64_t i = 0; i < n; ++i) out.push_back(*int_at(i));
  return out;
}

std::optional<std::vector<double>> HostTensor::to_floats() const {
  std::vector<double> out;
  int64_t n = numel();
  out.reserve(size_t(n));
  for (int64_t i = 0; i < n; ++i) {
    auto v = float_at(i);
    if (!v) return std::nullopt;
    out.push_back(*v);
  }
  return out;
}

HostTensor HostTensor::from_ints(DataType dtype, std::vector<int64_t> shape, const std::vector<int64_t>& values) {
  HostTensor t{dtype, std::move(shape), {}};
  RELAX_CHECK(int64_t(values.size()) == t.numel());
  t.bytes.assign(storage_bytes(dtype, t.numel()), 0);
  for (size_t i = 0; i < values.size(); ++i) {
    int64_t v = values[i];
    if (dtype.is_bool()) {
      t.bytes[i] = v != 0;
      continue;
    }
    if (dtype.is_float()) {
      RELAX_CHECK(dtype.code == TypeCode::Float && (dtype.bits == 32 || dtype.bits == 64));
      if (dtype.bits == 32)
        write<float>(t.bytes, int64_t(i), float(v));
      else
        write<double>(t.bytes, int64_t(i), double(v));
      continue;
    }
    switch (dtype.bits) {
      case 8:
        t.bytes[i] = uint8_t(v);
        break;
      case 16:
        write<uint16_t>(t.bytes, int64_t(i), uint16_t(v));
        break;
      case 32:
        write<uint32_t>(t.bytes, int64_t(i), uint32_t(v));
        break;
      case 64:
        write<uint64_t>(t.bytes, int64_t(i), uint64_t(v));
        break;
      case 4:
        t.bytes[i / 2] |= uint8_t((v & 0xf) << (4 * (i % 2)));
        break;
      case 2:
        t.bytes[i / 4] |= uint8_t((v & 0x3) << (2 * (i % 4)));
        break;
      default:
        fail("from_ints: unsupported dtype ", dtype.str());
    }
  }
  return t;
}

HostTensor HostTensor::from_floats(DataType dtype, std::vector<int64_t> shape, const std::vector<double>& values) {
  HostTensor t{dtype, std::move(shape), {}};
  RELAX_CHECK(int64_t(values.size()) == t.numel());
  t.bytes.assign(storage_bytes(dtype, t.numel()), 0);
  for (size_t i = 0; i < values.size(); ++i) {
    double v = values[i];
    if (dtype.code == TypeCode::Float && dtype.bits == 32)
      write<float>(t.bytes, int64_t(i), float(v));
    else if (dtype.code == TypeCode::Float && dtype.bits == 64)
      write<double>(t.bytes, int64_t(i), v);
    else if (dtype.code == TypeCode::Float && dtype.bits == 16)
      write<uint16_t>(t.bytes, int64_t(i), float_to_half(float(v)));
    else if (dtype.code == TypeCode::BFloat)
      write<uint16_t>(t.bytes, int64_t(i), float_to_bfloat(float(v)));
    else
      fail("from_floats: unsupported dtype ", dtype.str());
  }
  return t;
}

}  // namespace relax
