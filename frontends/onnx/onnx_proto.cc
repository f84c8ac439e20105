#include "frontends/onnx/onnx_proto.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "ir/error.h"
#include "runtime/tensor.h"

namespace relax::onnx_fe {
namespace fs = std::filesystem;

namespace {

// Every ONNX element type with a dtype, listed once.
struct TypeRow {
  int onnx;
  const char* name;
  DataType dtype;
};
const TypeRow kTypes[] = {
    {kFloat, "FLOAT", DataType::f32()},
    {kUint8, "UINT8", DataType::u(8)},
    {kInt8, "INT8", DataType::i(8)},
    {kUint16, "UINT16", DataType::u(16)},
    {kInt16, "INT16", DataType::i(16)},
    {kInt32, "INT32", DataType::i32()},
    {kInt64, "INT64", DataType::i64()},
    {kBool, "BOOL", DataType::boolean()},
    {kFloat16, "FLOAT16", DataType::f16()},
    {kDouble, "DOUBLE", DataType::f(64)},
    {kUint32, "UINT32", DataType::u(32)},
    {kUint64, "UINT64", DataType::u(64)},
    {kBFloat16, "BFLOAT16", DataType::bf16()},
    {kFloat8E4M3FN, "FLOAT8E4M3FN", DataType(TypeCode::Float8E4M3FN, 8)},
    {kFloat8E4M3FNUZ, "FLOAT8E4M3FNUZ", DataType(TypeCode::Float8E4M3FNUZ, 8)},
    {kFloat8E5M2, "FLOAT8E5M2", DataType(TypeCode::Float8E5M2, 8)},
    {kFloat8E5M2FNUZ, "FLOAT8E5M2FNUZ", DataType(TypeCode::Float8E5M2FNUZ, 8)},
    {kUint4, "UINT4", DataType::u(4)},
    {kInt4, "INT4", DataType::i(4)},
    {kFloat4E2M1, "FLOAT4E2M1", DataType(TypeCode::Float4E2M1, 4)},
    {kFloat8E8M0, "FLOAT8E8M0", DataType(TypeCode::Float8E8M0, 8)},
    {kUint2, "UINT2", DataType::u(2)},
    {kInt2, "INT2", DataType::i(2)},
};

// A file's bytes mapped read-only (no copy: a model of 500 MB was read
// through a growing string stream, three copies and 60,000 small reads).
class Mapped {
 public:
  Mapped(const std::string& path, const char* what) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail(path, ": cannot open ", what);
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      fail(path, ": cannot read ", what, " (not a regular file)");
    }
    size_ = size_t(st.st_size);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        ::close(fd);
        fail(path, ": cannot map ", what);
      }
      data_ = p;
      ::madvise(p, size_, MADV_SEQUENTIAL);
    }
    ::close(fd);
  }
  ~Mapped() {
    if (data_) ::munmap(data_, size_);
  }
  Mapped(const Mapped&) = delete;
  Mapped& operator=(const Mapped&) = delete;
  const void* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

template <typename Msg>
Msg parse_bytes(const void* data, size_t size, const std::string& path, const char* what) {
  if (size > size_t(INT32_MAX)) fail(path, ": ", what, " is over 2 GiB (protobuf's limit); use external data");
  google::protobuf::io::ArrayInputStream raw(data, int(size));
  google::protobuf::io::CodedInputStream in(&raw);
  in.SetTotalBytesLimit(INT32_MAX);
  in.SetRecursionLimit(512);
  Msg msg;
  if (!msg.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage())
    fail(path, ": not a valid ", what, " (protobuf parse failed)");
  return msg;
}

template <typename Msg>
Msg parse_file(const std::string& path, const char* what) {
  Mapped file(path, what);
  return parse_bytes<Msg>(file.data(), file.size(), path, what);
}

// Reads the external bytes of a tensor, refusing locations outside `dir`.
std::string read_external(const onnx::TensorProto& t, const std::string& dir) {
  std::string location;
  int64_t offset = 0, length = -1;
  auto number = [&](const std::string& key, const std::string& text) {
    int64_t v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || v < 0)
      fail("tensor '", t.name(), "': external data ", key, " '", text, "' is not a byte count");
    return v;
  };
  for (const auto& kv : t.external_data()) {
    if (kv.key() == "location")
      location = kv.value();
    else if (kv.key() == "offset")
      offset = number("offset", kv.value());
    else if (kv.key() == "length")
      length = number("length", kv.value());
  }
  if (location.empty()) fail("tensor '", t.name(), "': external data without a location");
  fs::path rel(location);
  if (rel.is_absolute()) fail("tensor '", t.name(), "': external data location '", location, "' is absolute");
  fs::path base, full;
  std::error_code ec;
  base = fs::weakly_canonical(fs::path(dir.empty() ? "." : dir), ec);
  if (!ec) full = fs::weakly_canonical(base / rel, ec);
  if (ec) fail("tensor '", t.name(), "': external data location '", location, "': ", ec.message());
  auto [b, f] = std::mismatch(base.begin(), base.end(), full.begin(), full.end());
  if (b != base.end())
    fail("tensor '", t.name(), "': external data location '", location, "' escapes the model's folder");
  std::ifstream in(full, std::ios::binary);
  if (!in) fail("tensor '", t.name(), "': cannot open external data file '", full.string(), "'");
  in.seekg(0, std::ios::end);
  int64_t size = in.tellg();
  if (offset < 0 || offset > size) fail("tensor '", t.name(), "': external data offset ", offset, " is past the end");
  if (length < 0) length = size - offset;
  if (length > size - offset) fail("tensor '", t.name(), "': external data is truncated");
  std::string bytes(size_t(length), '\0');
  in.seekg(offset);
  in.read(bytes.data(), length);
  return bytes;
}

}  // namespace

