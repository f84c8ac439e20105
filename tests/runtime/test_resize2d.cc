// image.resize2d (runtime/builtins_image.cc), the cpu's separable f32
// resize from tap tables, against the formula in double: 2x bilinear
// upsampling (each block's taps within one vector's reach: a load and a
// permute), rows narrower than a vector and wider than several, random
// taps over a wide row (gathers), four taps a side (cubic), on each ISA
// this CPU runs at one and two threads; and its refusals of tables that
// do not fit x and y.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "runtime/cpu_isa.h"
#include "runtime/error.h"
#include "runtime/thread_pool.h"
#include "runtime/vm.h"
#include "tests/runtime/builtin_call.h"

using namespace relax::rt;
using relax::rt::test::call;
using relax::rt::test::random_tensor;

namespace {

struct Table {
  Tensor at, weight;  // (taps, n): i64 and f32
};

// Bilinear, half-pixel, `in` -> `out` positions: two taps, clamped.
Table linear(int64_t in, int64_t out) {
  Table t{Tensor::empty(DType::i64(), {2, out}), Tensor::empty(DType::f32(), {2, out})};
  auto* at = static_cast<int64_t*>(t.at.data());
  auto* w = static_cast<float*>(t.weight.data());
  for (int64_t o = 0; o < out; ++o) {
    double c = (double(o) + 0.5) * double(in) / double(out) - 0.5;
    double f = std::floor(c);
    int64_t i0 = std::clamp<int64_t>(int64_t(f), 0, in - 1), i1 = std::clamp<int64_t>(int64_t(f) + 1, 0, in - 1);
    at[o] = i0, at[out + o] = i1;
    w[o] = float(1 - (c - f)), w[out + o] = float(c - f);
  }
  return t;
}

// `taps` taps a position, anywhere in [0, in), random weights.
Table random_taps(std::mt19937& rng, int64_t taps, int64_t in, int64_t out) {
  Table t{Tensor::empty(DType::i64(), {taps, out}), random_tensor(rng, {taps, out})};
  std::uniform_int_distribution<int64_t> d(0, in - 1);
  for (int64_t i = 0; i < taps * out; ++i) static_cast<int64_t*>(t.at.data())[i] = d(rng);
  return t;
}

void check(const Tensor& x, const Table& rows, const Table& cols, int64_t OH, int64_t OW) {
  const std::vector<int64_t>& xs = x.shape();
  const int64_t H = xs[xs.size() - 2], W = xs.back(), planes = x.numel() / (H * W);
  std::vector<int64_t> ys = xs;
  ys[ys.size() - 2] = OH, ys.back() = OW;
  const int64_t T = rows.at.shape()[0], S = cols.at.shape()[0];
  const auto *rt = static_cast<const int64_t*>(rows.at.data()), *ct = static_cast<const int64_t*>(cols.at.data());
  const auto *rw = static_cast<const float*>(rows.weight.data()), *cw = static_cast<const float*>(cols.weight.data());
  const auto* xd = static_cast<const float*>(x.data());
  std::vector<double> want(size_t(planes * OH * OW));
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t i = 0; i < OH; ++i)
      for (int64_t j = 0; j < OW; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < T; ++k)
          for (int64_t l = 0; l < S; ++l)
            acc += double(rw[k * OH + i]) * double(cw[l * OW + j]) *
                   double(xd[(p * H + rt[k * OH + i]) * W + ct[l * OW + j]]);
        want[size_t((p * OH + i) * OW + j)] = acc;
      }
  relax::rt::test::each_isa_at_1_and_2_threads([&] {
    Tensor y = Tensor::empty(DType::f32(), ys);
    call("image.resize2d",
         {Value(x), Value(rows.at), Value(rows.weight), Value(cols.at), Value(cols.weight), Value(y)});
    int64_t wrong = 0;
    for (int64_t i = 0; i < y.numel(); ++i) {
      const double v = static_cast<const float*>(y.data())[i], w = want[size_t(i)];
      wrong += std::abs(v - w) > 1e-5 * (1 + std::abs(w));
    }
    CHECK(wrong == 0);
  });
}

}  // namespace

TEST_CASE("image.resize2d: separable resize from tap tables") {
  std::mt19937 rng(11);
  // 2x bilinear upsampling: 15x23 -> 30x46 (rows of 46: two vectors and a part), 4x3 -> 8x6 (under one),
  // 40x70 -> 80x140 (nine vectors a row), over two images of 3 channels.
  for (auto [H, W] : {std::pair<int64_t, int64_t>{15, 23}, {4, 3}, {40, 70}}) {
    CAPTURE(H);
    CAPTURE(W);
    Tensor x = random_tensor(rng, {2, 3, H, W});
    check(x, linear(H, 2 * H), linear(W, 2 * W), 2 * H, 2 * W);
  }
  // Downsampling 50x90 -> 20x33 (a block's taps reach past 16 inputs: gathers); random taps over rows of
  // 300 (gathers and permutes mixed); four taps a side (cubic) over a rank-3 x.
  Tensor x = random_tensor(rng, {2, 50, 90});
  check(x, linear(50, 20), linear(90, 33), 20, 33);
  Tensor wide = random_tensor(rng, {1, 2, 7, 300});
  check(wide, random_taps(rng, 2, 7, 9), random_taps(rng, 2, 300, 70), 9, 70);
  Tensor cubic = random_tensor(rng, {3, 11, 13});
  check(cubic, random_taps(rng, 4, 11, 17), random_taps(rng, 4, 13, 29), 17, 29);
}

TEST_CASE("image.resize2d refuses tables that do not fit x and y") {
  std::mt19937 rng(12);
  Tensor x = random_tensor(rng, {1, 2, 4, 5}), y = Tensor::empty(DType::f32(), {1, 2, 8, 10});
  Table rows = linear(4, 8), cols = linear(5, 10);
  auto run = [&](const Table& r, const Table& c, const Tensor& out) {
    call("image.resize2d", {Value(x), Value(r.at), Value(r.weight), Value(c.at), Value(c.weight), Value(out)});
  };
  run(rows, cols, y);  // fits
  Table far = linear(4, 8);
  static_cast<int64_t*>(far.at.data())[5] = 4;
  CHECK_THROWS_WITH_AS(run(far, cols, y), doctest::Contains("rows tap 4 at 5 lies outside the input's 4 rows"), Error);
  Table negative = linear(5, 10);
  static_cast<int64_t*>(negative.at.data())[12] = -1;
  CHECK_THROWS_WITH_AS(run(rows, negative, y), doctest::Contains("columns tap -1 at 12"), Error);
  CHECK_THROWS_WITH_AS(run(rows, linear(5, 9), y), doctest::Contains("of one shape (taps, 10)"), Error);
  CHECK_THROWS_WITH_AS(run(cols, cols, y), doctest::Contains("of one shape (taps, 8)"), Error);
  Tensor other = Tensor::empty(DType::f32(), {1, 3, 8, 10});
  CHECK_THROWS_WITH_AS(run(rows, cols, other), doctest::Contains("equal but in the last two dims"), Error);
  Table ints{rows.at, Tensor::empty(DType::i32(), {2, 8})};
  CHECK_THROWS_WITH_AS(run(ints, cols, y), doctest::Contains("must be i64 and f32 tables"), Error);
}
