// Struct-info rules of the nn ops added for the ONNX frontend:
// conv_transpose, deform_conv, lp_pool, max_pool_indices, max_unpool, lrn,
// nll_loss (ir/ops/nn.cc).
#include <doctest/doctest.h>

#include <string>

#include "ir/error.h"
#include "ir/op.h"
#include "tests/unit/op_test_util.h"

using namespace relax;

namespace {

const DataType f32 = DataType::f32();
const DataType i64 = DataType::i64();

using testing::infer_error;
using testing::infer_tensor;
using testing::tensor;

const SymExpr n = SymExpr::var("n"), h = SymExpr::var("h"), w = SymExpr::var("w");

}  // namespace

TEST_CASE("conv_transpose: output size and channels") {
  // (in - 1) * stride - pads + dilation * (k - 1) + output_padding + 1
  Attrs a{{"strides", std::vector<int64_t>{3, 2}},
          {"padding", std::vector<int64_t>{1, 2, 1, 2}},
          {"output_padding", std::vector<int64_t>{1, 0}}};
  CHECK(infer_tensor("conv_transpose", {tensor({1, 1, 3, 3}), tensor({1, 2, 3, 3})}, a) == "(1, 2, 8, 3), f32");
  Attrs g{{"strides", std::vector<int64_t>{2, 2}}, {"groups", int64_t(2)}};
  CHECK(infer_tensor("conv_transpose", {tensor({n, 4, h, w}), tensor({4, 3, 3, 3})}, g) ==
        "(n, 6, h * 2 + 1, w * 2 + 1), f32");
  CHECK(infer_error("conv_transpose", {tensor({1, 3, 5, 5}), tensor({4, 2, 3, 3})}).find("channels") !=
        std::string::npos);
  CHECK(infer_error("conv_transpose", {tensor({1, 4, 5}), tensor({4, 2, 3, 3})}).find("rank") != std::string::npos);
}

TEST_CASE("deform_conv: conv's shape; offsets must fit") {
  Attrs a{{"padding", std::vector<int64_t>{1, 1, 1, 1}}};
  CHECK(infer_tensor("deform_conv", {tensor({1, 1, 3, 3}), tensor({1, 1, 2, 2}), tensor({1, 8, 4, 4})}, a) ==
        "(1, 1, 4, 4), f32");
  CHECK(infer_tensor("deform_conv", {tensor({1, 1, 3, 3}), tensor({1, 1, 2, 2}), tensor({1, 8, 2, 2}),
                                     tensor({1, 4, 2, 2})}) == "(1, 1, 2, 2), f32");
  CHECK(infer_error("deform_conv", {tensor({1, 1, 3, 3}), tensor({1, 1, 2, 2}), tensor({1, 6, 2, 2})}).find("offset") !=
        std::string::npos);
}

TEST_CASE("pooling: ceil_mode drops a last window starting in the padding") {
  Attrs a{{"pool_size", std::vector<int64_t>{1, 1}}, {"strides", std::vector<int64_t>{2, 2}}, {"ceil_mode", true}};
  CHECK(infer_tensor("max_pool", {tensor({1, 1, 2, 2})}, a) == "(1, 1, 1, 1), f32");
  Attrs b{{"pool_size", std::vector<int64_t>{3, 3}}, {"strides", std::vector<int64_t>{2, 2}}, {"ceil_mode", true}};
  CHECK(infer_tensor("max_pool", {tensor({1, 1, 4, 4})}, b) == "(1, 1, 2, 2), f32");
  CHECK(infer_tensor("avg_pool", {tensor({n, 1, h, 4})}, b) == "(n, 1, h // 2, 2), f32");
  Attrs c{{"pool_size", std::vector<int64_t>{3, 3}},
          {"strides", std::vector<int64_t>{3, 3}},
          {"padding", std::vector<int64_t>{1, 1, 1, 1}},
          {"ceil_mode", true}};
  CHECK(infer_tensor("avg_pool", {tensor({1, 3, 2, 2})}, c) == "(1, 3, 1, 1), f32");
}

TEST_CASE("lp_pool and max_pool_indices have max_pool's shape") {
  Attrs a{{"pool_size", std::vector<int64_t>{2, 2}}, {"p", 3.0}};
  CHECK(infer_tensor("lp_pool", {tensor({n, 3, h, w})}, a) == "(n, 3, h - 1, w - 1), f32");
  Attrs b{{"pool_size", std::vector<int64_t>{2, 2}},
          {"strides", std::vector<int64_t>{2, 2}},
          {"storage_order", int64_t(1)}};
  CHECK(infer_tensor("max_pool_indices", {tensor({1, 1, 5, 5})}, b) == "(1, 1, 2, 2), i64");
}

TEST_CASE("max_unpool: the given output shape") {
  Attrs a{{"output_shape", std::vector<SymExpr>{n, 2, h * 2, 5}}};
  CHECK(infer_tensor("max_unpool", {tensor({n, 2, h, 2}), tensor({n, 2, h, 2}, i64)}, a) == "(n, 2, h * 2, 5), f32");
  CHECK(infer_error("max_unpool", {tensor({1, 2, 2, 2}), tensor({1, 2, 2, 2}, f32)}, a).find("indices") !=
        std::string::npos);
  Attrs bad{{"output_shape", std::vector<SymExpr>{1, 3, 4, 4}}};
  CHECK(infer_error("max_unpool", {tensor({1, 2, 2, 2}), tensor({1, 2, 2, 2}, i64)}, bad).find("dim 1") !=
        std::string::npos);
}

TEST_CASE("lrn keeps the shape") {
  CHECK(infer_tensor("lrn", {tensor({n, 5, h, w})}, {{"size", int64_t(3)}}) == "(n, 5, h, w), f32");
  CHECK(infer_error("lrn", {tensor({n, 5, h, w}, i64)}, {{"size", int64_t(3)}}) != "");
}

TEST_CASE("nll_loss: target's shape or a scalar") {
  Expr x = tensor({n, 5, h}), t = tensor({n, h}, i64), wt = tensor({5});
  CHECK(infer_tensor("nll_loss", {x, t}, {{"reduction", std::string("none")}}) == "(n, h), f32");
  CHECK(infer_tensor("nll_loss", {x, t, wt}) == "(), f32");
  CHECK(infer_error("nll_loss", {tensor({n, 5, 6}), tensor({n, 4}, i64)}).find("target") != std::string::npos);
  CHECK(infer_error("nll_loss", {x, t, tensor({4})}).find("weight") != std::string::npos);
  CHECK(infer_error("nll_loss", {x, t}, {{"reduction", std::string("avg")}}).find("reduction") != std::string::npos);
}
