// The Vulkan backend's code generation for a package: every tensor program
// to GLSL compute shaders (one per GPU stage) to validated, optimised
// SPIR-V, with what the runtime needs to launch them.
//
// The package holds two sections: "kernels.vulkan", JSON,
//   {"block": B, "needs": [features],
//    "kernels": [{"name", "num_inputs", "num_params",
//                 "params": [{"dtype", "ndim", "chunks" (when more than 1)}],
//                 "push": [shape-args slot of each push constant],
//                 "stages": [{"name", "offset", "words", "threads": postfix code,
//                             "plain": {"offset", "words", "threads", "tile"},
//                             "rows": {"offset", "words", "work", "count", "needs"},
//                             "shared": {"offset", "words", "count", "rows", "cols", "depth", "block"}}]}]}
// and "kernels.vulkan.spv", the SPIR-V words of every stage, one after
// another (offset and words count 32-bit words). Shape args are what the VM
// passes every kernel: each parameter's dims in order, then the symbolic
// arguments; "threads" is postfix code over them (rt::ShapePattern).
// "rows", when present, is the stage's workgroup schedule (one row per
// workgroup, gpu_rows): "count" rows of "work" loop iterations each, both
// postfix code; the runtime picks it or the thread per row per call, and
// ignores it on a device without its "needs" (subgroup arithmetic).
// A parameter with "chunks" is bound as that many bindings of
// kGlslChunkBytes each (codegen_glsl.h): its own, then after the last
// parameter's, in parameter order.
// "plain", when present, is the stage without its register tile ("tile"
// outputs per thread): the runtime runs it when most of the tiles would
// fall past the extents.
// "shared", when present, is the stage tiled through shared memory
// (gpu_shared_tile): "count" workgroups computing a "rows" x "cols" output
// over "depth" reduction steps, all postfix code, each workgroup a
// "block" of [rows, cols, depth] at a time; the runtime picks it when the
// output fills its blocks well enough.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ir/tir.h"

namespace relax::vulkan {

struct VulkanArtifact {
  std::string metadata;  // the JSON of "kernels.vulkan"
  std::string spirv;     // the bytes of "kernels.vulkan.spv"
};

// `tile`: a thread's register tile, rows x cols (GlslSchedule); `block`:
// the threads of a workgroup and `max_shared_bytes` the shared memory it
// may use (the target's traits threads= and shared=).
VulkanArtifact compile_vulkan(const std::vector<tir::Program>& programs, int opt_level = 2,
                              std::pair<int64_t, int64_t> tile = {4, 4}, uint32_t block = 256,
                              int64_t max_shared_bytes = 16384);

}  // namespace relax::vulkan
