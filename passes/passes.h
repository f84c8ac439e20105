// The passes, one per file; file, function and registered name agree
// (passes/dead_code_elimination.cc, dead_code_elimination(mod),
// "dead-code-elimination"). The list is written once, in registry.cc.
#pragma once

#include <optional>
#include <string>

#include "ir/module.h"

namespace relax {

// Turns nested expressions into bindings (A-normal form) and gives every
// binding and expression its deduced struct info.
IRModule normalize(const IRModule& mod);
// Groups runs of pure bindings into dataflow blocks; variables used only
// inside a block become dataflow variables.
IRModule convert_to_dataflow(const IRModule& mod);
// Removes bindings whose values are pure and unused, and module items that
// no public function reaches.
IRModule dead_code_elimination(const IRModule& mod);
// Replaces variables bound to other variables (y = x) by what they alias,
// removes match_casts that provably hold already, and folds tuple
// indexing of literal tuples.
IRModule canonicalize_bindings(const IRModule& mod);
// Simplifies every symbolic expression in struct info, shapes and prim
// values with Analyzer::simplify, under its default assumption that
// symbolic integers are non-negative (user-given bounds are not read yet).
IRModule simplify_shapes(const IRModule& mod);

// For the cuda target: runs of kernel launches over planned storage
// become regions the runtime captures as CUDA graphs and replays, one graph
// per binding of what the kernels see (passes/rewrite_cuda_graph.cc).
IRModule rewrite_cuda_graph(const IRModule& mod);

// A matmul of two dequantized 8-bit tensors (per-tensor scales, b's may be
// per column) becomes their integer product (matmul_integer) times the
// product of the scales; a convolution of a dequantized x by a dequantized
// constant w, of 512 taps or more, conv_integer so (passes/qdq_to_integer.cc).
IRModule qdq_to_integer(const IRModule& mod);

// On a target whose kernels multiply no narrow float natively: conv,
// conv_transpose and matmul of f16 or bf16 tensors computed in f32, cast
// back after each (passes/widen_narrow_floats.cc).
IRModule widen_narrow_floats(const IRModule& mod);

// Host targets: a CNN's convolutions and what follows them kept in the
// blocked channel layout, (N, C / 16, H, W, 16), converted at the region's
// edges (passes/block_layout.cc); the module's `channel_layout` attribute
// (auto, blocked, plain) chooses.
IRModule block_layout(const IRModule& mod);

// cpu: a matmul reads its operands through the transposes, reshapes,
// splits and slices that made them, and writes its result through the
// transpose after it, as blas.matmul_view of strided views
// (passes/fold_matmul_views.cc).
IRModule fold_matmul_views(const IRModule& mod);

// Each op call with a registered legaliser (passes/legalize/) becomes a
// call_tir of a tensor program (or a library call), preceded by the
// bindings it needs; other calls stay. Runs bind-shapes first.
IRModule legalize(const IRModule& mod);

// Binds operands of known rank but unknown dims with a match_cast to fresh
// variables before an op reads them, so every op sees a symbolic shape.
IRModule bind_shapes(const IRModule& mod);

// Turns a pure binding structurally equal to an earlier one in its block
// into an alias of the earlier variable (not match_casts, impure calls or
// random ops).
IRModule eliminate_common_subexpr(const IRModule& mod);
// Groups call_tir bindings of a dataflow block that one kernel can compute
// (by the patterns of passes/analysis/op_pattern.h) into private functions marked
// primitive=true, called in their place.
IRModule fuse_ops(const IRModule& mod);
// Merges each primitive function into one tensor program (inlining plain
// computes, running elementwise epilogues in place) and calls it with
// call_tir.
IRModule fuse_tir(const IRModule& mod);
// A library convolution (gemm.conv2d_packed) whose only reader is an
// elementwise kernel adding per-channel biases and a residual and
// clamping takes that kernel's work as its epilogue, one call for the two.
IRModule fuse_library_epilogues(const IRModule& mod);
// cpu: a concat along the channels read only by a direct library
// convolution becomes the convolution reading its parts, where its kernel
// copies its input anyway (passes/fuse_concat_into_conv.cc).
IRModule fuse_concat_into_conv(const IRModule& mod);
// Simplifies index arithmetic in every tensor program under the bounds its
// loops give their variables (tir::simplify_indices).
IRModule simplify_tir(const IRModule& mod);
// Merges tensor programs equal but for their names and their buffers'
// names (fusion's per-layer copies of one kernel) into the first of them.
IRModule dedupe_programs(const IRModule& mod);
// Turns each tensor program's workspace (global buffers allocated at the
// root of its body) into extra outputs that its call_tir bindings declare
// and drop, so memory planning covers them.
IRModule lift_workspaces(const IRModule& mod);
// Moves @main's computations that depend only on weights into
// @transform_params, run once at load; @main reads their results as
// constants "__lifted_K".
IRModule lift_transform_params(const IRModule& mod);
// The constant name under which @main reads result K of @transform_params
// ("__lifted_K"), and the K of such a name (nullopt for any other name).
std::string lifted_constant_name(size_t k);
std::optional<size_t> lifted_constant_index(const std::string& name);
// Plans the storage of each graph function's activation tensors: explicit
// alloc_storage / alloc_tensor and destination-passing calls, storage
// reused between tensors whose lifetimes do not overlap (symbolic sizes
// provably equal, or planned at the upper bounds of attribute sym_bounds).
IRModule static_plan_memory(const IRModule& mod);

}  // namespace relax