std::optional<DataType> dtype_of(int onnx_type) {
  for (const TypeRow& r : kTypes)
    if (r.onnx == onnx_type) return r.dtype;
  return std::nullopt;
}

std::string onnx_type_name(int onnx_type) {
  for (const TypeRow& r : kTypes)
    if (r.onnx == onnx_type) return r.name;
  if (onnx_type == kString) return "STRING";
  if (onnx_type == kComplex64) return "COMPLEX64";
  if (onnx_type == kComplex128) return "COMPLEX128";
  return "type " + std::to_string(onnx_type);
}

int onnx_type_of(DataType dtype) {
  for (const TypeRow& r : kTypes)
    if (r.dtype == dtype) return r.onnx;
  return kUndefined;
}

onnx::ModelProto load_model(const std::string& path) {
  return parse_file<onnx::ModelProto>(path, "ONNX model");
}

onnx::ModelProto parse_model(std::span<const uint8_t> bytes, const std::string& label) {
  return parse_bytes<onnx::ModelProto>(bytes.data(), bytes.size(), label, "ONNX model");
}

onnx::TensorProto load_tensor_file(const std::string& path) {
  return parse_file<onnx::TensorProto>(path, "ONNX TensorProto");
}

HostTensor decode_tensor(const onnx::TensorProto& t, const std::string& model_dir) {
  auto dtype = dtype_of(t.data_type());
  if (!dtype) fail("tensor '", t.name(), "': element type ", onnx_type_name(t.data_type()), " is not supported");
  HostTensor out;
  out.dtype = *dtype;
  int64_t n = 1;
  for (int64_t d : t.dims()) {
    if (d < 0) fail("tensor '", t.name(), "': negative dim ", d);
    if (!HostTensor::count_dim(n, d))
      fail("tensor '", t.name(), "': shape ", rt::shape_str({t.dims().begin(), t.dims().end()}),
           " has too many elements");
    out.shape.push_back(d);
  }
  size_t nbytes = HostTensor::storage_bytes(*dtype, n);
  std::string external;
  const std::string* raw = nullptr;  // not copied when it is the proto's own
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    external = read_external(t, model_dir);
    raw = &external;
  } else if (t.has_raw_data()) {
    raw = &t.raw_data();
  }
  if (raw) {
    if (raw->size() != nbytes)
      fail("tensor '", t.name(), "': holds ", raw->size(), " bytes but ", n, " elements of ", dtype->str(), " need ",
           nbytes);
    const auto* p = reinterpret_cast<const uint8_t*>(raw->data());
    out.bytes.assign(p, p + raw->size());
    return out;
  }
  out.bytes.assign(nbytes, 0);
  auto need = [&](int64_t have, int64_t want) {
    if (have != want) fail("tensor '", t.name(), "': holds ", have, " values but its shape needs ", want);
  };
  int bits = dtype->bits;
  if (*dtype == DataType::f32()) {
    need(t.float_data_size(), n);
    std::memcpy(out.bytes.data(), t.float_data().data(), nbytes);
  } else if (*dtype == DataType::f(64)) {
    need(t.double_data_size(), n);
    std::memcpy(out.bytes.data(), t.double_data().data(), nbytes);
  } else if (*dtype == DataType::i64()) {
    need(t.int64_data_size(), n);
    std::memcpy(out.bytes.data(), t.int64_data().data(), nbytes);
  } else if (*dtype == DataType::u(32) || *dtype == DataType::u(64)) {
    need(t.uint64_data_size(), n);
    for (int64_t i = 0; i < n; ++i) {
      uint64_t v = t.uint64_data(int(i));
      std::memcpy(out.bytes.data() + i * bits / 8, &v, size_t(bits / 8));
    }
  } else if (bits < 8) {
    // Sub-byte types: int32_data holds the packed bytes, one per value.
    need(t.int32_data_size(), int64_t(nbytes));
    for (size_t i = 0; i < nbytes; ++i) out.bytes[i] = uint8_t(t.int32_data(int(i)));
  } else {
    // int32, int16, int8, uint16, uint8, bool, float16, bfloat16, float8:
    // int32_data holds one value (or bit pattern) per element.
    need(t.int32_data_size(), n);
    for (int64_t i = 0; i < n; ++i) {
      uint32_t v = uint32_t(t.int32_data(int(i)));
      std::memcpy(out.bytes.data() + i * bits / 8, &v, size_t(bits / 8));
    }
  }
  return out;
}

}  // namespace relax::onnx_fe
