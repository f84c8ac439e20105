// Legalised ops compiled by the CPU backend on the values where real models
// meet their edges: what ONNX leaves to the implementation, defined the way
// ONNX Runtime and PyTorch agree on, never a NaN the model did not ask for.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "cpu_test_util.h"
#include "passes/pass.h"

namespace relax::cpu::test {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// grid_sample of a (1, 1, H, W) image at the (x, y) points of `grid`, one
// output per point.
std::vector<float> grid_sample(const std::vector<float>& image, int64_t h, int64_t w,
                               const std::vector<float>& grid, const std::string& attrs) {
  int64_t points = int64_t(grid.size() / 2);
  std::string out = "Tensor[(1, 1, 1, " + std::to_string(points) + "), f32]";
  std::string text = "fn @main(x: Tensor[(1, 1, " + std::to_string(h) + ", " + std::to_string(w) +
                     "), f32], g: Tensor[(1, 1, " + std::to_string(points) + ", 2), f32]) -> " + out +
                     " {\n  dataflow {\n    y: " + out + " = grid_sample(x, g" + attrs +
                     ")\n  }\n  return y\n}\n";
  IRModule lowered = run_passes(parse_module(text), pipeline("O0"));
  std::vector<tir::Program> progs = programs_in(lowered);
  REQUIRE(progs.size() == 1);
  Library lib(compile_programs(progs, {}));
  std::vector<float> y(size_t(points), -7.0f);
  REQUIRE(call(lib.kernel(progs[0]->name), {(void*)image.data(), (void*)grid.data(), y.data()},
               {1, 1, h, w, 1, 1, points, 2, 1, 1, 1, points}) == 0);
  return y;
}

TEST_CASE("cpu: grid_sample reads an axis of one pixel at any coordinate (align_corners), infinite ones included") {
  // RAFT's correlation pyramid normalises y by 2 / (H - 1): on a level one
  // pixel high that is an infinity or (at 0 / 0) NaN, and the sample must be
  // the row's pixel, as in ONNX Runtime (inf * (H - 1) = inf * 0 is NaN).
  std::vector<float> image = {10, 20, 30};  // H = 1, W = 3
  std::vector<float> grid = {-1, kInf, 0, kNaN, 1, -kInf, 0.5f, 0.25f, -1, -1};
  std::vector<float> y = grid_sample(image, 1, 3, grid, ", align_corners=true");
  CHECK(y == std::vector<float>{10, 20, 30, 25, 10});
}

TEST_CASE("cpu: grid_sample samples nothing at NaN, infinite or far coordinates, in every mode") {
  // As PyTorch does: such a point is outside the image; with zeros padding
  // it reads 0, and its weights are never NaN.
  std::vector<float> image = {1, 2, 3, 4, 5, 6};  // H = 2, W = 3
  std::vector<float> grid = {kNaN, 0, kInf, 0, -kInf, 0.5f, 0, kNaN, 1e30f, 0, 0, -1e30f, 0, 0.5f};
  for (const char* mode : {"nearest", "linear", "cubic"})
    for (const char* align : {"false", "true"}) {
      CAPTURE(mode);
      CAPTURE(align);
      std::vector<float> y =
          grid_sample(image, 2, 3, grid, std::string(", mode=\"") + mode + "\", align_corners=" + align);
      for (size_t i = 0; i + 1 < y.size(); ++i) {
        CAPTURE(i);
        CHECK(y[i] == 0.0f);
      }
      CHECK(std::isfinite(y.back()));  // (0, 0.5): an ordinary point
      CHECK(y.back() != 0.0f);
    }
  // border and reflection: every output is a value of the image's range, never NaN
  for (const char* pad : {"border", "reflection"}) {
    CAPTURE(pad);
    std::vector<float> y = grid_sample(image, 2, 3, grid, std::string(", padding_mode=\"") + pad + "\"");
    for (float v : y) {
      CHECK(v >= 1.0f);
      CHECK(v <= 6.0f);
    }
  }
}

}  // namespace
}  // namespace relax::cpu::test
