// gemm.conv2d_packed with an epilogue fused in (runtime/builtins_blas.cc,
// passes/fuse_library_epilogues.cc): the direct, depthwise and product layouts,
// biases, a residual and clamps, bitwise what the plain call followed by
// the formula gives, on each ISA at one and two threads (clamps from
// tensors and a leaky ReLU too), a SiLU within 2 ulp; and its
// refusals of operands that do not fit.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "runtime/conv_direct.h"
#include "runtime/cpu_isa.h"
#include "runtime/error.h"
#include "runtime/gemm.h"
#include "runtime/thread_pool.h"
#include "runtime/vm.h"

using namespace relax::rt;

namespace {

Value shape_value(std::vector<int64_t> v) {
  return Value(Shape(std::make_shared<const std::vector<int64_t>>(std::move(v))));
}

void call(const char* name, std::vector<Value> args) {
  static VirtualMachine vm(
      Executable{}, [](const std::string&) { return Tensor(); }, nullptr);
  const Builtin* fn = find_builtin(name);
  REQUIRE(fn);
  std::vector<const Value*> argp;
  for (const Value& a : args) argp.push_back(&a);
  std::vector<int64_t> heap;
  Value out;
  BuiltinCall c{vm, heap, argp.data(), argp.size(), out};
  (*fn)(c);
}

Tensor random_tensor(std::mt19937& rng, std::vector<int64_t> shape) {
  Tensor t = Tensor::empty(DType::f32(), shape);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  for (int64_t i = 0; i < t.numel(); ++i) static_cast<float*>(t.data())[i] = d(rng);
  return t;
}

int64_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return int64_t(u);
}

}  // namespace

TEST_CASE("gemm.conv2d_packed applies a fused epilogue: biases, a residual, clamps") {
  std::mt19937 rng(5);
  struct Layer {
    int64_t N, C, H, W, O, K, groups, layout;
  };
  // Direct (layout 0) 3x3 over 12x10, two images; depthwise (layout 2) over 4x4; a 1x1 product (layout 1, no
  // workspace) over 5x5.
  for (Layer l :
       {Layer{2, 16, 12, 10, 16, 3, 1, 0}, Layer{1, 32, 4, 4, 32, 3, 32, 2}, Layer{2, 16, 5, 5, 24, 1, 1, 1}}) {
    CAPTURE(l.layout);
    const int64_t Kc = l.C / l.groups * l.K * l.K;
    Tensor x = random_tensor(rng, {l.N, l.C, l.H, l.W}), w = random_tensor(rng, {l.O, l.C / l.groups, l.K, l.K});
    const int64_t size = l.layout == 2   ? conv2d_depthwise_packed_size(l.O, l.K * l.K)
                         : l.layout == 0 ? conv2d_packed_size(l.O, 1, Kc)
                                         : gemm_packed_a_size(l.O, Kc);
    Tensor packed = Tensor::empty(DType::f32(), {size});
    call("gemm.conv2d_pack", {Value(w), shape_value({l.groups, l.layout}), Value(packed)});
    const int64_t pad = l.K / 2;
    std::vector<int64_t> p = {1, 1, pad, pad, 1, 1, l.groups, l.K, l.K, l.layout};
    Tensor b0 = random_tensor(rng, {l.O, 1, 1}), b1 = random_tensor(rng, {l.O});
    Tensor r = random_tensor(rng, {l.N, l.O, l.H, l.W});
    for (int run = 0; run < 6; ++run) {
      // Each ISA this CPU runs (the epilogue's AVX-512, AVX2 and plain loops), at 1 and 2 threads.
      const KernelIsa isa = run < 2 ? KernelIsa::avx512 : run < 4 ? KernelIsa::avx2 : KernelIsa::portable;
      if (isa != KernelIsa::portable && !cpu_runs(isa)) continue;
      REQUIRE(set_kernel_isa(kernel_isa_name(isa)));
      const int threads = 1 + run % 2;
      CAPTURE(kernel_isa_name(isa));
      CAPTURE(threads);
      ThreadPool::set_global_num_threads(threads);
      Tensor plain = Tensor::empty(DType::f32(), {l.N, l.O, l.H, l.W});
      call("gemm.conv2d_packed", {Value(x), Value(packed), shape_value(p), Value(plain)});
      const float* y = static_cast<const float*>(plain.data());
      const float *c0 = static_cast<const float*>(b0.data()), *c1 = static_cast<const float*>(b1.data()),
                  *rd = static_cast<const float*>(r.data());
      const int64_t P = l.H * l.W;
      // One bias and relu; two biases, a residual and both clamps.
      std::vector<int64_t> relu = p, full = p;
      for (int64_t v : {int64_t(1), bits(0.0f), bits(std::numeric_limits<float>::infinity())}) relu.push_back(v);
      for (int64_t v : {int64_t(6), bits(-0.25f), bits(0.5f)}) full.push_back(v);
      Tensor y1 = Tensor::empty(DType::f32(), plain.shape()), y2 = Tensor::empty(DType::f32(), plain.shape());
      call("gemm.conv2d_packed", {Value(x), Value(packed), shape_value(relu), Value(b0), Value(y1)});
      call("gemm.conv2d_packed",
           {Value(x), Value(packed), shape_value(full), Value(b0), Value(b1), Value(r), Value(y2)});
      // A bias and a SiLU (bit 3): exp on vectors, within 2 ulp of the formula in double.
      std::vector<int64_t> silu = p;
      for (int64_t v : {int64_t(1 | 8), bits(-std::numeric_limits<float>::infinity()),
                        bits(std::numeric_limits<float>::infinity())})
        silu.push_back(v);
      Tensor y3 = Tensor::empty(DType::f32(), plain.shape());
      call("gemm.conv2d_packed", {Value(x), Value(packed), shape_value(silu), Value(b0), Value(y3)});
      // Bounds from tensors (bits 4, 5) and a leaky ReLU (bit 6): its threshold and slope tensors.
      std::vector<int64_t> tensors = p;
      for (int64_t v : {int64_t(1 | 16 | 32 | 64), bits(0.0f), bits(0.0f)}) tensors.push_back(v);
      Tensor lo = Tensor::empty(DType::f32(), {}), hi = Tensor::empty(DType::f32(), {1}),
             at = Tensor::empty(DType::f32(), {}), slope = Tensor::empty(DType::f32(), {});
      *static_cast<float*>(lo.data()) = -0.3f, *static_cast<float*>(hi.data()) = 0.8f;
      *static_cast<float*>(at.data()) = 0.1f, *static_cast<float*>(slope.data()) = 0.25f;
      Tensor y4 = Tensor::empty(DType::f32(), plain.shape());
      call("gemm.conv2d_packed", {Value(x), Value(packed), shape_value(tensors), Value(b0), Value(lo), Value(hi),
                                  Value(at), Value(slope), Value(y4)});
      int64_t wrong1 = 0, wrong2 = 0, wrong3 = 0, wrong4 = 0;
      for (int64_t i = 0; i < plain.numel(); ++i) {
        const int64_t o = i / P % l.O;
        float want1 = std::min(std::max(y[i] + c0[o], 0.0f), std::numeric_limits<float>::infinity());
        float want2 = std::min(std::max(y[i] + (c0[o] + c1[o]) + rd[i], -0.25f), 0.5f);
        double s = double(y[i] + c0[o]), want3 = s / (1.0 + std::exp(-s));
        wrong1 += static_cast<const float*>(y1.data())[i] != want1;
        wrong2 += static_cast<const float*>(y2.data())[i] != want2;
        wrong3 += std::abs(static_cast<const float*>(y3.data())[i] - want3) > 2.4e-7 * std::max(1.0, std::abs(want3));
        float v4 = y[i] + c0[o];
        float want4 = std::min(std::max(v4 < 0.1f ? v4 * 0.25f : v4, -0.3f), 0.8f);
        wrong4 += static_cast<const float*>(y4.data())[i] != want4;
      }
      CHECK(wrong1 == 0);
      CHECK(wrong2 == 0);
      CHECK(wrong3 == 0);
      CHECK(wrong4 == 0);
    }
  }
  REQUIRE(set_kernel_isa(""));
  ThreadPool::set_global_num_threads(0);
}

