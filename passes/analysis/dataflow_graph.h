// The graph of a module's @main as boxes and arrows, for people: what
// relax-inspect --dot draws. One node per kernel launch (a fused tensor
// program, a library call, a runtime builtin, any other op), one per graph
// input and output; an edge per tensor passed, labelled with its type and
// symbolic shape ("f32[batch, 8, height // 2, width // 2]"). Allocation,
// tuple plumbing and aliases are looked through; weights are counted on the
// node that reads them, not drawn. The launches of a CUDA graph region
// (passes/rewrite_cuda_graph.cc) are drawn in place, boxed together.
//
// JSON, as packages store it (section "graph"):
//   {"nodes": [{"id", "kind": input|kernel|library|builtin|op|if|output,
//               "name", "ops": [graph ops a fused kernel computes],
//               "weights": count, "cuda_graph": region name}],
//    "edges": [{"from", "to", "type"}]}
#pragma once

#include <nlohmann/json.hpp>

#include "ir/module.h"

namespace relax {

// Throws relax::Error when the module has no @main.
nlohmann::json dataflow_graph(const IRModule& mod);

// The graph as Graphviz dot, titled `title`.
std::string dataflow_dot(const nlohmann::json& graph, const std::string& title);

}  // namespace relax
