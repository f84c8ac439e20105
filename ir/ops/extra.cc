// Ops of newer and preview ONNX ops and of the ai.onnx.ml domain.
#include "ir/ops/common.h"

namespace relax {

void register_extra_ops(OpRegistry& reg) {}

}  // namespace relax
