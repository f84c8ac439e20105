#include "frontends/onnx/safetensors.h"

#include <cstring>
#include <nlohmann/json.hpp>

#include "ir/error.h"

namespace relax {
namespace {

struct DtypeName {
  const char* name;
  DataType dtype;
};
const DtypeName kNames[] = {
    {"F64", DataType::f(64)},
    {"F32", DataType::f32()},
    {"F16", DataType::f16()},
    {"BF16", DataType::bf16()},
    {"I64", DataType::i64()},
    {"I32", DataType::i32()},
    {"I16", DataType::i(16)},
    {"I8", DataType::i(8)},
    {"U64", DataType::u(64)},
    {"U32", DataType::u(32)},
    {"U16", DataType::u(16)},
    {"U8", DataType::u(8)},
    {"BOOL", DataType::boolean()},
    {"F8_E4M3", DataType(TypeCode::Float8E4M3FN, 8)},
    {"F8_E5M2", DataType(TypeCode::Float8E5M2, 8)},
    {"F8_E4M3FNUZ", DataType(TypeCode::Float8E4M3FNUZ, 8)},
    {"F8_E5M2FNUZ", DataType(TypeCode::Float8E5M2FNUZ, 8)},
    {"F8_E8M0", DataType(TypeCode::Float8E8M0, 8)},
    {"F4_E2M1", DataType(TypeCode::Float4E2M1, 4)},
    {"I4", DataType::i(4)},
    {"U4", DataType::u(4)},
    {"I2", DataType::i(2)},
    {"U2", DataType::u(2)},
};

}  // namespace

std::string safetensors_dtype(DataType dtype) {
  for (const DtypeName& n : kNames)
    if (n.dtype == dtype) return n.name;
  fail("no safetensors name for dtype ", dtype.str());
}

std::string encode_safetensors(const NamedTensors& tensors) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  size_t offset = 0;
  for (const auto& [name, t] : tensors) {
    size_t begin = offset;
    offset += t.bytes.size();
    header[name] = {{"dtype", safetensors_dtype(t.dtype)}, {"shape", t.shape}, {"data_offsets", {begin, offset}}};
    offset = (offset + 7) / 8 * 8;
  }
  std::string h = header.dump();
  while ((h.size() + 8) % 8 != 0) h += ' ';
  std::string out(8, '\0');
  uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char((n >> (8 * i)) & 0xff);
  out += h;
  size_t base = out.size();
  out.resize(base + offset, '\0');
  size_t pos = 0;
  for (const auto& [name, t] : tensors) {
    if (!t.bytes.empty()) std::memcpy(out.data() + base + pos, t.bytes.data(), t.bytes.size());
    pos = (pos + t.bytes.size() + 7) / 8 * 8;
  }
  return out;
}

NamedTensors decode_safetensors(const std::string& bytes, const std::string& what) {
  if (bytes.size() < 8) fail(what, ": too short for a safetensors file");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(uint8_t(bytes[size_t(i)])) << (8 * i);
  if (n > bytes.size() - 8) fail(what, ": header length ", n, " exceeds the file");
  nlohmann::ordered_json header;
  try {
    header = nlohmann::ordered_json::parse(bytes.substr(8, n));
  } catch (const std::exception& e) {
    fail(what, ": malformed header: ", e.what());
  }
  size_t base = 8 + n;
  NamedTensors out;
  for (auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    try {
      std::string dt = info.at("dtype").get<std::string>();
      HostTensor t;
      bool found = false;
      for (const DtypeName& d : kNames)
        if (dt == d.name) t.dtype = d.dtype, found = true;
      if (!found) fail(what, ": tensor '", name, "' has unknown dtype ", dt);
      // Whole numbers only: json's conversion of 4e34 to an integer is
      // undefined behaviour.
      int64_t numel = 1;
      for (const auto& d : info.at("shape")) {
        if (!d.is_number_integer() || d.get<int64_t>() < 0)
          fail(what, ": tensor '", name, "' has a dim that is not a count: ", d.dump());
        if (!HostTensor::count_dim(numel, d.get<int64_t>()))
          fail(what, ": tensor '", name, "' has too many elements");
        t.shape.push_back(d.get<int64_t>());
      }
      std::vector<uint64_t> off;
      for (const auto& o : info.at("data_offsets")) {
        if (!o.is_number_unsigned()) fail(what, ": tensor '", name, "' has bad data offsets");
        off.push_back(o.get<uint64_t>());
      }
      if (off.size() != 2 || off[0] > off[1] || off[1] > bytes.size() - base)
        fail(what, ": tensor '", name, "' has bad data offsets");
      if (off[1] - off[0] != HostTensor::storage_bytes(t.dtype, t.numel()))
        fail(what, ": tensor '", name, "' size does not match its shape");
      t.bytes.assign(bytes.begin() + long(base + off[0]), bytes.begin() + long(base + off[1]));
      out.emplace_back(name, std::move(t));
    } catch (const nlohmann::json::exception& e) {
      fail(what, ": tensor '", name, "': ", e.what());
    }
  }
  return out;
}

}  // namespace relax
