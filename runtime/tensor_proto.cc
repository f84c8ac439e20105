#include "runtime/tensor_proto.h"

#include <bit>
#include <cstring>
#include <vector>

#include "runtime/error.h"
#include "runtime/file_util.h"

namespace relax::rt {
namespace {

// Protobuf wire types.
enum Wire : int { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// TensorProto field numbers.
enum Field : uint32_t {
  kDims = 1,
  kDataType = 2,
  kSegment = 3,
  kFloatData = 4,
  kInt32Data = 5,
  kStringData = 6,
  kInt64Data = 7,
  kName = 8,
  kRawData = 9,
  kDoubleData = 10,
  kUint64Data = 11,
  kExternalData = 13,
  kDataLocation = 14,
};

// ONNX TensorProto.DataType numbers -> runtime dtypes (0: not supported).
struct OnnxType {
  int number;
  DType dtype;
};
constexpr OnnxType kOnnxTypes[] = {
    {1, DType::f32()},
    {2, DType::u(8)},
    {3, DType::i(8)},
    {4, DType::u(16)},
    {5, DType::i(16)},
    {6, DType::i(32)},
    {7, DType::i(64)},
    {9, DType::boolean()},
    {10, DType::f16()},
    {11, DType::f(64)},
    {12, DType::u(32)},
    {13, DType::u(64)},
    {16, DType::bf16()},
    {17, DType(DType::kFloat8E4M3FN, 8)},
    {18, DType(DType::kFloat8E4M3FNUZ, 8)},
    {19, DType(DType::kFloat8E5M2, 8)},
    {20, DType(DType::kFloat8E5M2FNUZ, 8)},
    {21, DType::u(4)},
    {22, DType::i(4)},
    {23, DType(DType::kFloat4E2M1, 4)},
    {24, DType(DType::kFloat8E8M0, 8)},
    {25, DType::u(2)},
    {26, DType::i(2)},
};

// A bounds-checked cursor over protobuf wire bytes.
class WireReader {
 public:
  WireReader(std::span<const uint8_t> b, std::string_view label)
      : p_(b.data()), end_(b.data() + b.size()), label_(label) {}

  bool done() const { return p_ == end_; }

