// Reading ONNX protobuf messages: models (with external data), tensors
// (every element type, the narrow ones included), and the type and shape
// of values. Nothing here builds IR.
#pragma once

#include <onnx/onnx_pb.h>

#include <optional>
#include <span>
#include <string>

#include "frontends/onnx/host_tensor.h"

namespace relax::onnx_fe {

// ONNX TensorProto.DataType numbers, the ones newer than Debian's schema
// included (they arrive as plain numbers).
enum OnnxType : int {
  kUndefined = 0,
  kFloat = 1,
  kUint8 = 2,
  kInt8 = 3,
  kUint16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kDouble = 11,
  kUint32 = 12,
  kUint64 = 13,
  kComplex64 = 14,
  kComplex128 = 15,
  kBFloat16 = 16,
  kFloat8E4M3FN = 17,
  kFloat8E4M3FNUZ = 18,
  kFloat8E5M2 = 19,
  kFloat8E5M2FNUZ = 20,
  kUint4 = 21,
  kInt4 = 22,
  kFloat4E2M1 = 23,
  kFloat8E8M0 = 24,
  kUint2 = 25,
  kInt2 = 26,
};

// The IR dtype of an ONNX element type; nullopt for string, complex and
// unknown numbers.
std::optional<DataType> dtype_of(int onnx_type);
// The ONNX type name, for messages ("FLOAT", "INT4", "type 99").
std::string onnx_type_name(int onnx_type);
// The ONNX element type number of an IR dtype.
int onnx_type_of(DataType dtype);

// Parses a model file. Errors name the file.
onnx::ModelProto load_model(const std::string& path);
// Parses a model held in memory; errors name `label`.
onnx::ModelProto parse_model(std::span<const uint8_t> bytes, const std::string& label);
// Parses a serialized TensorProto (an input_K.pb / output_K.pb file).
onnx::TensorProto load_tensor_file(const std::string& path);

// Decodes a TensorProto, reading external data relative to `model_dir`
// (refused if the location escapes that folder). Errors name the tensor.
HostTensor decode_tensor(const onnx::TensorProto& t, const std::string& model_dir);

}  // namespace relax::onnx_fe
