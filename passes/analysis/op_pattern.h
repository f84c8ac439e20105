// What a tensor program does with its loops, read off the loops themselves.
// Fusion (fuse-ops, fuse-tir) decides from it which programs may merge.
//
//   elementwise     every output element reads its inputs at its own index
//   broadcast       ... or at a subset of its index (dims of size 1 or absent)
//   injective       each output element is a function of its index (reshape,
//                   transpose, gather, concat, pad)
//   reduction       accumulates over loops that do not index the output
//                   (sum, max, softmax, layer norm, pooling)
//   output-fusable  a contraction: accumulates products of two inputs
//                   (matmul, conv); takes an elementwise epilogue
//   opaque          anything else (scatter, barriers, writes to inputs)
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/tir.h"

namespace relax {

enum class OpPattern : uint8_t { Elementwise, Broadcast, Injective, Reduction, OutputFusable, Opaque };
const char* op_pattern_name(OpPattern p);

// An output written by one perfect loop nest whose only statement is
//   out[v0, ..., vk] = value
// with the nest's variables as the indices, in order, over the output's
// dims, and a value that reads only inputs. Its element at any index is
// `value` with the variables replaced: the program can be inlined.
struct ComputeDef {
  std::vector<SymExpr> vars;
  tir::TExpr value;
};

// A perfect loop nest around one store `buf[v0, ..., vk] = value`, its own
// variables as the indices, in order, over buf's dims (what a compute and
// an in-place epilogue look like), with the store.
struct StoreNest {
  const tir::StoreNode* store = nullptr;
  ComputeDef def;
};
std::optional<StoreNest> as_store_nest(const tir::Stmt& s);

struct ProgramPattern {
  OpPattern kind = OpPattern::Opaque;
  std::vector<std::optional<ComputeDef>> outputs;  // one per output
  bool inlinable() const;                          // every output has a ComputeDef
};

// A program whose first top-level statements check its inputs before it
// computes (ProgramBuilder::check_indices: they read inputs and write only
// a status input) says how many in its attribute "prelude". Its pattern is
// the rest's; fuse-tir emits the prelude as it is, ahead of the rest, in
// whatever it fuses the program into. `main` is the program without the
// prelude (the same buffers); with no valid prelude, `prelude` is empty and
// `main` is `p`.
struct PreludeSplit {
  std::vector<tir::Stmt> prelude;
  tir::Program main;
};
PreludeSplit split_prelude(const tir::Program& p);

ProgramPattern analyze_pattern(const tir::Program& p);

// Whether every load of `input` in `def` is at exactly def's own index and
// `input` has the shape `out_shape` (the output's).
bool reads_at_identity(const ComputeDef& def, const tir::BufferNode* input, const std::vector<SymExpr>& out_shape);

// The graph ops a program computes: the list in its "fused" attribute, or
// for a legalised program the op it was named after ("add_3" -> add).
std::vector<std::string> program_ops(const tir::Program& p);

// Whether every load of `input` in `p` indexes with symbolic expressions
// only (no index read from data), so a producer of `input` can be inlined.
bool loads_at_symbolic_indices(const tir::Program& p, const tir::BufferNode* input);

}  // namespace relax
