// The graph op of ir/ops/attention.cc: linear_attention.
#include <doctest/doctest.h>

#include "ir/error.h"
#include "ir/op.h"
#include "tests/unit/op_test_util.h"

using namespace relax;

namespace {

const DataType f32 = DataType::f32();

using testing::infer;
using testing::infer_error;
using testing::tensor;

Attrs rule(const std::string& r) { return {{"update_rule", r}}; }

}  // namespace

// ---- linear_attention --------------------------------------------------------------------

TEST_CASE("linear_attention: output and state shapes, symbolic batch and length") {
  SymExpr b = SymExpr::var("b"), t = SymExpr::var("t");
  Expr q = tensor({b, 8, t, 16}), k = tensor({b, 2, t, 16}), v = tensor({b, 2, t, 32}), s = tensor({b, 2, 16, 32});
  CHECK(infer("linear_attention", {q, k, v, s}, rule("linear")) ==
        "Tuple[Tensor[(b, 8, t, 32), f32], Tensor[(b, 2, 16, 32), f32]]");
  // Per-key-dim or per-head decay; per-head or shared beta.
  CHECK(infer("linear_attention", {q, k, v, s, tensor({b, 2, t, 16}), tensor({b, 2, t, 1})}) ==
        "Tuple[Tensor[(b, 8, t, 32), f32], Tensor[(b, 2, 16, 32), f32]]");
  CHECK(infer("linear_attention", {q, k, v, s, tensor({b, 2, t, 1})}, rule("gated")) ==
        "Tuple[Tensor[(b, 8, t, 32), f32], Tensor[(b, 2, 16, 32), f32]]");
  CHECK(infer("linear_attention", {q, k, v, s, tensor({b, 1, t, 1})}, rule("delta")) ==
        "Tuple[Tensor[(b, 8, t, 32), f32], Tensor[(b, 2, 16, 32), f32]]");
  // Unknown dims: rank only.
  Expr q_ndim = make_var("q", tensor_si_ndim(f32, 4));
  CHECK(infer("linear_attention", {q_ndim, k, v, s}, rule("linear")) ==
        "Tuple[Tensor[ndim=4, f32], Tensor[ndim=4, f32]]");
}

TEST_CASE("linear_attention: errors") {
  Expr q = tensor({2, 4, 3, 8}), k = tensor({2, 4, 3, 8}), v = tensor({2, 4, 3, 8}), s = tensor({2, 4, 8, 8});
  CHECK(infer_error("linear_attention", {q, k, v, s}) ==
        "linear_attention: update_rule 'gated_delta' takes 6 operands, got 4");
  CHECK(infer_error("linear_attention", {q, k, v, s}, rule("fast")) ==
        "linear_attention: unknown update_rule 'fast' (linear, gated, delta or gated_delta)");
  CHECK(infer_error("linear_attention", {q, k, v, tensor({2, 4, 8, 5})}, rule("linear")) ==
        "linear_attention: value head sizes differ: 8 and 5");
  CHECK(infer_error("linear_attention", {tensor({2, 6, 3, 8}), k, v, s}, rule("linear")) ==
        "linear_attention: 6 query heads are no multiple of 4 kv heads");
  CHECK(infer_error("linear_attention", {q, tensor({2, 4, 5, 8}), v, s}, rule("linear")) ==
        "linear_attention: sequence lengths differ: 3 and 5");
  CHECK(infer_error("linear_attention", {q, k, v, s, tensor({2, 4, 3, 3})}, rule("gated")) ==
        "linear_attention: the decay's last dim is 3, expected 8 or 1");
  CHECK(infer_error("linear_attention", {q, k, v, tensor({2, 4, 8, 8}, DataType::f16())}, rule("linear")) ==
        "linear_attention: dtypes f32 and f16 differ");
  CHECK(infer_error("linear_attention", {tensor({2, 4, 8}), k, v, s}, rule("linear")) ==
        "linear_attention: operand 0 must have rank 4, got 3");
}

// ---- com.microsoft contrib ops ---------------------------------------------------------------
