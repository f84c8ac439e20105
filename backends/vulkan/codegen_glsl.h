// Tensor programs to GLSL compute shaders, one per GPU stage
// (backends/gpu/schedule.h).
//
// Kernel ABI (what the runtime binds):
//   - set 0, binding k: the program's inputs, then its outputs, each a
//     std430 storage buffer of its element type (bool as uint8); an input
//     too large for one binding continues at bindings after the last
//     parameter's (GlslProgram::chunks);
//   - push constants: `push_vars`, each an int32, in order: the variables
//     of the parameter buffers' plain dims (first binding wins, inputs
//     then outputs) and then the symbolic parameters; the host computes
//     them from the buffers' shapes and checks every other dim. When they
//     are more than kGlslPushBytes (Vulkan's guaranteed minimum of
//     maxPushConstantsSize), they come instead in a readonly storage
//     buffer of int32 at the binding after every other
//     (`push_in_buffer`: a detector's post-processing can have 90);
//   - a 1-D launch of `block`-thread workgroups; each stage loops over its
//     index space with a grid stride, so any workgroup count is correct.
// Index arithmetic is 32-bit: the host refuses buffers of 2^31 elements or
// more. Data types: f32, f16, f64, i8..i64, u8..u64, bool, each within
// what the device supports (an Error names the program and the missing
// feature otherwise).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "ir/tir.h"

namespace relax::vulkan {

struct GlslFeatures {
  bool int64 = true, float16 = true, float64 = true, int8 = true, int16 = true;
  bool storage8 = true, storage16 = true;
  // Subgroup add/mul/min/max/any in compute shaders (Vulkan 1.1): the
  // workgroup reductions use them; a device without them runs those
  // stages a thread per row.
  bool subgroup_arithmetic = true;
};

struct GlslStage {
  std::string name;              // program name, then "_s<k>" when there are several
  std::string source;            // the shader
  std::vector<SymExpr> extents;  // threads = their product (1 when empty)
  // The most iterations any one loop of `source` (and `plain_source`) runs
  // in one invocation for one row: the product of its extent and those of
  // the loops around it (max over the loops; undefined when it has none
  // whose extents the host can compute). lavapipe stops a loop silently
  // after 65,535 iterations in one invocation, counted across the loops
  // around it: the runtime refuses such a call there (docs/vulkan.md).
  SymExpr loop_iters;
  // The workgroup schedule (gpu_rows), when the stage has one: one row
  // (an index of extents) per workgroup. Empty when none.
  // When `source` computes a register tile of rows per thread, the same
  // stage one row per thread (the runtime runs it when most of the tiles
  // would be past the extents: a matmul of one row). Empty otherwise.
  std::string plain_source;
  std::vector<SymExpr> plain_extents;
  int64_t tile = 1;  // rows per thread in `source`
  std::string rows_source;
  SymExpr rows_work;                  // loop iterations per row
  std::vector<SymExpr> rows_extents;  // rows = their product (the thread-per-row source may tile them)
  std::set<std::string> rows_needs;   // device features only the workgroup schedule needs ("subgroup_arithmetic")
  // The stage tiled through shared memory (gpu_shared_tile), when it is
  // matmul-like: one workgroup per index of shared_extents, for an output
  // of shared_rows x shared_cols reducing shared_depth steps. Empty when not.
  std::string shared_source;
  std::vector<SymExpr> shared_extents;
  SymExpr shared_rows, shared_cols, shared_depth;
  std::vector<int64_t> shared_block;  // a workgroup's rows, cols and depth
  // The parameters (inputs, then outputs, by position) the stage loads and
  // stores: the runtime puts a barrier before it only when it depends on a
  // command since the last one (a check that writes a status alone needs
  // none before the stage after it).
  std::vector<int64_t> reads, writes;
};

// The bytes one binding of a parameter spans at most: Vulkan's guaranteed
// maxStorageBufferRange. An input of constant shape beyond it is bound in
// chunks of this many bytes (GlslProgram::chunks).
constexpr uint64_t kGlslChunkBytes = uint64_t(1) << 27;

// The push-constant bytes every Vulkan device has (maxPushConstantsSize >= 128).
constexpr size_t kGlslPushBytes = 128;

struct GlslProgram {
  std::vector<SymExpr> push_vars;
  bool push_in_buffer = false;  // push_vars in a storage buffer (kernel ABI above)
  // Bindings of each parameter (inputs, then outputs): 1, or for an input
  // of constant shape beyond kGlslChunkBytes (a large FC weight) that many
  // chunks: the first at the parameter's binding, the others after all
  // parameters' (in parameter order), each kGlslChunkBytes of it.
  std::vector<int64_t> chunks;
  // Device features the shaders use: "int64", "int16", "int8", "float16",
  // "float64", "storage8", "storage16" (the runtime checks the device).
  std::set<std::string> needs;
  uint32_t block = 256;
  std::vector<GlslStage> stages;
};

// How stages are scheduled beyond the rules (backends/gpu/schedule.h): the register
// tile of a thread (gpu_register_tile); 1 x 1 is none.
struct GlslSchedule {
  int64_t tile_rows = 4, tile_cols = 4;
  // No workgroup schedule for rows known to do fewer loop iterations: the
  // runtime would never pick it (runtime/vulkan_exec.cc wants 256 or more
  // on a GPU, more on a cpu device).
  int64_t min_row_work = 256;
  // Matmul-like stages also tiled through shared memory, each thread
  // computing a tile_rows x tile_cols register tile of its workgroup's block.
  bool shared_tiles = true;
  // The shared memory a workgroup may use (the target's trait `shared`).
  int64_t max_shared_bytes = 16384;
  // Rows printed from the CUDA backend's block-per-row TIR (gpu_row_block,
  // with a shared tree instead of warp shuffles) instead of print_rows: a
  // check of that TIR on a Vulkan device, lavapipe included. compile_vulkan
  // sets it from RELAX_VULKAN_ROW_BLOCKS=1 (tests only).
  bool row_blocks = false;
};

GlslProgram glsl_program(const tir::Program& p, const GlslFeatures& features = {}, uint32_t block = 256,
                         const GlslSchedule& schedule = {});

}  // namespace relax::vulkan
