// Every converter family, listed once.
#include <mutex>

#include "frontends/onnx/context.h"

namespace relax::onnx_fe {

const ConverterRegistry& converters() {
  static ConverterRegistry reg;
  static std::once_flag once;
  std::call_once(once, [] {
    register_elementwise_converters(reg);
    register_shape_converters(reg);
    register_tensor_converters(reg);
    register_nn_converters(reg);
    register_resize_converters(reg);
    register_attention_converters(reg);
    register_reduce_converters(reg);
    register_control_converters(reg);
    register_quant_converters(reg);
    register_rnn_converters(reg);
    register_ml_converters(reg);
    register_contrib_converters(reg);
    register_random_converters(reg);
    register_sequence_converters(reg);
  });
  return reg;
}

}  // namespace relax::onnx_fe
