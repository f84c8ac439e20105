// The loop analysis fusion relies on: the pattern each legalised program
// has, read from its loops.
#include <doctest/doctest.h>

#include "ir/parser.h"
#include "ir/printer.h"
#include "passes/analysis/op_pattern.h"
#include "passes/legalize/legalize.h"
#include "passes/passes.h"

using namespace relax;

namespace {

// The program that legalising `op_call` (one binding `%y = op_call` in
// @main(params)) calls.
tir::Program program_of(const std::string& params, const std::string& op_call) {
  std::string text = "fn @main(" + params + ") -> Object {\n  %y = " + op_call + "\n  return %y\n}\n";
  IRModule mod = legalize(normalize(parse_module(text)));
  INFO(print_module(mod));
  REQUIRE(mod.program_names().size() == 1);
  return mod.program(mod.program_names()[0]);
}

ProgramPattern pattern_of(const std::string& params, const std::string& op_call) {
  return analyze_pattern(program_of(params, op_call));
}

OpPattern kind_of(const std::string& params, const std::string& op_call) { return pattern_of(params, op_call).kind; }

}  // namespace

TEST_CASE("op pattern: elementwise, broadcast and injective programs are plain computes") {
  ProgramPattern add = pattern_of("a: Tensor[(n, 4), f32], b: Tensor[(n, 4), f32]", "add(a, b)");
  CHECK(add.kind == OpPattern::Elementwise);
  CHECK(add.inlinable());
  REQUIRE(add.outputs[0]);
  CHECK(add.outputs[0]->vars.size() == 2);
  CHECK(kind_of("a: Tensor[(n, 4), f32], b: Tensor[(4,), f32]", "add(a, b)") == OpPattern::Broadcast);
  CHECK(kind_of("a: Tensor[(n, 4), f32], b: Tensor[(n, 1), f32]", "multiply(a, b)") == OpPattern::Broadcast);
  CHECK(kind_of("a: Tensor[(n, 4), f32]", "permute_dims(a, axes=[1, 0])") == OpPattern::Injective);
  CHECK(kind_of("a: Tensor[(n, 4), f32]", "reshape(a, shape(4, n))") == OpPattern::Injective);
  ProgramPattern take = pattern_of("a: Tensor[(10, 4), f32], i: Tensor[(n,), i64]", "take(a, i, axis=0)");
  CHECK(take.kind == OpPattern::Injective);  // reads at an index loaded from data
  CHECK(take.inlinable());
  // Its indices are checked by its prelude, a nest that writes the status input; the pattern is the rest's.
  tir::Program p = program_of("a: Tensor[(10, 4), f32], i: Tensor[(n,), i64]", "take(a, i, axis=0)");
  CHECK(p->attrs.get_int("prelude") == 1);
  PreludeSplit parts = split_prelude(p);
  CHECK(parts.prelude.size() == 1);
  CHECK(parts.main->inputs.size() == 3);  // the data, the indices and the status
  CHECK(analyze_pattern(parts.main).kind == OpPattern::Injective);
  // Without the attribute the store to an input makes the whole program opaque.
  CHECK(analyze_pattern(tir::make_program(p->name, p->inputs, p->outputs, p->sym_params, p->body)).kind ==
        OpPattern::Opaque);
  // A "prelude" that writes an output is no prelude.
  tir::Program lie = tir::make_program(p->name, p->inputs, p->outputs, p->sym_params,
                                       tir::make_seq({parts.main->body, parts.prelude[0]}), p->attrs);
  CHECK(split_prelude(lie).prelude.empty());
  ProgramPattern split = pattern_of("a: Tensor[(n, 6), f32]", "split(a, sections=2, axis=1)");
  CHECK(split.inlinable());
  CHECK(split.outputs.size() == 2);
}

TEST_CASE("op pattern: concat is injective but not one compute per output") {
  ProgramPattern c = pattern_of("a: Tensor[(n, 4), f32], b: Tensor[(m, 4), f32]", "concat((a, b), axis=0)");
  CHECK(c.kind == OpPattern::Injective);
  CHECK_FALSE(c.inlinable());
}

TEST_CASE("op pattern: reductions and contractions") {
  CHECK(kind_of("a: Tensor[(n, k), f32]", "sum(a, axis=[1])") == OpPattern::Reduction);
  CHECK(kind_of("a: Tensor[(n, k), f32]", "softmax(a, axis=1)") == OpPattern::Reduction);
  // (f16: an f32 2-D max pool is the runtime's pool.max2d on the cpu.)
  CHECK(kind_of("x: Tensor[(n, 4, 8, 8), f16]", "max_pool(x, pool_size=[2, 2], strides=[2, 2])") ==
        OpPattern::Reduction);
  // A conv with 2 outputs and 2 inputs per group is a loop nest (wider f32
  // ones and depthwise ones go to gemm.conv2d).
  CHECK(kind_of("x: Tensor[(n, 8, h, w), f32], k: Tensor[(8, 2, 3, 3), f32]",
                "conv(x, k, padding=[1, 1, 1, 1], groups=4)") == OpPattern::OutputFusable);
  // Integer matmul is a loop nest (f32 goes to BLAS).
  CHECK(kind_of("a: Tensor[(n, k), i32], b: Tensor[(k, 5), i32]", "matmul(a, b)") == OpPattern::OutputFusable);
}

TEST_CASE("op pattern: a scatter is opaque") {
  CHECK(kind_of("x: Tensor[(n, 4), f32], i: Tensor[(2, 4), i64], u: Tensor[(2, 4), f32]",
                "scatter_elements(x, i, u, axis=0)") == OpPattern::Opaque);
}

TEST_CASE("op pattern: reads at identity") {
  ProgramPattern add = pattern_of("a: Tensor[(n, 4), f32], b: Tensor[(4,), f32]", "add(a, b)");
  std::string text =
      "fn @main(a: Tensor[(n, 4), f32], b: Tensor[(4,), f32]) -> Object {\n  %y = add(a, b)\n  return %y\n}\n";
  IRModule mod = legalize(normalize(parse_module(text)));
  tir::Program p = mod.program(mod.program_names()[0]);
  CHECK(reads_at_identity(*add.outputs[0], p->inputs[0].get(), p->outputs[0]->shape));
  CHECK_FALSE(reads_at_identity(*add.outputs[0], p->inputs[1].get(), p->outputs[0]->shape));
}
