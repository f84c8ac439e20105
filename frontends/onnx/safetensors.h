// Weights in the safetensors layout: an 8-byte little-endian header
// length, a JSON header {"name": {"dtype", "shape", "data_offsets"}}, then
// the bytes, each tensor aligned to 8 bytes. Dtypes outside the
// safetensors set use our own names: F8_E4M3FNUZ, F8_E5M2FNUZ, F8_E8M0,
// F4_E2M1, I4, U4, I2, U2 (packed as ONNX packs them).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "frontends/onnx/host_tensor.h"

namespace relax {

using NamedTensors = std::vector<std::pair<std::string, HostTensor>>;

// Serializes the tensors (the file's bytes).
std::string encode_safetensors(const NamedTensors& tensors);
// Parses a safetensors file's bytes; an Error names what is wrong.
NamedTensors decode_safetensors(const std::string& bytes, const std::string& what);
std::string safetensors_dtype(DataType dtype);

}  // namespace relax