TEST_CASE("gemm.conv2d_packed refuses epilogue operands that do not fit") {
  std::mt19937 rng(6);
  Tensor x = random_tensor(rng, {1, 8, 5, 5}), w = random_tensor(rng, {8, 8, 3, 3});
  Tensor packed = Tensor::empty(DType::f32(), {conv2d_packed_size(8, 1, 72)});
  call("gemm.conv2d_pack", {Value(w), shape_value({1, 0}), Value(packed)});
  Tensor y = Tensor::empty(DType::f32(), {1, 8, 5, 5});
  auto params = [](int64_t flags) { return shape_value({1, 1, 1, 1, 1, 1, 1, 3, 3, 0, flags, 0, 0}); };
  Tensor short_bias = random_tensor(rng, {7}), bias = random_tensor(rng, {8}), small = random_tensor(rng, {1, 8, 5, 4});
  CHECK_THROWS_WITH_AS(call("gemm.conv2d_packed", {Value(x), Value(packed), params(1), Value(short_bias), Value(y)}),
                       doctest::Contains("a bias must hold 8 f32"), Error);
  CHECK_THROWS_WITH_AS(call("gemm.conv2d_packed", {Value(x), Value(packed), params(4), Value(small), Value(y)}),
                       doctest::Contains("the residual must be"), Error);
  CHECK_THROWS_WITH_AS(call("gemm.conv2d_packed", {Value(x), Value(packed), params(2), Value(bias), Value(y)}),
                       doctest::Contains("takes 6 or 7 arguments"), Error);
  CHECK_THROWS_WITH_AS(call("gemm.conv2d_packed", {Value(x), Value(packed), params(16), Value(bias), Value(y)}),
                       doctest::Contains("bound, threshold or slope must be one f32"), Error);
  for (int64_t flags : {3, 7, 128, -1})  // three biases; bits past the leaky ReLU's
    CHECK_THROWS_WITH_AS(call("gemm.conv2d_packed", {Value(x), Value(packed), params(flags), Value(bias), Value(y)}),
                         doctest::Contains("13 with an epilogue"), Error);
}
