// GPU schedules by rule, shared by the Vulkan and CUDA backends: a tensor
// program becomes a sequence of stages, one kernel launch each (a launch
// boundary is the only global barrier a GPU has), and each stage says which
// of its loops are spread over the threads of the launch.
//
// Rules, per top-level statement of the program body:
//  - a perfect nest around one store of the nest's own index (elementwise,
//    broadcast, injective computes; op_pattern.h's StoreNest): every loop
//    is independent, so the whole nest is flattened into one index space,
//    one thread per element;
//  - otherwise the leading chain of loops whose iterations are independent
//    (marked parallel or vectorized by the legaliser, or shown so: each
//    iteration writes only elements indexed by its own variable and reads
//    back only those): flattened, one thread per iteration, the rest of the
//    body serial in the thread (reductions per output element, conv row
//    nests, scans);
//  - otherwise one thread runs the stage.
// A program must have no workspace left (lift-workspaces runs first): a
// shader cannot allocate.
#pragma once

#include <vector>

#include "ir/tir.h"

namespace relax {

struct GpuStage {
  std::vector<SymExpr> vars;     // the loops spread over threads, outermost first
  std::vector<SymExpr> extents;  // their extents: threads = the product (1 when vars is empty)
  tir::Stmt body;                // what one thread runs for one index of vars
};

// The stages of `p`; an Error naming the program when it still holds a
// workspace.
std::vector<GpuStage> gpu_stages(const tir::Program& p);

}  // namespace relax
