// pool.max2d (runtime/builtins_pool.cc), the cpu target's f32 2-D max
// pool, against a direct loop over each window's taps: strides 1 to 3,
// windows of 1 to 5, padding, dilation, a ceil mode's last window past
// the input, rows of 1 to 70 outputs (the stride-2 vector path's full and
// partial vectors), one thread and a pool, each vector ISA this CPU runs.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "rt_test_util.h"
#include "runtime/cpu_isa.h"
#include "runtime/thread_pool.h"
#include "runtime/vm.h"

using namespace relax::rt;

namespace {

struct Case {
  int64_t N, C, H, W, KH, KW, sh, sw, ph, pw, dh, dw;
  bool ceil;
};

int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil) {
  const int64_t span = in + 2 * p - d * (k - 1) - 1;
  return (ceil ? (span + s - 1) / s : span / s) + 1;
}

void run_pool(const Case& k, const Tensor& x, const Tensor& y) {
  static VirtualMachine vm(
      Executable{}, [](const std::string&) { return Tensor(); }, nullptr);
  const Builtin* fn = find_builtin("pool.max2d");
  REQUIRE(fn);
  Value xv(x), yv(y), pv(Shape(std::make_shared<const std::vector<int64_t>>(
                        std::vector<int64_t>{k.KH, k.KW, k.sh, k.sw, k.ph, k.pw, k.dh, k.dw})));
  std::vector<const Value*> args{&xv, &pv, &yv};
  std::vector<int64_t> heap;
  Value out;
  BuiltinCall c{vm, heap, args.data(), args.size(), out};
  (*fn)(c);
}

}  // namespace

TEST_CASE("pool.max2d matches each window's maximum over the taps inside the input") {
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> dist(-4, 4);
  const std::vector<Case> cases = {
      {2, 16, 24, 20, 3, 3, 2, 2, 1, 1, 1, 1, false},   // ResNet's stem pool
      {1, 3, 9, 70, 3, 3, 2, 2, 1, 1, 1, 1, false},     // rows of 35: two vectors and a partial one
      {1, 2, 8, 8, 2, 2, 2, 2, 0, 0, 1, 1, false},      // 2x2 stride 2
      {1, 2, 7, 9, 3, 3, 2, 2, 0, 0, 1, 1, true},       // ceil mode: the last window past the input
      {3, 4, 10, 11, 3, 3, 1, 1, 1, 1, 1, 1, false},    // stride 1
      {1, 5, 13, 17, 5, 3, 3, 3, 2, 1, 1, 1, false},    // stride 3, a 5x3 window
      {1, 2, 12, 16, 3, 3, 2, 2, 2, 2, 2, 2, false},    // dilation 2
      {2, 3, 5, 1, 3, 1, 2, 1, 1, 0, 1, 1, false},     // rows of one
      {1, 1, 3, 3, 1, 1, 1, 1, 0, 0, 1, 1, false},      // 1x1
      {1, 2, 6, 5, 5, 5, 1, 1, 2, 2, 1, 1, false},      // padding of 2 on both sides of a row shorter than a vector
      {4, 40, 33, 33, 3, 3, 2, 2, 1, 1, 1, 1, false},   // large enough to split over the pool
  };
  ThreadPool pool2(2);
  for (const Case& k : cases) {
    CAPTURE(k.H);
    CAPTURE(k.W);
    CAPTURE(k.KW);
    CAPTURE(k.sw);
    const int64_t OH = out_size(k.H, k.KH, k.sh, k.ph, k.dh, k.ceil), OW = out_size(k.W, k.KW, k.sw, k.pw, k.dw, k.ceil);
    Tensor x = Tensor::empty(DType::f32(), {k.N, k.C, k.H, k.W});
    float* xd = static_cast<float*>(x.data());
    for (int64_t i = 0; i < x.numel(); ++i) xd[i] = dist(rng);
    std::vector<float> want(size_t(k.N * k.C * OH * OW));
    for (int64_t p = 0; p < k.N * k.C; ++p)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          float m = -std::numeric_limits<float>::infinity();
          for (int64_t kh = 0; kh < k.KH; ++kh)
            for (int64_t kw = 0; kw < k.KW; ++kw) {
              int64_t ih = oh * k.sh - k.ph + kh * k.dh, iw = ow * k.sw - k.pw + kw * k.dw;
              if (ih >= 0 && ih < k.H && iw >= 0 && iw < k.W) m = std::max(m, xd[(p * k.H + ih) * k.W + iw]);
            }
          want[size_t((p * OH + oh) * OW + ow)] = m;
        }
    for (const char* isa : {"avx512", "avx2", "portable"}) {
      if (std::string(isa) != "portable" && !cpu_runs(std::string(isa) == "avx512" ? KernelIsa::avx512 : KernelIsa::avx2))
        continue;
      CAPTURE(isa);
      REQUIRE(set_kernel_isa(isa));
      for (int threads : {1, 2}) {
        ThreadPool::set_global_num_threads(threads);
        Tensor y = Tensor::empty(DType::f32(), {k.N, k.C, OH, OW});
        std::fill(static_cast<float*>(y.data()), static_cast<float*>(y.data()) + y.numel(), 7.0f);
        run_pool(k, x, y);
        CHECK(std::memcmp(y.data(), want.data(), want.size() * sizeof(float)) == 0);
      }
    }
    REQUIRE(set_kernel_isa(""));
  }
  ThreadPool::set_global_num_threads(0);
}

TEST_CASE("pool.max2d refuses mismatched shapes and bad parameters") {
  Tensor x = Tensor::empty(DType::f32(), {1, 2, 4, 4}), y = Tensor::empty(DType::f32(), {1, 3, 2, 2});
  CHECK_THROWS_WITH_AS(run_pool({1, 2, 4, 4, 2, 2, 2, 2, 0, 0, 1, 1, false}, x, y),
                       doctest::Contains("do not agree"), Error);
  Tensor y2 = Tensor::empty(DType::f32(), {1, 2, 2, 2});
  CHECK_THROWS_WITH_AS(run_pool({1, 2, 4, 4, 2, 0, 2, 2, 0, 0, 1, 1, false}, x, y2),
                       doctest::Contains("positive sizes"), Error);
  Tensor y3 = Tensor::empty(DType::f32(), {1, 2, 9, 2});
  CHECK_THROWS_WITH_AS(run_pool({1, 2, 4, 4, 2, 2, 2, 2, 0, 0, 1, 1, false}, x, y3),
                       doctest::Contains("past x"), Error);
}
