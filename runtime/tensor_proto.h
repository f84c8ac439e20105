// Reads a serialized ONNX TensorProto (the `.pb` files of the ONNX backend
// test data) without protobuf: a small reader of the protobuf wire format
// that knows the fields of TensorProto. The runtime uses it for test inputs
// and expected outputs; it never links libprotobuf.
//
// Data comes from raw_data (little-endian, exactly the tensor's storage
// bytes) or from the typed fields: float_data (f32), double_data (f64),
// int64_data (i64), uint64_data (u32, u64), and int32_data for everything
// narrower: one element per entry, f16/bf16/float8 as their bit patterns,
// and for the packed 4-bit (2-bit) types one byte, i.e. two (four)
// elements, per entry. Strings, complex numbers, external data and segments
// are refused with a clear rt::Error; so is any malformed byte, never read
// out of bounds.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/tensor.h"

namespace relax::rt {

struct NamedTensor {
  std::string name;  // TensorProto.name; may be empty
  Tensor tensor;
};

// Throws rt::Error naming the file.
NamedTensor read_tensor_proto(const std::string& path);
// `label` names the bytes in messages.
NamedTensor parse_tensor_proto(std::span<const uint8_t> bytes, std::string_view label);

// A serialized ONNX SequenceProto of tensors (the sequence inputs and
// outputs of the backend test data): its tensors in order. Sequences of
// other kinds are refused.
std::vector<NamedTensor> read_sequence_proto(const std::string& path);
std::vector<NamedTensor> parse_sequence_proto(std::span<const uint8_t> bytes, std::string_view label);

// The runtime dtype of an ONNX TensorProto.DataType number; nullopt for
// UNDEFINED, STRING, the complex types and unknown numbers.
std::optional<DType> dtype_from_onnx(int data_type);

}  // namespace relax::rt
