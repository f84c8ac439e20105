// Struct-info rules of the image ops: resize, grid_sample, affine_grid,
// roi_align (ir/ops/image.cc).
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

TEST_CASE("resize: the sizes attribute is the shape") {
  Attrs a{{"sizes", std::vector<SymExpr>{n, 3, h * 2, w * 2}}, {"mode", std::string("linear")}};
  CHECK(infer_tensor("resize", {tensor({n, 3, h, w}), tensor({8}), tensor({4})}, a) == "(n, 3, h * 2, w * 2), f32");
  CHECK(infer_error("resize", {tensor({n, 3, h})}, a).find("rank") != std::string::npos);
  CHECK(infer_error("resize", {tensor({n, 3, h, w}), tensor({6})}, a).find("roi") != std::string::npos);
  Attrs bad{{"sizes", std::vector<SymExpr>{1, 1, 2, 2}}, {"mode", std::string("area")}};
  CHECK(infer_error("resize", {tensor({1, 1, 4, 4})}, bad).find("mode") != std::string::npos);
}

TEST_CASE("grid_sample: (N, C) then the grid's spatial dims") {
  CHECK(infer_tensor("grid_sample", {tensor({n, 3, h, w}), tensor({n, 7, 9, 2})}) == "(n, 3, 7, 9), f32");
  CHECK(infer_tensor("grid_sample", {tensor({1, 1, 3, 2, 2}), tensor({1, 2, 4, 2, 3})}) == "(1, 1, 2, 4, 2), f32");
  CHECK(infer_error("grid_sample", {tensor({1, 3, 4, 4}), tensor({1, 7, 9, 3})}).find("grid") != std::string::npos);
  CHECK(infer_error("grid_sample", {tensor({1, 3, 4, 4}), tensor({1, 7, 9, 2})},
                    {{"padding_mode", std::string("wrap")}}) != "");
}

TEST_CASE("affine_grid: (N, spatial..., r)") {
  CHECK(infer_tensor("affine_grid", {tensor({n, 2, 3})}, {{"size", std::vector<SymExpr>{n, 3, h, w}}}) ==
        "(n, h, w, 2), f32");
  CHECK(infer_tensor("affine_grid", {tensor({2, 3, 4})}, {{"size", std::vector<SymExpr>{2, 3, 4, 5, 6}}}) ==
        "(2, 4, 5, 6, 3), f32");
  CHECK(
      infer_error("affine_grid", {tensor({2, 2, 3})}, {{"size", std::vector<SymExpr>{2, 3, 4, 5, 6}}}).find("theta") !=
      std::string::npos);
}

TEST_CASE("roi_align: (num_rois, C, output_height, output_width)") {
  Attrs a{{"output_height", int64_t(5)}, {"output_width", int64_t(4)}};
  SymExpr r = SymExpr::var("r");
  CHECK(infer_tensor("roi_align", {tensor({n, 3, h, w}), tensor({r, 4}), tensor({r}, i64)}, a) == "(r, 3, 5, 4), f32");
  CHECK(infer_error("roi_align", {tensor({n, 3, h, w}), tensor({r, 5}), tensor({r}, i64)}, a).find("rois") !=
        std::string::npos);
  CHECK(infer_error("roi_align", {tensor({n, 3, h, w}), tensor({r, 4}), tensor({r}, f32)}, a) != "");
}
