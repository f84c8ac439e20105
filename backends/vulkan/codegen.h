// The Vulkan backend's code generation for a package: every tensor program
// to GLSL compute shaders (one per GPU stage) to validated, optimised
// SPIR-V, with what the runtime needs to launch them.
//
// The package holds two sections: "kernels.vulkan", JSON,
//   {"block": B, "needs": [features],
//    "kernels": [{"name", "num_inputs", "num_params",
//                 "params": [{"dtype", "ndim"}],
//                 "push": [shape-args slot of each push constant],
//                 "stages": [{"name", "offset", "words", "threads": postfix code}]}]}
// and "kernels.vulkan.spv", the SPIR-V words of every stage, one after
// another (offset and words count 32-bit words). Shape args are what the VM
// passes every kernel: each parameter's dims in order, then the symbolic
// arguments; "threads" is postfix code over them (rt::ShapePattern).
#pragma once

#include <string>
#include <vector>

#include "ir/tir.h"

namespace relax::vulkan {

struct VulkanArtifact {
  std::string metadata;  // the JSON of "kernels.vulkan"
  std::string spirv;     // the bytes of "kernels.vulkan.spv"
};

VulkanArtifact compile_vulkan(const std::vector<tir::Program>& programs, int opt_level = 2);

}  // namespace relax::vulkan