  [[noreturn]] void fail(std::string_view what) const { rt_fail(label_, ": malformed TensorProto: ", what); }

  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (p_ == end_) fail("truncated varint");
      uint8_t byte = *p_++;
      v |= uint64_t(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return v;
    }
    fail("varint longer than 10 bytes");
  }
  template <class T>
  T fixed() {
    if (size_t(end_ - p_) < sizeof(T)) fail("truncated fixed-width value");
    T v;
    std::memcpy(&v, p_, sizeof(T));
    p_ += sizeof(T);
    return v;
  }
  std::span<const uint8_t> bytes() {
    uint64_t n = varint();
    if (n > uint64_t(end_ - p_)) fail("length " + std::to_string(n) + " runs past the end");
    std::span<const uint8_t> s(p_, size_t(n));
    p_ += n;
    return s;
  }
  void skip(int wire) {
    switch (wire) {
      case kVarint:
        varint();
        return;
      case kFixed64:
        fixed<uint64_t>();
        return;
      case kLengthDelimited:
        bytes();
        return;
      case kFixed32:
        fixed<uint32_t>();
        return;
      default:
        fail("unsupported wire type " + std::to_string(wire));
    }
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
  std::string_view label_;
};

// Appends the values of a repeated varint field, packed or not.
template <class T>
void read_varints(WireReader& r, int wire, std::vector<T>& out, std::string_view label) {
  if (wire == kVarint) {
    out.push_back(T(r.varint()));
    return;
  }
  if (wire != kLengthDelimited) r.fail("bad wire type for a varint field");
  WireReader packed(r.bytes(), label);
  while (!packed.done()) out.push_back(T(packed.varint()));
}

// Appends the values of a repeated fixed-width field (float, double).
template <class T, class Bits>
void read_fixed(WireReader& r, int wire, std::vector<T>& out, std::string_view label) {
  constexpr int kSingle = sizeof(T) == 8 ? kFixed64 : kFixed32;
  if (wire == kSingle) {
    out.push_back(std::bit_cast<T>(r.fixed<Bits>()));
    return;
  }
  if (wire != kLengthDelimited) r.fail("bad wire type for a fixed-width field");
  auto b = r.bytes();
  if (b.size() % sizeof(T)) r.fail("packed field length is not a multiple of " + std::to_string(sizeof(T)));
  size_t n = b.size() / sizeof(T);
  size_t at = out.size();
  out.resize(at + n);
  if (n > 0) std::memcpy(out.data() + at, b.data(), b.size());
}

struct Fields {
  std::vector<int64_t> dims;
  int64_t data_type = 0;
  std::vector<float> float_data;
  std::vector<int32_t> int32_data;
  std::vector<int64_t> int64_data;
  std::vector<double> double_data;
  std::vector<uint64_t> uint64_data;
  std::optional<std::span<const uint8_t>> raw;
  std::string name;
  bool strings = false, external = false, segment = false;
};

Fields read_fields(std::span<const uint8_t> bytes, std::string_view label) {
  Fields f;
  WireReader r(bytes, label);
  while (!r.done()) {
    uint64_t key = r.varint();
    int wire = int(key & 7);
    uint64_t field = key >> 3;
    if (field == 0) r.fail("field number 0");
    switch (field) {
      case kDims:
        read_varints(r, wire, f.dims, label);
        break;
      case kDataType:
        if (wire != kVarint) r.fail("bad wire type for data_type");
        f.data_type = int64_t(r.varint());
        break;
      case kFloatData:
        read_fixed<float, uint32_t>(r, wire, f.float_data, label);
        break;
      case kInt32Data:
        read_varints(r, wire, f.int32_data, label);
        break;
      case kInt64Data:
        read_varints(r, wire, f.int64_data, label);
        break;
      case kUint64Data:
        read_varints(r, wire, f.uint64_data, label);
        break;
      case kDoubleData:
        read_fixed<double, uint64_t>(r, wire, f.double_data, label);
        break;
      case kStringData:
        f.strings = true;
        r.skip(wire);
        break;
      case kName: {
        if (wire != kLengthDelimited) r.fail("bad wire type for name");
        auto b = r.bytes();
        f.name.assign(reinterpret_cast<const char*>(b.data()), b.size());
        break;
      }
      case kRawData:
        if (wire != kLengthDelimited) r.fail("bad wire type for raw_data");
        f.raw = r.bytes();
        break;
      case kExternalData:
        f.external = true;
        r.skip(wire);
        break;
      case kDataLocation:
        if (wire != kVarint) r.fail("bad wire type for data_location");
        if (r.varint() == 1) f.external = true;  // EXTERNAL
        break;
      case kSegment:
        f.segment = true;
        r.skip(wire);
        break;
      default:
        r.skip(wire);  // doc_string, metadata_props, ...
    }
  }
  return f;
}

// Checks that a typed field holds `want` values.
template <class T>
void check_count(const std::vector<T>& v, size_t want, const char* field, const std::string& type,
                 std::string_view label) {
  if (v.size() != want) rt_fail(label, ": ", field, " has ", v.size(), " values; ", type, " needs ", want);
}

}  // namespace

std::optional<DType> dtype_from_onnx(int data_type) {
  for (const OnnxType& t : kOnnxTypes)
    if (t.number == data_type) return t.dtype;
  return std::nullopt;
}

NamedTensor parse_tensor_proto(std::span<const uint8_t> bytes, std::string_view label) {
  Fields f = read_fields(bytes, label);
  if (f.strings || f.data_type == 8) rt_fail(label, ": string tensors are not supported");
  if (f.data_type == 14 || f.data_type == 15) rt_fail(label, ": complex tensors are not supported");
  if (f.external) rt_fail(label, ": tensors with external data are not supported");
  if (f.segment) rt_fail(label, ": segmented tensors are not supported (is this a TensorProto?)");
  if (f.data_type == 0) rt_fail(label, ": the tensor has no data_type (UNDEFINED)");
  std::optional<DType> dtype = f.data_type > 0 && f.data_type < 1000 ? dtype_from_onnx(int(f.data_type)) : std::nullopt;
  if (!dtype) rt_fail(label, ": unsupported ONNX data_type ", f.data_type);

  // The data is in the file, at least one byte per four elements, so a
  // shape claiming more is damaged (and would overflow the byte count).
  int64_t numel = 1;
  for (int64_t d : f.dims) {
    if (d < 0) rt_fail(label, ": negative dimension ", d, " in ", shape_str(f.dims));
    if (d != 0 && numel > int64_t(bytes.size()) * 4 / d)
      rt_fail(label, ": dims ", shape_str(f.dims), " hold more elements than the file has data");
    numel *= d;
  }
  if (numel > int64_t(bytes.size()) * 4)
    rt_fail(label, ": dims ", shape_str(f.dims), " hold more elements than the file has data");
  const std::string type = dtype->str() + shape_str(f.dims);
  const size_t nbytes = size_t(dtype->storage_bytes(numel));

  const DType d = *dtype;
  // Which field holds the data and how many values it must have; checked
  // before allocating so that a damaged count cannot ask for a huge tensor.
  enum class Source { kRaw, kFloat, kDouble, kInt64, kUint64, kPacked, kInt32 } src;
  if (f.raw) {
    src = Source::kRaw;
    if (f.raw->size() != nbytes) rt_fail(label, ": raw_data has ", f.raw->size(), " bytes; ", type, " needs ", nbytes);
  } else if (d == DType::f32()) {
    src = Source::kFloat;
    check_count(f.float_data, size_t(numel), "float_data", type, label);
  } else if (d == DType::f(64)) {
    src = Source::kDouble;
    check_count(f.double_data, size_t(numel), "double_data", type, label);
  } else if (d == DType::i64()) {
    src = Source::kInt64;
    check_count(f.int64_data, size_t(numel), "int64_data", type, label);
  } else if (d == DType::u(64) || d == DType::u(32)) {
    src = Source::kUint64;
    check_count(f.uint64_data, size_t(numel), "uint64_data", type, label);
  } else if (d.storage_bits() < 8) {
    src = Source::kPacked;  // one packed byte per int32_data entry
    check_count(f.int32_data, nbytes, "int32_data", type, label);
  } else {
    src = Source::kInt32;  // one element per entry
    check_count(f.int32_data, size_t(numel), "int32_data", type, label);
  }

  Tensor t = Tensor::empty(d, f.dims);
  auto* out = static_cast<uint8_t*>(t.data());
  const size_t width = size_t(d.storage_bits() / 8);
  if (nbytes == 0) return {std::move(f.name), std::move(t)};
  switch (src) {
    case Source::kRaw:
      std::memcpy(out, f.raw->data(), nbytes);
      break;
    case Source::kFloat:
      std::memcpy(out, f.float_data.data(), nbytes);
      break;
    case Source::kDouble:
      std::memcpy(out, f.double_data.data(), nbytes);
      break;
    case Source::kInt64:
      std::memcpy(out, f.int64_data.data(), nbytes);
      break;
    case Source::kUint64:
      // The low bytes of each value (little-endian), for u32 and u64.
      for (size_t i = 0; i < size_t(numel); ++i) std::memcpy(out + i * width, &f.uint64_data[i], width);
      break;
    case Source::kPacked:
      for (size_t i = 0; i < nbytes; ++i) out[i] = uint8_t(f.int32_data[i]);
      break;
    case Source::kInt32:
      // The low storage bytes: an int8 value, an f16 bit pattern; bool: 0 or 1.
      for (size_t i = 0; i < size_t(numel); ++i) {
        uint32_t v = uint32_t(f.int32_data[i]);
        if (d.is_bool()) v = v != 0;
        std::memcpy(out + i * width, &v, width);
      }
      break;
  }
  return {std::move(f.name), std::move(t)};
}

NamedTensor read_tensor_proto(const std::string& path) {
  auto file = MappedFile::open(path);
  return parse_tensor_proto(file->bytes(), path);
}

std::vector<NamedTensor> parse_sequence_proto(std::span<const uint8_t> bytes, std::string_view label) {
  // SequenceProto: name = 1, elem_type = 2 (1: tensors), tensor_values = 3.
  constexpr int kTensorElems = 1;
  std::vector<NamedTensor> out;
  WireReader r(bytes, label);
  int64_t elem_type = kTensorElems;
  while (!r.done()) {
    uint64_t key = r.varint();
    int wire = int(key & 7);
    uint64_t field = key >> 3;
    if (field == 0) r.fail("field number 0");
    if (field == 2 && wire == kVarint) {
      elem_type = int64_t(r.varint());
    } else if (field == 3 && wire == kLengthDelimited) {
      out.push_back(parse_tensor_proto(r.bytes(), label));
    } else if (field >= 4 && field <= 7) {
      rt_fail(label, ": a SequenceProto of sequences, maps or optionals is not supported");
    } else {
      r.skip(wire);
    }
  }
  if (elem_type != kTensorElems) rt_fail(label, ": a SequenceProto of element type ", elem_type, " is not supported");
  return out;
}

std::vector<NamedTensor> read_sequence_proto(const std::string& path) {
  auto file = MappedFile::open(path);
  return parse_sequence_proto(file->bytes(), path);
}

}  // namespace relax::rt
