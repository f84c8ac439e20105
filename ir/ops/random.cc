// Random number generation.
#include "ir/ops/common.h"

namespace relax {

void register_random_ops(OpRegistry& reg) {}

}  // namespace relax
