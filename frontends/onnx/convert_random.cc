// ONNX converters: random generators and Optional ops on plain tensors.
#include "frontends/onnx/context.h"

namespace relax::onnx_fe {

void register_random_converters(ConverterRegistry& r) {}

}  // namespace relax::onnx_fe
