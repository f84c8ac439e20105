// The op families, listed once. The registry (ir/op.cc) calls this the
// first time an op is looked up.
#include "ir/ops/common.h"

namespace relax {

void register_all_ops(OpRegistry& reg) {
  register_elementwise_ops(reg);
  register_matmul_ops(reg);
  register_manipulate_ops(reg);
  register_reduce_ops(reg);
  register_nn_ops(reg);
  register_cross_level_ops(reg);
  register_math_ops(reg);
  register_index_ops(reg);
  register_image_ops(reg);
  register_sequence_ops(reg);
  register_linalg_ops(reg);
  register_signal_ops(reg);
  register_control_ops(reg);
  register_quant_ops(reg);
  register_recurrent_ops(reg);
  register_attention_ops(reg);
  register_random_ops(reg);
  register_list_ops(reg);
}

}  // namespace relax
