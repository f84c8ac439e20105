// The struct-info rules of ir/ops/scan_sort.cc: einsum, topk, cumsum /
// cumprod, hardmax, det, dft, stft, window, mel_weight_matrix,
// non_max_suppression; and reduce_dynamic of ir/ops/reduce.cc (reductions
// over axes read at run time, which the ONNX converters of this family emit).
#include <doctest/doctest.h>

#include <functional>
#include <string>

#include "ir/error.h"
#include "ir/op.h"

using namespace relax;

namespace {

const DataType f32 = DataType::f32();
const DataType i64 = DataType::i64();

std::string dims_str(const std::vector<SymExpr>& ds) {
  std::string s = "(";
  for (size_t i = 0; i < ds.size(); ++i) s += (i ? ", " : "") + to_string(ds[i]);
  return s + (ds.size() == 1 ? ",)" : ")");
}

// Tensor[(n, 4), f32], Tensor[ndim=2, i64], Tuple[...].
std::string show(const StructInfo& si) {
  if (const auto* t = as<TensorSI>(si)) {
    std::string s = "Tensor[";
    if (t->shape)
      s += dims_str(*t->shape);
    else if (t->ndim >= 0)
      s += "ndim=" + std::to_string(t->ndim);
    if (!t->dtype.is_void()) s += (s.size() > 7 ? ", " : "") + t->dtype.str();
    return s + "]";
  }
  if (const auto* t = as<TupleSI>(si)) {
    std::string s = "Tuple[";
    for (size_t i = 0; i < t->fields.size(); ++i) s += (i ? ", " : "") + show(t->fields[i]);
    return s + "]";
  }
  return "?";
}

Expr tensor(std::vector<SymExpr> dims, DataType dtype = f32) {
  return make_var("x", tensor_si(dtype, std::move(dims)));
}
Expr tensor_ndim(int ndim, DataType dtype = f32) { return make_var("x", tensor_si_ndim(dtype, ndim)); }

std::string infer(const std::string& op, std::vector<Expr> args, Attrs attrs = {}) {
  Expr call = make_op_call(op, std::move(args), std::move(attrs));
  const auto* c = as<CallNode>(call);
  Analyzer ana;
  return show(c->op()->infer(*c, InferContext{ana, nullptr}));
}

// The message of the Error the rule raises, or "" when none.
std::string infer_error(const std::string& op, std::vector<Expr> args, Attrs attrs = {}) {
  try {
    infer(op, std::move(args), std::move(attrs));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

Expr tuple(std::vector<Expr> fields) { return make_tuple(std::move(fields)); }
Attrs eq(const std::string& s) { return {{"subscripts", s}}; }

}  // namespace

TEST_CASE("einsum: explicit, implicit, ellipsis and diagonal forms") {
  SymExpr n = SymExpr::var("n");
  CHECK(infer("einsum", {tuple({tensor({n, 4}), tensor({4, 5})})}, eq("ij,jk->ik")) == "Tensor[(n, 5), f32]");
  CHECK(infer("einsum", {tuple({tensor({2, 3, 4}), tensor({2, 4, 5})})}, eq("bij, bjk -> bik")) ==
        "Tensor[(2, 3, 5), f32]");
  // Implicit output: the letters used once, in ASCII order.
  CHECK(infer("einsum", {tuple({tensor({3, 4})})}, eq("ji")) == "Tensor[(4, 3), f32]");
  CHECK(infer("einsum", {tuple({tensor({3, 4}), tensor({4, 5})})}, eq("ij,jk")) == "Tensor[(3, 5), f32]");
  CHECK(infer("einsum", {tuple({tensor({5}), tensor({5})})}, eq("i,i")) == "Tensor[(), f32]");
  CHECK(infer("einsum", {tuple({tensor({3, 4})})}, eq("ij->")) == "Tensor[(), f32]");
  // Ellipsis dims broadcast and lead the implicit output.
  CHECK(infer("einsum", {tuple({tensor({3, 5, 5})})}, eq("...ii ->...i")) == "Tensor[(3, 5), f32]");
  CHECK(infer("einsum", {tuple({tensor({7, 1, 2, 3}), tensor({6, 3, 4})})}, eq("...ij,...jk")) ==
        "Tensor[(7, 6, 2, 4), f32]");
  CHECK(infer("einsum", {tuple({tensor({2, 3, 4})})}, eq("i...->...i")) == "Tensor[(3, 4, 2), f32]");
  // A diagonal: both uses of i take the same size.
  CHECK(infer("einsum", {tuple({tensor({n, n})})}, eq("ii->i")) == "Tensor[(n,), f32]");
  // Coarser answers.
  CHECK(infer("einsum", {tuple({tensor_ndim(2), tensor({4, 5})})}, eq("ij,jk->ik")) == "Tensor[ndim=2, f32]");
  CHECK(infer("einsum", {tuple({tensor_ndim(-1)})}, eq("...i->...")) == "Tensor[f32]");
}

TEST_CASE("einsum: errors") {
  CHECK(infer_error("einsum", {tuple({tensor({3, 4}), tensor({5, 6})})}, eq("ij,jk->ik")) ==
        "einsum: index 'j' has sizes 4 and 5");
  CHECK(infer_error("einsum", {tuple({tensor({3, 4})})}, eq("ijk->i")) ==
        "einsum: operand 0 has rank 2 but 'ijk->i' gives it 3 indices");
  CHECK(infer_error("einsum", {tuple({tensor({3, 4})})}, eq("ij,jk->ik")) ==
        "einsum: 'ij,jk->ik' names 2 operands but 1 are given");
  CHECK(infer_error("einsum", {tuple({tensor({3, 4})})}, eq("ij->iz")) ==
        "einsum: output index 'z' appears in no input");
  CHECK(infer_error("einsum", {tuple({tensor({3, 4})})}, eq("ij->ii")) == "einsum: output index 'i' repeats");
  CHECK(infer_error("einsum", {tuple({tensor({3, 4})})}, eq("i-j")) == "einsum: bad subscripts 'i-j'");
  CHECK(infer_error("einsum", {tuple({tensor({3, 4}), tensor({4}, i64)})}, eq("ij,j->i")) ==
        "einsum: dtypes f32 and i64 differ");
}

TEST_CASE("topk: k replaces the dim at the axis") {
  SymExpr n = SymExpr::var("n"), k = SymExpr::var("k");
  CHECK(infer("topk", {tensor({3, 4})}, {{"k", int64_t(2)}, {"axis", int64_t(1)}}) ==
        "Tuple[Tensor[(3, 2), f32], Tensor[(3, 2), i64]]");
  CHECK(infer("topk", {tensor({n, 4})}, {{"k", k}, {"axis", int64_t(0)}}) ==
        "Tuple[Tensor[(k, 4), f32], Tensor[(k, 4), i64]]");
  CHECK(infer("topk", {tensor_ndim(2)}, {{"k", k}}) == "Tuple[Tensor[ndim=2, f32], Tensor[ndim=2, i64]]");
  CHECK(infer_error("topk", {tensor({3, 4})}, {{"k", int64_t(5)}}) == "topk: k = 5 exceeds dim 4 at axis 1");
  CHECK(infer_error("topk", {tensor({3, 4})}, {{"k", int64_t(-2)}}) == "topk: k must be non-negative, got -2");
  CHECK(infer_error("topk", {tensor({})}, {{"k", int64_t(1)}}) == "topk: needs a tensor of rank >= 1");
}

TEST_CASE("cumsum, cumprod, hardmax: same struct info as the operand") {
  SymExpr n = SymExpr::var("n");
  for (const char* op : {"cumsum", "cumprod", "hardmax"}) {
    CHECK(infer(op, {tensor({n, 4})}, {{"axis", int64_t(-1)}}) == "Tensor[(n, 4), f32]");
    CHECK(infer_error(op, {tensor({n, 4})}, {{"axis", int64_t(2)}}).find("axis 2") != std::string::npos);
  }
  CHECK(infer("cumsum", {tensor({5}, i64)}, {{"exclusive", true}, {"reverse", true}}) == "Tensor[(5,), i64]");
}

TEST_CASE("cumsum, cumprod: the axis as a run-time operand") {
  SymExpr n = SymExpr::var("n");
  for (const char* op : {"cumsum", "cumprod"}) {
    CHECK(infer(op, {tensor({n, 4}), tensor({}, i64)}) == "Tensor[(n, 4), f32]");
    CHECK(infer(op, {tensor({n, 4}), tensor({1}, DataType::i32())}, {{"reverse", true}}) == "Tensor[(n, 4), f32]");
    CHECK(infer(op, {tensor_ndim(-1), tensor({}, i64)}) == "Tensor[f32]");
    CHECK(infer_error(op, {tensor({}), tensor({}, i64)}) == std::string(op) + ": needs a tensor of rank >= 1");
    CHECK(infer_error(op, {tensor({3}), tensor({2}, i64)}) ==
          std::string(op) + ": the axis operand must have one element, got 2");
    CHECK(infer_error(op, {tensor({3}), tensor({2, 1}, i64)}) ==
          std::string(op) + ": the axis operand must be a scalar, got a rank-2 tensor");
    CHECK(infer_error(op, {tensor({3}), tensor({})}).find("axis operand") != std::string::npos);
  }
}

TEST_CASE("reduce_dynamic: the rank follows from the number of axes") {
  SymExpr n = SymExpr::var("n"), k = SymExpr::var("k");
  auto attrs = [](const char* kind, bool keepdims, bool noop = false) {
    return Attrs{{"kind", std::string(kind)}, {"keepdims", keepdims}, {"noop_with_empty_axes", noop}};
  };
  Expr x = tensor({n, 3, 4});
  // keepdims: the rank stays, the dims depend on the axes' values.
  CHECK(infer("reduce_dynamic", {x, tensor({1}, i64)}, attrs("sum", true)) == "Tensor[ndim=3, f32]");
  CHECK(infer("reduce_dynamic", {x, tensor({k}, i64)}, attrs("max", true)) == "Tensor[ndim=3, f32]");
  // Without: rank - len(axes), unknown when the length is.
  CHECK(infer("reduce_dynamic", {x, tensor({2}, i64)}, attrs("mean", false)) == "Tensor[ndim=1, f32]");
  CHECK(infer("reduce_dynamic", {x, tensor({k}, i64)}, attrs("min", false)) == "Tensor[f32]");
  // As many axes as dims: every axis.
  CHECK(infer("reduce_dynamic", {x, tensor({3}, i64)}, attrs("prod", false)) == "Tensor[(), f32]");
  CHECK(infer("reduce_dynamic", {x, tensor({3}, i64)}, attrs("prod", true)) == "Tensor[(1, 1, 1), f32]");
  // No axes: every axis, or none with noop_with_empty_axes.
  CHECK(infer("reduce_dynamic", {x, tensor({0}, i64)}, attrs("sum", false)) == "Tensor[(), f32]");
  CHECK(infer("reduce_dynamic", {x, tensor({0}, i64)}, attrs("sum", true)) == "Tensor[(1, 1, 1), f32]");
  CHECK(infer("reduce_dynamic", {x, tensor({0}, i64)}, attrs("sum", false, true)) == "Tensor[(n, 3, 4), f32]");
  // Unknown rank, other dtypes.
  CHECK(infer("reduce_dynamic", {tensor_ndim(-1), tensor({1}, i64)}, attrs("sum", false)) == "Tensor[f32]");
  CHECK(infer("reduce_dynamic", {tensor({4, 2}, DataType::boolean()), tensor({1}, DataType::i32())},
              attrs("max", true)) == "Tensor[ndim=2, bool]");
}

TEST_CASE("reduce_dynamic: errors") {
  Attrs sum{{"kind", std::string("sum")}};
  CHECK(infer_error("reduce_dynamic", {tensor({3, 4}), tensor({3}, i64)}, sum) ==
        "reduce_dynamic: 3 distinct axes for a rank-2 tensor");
  CHECK(infer_error("reduce_dynamic", {tensor({3, 4}), tensor({1, 1}, i64)}, sum) ==
        "reduce_dynamic: the axes must be a 1-D tensor, got rank 2");
  CHECK(infer_error("reduce_dynamic", {tensor({3, 4}), tensor({1})}, sum).find("axes") != std::string::npos);
  CHECK(infer_error("reduce_dynamic", {tensor({3, 4}), tensor({1}, i64)}, {{"kind", std::string("median")}}) ==
        "reduce_dynamic: unknown kind 'median' (sum, mean, max, min or prod)");
}

TEST_CASE("det") {
  SymExpr n = SymExpr::var("n");
  CHECK(infer("det", {tensor({2, n, n})}) == "Tensor[(2,), f32]");
  CHECK(infer("det", {tensor({3, 3})}) == "Tensor[(), f32]");
  CHECK(infer("det", {tensor_ndim(4)}) == "Tensor[ndim=2, f32]");
  CHECK(infer_error("det", {tensor({3, 4})}) == "det: the matrices are 3 x 4, not square");
  CHECK(infer_error("det", {tensor({3})}) == "det: needs a tensor of rank >= 2, got rank 1");
}

TEST_CASE("dft: lengths and one-sided forms") {
  SymExpr n = SymExpr::var("n");
  CHECK(infer("dft", {tensor({1, 10, 10, 1})}, {{"axis", int64_t(1)}}) == "Tensor[(1, 10, 10, 2), f32]");
  CHECK(infer("dft", {tensor({1, 10, 10, 1})}, {{"axis", int64_t(-2)}, {"onesided", true}}) ==
        "Tensor[(1, 10, 6, 2), f32]");
  CHECK(infer("dft", {tensor({1, 6, 10, 2})}, {{"axis", int64_t(1)}, {"onesided", true}, {"inverse", true}}) ==
        "Tensor[(1, 10, 10, 1), f32]");
  CHECK(infer("dft", {tensor({2, n, 2})}, {{"axis", int64_t(1)}, {"length", int64_t(16)}}) ==
        "Tensor[(2, 16, 2), f32]");
  CHECK(infer_error("dft", {tensor({2, 8, 2})}, {{"axis", int64_t(-1)}}) ==
        "dft: the axis cannot be the last (complex) dim");
  CHECK(infer_error("dft", {tensor({2, 8, 3})}, {{"axis", int64_t(1)}}) ==
        "dft: the last dim must be 1 (real) or 2 (complex), got 3");
}

TEST_CASE("dft: the axis as a run-time operand") {
  SymExpr n = SymExpr::var("n");
  Expr axis = tensor({}, i64);
  // Full transforms keep every dim: known whichever the axis.
  CHECK(infer("dft", {tensor({1, 10, 10, 1}), axis}) == "Tensor[(1, 10, 10, 2), f32]");
  CHECK(infer("dft", {tensor({n, 10, 2}), axis}, {{"inverse", true}}) == "Tensor[(n, 10, 2), f32]");
  // With a length or one-sided, the dim at the axis may change.
  CHECK(infer("dft", {tensor({1, 10, 10, 1}), axis}, {{"onesided", true}}) == "Tensor[ndim=4, f32]");
  CHECK(infer("dft", {tensor({8, 8, 2}), axis}, {{"length", int64_t(8)}}) == "Tensor[(8, 8, 2), f32]");
  CHECK(infer("dft", {tensor({8, 4, 2}), axis}, {{"length", int64_t(8)}}) == "Tensor[ndim=3, f32]");
  CHECK(infer_error("dft", {tensor({8, 2}), tensor({2}, i64)}) == "dft: the axis operand must have one element, got 2");
  CHECK(infer_error("dft", {tensor({8}), axis}) == "dft: needs a signal of rank >= 2, got rank 1");
}

TEST_CASE("stft") {
  Expr signal = tensor({1, 128, 1});
  CHECK(infer("stft", {signal}, {{"frame_step", int64_t(8)}, {"frame_length", int64_t(16)}}) ==
        "Tensor[(1, 15, 9, 2), f32]");
  CHECK(infer("stft", {signal, tensor({16})}, {{"frame_step", int64_t(8)}, {"onesided", false}}) ==
        "Tensor[(1, 15, 16, 2), f32]");
  CHECK(infer_error("stft", {signal}, {{"frame_step", int64_t(8)}}) == "stft: needs a frame_length or a window");
  CHECK(infer_error("stft", {signal, tensor({16})}, {{"frame_step", int64_t(8)}, {"frame_length", int64_t(8)}}) ==
        "stft: the window has 16 elements but frame_length is 8");
}

TEST_CASE("window, mel_weight_matrix") {
  SymExpr n = SymExpr::var("n");
  CHECK(infer("window", {}, {{"kind", std::string("hann")}, {"size", n}}) == "Tensor[(n,), f32]");
  CHECK(infer("window", {}, {{"kind", std::string("blackman")}, {"size", int64_t(4)}, {"dtype", DataType::f(64)}}) ==
        "Tensor[(4,), f64]");
  CHECK(infer_error("window", {}, {{"kind", std::string("kaiser")}, {"size", int64_t(4)}}) ==
        "window: unknown window kind 'kaiser' (hann, hamming or blackman)");
  CHECK(infer("mel_weight_matrix", {tensor({}, DataType::i32()), tensor({}), tensor({})},
              {{"num_mel_bins", int64_t(8)}, {"dft_length", int64_t(16)}}) == "Tensor[(9, 8), f32]");
}

TEST_CASE("non_max_suppression: data-dependent rows") {
  CHECK(infer("non_max_suppression", {tensor({2, 6, 4}), tensor({2, 1, 6})}) == "Tensor[ndim=2, i64]");
  CHECK(infer("non_max_suppression", {tensor({2, 6, 4}), tensor({2, 1, 6}), tensor({1}, i64), tensor({1}), tensor({1})},
              {{"center_point_box", int64_t(1)}}) == "Tensor[ndim=2, i64]");
  CHECK(infer_error("non_max_suppression", {tensor({2, 6, 4}), tensor({2, 1, 5})}) ==
        "non_max_suppression: boxes have 6 boxes, scores 5");
  CHECK(infer_error("non_max_suppression", {tensor({2, 6, 5}), tensor({2, 1, 6})}) ==
        "non_max_suppression: boxes must have 4 coordinates, got 5");
}
