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
//    iteration writes only elements indexed by its own variable, or by it
//    plus an offset free of it (a concat's later parts), and reads back
//    only those): flattened, one thread per iteration, the rest of the
//    body serial in the thread (reductions per output element, conv row
//    nests, scans);
//  - otherwise one thread runs the stage.
// A program must have no workspace left (lift-workspaces runs first): a
// shader cannot allocate.
#pragma once

#include <optional>
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

// The workgroup schedule of a stage with loops per thread: one row (an
// index of the stage's vars) per workgroup, the row's loops split over the
// workgroup's threads. Each step of the row body is one of:
//   Serial  a statement on local scalars, run by every thread alike;
//   Global  a store to global memory outside any loop, run by thread 0;
//   Reduce  a loop nest whose one store is acc[0] = op(acc[0], x), op one of
//           + * min max: the nest's iterations (flattened) are split over
//           the threads, their partials combined through shared memory,
//           and every thread gets the result;
//   Spread  a loop whose iterations are independent (marked, or shown as
//           gpu_stages shows them), split over the threads.
// nullopt when the body has anything else (a serial loop that is not a
// reduction, a local array, a condition around loops): the stage then runs
// one thread per row. The runtime picks between the two per call, from the
// row count and the work per row.
struct GpuRowStep {
  enum class Kind { Serial, Global, Reduce, Spread };
  Kind kind = Kind::Serial;
  tir::Stmt stmt;
  tir::Buffer acc;                  // Reduce: the accumulator
  tir::BinOp op = tir::BinOp::Add;  // Reduce: how partials combine
  bool barrier_after = false;       // a later step reads global memory this one writes
};
struct GpuRows {
  std::vector<tir::Buffer> locals;  // the row's local scalars
  std::vector<GpuRowStep> steps;
  SymExpr work;  // loop iterations per row: of its Reduce nests and Spread loops, summed
};
std::optional<GpuRows> gpu_rows(const GpuStage& st);

// Register tiles: each thread of a stage with loops per row computes a
// `rows` x `cols` tile of rows (its last two vars; `cols` of the last only
// when it has one), the tile's copies of the body jammed loop by loop so
// that a value loaded once serves every copy that reads it (a matmul's
// A[i, k] serves the tile's row, B[k, j] its column). Indices past an
// extent are clamped for loads, and their stores skipped. nullopt when the
// body does not jam (a loop's extent depends on the tiled vars, a loop
// under a condition), is too large to copy (4096 expression nodes over all
// copies), or would not gain (no accumulation into a local
// inside a loop reads a load shared between copies).
std::optional<GpuStage> gpu_register_tile(const GpuStage& st, int64_t rows, int64_t cols);

// A stage run by whole workgroups: one workgroup per index of `vars`,
// every one of its `threads` threads running `body` with `thread` its
// index in the workgroup. In the body a Barrier synchronizes the
// workgroup (every thread reaches it alike), and buffers allocated Shared
// are the workgroup's memory.
struct GpuBlockStage {
  std::vector<SymExpr> vars, extents;  // workgroups = the product of extents
  SymExpr thread;
  int64_t threads = 256;
  tir::Stmt body;
  SymExpr rows, cols, depth;                                // the tiled extents (for the runtime's choice)
  int64_t block_rows = 1, block_cols = 1, block_depth = 1;  // a workgroup's block of them
};

// Shared-memory tiles for matmul-like stages: a stage whose rows (an index
// of its vars) hold one reduction nest, acc = op(acc, x), and statements
// without loops. A stage var splits its vars into outer ones (fixed per
// workgroup), the row var and the column vars after it (flattened: a
// convolution's output pixels). Each workgroup computes a block of
// (threads/16 * rows) x (16 * cols) outputs, each thread a `rows` x `cols`
// register tile of it, in chunks of `depth` reduction steps: the
// workgroup first loads the chunk of every staged value of x into shared
// memory, cooperatively, then each thread reads them from there. A staged
// value is a largest subexpression of x that reads global memory (nothing
// the stage writes) and depends on the row var or on the column vars,
// not both: a matmul's A[i, k] and B[k, j], a convolution's weight and its
// padded input. The innermost row var that stages values on both sides is
// chosen. Indices past an extent are clamped for loads, their stores
// skipped. nullopt when the stage is not of that form, stages nothing on
// one side, or needs more than `max_shared_bytes` of shared memory (the
// target's trait `shared`; 16 KiB is Vulkan's guaranteed minimum).
std::optional<GpuBlockStage> gpu_shared_tile(const GpuStage& st, int64_t rows = 4, int64_t cols = 4,
                                             int64_t threads = 256, int64_t depth = 16,
                                             int64_t max_shared_bytes = 16384);

// The workgroup rows of a stage as a block stage, for code generators that
// compile block stages (CUDA): one block of `threads` threads per row.
// Serial steps run in every thread, Global ones in thread 0, Spread loops
// and Reduce nests split their iterations over the threads (thread t takes
// t, t + threads, ...). A Reduce combines the threads' partials into every
// thread's accumulator: with `warp` > 1 and a 32-bit accumulator, a warp's
// lanes by shfl_xor butterflies, then the warps' partials through shared
// memory; otherwise a shared-memory tree. Barriers end each reduction and
// each step a later one reads the global writes of. (Its rows, cols and
// depth, which describe shared-memory tiles, stay unset.)
GpuBlockStage gpu_row_block(const GpuStage& st, const GpuRows& rows, int64_t threads, int64_t warp);

}  // namespace relax
