// Struct-info rules of the nn and image ops added for the ONNX frontend:
// conv_transpose, deform_conv, lp_pool, max_pool_indices, max_unpool, lrn,
// nll_loss (ir/ops/nn.cc) and resize, grid_sample, affine_grid, roi_align
// (ir/ops/image.cc).
#include <doctest/doctest.h>

#include <string>

#include "ir/error.h"
#include "ir/op.h"

using namespace relax;

namespace {

const DataType f32 = DataType::f32();
const DataType i64 = DataType::i64();

Expr var(std::vector<SymExpr> dims, DataType dtype = DataType::f32()) {
  return make_var("x", tensor_si(dtype, std::move(dims)));
}

// "(n, 8, h * 2), f32" / "ndim=4, f32": the deduced tensor struct info.
std::string deduce(const std::string& op, std::vector<Expr> args, Attrs attrs = {}) {
  Expr call = make_op_call(op, std::move(args), std::move(attrs));
  const auto* c = as<CallNode>(call);
  Analyzer ana;
  StructInfo si = c->op()->infer(*c, InferContext{ana, nullptr});
  const auto* t = as<TensorSI>(si);
  REQUIRE(t != nullptr);
  std::string s;
  if (t->shape) {
    s = "(";
    for (size_t i = 0; i < t->shape->size(); ++i) s += (i ? ", " : "") + to_string((*t->shape)[i]);
    s += ")";
  } else {
    s = "ndim=" + std::to_string(t->ndim);
  }
  return s + ", " + t->dtype.str();
}

std::string error_of(const std::string& op, std::vector<Expr> args, Attrs attrs = {}) {
  try {
    deduce(op, std::move(args), std::move(attrs));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

const SymExpr n = SymExpr::var("n"), h = SymExpr::var("h"), w = SymExpr::var("w");

}  // namespace

TEST_CASE("conv_transpose: output size and channels") {
  // (in - 1) * stride - pads + dilation * (k - 1) + output_padding + 1
  Attrs a{{"strides", std::vector<int64_t>{3, 2}},
          {"padding", std::vector<int64_t>{1, 2, 1, 2}},
          {"output_padding", std::vector<int64_t>{1, 0}}};
  CHECK(deduce("conv_transpose", {var({1, 1, 3, 3}), var({1, 2, 3, 3})}, a) == "(1, 2, 8, 3), f32");
  Attrs g{{"strides", std::vector<int64_t>{2, 2}}, {"groups", int64_t(2)}};
  CHECK(deduce("conv_transpose", {var({n, 4, h, w}), var({4, 3, 3, 3})}, g) == "(n, 6, h * 2 + 1, w * 2 + 1), f32");
  CHECK(error_of("conv_transpose", {var({1, 3, 5, 5}), var({4, 2, 3, 3})}).find("channels") != std::string::npos);
  CHECK(error_of("conv_transpose", {var({1, 4, 5}), var({4, 2, 3, 3})}).find("rank") != std::string::npos);
}

TEST_CASE("deform_conv: conv's shape; offsets must fit") {
  Attrs a{{"padding", std::vector<int64_t>{1, 1, 1, 1}}};
  CHECK(deduce("deform_conv", {var({1, 1, 3, 3}), var({1, 1, 2, 2}), var({1, 8, 4, 4})}, a) == "(1, 1, 4, 4), f32");
  CHECK(deduce("deform_conv", {var({1, 1, 3, 3}), var({1, 1, 2, 2}), var({1, 8, 2, 2}), var({1, 4, 2, 2})}) ==
        "(1, 1, 2, 2), f32");
  CHECK(error_of("deform_conv", {var({1, 1, 3, 3}), var({1, 1, 2, 2}), var({1, 6, 2, 2})}).find("offset") !=
        std::string::npos);
}

TEST_CASE("pooling: ceil_mode drops a last window starting in the padding") {
  Attrs a{{"pool_size", std::vector<int64_t>{1, 1}}, {"strides", std::vector<int64_t>{2, 2}}, {"ceil_mode", true}};
  CHECK(deduce("max_pool", {var({1, 1, 2, 2})}, a) == "(1, 1, 1, 1), f32");
  Attrs b{{"pool_size", std::vector<int64_t>{3, 3}}, {"strides", std::vector<int64_t>{2, 2}}, {"ceil_mode", true}};
  CHECK(deduce("max_pool", {var({1, 1, 4, 4})}, b) == "(1, 1, 2, 2), f32");
  CHECK(deduce("avg_pool", {var({n, 1, h, 4})}, b) == "(n, 1, h // 2, 2), f32");
  Attrs c{{"pool_size", std::vector<int64_t>{3, 3}},
          {"strides", std::vector<int64_t>{3, 3}},
          {"padding", std::vector<int64_t>{1, 1, 1, 1}},
          {"ceil_mode", true}};
  CHECK(deduce("avg_pool", {var({1, 3, 2, 2})}, c) == "(1, 3, 1, 1), f32");
}

TEST_CASE("lp_pool and max_pool_indices have max_pool's shape") {
  Attrs a{{"pool_size", std::vector<int64_t>{2, 2}}, {"p", 3.0}};
  CHECK(deduce("lp_pool", {var({n, 3, h, w})}, a) == "(n, 3, h - 1, w - 1), f32");
  Attrs b{{"pool_size", std::vector<int64_t>{2, 2}},
          {"strides", std::vector<int64_t>{2, 2}},
          {"storage_order", int64_t(1)}};
  CHECK(deduce("max_pool_indices", {var({1, 1, 5, 5})}, b) == "(1, 1, 2, 2), i64");
}

TEST_CASE("max_unpool: the given output shape") {
  Attrs a{{"output_shape", std::vector<SymExpr>{n, 2, h * 2, 5}}};
  CHECK(deduce("max_unpool", {var({n, 2, h, 2}), var({n, 2, h, 2}, i64)}, a) == "(n, 2, h * 2, 5), f32");
  CHECK(error_of("max_unpool", {var({1, 2, 2, 2}), var({1, 2, 2, 2}, f32)}, a).find("indices") != std::string::npos);
  Attrs bad{{"output_shape", std::vector<SymExpr>{1, 3, 4, 4}}};
  CHECK(error_of("max_unpool", {var({1, 2, 2, 2}), var({1, 2, 2, 2}, i64)}, bad).find("dim 1") != std::string::npos);
}

TEST_CASE("lrn keeps the shape") {
  CHECK(deduce("lrn", {var({n, 5, h, w})}, {{"size", int64_t(3)}}) == "(n, 5, h, w), f32");
  CHECK(error_of("lrn", {var({n, 5, h, w}, i64)}, {{"size", int64_t(3)}}) != "");
}

TEST_CASE("nll_loss: target's shape or a scalar") {
  Expr x = var({n, 5, h}), t = var({n, h}, i64), wt = var({5});
  CHECK(deduce("nll_loss", {x, t}, {{"reduction", std::string("none")}}) == "(n, h), f32");
  CHECK(deduce("nll_loss", {x, t, wt}) == "(), f32");
  CHECK(error_of("nll_loss", {var({n, 5, 6}), var({n, 4}, i64)}).find("target") != std::string::npos);
  CHECK(error_of("nll_loss", {x, t, var({4})}).find("weight") != std::string::npos);
  CHECK(error_of("nll_loss", {x, t}, {{"reduction", std::string("avg")}}).find("reduction") != std::string::npos);
}

TEST_CASE("resize: the sizes attribute is the shape") {
  Attrs a{{"sizes", std::vector<SymExpr>{n, 3, h * 2, w * 2}}, {"mode", std::string("linear")}};
  CHECK(deduce("resize", {var({n, 3, h, w}), var({8}), var({4})}, a) == "(n, 3, h * 2, w * 2), f32");
  CHECK(error_of("resize", {var({n, 3, h})}, a).find("rank") != std::string::npos);
  CHECK(error_of("resize", {var({n, 3, h, w}), var({6})}, a).find("roi") != std::string::npos);
  Attrs bad{{"sizes", std::vector<SymExpr>{1, 1, 2, 2}}, {"mode", std::string("area")}};
  CHECK(error_of("resize", {var({1, 1, 4, 4})}, bad).find("mode") != std::string::npos);
}

TEST_CASE("grid_sample: (N, C) then the grid's spatial dims") {
  CHECK(deduce("grid_sample", {var({n, 3, h, w}), var({n, 7, 9, 2})}) == "(n, 3, 7, 9), f32");
  CHECK(deduce("grid_sample", {var({1, 1, 3, 2, 2}), var({1, 2, 4, 2, 3})}) == "(1, 1, 2, 4, 2), f32");
  CHECK(error_of("grid_sample", {var({1, 3, 4, 4}), var({1, 7, 9, 3})}).find("grid") != std::string::npos);
  CHECK(error_of("grid_sample", {var({1, 3, 4, 4}), var({1, 7, 9, 2})}, {{"padding_mode", std::string("wrap")}}) != "");
}

TEST_CASE("affine_grid: (N, spatial..., r)") {
  CHECK(deduce("affine_grid", {var({n, 2, 3})}, {{"size", std::vector<SymExpr>{n, 3, h, w}}}) == "(n, h, w, 2), f32");
  CHECK(deduce("affine_grid", {var({2, 3, 4})}, {{"size", std::vector<SymExpr>{2, 3, 4, 5, 6}}}) ==
        "(2, 4, 5, 6, 3), f32");
  CHECK(error_of("affine_grid", {var({2, 2, 3})}, {{"size", std::vector<SymExpr>{2, 3, 4, 5, 6}}}).find("theta") !=
        std::string::npos);
}

TEST_CASE("roi_align: (num_rois, C, output_height, output_width)") {
  Attrs a{{"output_height", int64_t(5)}, {"output_width", int64_t(4)}};
  SymExpr r = SymExpr::var("r");
  CHECK(deduce("roi_align", {var({n, 3, h, w}), var({r, 4}), var({r}, i64)}, a) == "(r, 3, 5, 4), f32");
  CHECK(error_of("roi_align", {var({n, 3, h, w}), var({r, 5}), var({r}, i64)}, a).find("rois") != std::string::npos);
  CHECK(error_of("roi_align", {var({n, 3, h, w}), var({r, 4}), var({r}, f32)}, a) != "");
}
