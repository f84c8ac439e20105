// layout.transpose (runtime/builtins_layout.cc): batched 2-D transposes,
// whole 16 x 16 tiles and ragged edges, bitwise on each ISA at one and two
// threads; and pool.max2d over positions of 16 lanes (a blocked layout's
// planes, runtime/builtins_pool.cc) against the plain pool of each lane.
#include <doctest/doctest.h>

#include <cstring>
#include <limits>
#include <random>

#include "runtime/cpu_isa.h"
#include "runtime/error.h"
#include "runtime/thread_pool.h"
#include "runtime/vm.h"
#include "tests/runtime/builtin_call.h"

using namespace relax::rt;
using relax::rt::test::call;
using relax::rt::test::each_isa_at_1_and_2_threads;
using relax::rt::test::random_tensor;
using relax::rt::test::shape_value;

TEST_CASE("layout.transpose: y[b, c, r] = x[b, r, c], every tile shape, each ISA") {
  std::mt19937 rng(7);
  struct Case {
    int64_t B, R, C;
  };
  for (Case k : {Case{1, 16, 16}, Case{2, 16, 3136}, Case{3, 49, 16}, Case{1, 37, 53}, Case{4, 1, 20}, Case{1, 64, 1},
                 Case{2, 33, 40}}) {
    CAPTURE(k.R);
    CAPTURE(k.C);
    Tensor x = random_tensor(rng, {k.B, k.R, k.C});
    const float* xd = static_cast<const float*>(x.data());
    each_isa_at_1_and_2_threads([&] {
      Tensor y = Tensor::empty(DType::f32(), {k.B, k.C, k.R});
      call("layout.transpose", {Value(x), shape_value({k.B, k.R, k.C}), Value(y)});
      const float* yd = static_cast<const float*>(y.data());
      int64_t wrong = 0;
      for (int64_t b = 0; b < k.B; ++b)
        for (int64_t r = 0; r < k.R; ++r)
          for (int64_t c = 0; c < k.C; ++c)
            wrong += std::memcmp(&yd[(b * k.C + c) * k.R + r], &xd[(b * k.R + r) * k.C + c], 4) != 0;
      CHECK(wrong == 0);
    });
  }
  Tensor x = random_tensor(rng, {2, 3, 4}), y = Tensor::empty(DType::f32(), {24});
  CHECK_THROWS_WITH_AS(call("layout.transpose", {Value(x), shape_value({2, 3, 5}), Value(y)}),
                       doctest::Contains("needs x and y of one 4-byte dtype and 30 elements"), Error);
}

TEST_CASE("pool.max2d over positions of 16 lanes: each lane pooled as a plane is") {
  std::mt19937 rng(9);
  // 3x3 stride 2 pad 1 (ResNet's stem) and 5x5 stride 1 pad 2 (YOLO's SPPF), two blocks, two images.
  struct Case {
    int64_t K, s, pad, H, W;
  };
  for (Case k : {Case{3, 2, 1, 13, 11}, Case{5, 1, 2, 9, 10}}) {
    const int64_t N = 2, Cb = 2, OH = (k.H + 2 * k.pad - k.K) / k.s + 1, OW = (k.W + 2 * k.pad - k.K) / k.s + 1;
    Tensor x = random_tensor(rng, {N, Cb, k.H, k.W, 16});
    Tensor plain = Tensor::empty(DType::f32(), {N, Cb * 16, k.H, k.W});
    const float* xd = static_cast<const float*>(x.data());
    float* pd = static_cast<float*>(plain.data());
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < Cb * 16; ++c)
        for (int64_t p = 0; p < k.H * k.W; ++p)
          pd[(n * Cb * 16 + c) * k.H * k.W + p] = xd[((n * Cb + c / 16) * k.H * k.W + p) * 16 + c % 16];
    Tensor want = Tensor::empty(DType::f32(), {N, Cb * 16, OH, OW}), got = Tensor::empty(DType::f32(), {N, Cb, OH, OW, 16});
    call("pool.max2d", {Value(plain), shape_value({k.K, k.K, k.s, k.s, k.pad, k.pad, 1, 1}), Value(want)});
    for (const char* isa : {"avx512", "portable"}) {
      if (!set_kernel_isa(isa)) continue;
      CAPTURE(std::string(isa));
      call("pool.max2d", {Value(x), shape_value({k.K, k.K, k.s, k.s, k.pad, k.pad, 1, 1, 16}), Value(got)});
      const float *w = static_cast<const float*>(want.data()), *g = static_cast<const float*>(got.data());
      int64_t wrong = 0;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t c = 0; c < Cb * 16; ++c)
          for (int64_t p = 0; p < OH * OW; ++p)
            wrong += w[(n * Cb * 16 + c) * OH * OW + p] != g[((n * Cb + c / 16) * OH * OW + p) * 16 + c % 16];
      CHECK(wrong == 0);
    }
    REQUIRE(set_kernel_isa(""));
  }
}
