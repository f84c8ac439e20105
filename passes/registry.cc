// Every pass, listed once, and the named pipelines.
#include "ir/error.h"
#include "passes/pass.h"
#include "passes/passes.h"

namespace relax {

const std::vector<Pass>& all_passes() {
  static const std::vector<Pass> passes = {
      {"normalize", "A-normal form and deduced struct info everywhere", normalize},
      {"convert-to-dataflow", "group runs of pure bindings into dataflow blocks", convert_to_dataflow},
      {"canonicalize-bindings", "alias elimination, trivial match_cast removal, tuple-item folding",
       canonicalize_bindings},
      {"dead-code-elimination", "drop unused pure bindings and unreachable module items", dead_code_elimination},
      {"simplify-shapes", "simplify symbolic expressions under declared bounds", simplify_shapes},
      {"qdq-to-integer",
       "a matmul (or a long convolution) of dequantized 8-bit tensors becomes their integer product times the "
       "scales",
       qdq_to_integer},
      {"widen-narrow-floats",
       "targets without native f16 or bf16 products (traits: precisions): conv, conv_transpose and matmul of f16 or "
       "bf16 tensors computed in f32 (library kernels; weights converted at build time), cast back after each",
       widen_narrow_floats},
      {"block-layout",
       "host kernels: convolutions and the elementwise ops, plane reductions and channel concats after them kept in "
       "the blocked channel layout (N, C / 16, H, W, 16) between layers, converted at the region's edges",
       block_layout},
      {"fold-matmul-views",
       "host kernels: a matmul reads its operands through the transposes, reshapes and slices that made them (and writes "
       "its result through the transpose after it) as a BLAS product of strided views",
       fold_matmul_views},
      {"legalize", "graph ops to tensor programs (call_tir) by the registered legalisers", legalize},
      {"eliminate-common-subexpr", "pure bindings equal to an earlier one become aliases of it",
       eliminate_common_subexpr},
      {"fuse-ops", "group call_tir bindings one kernel can compute into primitive functions", fuse_ops},
      {"fuse-tir", "merge each primitive function into one tensor program", fuse_tir},
      {"fuse-library-epilogues",
       "a library convolution read only by a kernel of biases, a residual and a clamp, SiLU or leaky ReLU applies "
       "that itself",
       fuse_library_epilogues},
      {"fuse-concat-into-conv",
       "host kernels: a concat along the channels that only a direct library convolution reads is not made; the "
       "convolution reads its parts",
       fuse_concat_into_conv},
      {"simplify-tir", "simplify index arithmetic in tensor programs under their loop bounds", simplify_tir},
      {"dedupe-programs", "tensor programs equal but for their names and their buffers' names become one",
       dedupe_programs},
      {"lift-transform-params", "weight-only computations of @main move to @transform_params, run once at load",
       lift_transform_params},
      {"lift-workspaces",
       "tensor programs' workspaces become outputs their callers allocate (and memory planning plans)",
       lift_workspaces},
      {"static-plan-memory", "plan activation storage: explicit allocations reused across lifetimes",
       static_plan_memory},
      {"rewrite-cuda-graph",
       "targets that capture launches (traits: capture): runs of kernel launches over planned storage become regions "
       "captured once as CUDA graphs and replayed",
       rewrite_cuda_graph},
      {"bind-shapes", "match_cast operands of unknown dims to fresh variables before ops read them", bind_shapes},
  };
  return passes;
}

std::vector<std::string> pipeline_names() { return {"O0", "O1", "O2"}; }

// The pipelines are what relax-build runs at -O0, -O1 and -O2: graph-level
// passes, legalisation into tensor programs, then the passes on the
// legalised form. Every level legalises, so every level builds. What
// differs between targets comes from their traits: GPU kernels cannot
// allocate (workspaces lifted at every level); a target with 8-bit
// integer products computes dequantized products as integer ones (the
// cpu's VNNI kernels; others keep their f32 kernels); matmul views are
// folded only into host kernels, which read strided operands.
std::vector<std::string> pipeline(const std::string& name, const TargetTraits& traits) {
  const bool gpu = traits.gpu;
  std::vector<std::string> graph = {"normalize", "convert-to-dataflow", "simplify-shapes", "canonicalize-bindings",
                                    "dead-code-elimination"};
  if (traits.has_precision("i8")) graph.insert(graph.end() - 1, "qdq-to-integer");
  if (!traits.has_precision("f16") && !traits.has_precision("bf16"))
    graph.insert(graph.end() - 1, "widen-narrow-floats");
  const std::vector<std::string> lower = {"legalize", "canonicalize-bindings", "dead-code-elimination"};
  std::vector<std::string> names;
  auto add = [&](const std::vector<std::string>& more) { names.insert(names.end(), more.begin(), more.end()); };
  if (name == "O0") {
    add({"normalize"});
    add(lower);
    if (gpu) add({"lift-workspaces"});
  } else if (name == "O1") {
    add(graph);
    add(lower);
    if (gpu) add({"lift-workspaces"});
  } else if (name == "O2") {
    add(graph);
    add({"eliminate-common-subexpr", "canonicalize-bindings", "dead-code-elimination", "lift-transform-params"});
    if (traits.host_kernels) add({"block-layout", "fold-matmul-views"});
    add({"legalize", "canonicalize-bindings", "dead-code-elimination", "lift-transform-params", "fuse-ops", "fuse-tir",
         "fuse-library-epilogues", "fuse-concat-into-conv", "simplify-tir", "dedupe-programs", "lift-workspaces",
         "canonicalize-bindings", "dead-code-elimination", "static-plan-memory", "rewrite-cuda-graph"});
  } else {
    fail("unknown pipeline '", name, "'; known: O0, O1, O2");
  }
  return names;
}

}  // namespace relax
