// The CUDA backend's code generator: tensor programs -> GPU stages
// (backends/gpu/schedule.h) -> LLVM IR through the LLVM code generator
// shared with the cpu backend (backends/llvm/; the kernel entry is
// backends/cuda/kernel_codegen.h) -> PTX by
// LLVM's NVPTX target. Math functions come from CUDA's libdevice, linked in
// as bitcode where the CUDA toolkit is installed; ptxas, where installed,
// checks every module (backends/cuda/ptxas.h).
//
// The package holds two sections: "kernels.cuda", JSON,
//   {"arch": "sm_80", "ptx_version": ..., "block": B,
//    "kernels": [{"name", "num_inputs", "params": [{"dtype", "ndim"}], "slots": S,
//                 "stages": [{"symbol", "threads": postfix code,
//                             "plain": {"symbol", "threads", "tile"},
//                             "shared": {"symbol", "blocks", "threads", "rows", "cols", "depth",
//                                        "block": [rows, cols, depth]},
//                             "rows": {"symbol", "blocks", "threads", "work"}}]}],
//    "ptxas": {"version", "kernels": {symbol: {"registers", "spill_stores", "spill_loads", "stack"}}}}
// and "kernels.cuda.ptx", the PTX text of one module holding every stage.
// A stage's kernel takes the program's buffers (device pointers, inputs
// then outputs) and all its S shape-args slots (i64, runtime_abi.md
// section 2's order); it runs on ceil(threads / B) blocks of B threads.
// "plain", where present, is the stage without the register tile the main
// kernel has ("tile" outputs per thread): the runtime runs it when most of
// the tiles would fall past the extents. "shared", where present, is the
// stage tiled through shared memory
// (gpu_shared_tile: one block of "threads" threads per block of outputs,
// "blocks" of them); rows, cols and depth (postfix code) are the tiled
// extents the runtime compares with the block to choose it. "rows", where
// present, is the stage as one block of "threads" threads per row, the
// row's loops split over them and reductions combined by warp shuffles
// (gpu_row_block); "blocks" rows of "work" loop iterations each, which the
// runtime weighs to choose it.
#pragma once

#include <string>
#include <vector>

#include "ir/tir.h"

namespace relax::cuda {

struct CudaOptions {
  std::string arch = "sm_80";  // sm_80 (A100), sm_90 (H100), ...
  int opt_level = 3;           // LLVM's, 0..3
  int block = 256;             // threads per block
  int64_t max_shared_bytes = 48 << 10;  // a block's static shared memory (the trait shared=)
  bool check_with_ptxas = true;
};

struct CudaArtifact {
  std::string metadata;  // the "kernels.cuda" section
  std::string ptx;       // the "kernels.cuda.ptx" section
};

// Throws relax::Error naming the program on anything it cannot compile, and
// when ptxas rejects the module.
CudaArtifact compile_cuda(const std::vector<tir::Program>& programs, const CudaOptions& opts);

// The PTX alone (relax-build --emit kernels).
std::string cuda_ptx(const std::vector<tir::Program>& programs, const CudaOptions& opts);

// Where libdevice is (RELAX_CUDA_HOME, CUDA_HOME, CUDA_PATH,
// /usr/local/cuda); empty when not found, or when RELAX_CUDA_HOME is
// "none" (tests: as on a machine without the CUDA toolkit).
std::string find_libdevice();

}  // namespace relax::cuda
