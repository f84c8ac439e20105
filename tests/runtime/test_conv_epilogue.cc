// gemm.conv2d_packed with an epilogue fused in (runtime/builtins_blas.cc,
// passes/fuse_library_epilogues.cc): the direct, both depthwise and the product layouts,
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
#include <tuple>

#include "runtime/conv_direct.h"
#include "runtime/cpu_isa.h"
#include "runtime/error.h"
#include "runtime/gemm.h"
#include "runtime/qgemm.h"
#include "runtime/thread_pool.h"
#include "runtime/vm.h"
#include "tests/runtime/builtin_call.h"

using namespace relax::rt;
using relax::rt::test::call;
using relax::rt::test::each_isa_at_1_and_2_threads;
using relax::rt::test::random_tensor;
using relax::rt::test::shape_value;

namespace {

int64_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return int64_t(u);
}

// p and an epilogue's six parameters (runtime/epilogue.h).
std::vector<int64_t> with_epilogue(std::vector<int64_t> p, int64_t flags, float lo, float hi, float k1 = 1.0f,
                                   float k2 = 0.0f, float k3 = 1.0f) {
  for (int64_t v : {flags, bits(lo), bits(hi), bits(k1), bits(k2), bits(k3)}) p.push_back(v);
  return p;
}

}  // namespace

TEST_CASE("gemm.conv2d_packed applies a fused epilogue: biases, a residual, clamps") {
  std::mt19937 rng(5);
  struct Layer {
    int64_t N, C, H, W, O, K, groups, layout;
  };
  // Direct (layout 0) 3x3 over 12x10, two images; depthwise (layout 2) over 4x4; a 1x1 product (layout 1, no
  // workspace) over 5x5; direct over 4x4 planes with 4,096 outputs, whose SiLU splits over the pool with the
  // biases spread (planes under 64 outputs); depthwise over 9x9 by the plane-wise kernel (layout 3, the
  // weights as they are).
  for (Layer l : {Layer{2, 16, 12, 10, 16, 3, 1, 0}, Layer{1, 32, 4, 4, 32, 3, 32, 2}, Layer{2, 16, 5, 5, 24, 1, 1, 1},
                  Layer{4, 16, 4, 4, 64, 3, 1, 0}, Layer{2, 8, 9, 9, 8, 3, 8, 3}}) {
    CAPTURE(l.layout);
    const int64_t Kc = l.C / l.groups * l.K * l.K;
    Tensor x = random_tensor(rng, {l.N, l.C, l.H, l.W}), w = random_tensor(rng, {l.O, l.C / l.groups, l.K, l.K});
    const int64_t size = l.layout == 3   ? l.O * l.K * l.K
                         : l.layout == 2 ? conv2d_depthwise_packed_size(l.O, l.K * l.K)
                         : l.layout == 0 ? conv2d_packed_size(l.O, 1, Kc)
                                         : gemm_packed_a_size(l.O, Kc);
    Tensor packed = Tensor::empty(DType::f32(), {size});
    call("gemm.conv2d_pack", {Value(w), shape_value({l.groups, l.layout}), Value(packed)});
    const int64_t pad = l.K / 2;
    std::vector<int64_t> p = {1, 1, pad, pad, 1, 1, l.groups, l.K, l.K, l.layout};
    Tensor b0 = random_tensor(rng, {l.O, 1, 1}), b1 = random_tensor(rng, {l.O});
    Tensor r = random_tensor(rng, {l.N, l.O, l.H, l.W});
    each_isa_at_1_and_2_threads([&] {
      Tensor plain = Tensor::empty(DType::f32(), {l.N, l.O, l.H, l.W});
      call("gemm.conv2d_packed", {Value(x), Value(packed), shape_value(p), Value(plain)});
      const float* y = static_cast<const float*>(plain.data());
      const float *c0 = static_cast<const float*>(b0.data()), *c1 = static_cast<const float*>(b1.data()),
                  *rd = static_cast<const float*>(r.data());
      const int64_t P = l.H * l.W;
      // One bias and relu; two biases, a residual and both clamps.
      const float inf = std::numeric_limits<float>::infinity();
      std::vector<int64_t> relu = with_epilogue(p, 1, 0.0f, inf), full = with_epilogue(p, 6, -0.25f, 0.5f);
      Tensor y1 = Tensor::empty(DType::f32(), plain.shape()), y2 = Tensor::empty(DType::f32(), plain.shape());
      call("gemm.conv2d_packed", {Value(x), Value(packed), shape_value(relu), Value(b0), Value(y1)});
      call("gemm.conv2d_packed",
           {Value(x), Value(packed), shape_value(full), Value(b0), Value(b1), Value(r), Value(y2)});
      // A bias and a SiLU (bit 3): exp on vectors, within 2 ulp of the formula in double.
      std::vector<int64_t> silu = with_epilogue(p, 1 | 8, -inf, inf);
      Tensor y3 = Tensor::empty(DType::f32(), plain.shape());
      call("gemm.conv2d_packed", {Value(x), Value(packed), shape_value(silu), Value(b0), Value(y3)});
      // Bounds from tensors (bits 4, 5) and a leaky ReLU (bit 6): its threshold and slope tensors.
      std::vector<int64_t> tensors = with_epilogue(p, 1 | 16 | 32 | 64, 0.0f, 0.0f);
      Tensor lo = Tensor::empty(DType::f32(), {}), hi = Tensor::empty(DType::f32(), {1}),
             at = Tensor::empty(DType::f32(), {}), slope = Tensor::empty(DType::f32(), {});
      *static_cast<float*>(lo.data()) = -0.3f, *static_cast<float*>(hi.data()) = 0.8f;
      *static_cast<float*>(at.data()) = 0.1f, *static_cast<float*>(slope.data()) = 0.25f;
      Tensor y4 = Tensor::empty(DType::f32(), plain.shape());
      call("gemm.conv2d_packed", {Value(x), Value(packed), shape_value(tensors), Value(b0), Value(lo), Value(hi),
                                  Value(at), Value(slope), Value(y4)});
      // A bias and tanh (bit 7); a residual and GELU (bit 8, k1 dividing: bit 9) with k1 from a tensor (bit 10).
      Tensor y5 = Tensor::empty(DType::f32(), plain.shape()), y6 = Tensor::empty(DType::f32(), plain.shape());
      call("gemm.conv2d_packed",
           {Value(x), Value(packed), shape_value(with_epilogue(p, 1 | 128, -inf, inf)), Value(b0), Value(y5)});
      Tensor k1 = Tensor::empty(DType::f32(), {});
      *static_cast<float*>(k1.data()) = 1.4142135f;
      call("gemm.conv2d_packed",
           {Value(x), Value(packed), shape_value(with_epilogue(p, 4 | 256 | 512 | 1024, -inf, inf, 9.0f, 1.0f, 0.5f)),
            Value(r), Value(k1), Value(y6)});
      // A bias and hardswish (bit 13): v * min(max(v / 6 + 0.5, 0), 1), the bounds the gate's.
      Tensor y7 = Tensor::empty(DType::f32(), plain.shape());
      call("gemm.conv2d_packed",
           {Value(x), Value(packed), shape_value(with_epilogue(p, 1 | 8192, 0.0f, 1.0f, 1.0f / 6, 0.5f)), Value(b0),
            Value(y7)});
      int64_t wrong1 = 0, wrong2 = 0, wrong3 = 0, wrong4 = 0, wrong5 = 0, wrong6 = 0, wrong7 = 0;
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
        double want5 = std::tanh(double(y[i] + c0[o]));
        wrong5 += std::abs(static_cast<const float*>(y5.data())[i] - want5) > 4.8e-7 * std::max(1e-2, std::abs(want5));
        // erf within 2 ulp of 1 where erf(x) + 1 cancels: an error of 2.4e-7 * |s| * k3 on top of the result's 2 ulp.
        double s6 = double(y[i] + rd[i]), want6 = s6 * (std::erf(s6 / double(1.4142135f)) + 1.0) * 0.5;
        wrong6 += std::abs(static_cast<const float*>(y6.data())[i] - want6) >
                  2.4e-7 * std::abs(s6) * 0.5 + 2.4e-7 * std::abs(want6) + 1e-30;
        const double v7 = double(y[i] + c0[o]), want7 = v7 * std::min(std::max(v7 / 6.0 + 0.5, 0.0), 1.0);
        wrong7 += std::abs(static_cast<const float*>(y7.data())[i] - want7) > 3.6e-7 * std::abs(v7) + 1e-30;
      }
      CHECK(wrong1 == 0);
      CHECK(wrong2 == 0);
      CHECK(wrong3 == 0);
      CHECK(wrong4 == 0);
      CHECK(wrong5 == 0);
      CHECK(wrong6 == 0);
      CHECK(wrong7 == 0);
    });
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
  auto params = [](int64_t flags) {
    return shape_value(with_epilogue({1, 1, 1, 1, 1, 1, 1, 3, 3, 0}, flags, 0.0f, 0.0f));
  };
  Tensor short_bias = random_tensor(rng, {7}), bias = random_tensor(rng, {8}), small = random_tensor(rng, {1, 8, 5, 4});
  CHECK_THROWS_WITH_AS(call("gemm.conv2d_packed", {Value(x), Value(packed), params(1), Value(short_bias), Value(y)}),
                       doctest::Contains("a bias must hold 8 f32"), Error);
  CHECK_THROWS_WITH_AS(call("gemm.conv2d_packed", {Value(x), Value(packed), params(4), Value(small), Value(y)}),
                       doctest::Contains("the residual must be"), Error);
  CHECK_THROWS_WITH_AS(call("gemm.conv2d_packed", {Value(x), Value(packed), params(2), Value(bias), Value(y)}),
                       doctest::Contains("takes 6 or 7 arguments"), Error);
  CHECK_THROWS_WITH_AS(call("gemm.conv2d_packed", {Value(x), Value(packed), params(16), Value(bias), Value(y)}),
                       doctest::Contains("must be one f32"), Error);
  // Three biases; i32 sums' scale (an integer product's); bits past it; two activations; GELU's constants
  // without GELU or hardswish.
  for (int64_t flags : {3, 7, 1 << 14, 1 << 15, -1, 8 | 64, 128 | 256, 256 | 8192, 1 | 1024, 8192 | 4096, 8192 | 512})
    CHECK_THROWS_WITH_AS(call("gemm.conv2d_packed", {Value(x), Value(packed), params(flags), Value(bias), Value(y)}),
                         doctest::Contains("16 with an epilogue"), Error);
}

TEST_CASE("blas.matmul applies a fused epilogue to each slice of the product") {
  std::mt19937 rng(8);
  const float inf = std::numeric_limits<float>::infinity();
  // Batched with a broadcast weight (column slices at two threads), one row (the runtime's gemv), and a
  // product too small to split.
  struct Case {
    std::vector<int64_t> a, b;
  };
  for (const Case& k : {Case{{2, 3, 64, 48}, {48, 70}}, Case{{1, 96}, {96, 300}}, Case{{5, 7}, {7, 9}}}) {
    CAPTURE(k.a.size());
    Tensor a = random_tensor(rng, k.a), b = random_tensor(rng, k.b);
    std::vector<int64_t> os = k.a;
    os.back() = k.b.back();
    const int64_t N = os.back();
    Tensor b0 = random_tensor(rng, {N}), b1 = random_tensor(rng, {1, N}), r = random_tensor(rng, os);
    each_isa_at_1_and_2_threads([&] {
      Tensor plain = Tensor::empty(DType::f32(), os);
      call("blas.matmul", {Value(a), Value(b), Value(plain)});
      // Two biases, a residual, both clamps: bitwise the formula.
      Tensor y1 = Tensor::empty(DType::f32(), os), y2 = Tensor::empty(DType::f32(), os);
      call("blas.matmul", {Value(a), Value(b), shape_value(with_epilogue({}, 2 | 4, -0.5f, 0.75f)), Value(b0),
                           Value(b1), Value(r), Value(y1)});
      // One bias and the legaliser's GELU, v * (erf(v * 0.70710678) + 1) * 0.5, all constants parameters.
      call("blas.matmul",
           {Value(a), Value(b), shape_value(with_epilogue({}, 1 | 256, -inf, inf, 0.70710678f, 1.0f, 0.5f)), Value(b0),
            Value(y2)});
      const float *y = static_cast<const float*>(plain.data()), *c0 = static_cast<const float*>(b0.data()),
                  *c1 = static_cast<const float*>(b1.data()), *rd = static_cast<const float*>(r.data());
      int64_t wrong1 = 0, wrong2 = 0;
      for (int64_t i = 0; i < plain.numel(); ++i) {
        const int64_t j = i % N;
        const float want1 = std::min(std::max(y[i] + (c0[j] + c1[j]) + rd[i], -0.5f), 0.75f);
        wrong1 += static_cast<const float*>(y1.data())[i] != want1;
        const double s = double(y[i] + c0[j]), want2 = s * (std::erf(s * double(0.70710678f)) + 1.0) * 0.5;
        wrong2 += std::abs(static_cast<const float*>(y2.data())[i] - want2) >
                  2.4e-7 * std::abs(s) * 0.5 + 2.4e-7 * std::abs(want2) + 1e-30;
      }
      CHECK(wrong1 == 0);
      CHECK(wrong2 == 0);
    });
  }
  REQUIRE(set_kernel_isa(""));
  ThreadPool::set_global_num_threads(0);

  // Operands that do not fit.
  Tensor a = random_tensor(rng, {4, 6}), b = random_tensor(rng, {6, 5}), y = Tensor::empty(DType::f32(), {4, 5});
  Tensor short_bias = random_tensor(rng, {4}), residual = random_tensor(rng, {5, 4});
  CHECK_THROWS_WITH_AS(
      call("blas.matmul", {Value(a), Value(b), shape_value(with_epilogue({}, 1, 0, 1)), Value(short_bias), Value(y)}),
      doctest::Contains("a bias must hold 5 f32"), Error);
  CHECK_THROWS_WITH_AS(
      call("blas.matmul", {Value(a), Value(b), shape_value(with_epilogue({}, 4, 0, 1)), Value(residual), Value(y)}),
      doctest::Contains("the residual must be f32[4, 5], got f32[5, 4]"), Error);
  CHECK_THROWS_WITH_AS(call("blas.matmul", {Value(a), Value(b), shape_value(with_epilogue({}, 2, 0, 1)), Value(y)}),
                       doctest::Contains("an epilogue needs 6 parameters"), Error);
  Tensor a64 = Tensor::empty(DType::f(64), {4, 6}), b64 = Tensor::empty(DType::f(64), {6, 5}),
         y64 = Tensor::empty(DType::f(64), {4, 5});
  CHECK_THROWS_WITH_AS(
      call("blas.matmul", {Value(a64), Value(b64), shape_value(with_epilogue({}, 0, 0, 1)), Value(y64)}),
      doctest::Contains("an epilogue needs f32 operands"), Error);
}

TEST_CASE("gemm.matmul_packed: blas.matmul's sums and epilogue from b packed once, a's batches as rows") {
  std::mt19937 rng(13);
  // Batches of rows split over two threads in whole panels; one row (a matrix-vector product over the
  // packed blocks); a product too small to split, N under a panel.
  for (auto [batch, M, K, N] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{2, 37, 300, 200}, {1, 1, 600, 100},
                                {1, 3, 5, 20}}) {
    CAPTURE(M);
    Tensor a = random_tensor(rng, {batch, M, K}), b = random_tensor(rng, {K, N});
    Tensor bp = Tensor::empty(DType::f32(), {gemm_packed_b_size(K, N)});
    call("gemm.matmul_pack", {Value(b), Value(bp)});
    Tensor bias = random_tensor(rng, {N}), r = random_tensor(rng, {batch, M, N});
    each_isa_at_1_and_2_threads([&] {
      Tensor want = Tensor::empty(DType::f32(), {batch, M, N}), got = Tensor::empty(DType::f32(), {batch, M, N});
      call("blas.matmul", {Value(a), Value(b), Value(want)});
      call("gemm.matmul_packed", {Value(a), Value(bp), shape_value({K, N}), Value(got)});
      CHECK(std::memcmp(want.data(), got.data(), want.nbytes()) == 0);
      // A bias, a residual and clamps: blas.matmul's epilogue, bitwise.
      const std::vector<int64_t> e = with_epilogue({}, 1 | 4, -0.5f, 0.75f);
      std::vector<int64_t> ep = {K, N};
      ep.insert(ep.end(), e.begin(), e.end());
      call("blas.matmul", {Value(a), Value(b), shape_value(e), Value(bias), Value(r), Value(want)});
      call("gemm.matmul_packed", {Value(a), Value(bp), shape_value(ep), Value(bias), Value(r), Value(got)});
      CHECK(std::memcmp(want.data(), got.data(), want.nbytes()) == 0);
    });
  }
  // Refusals: packed weights of another size, an a of another K, scaled sums.
  Tensor a = random_tensor(rng, {4, 8}), b = random_tensor(rng, {8, 40}), y = Tensor::empty(DType::f32(), {4, 40});
  Tensor bp = Tensor::empty(DType::f32(), {gemm_packed_b_size(8, 40)}), small = Tensor::empty(DType::f32(), {8 * 40});
  call("gemm.matmul_pack", {Value(b), Value(bp)});
  CHECK_THROWS_WITH_AS(call("gemm.matmul_packed", {Value(a), Value(small), shape_value({8, 40}), Value(y)}),
                       doctest::Contains("the packed weights must hold"), Error);
  CHECK_THROWS_WITH_AS(call("gemm.matmul_packed", {Value(a), Value(bp), shape_value({9, 40}), Value(y)}),
                       doctest::Contains("must end in K = 9"), Error);
  CHECK_THROWS_WITH_AS(call("gemm.matmul_packed", {Value(a), Value(bp), shape_value(with_epilogue({8, 40}, 16384 | 1, 0, 1)),
                                                   Value(b), Value(y)}),
                       doctest::Contains("not the flags of an epilogue of f32 sums"), Error);
}

TEST_CASE("gemm.qmatmul_packed scales its i32 sums and applies a fused epilogue, block by block") {
  std::mt19937 rng(9);
  const float inf = std::numeric_limits<float>::infinity();
  // Rows of several batches folded (two threads split them), and a product too small to split.
  for (auto [rows, K, N] : {std::tuple<int64_t, int64_t, int64_t>{2 * 61, 96, 200}, {3, 5, 7}}) {
    CAPTURE(rows);
    Tensor a = Tensor::empty(DType::u(8), {rows, K}), b = Tensor::empty(DType::i(8), {K, N});
    std::uniform_int_distribution<int> byte(0, 255);
    for (int64_t i = 0; i < a.numel(); ++i) static_cast<uint8_t*>(a.data())[i] = uint8_t(byte(rng));
    for (int64_t i = 0; i < b.numel(); ++i) static_cast<int8_t*>(b.data())[i] = int8_t(byte(rng) - 128);
    Tensor za = Tensor::empty(DType::u(8), {}), zb = Tensor::empty(DType::i(8), {});
    *static_cast<uint8_t*>(za.data()) = 117;
    *static_cast<int8_t*>(zb.data()) = -3;
    Tensor bp = Tensor::empty(DType::u(8), {qgemm_packed_b_size(K, N)});
    call("gemm.qmatmul_pack", {Value(b), Value(zb), Value(bp)});
    Tensor s = random_tensor(rng, {N}), s0 = random_tensor(rng, {1}), bias = random_tensor(rng, {N});
    Tensor r = random_tensor(rng, {rows, N}), s1 = random_tensor(rng, {}), qs = Tensor::empty(DType::f32(), {});
    Tensor qz = Tensor::empty(DType::u(8), {1}), qzi = Tensor::empty(DType::i(8), {});
    *static_cast<uint8_t*>(qz.data()) = 100;
    *static_cast<int8_t*>(qzi.data()) = -20;
    // About 100 steps over the sums' spread: both ends saturate somewhere.
    *static_cast<float*>(qs.data()) = 0.01f * std::sqrt(float(K)) * 128.0f * 128.0f / 100.0f;
    each_isa_at_1_and_2_threads([&] {
      Tensor sums = Tensor::empty(DType::i32(), {rows, N});
      call("gemm.qmatmul_packed", {Value(a), Value(bp), Value(za), shape_value({K, N}), Value(sums)});
      // Scales per column, a bias, clamps: bitwise the formula.
      Tensor y1 = Tensor::empty(DType::f32(), {rows, N}), y2 = Tensor::empty(DType::f32(), {rows, N});
      call("gemm.qmatmul_packed",
           {Value(a), Value(bp), Value(za), shape_value(with_epilogue({K, N}, 16384 | 1, -40.0f, 50.0f)), Value(s),
            Value(bias), Value(y1)});
      // One scale for all, a residual and GELU.
      call("gemm.qmatmul_packed",
           {Value(a), Value(bp), Value(za),
            shape_value(with_epilogue({K, N}, 16384 | 4 | 256, -inf, inf, 0.70710678f, 1.0f, 0.5f)), Value(s0),
            Value(r), Value(y2)});
      // The product of two scales, a bias, the result quantized to u8 and to i8 (zero points 100 and -20).
      Tensor q8 = Tensor::empty(DType::u(8), {rows, N}), qi8 = Tensor::empty(DType::i(8), {rows, N});
      const std::vector<int64_t> qp = with_epilogue({K, N}, 16384 | 32768 | 65536 | 1, -inf, inf);
      call("gemm.qmatmul_packed", {Value(a), Value(bp), Value(za), shape_value(qp), Value(s0), Value(s1), Value(bias),
                                   Value(qs), Value(qz), Value(q8)});
      call("gemm.qmatmul_packed", {Value(a), Value(bp), Value(za), shape_value(qp), Value(s0), Value(s1), Value(bias),
                                   Value(qs), Value(qzi), Value(qi8)});
      const int32_t* acc = static_cast<const int32_t*>(sums.data());
      const float *sc = static_cast<const float*>(s.data()), *bd = static_cast<const float*>(bias.data()),
                  *rd = static_cast<const float*>(r.data()), s0v = *static_cast<const float*>(s0.data());
      int64_t wrong1 = 0, wrong2 = 0;
      for (int64_t i = 0; i < rows * N; ++i) {
        const int64_t j = i % N;
        const float want1 = std::min(std::max(float(acc[i]) * sc[j] + bd[j], -40.0f), 50.0f);
        wrong1 += static_cast<const float*>(y1.data())[i] != want1;
        const float sum = float(acc[i]) * s0v + rd[i];
        const double want2 = double(sum) * (std::erf(double(sum) * double(0.70710678f)) + 1.0) * 0.5;
        wrong2 += std::abs(static_cast<const float*>(y2.data())[i] - want2) >
                  2.4e-7 * std::abs(double(sum)) * 0.5 + 2.4e-7 * std::abs(want2) + 1e-30;
      }
      CHECK(wrong1 == 0);
      CHECK(wrong2 == 0);
      const float s01 = s0v * *static_cast<const float*>(s1.data()), qsv = *static_cast<const float*>(qs.data());
      int64_t wrong_u8 = 0, wrong_i8 = 0, saturated = 0;
      for (int64_t i = 0; i < rows * N; ++i) {
        const float v = float(acc[i]) * s01 + bd[i % N];
        const float u = std::nearbyint(v / qsv) + 100.0f, t = std::nearbyint(v / qsv) - 20.0f;
        saturated += u < 0.0f || u > 255.0f;
        wrong_u8 += static_cast<const uint8_t*>(q8.data())[i] != uint8_t(std::min(std::max(u, 0.0f), 255.0f));
        wrong_i8 += static_cast<const int8_t*>(qi8.data())[i] != int8_t(std::min(std::max(t, -128.0f), 127.0f));
      }
      CHECK(wrong_u8 == 0);
      CHECK(wrong_i8 == 0);
      CHECK(saturated > 0);  // the saturation taken too
    });
  }
  REQUIRE(set_kernel_isa(""));
  ThreadPool::set_global_num_threads(0);

  // Operands that do not fit.
  Tensor a = Tensor::empty(DType::u(8), {4, 8}), b = Tensor::empty(DType::i(8), {8, 5});
  Tensor za = Tensor::empty(DType::u(8), {}), zb = Tensor::empty(DType::i(8), {});
  std::memset(a.data(), 1, 32), std::memset(b.data(), 1, 40), std::memset(za.data(), 0, 1),
      std::memset(zb.data(), 0, 1);
  Tensor bp = Tensor::empty(DType::u(8), {qgemm_packed_b_size(8, 5)});
  call("gemm.qmatmul_pack", {Value(b), Value(zb), Value(bp)});
  Tensor y = Tensor::empty(DType::f32(), {4, 5}), yi = Tensor::empty(DType::i32(), {4, 5});
  Tensor s3 = random_tensor(rng, {3}), bias = random_tensor(rng, {5});
  CHECK_THROWS_WITH_AS(
      call("gemm.qmatmul_packed",
           {Value(a), Value(bp), Value(za), shape_value(with_epilogue({8, 5}, 16384, 0, 1)), Value(s3), Value(y)}),
      doctest::Contains("the sums' scale must be one f32 or 5"), Error);
  CHECK_THROWS_WITH_AS(
      call("gemm.qmatmul_packed",
           {Value(a), Value(bp), Value(za), shape_value(with_epilogue({8, 5}, 1, 0, 1)), Value(bias), Value(y)}),
      doctest::Contains("is not the flags of an epilogue of scaled sums"), Error);
  CHECK_THROWS_WITH_AS(
      call("gemm.qmatmul_packed",
           {Value(a), Value(bp), Value(za), shape_value(with_epilogue({8, 5}, 16384, 0, 1)), Value(bias), Value(yi)}),
      doctest::Contains("the output must hold 20 f32"), Error);
  Tensor one = random_tensor(rng, {1}), zi = Tensor::empty(DType::i(8), {}), zi32 = Tensor::empty(DType::i32(), {});
  std::memset(zi.data(), 0, 1), std::memset(zi32.data(), 0, 4);
  Tensor yu = Tensor::empty(DType::u(8), {4, 5});
  CHECK_THROWS_WITH_AS(call("gemm.qmatmul_packed",
                            {Value(a), Value(bp), Value(za), shape_value(with_epilogue({8, 5}, 16384 | 65536, 0, 1)),
                             Value(one), Value(one), Value(zi), Value(yu)}),
                       doctest::Contains("the output must hold 20 i8, got u8"), Error);
  CHECK_THROWS_WITH_AS(call("gemm.qmatmul_packed",
                            {Value(a), Value(bp), Value(za), shape_value(with_epilogue({8, 5}, 16384 | 65536, 0, 1)),
                             Value(one), Value(one), Value(zi32), Value(yu)}),
                       doctest::Contains("zero point must be one u8 or i8"), Error);
  CHECK_THROWS_WITH_AS(call("gemm.qmatmul_packed",
                            {Value(a), Value(bp), Value(za), shape_value(with_epilogue({8, 5}, 16384 | 32768, 0, 1)),
                             Value(bias), Value(one), Value(y)}),
                       doctest::Contains("the sums' scale must be one f32, got f32[5]"), Error);
  CHECK_THROWS_WITH_AS(
      call("gemm.qmatmul_packed",
           {Value(a), Value(bp), Value(za), shape_value(with_epilogue({8, 5}, 32768, 0, 1)), Value(one), Value(y)}),
      doctest::Contains("is not the flags of an epilogue of scaled sums"), Error);
  // And the other library calls refuse scaled sums.
  Tensor fa = random_tensor(rng, {4, 8}), fb = random_tensor(rng, {8, 5});
  CHECK_THROWS_WITH_AS(
      call("blas.matmul", {Value(fa), Value(fb), shape_value(with_epilogue({}, 16384, 0, 1)), Value(bias), Value(y)}),
      doctest::Contains("an epilogue of i32 sums or a quantized result needs an integer product"), Error);
}

TEST_CASE("gemm.qmatmul: batched products exact, b broadcast over a batch dim, small ones across the pool") {
  std::mt19937 rng(10);
  std::uniform_int_distribution<int> byte(0, 255);
  // Small products (one per worker at a time) and large ones (each split); b broadcast over a's first dim.
  for (auto [M, K, N] : {std::tuple<int64_t, int64_t, int64_t>{31, 64, 33}, {70, 96, 40}}) {
    CAPTURE(M);
    Tensor a = Tensor::empty(DType::u(8), {3, 4, M, K}), b = Tensor::empty(DType::i(8), {4, K, N});
    for (int64_t i = 0; i < a.numel(); ++i) static_cast<uint8_t*>(a.data())[i] = uint8_t(byte(rng));
    for (int64_t i = 0; i < b.numel(); ++i) static_cast<int8_t*>(b.data())[i] = int8_t(byte(rng) - 128);
    Tensor za = Tensor::empty(DType::u(8), {}), zb = Tensor::empty(DType::i(8), {N});
    *static_cast<uint8_t*>(za.data()) = 131;
    for (int64_t j = 0; j < N; ++j) static_cast<int8_t*>(zb.data())[j] = int8_t(byte(rng) - 128);
    const auto* ad = static_cast<const uint8_t*>(a.data());
    const auto* bd = static_cast<const int8_t*>(b.data());
    const auto* zbd = static_cast<const int8_t*>(zb.data());
    std::vector<int32_t> want(size_t(12 * M * N));
    for (int64_t p = 0; p < 12; ++p)
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          int64_t acc = 0;
          for (int64_t k = 0; k < K; ++k)
            acc += (int64_t(ad[(p * M + i) * K + k]) - 131) * (int64_t(bd[((p % 4) * K + k) * N + j]) - zbd[j]);
          want[size_t((p * M + i) * N + j)] = int32_t(acc);
        }
    for (int threads : {1, 2}) {
      CAPTURE(threads);
      ThreadPool::set_global_num_threads(threads);
      Tensor out = Tensor::empty(DType::i32(), {3, 4, M, N});
      call("gemm.qmatmul", {Value(a), Value(b), Value(za), Value(zb), Value(out)});
      const auto* got = static_cast<const int32_t*>(out.data());
      CHECK(std::vector<int32_t>(got, got + out.numel()) == want);
    }
  }
  ThreadPool::set_global_num_threads(0);
}

// x given as its parts along the channels (passes/fuse_concat_into_conv.cc:
// a concat read in place): bitwise the call on x whole, padded (3x3) and
// not (1x1), with an epilogue, on each ISA at one and two threads; and
// parts that do not make an x refused by name.
TEST_CASE("gemm.conv2d_packed reads x in parts along its channels") {
  std::mt19937 rng(7);
  Tensor x = random_tensor(rng, {2, 16, 7, 9});
  // Parts of 5, 0 and 11 channels: x's planes, image by image.
  std::vector<Tensor> parts;
  for (auto [c0, c1] : {std::pair<int64_t, int64_t>{0, 5}, {5, 5}, {5, 16}}) {
    Tensor t = Tensor::empty(DType::f32(), {2, c1 - c0, 7, 9});
    for (int64_t n = 0; n < 2; ++n)
      std::memcpy(static_cast<float*>(t.data()) + n * (c1 - c0) * 63,
                  static_cast<const float*>(x.data()) + (n * 16 + c0) * 63, size_t((c1 - c0) * 63) * sizeof(float));
    parts.push_back(t);
  }
  const Value x_parts(make_tuple({Value(parts[0]), Value(parts[1]), Value(parts[2])}));
  Tensor b = random_tensor(rng, {24});
  for (int64_t k : {3, 1}) {
    CAPTURE(k);
    Tensor w = random_tensor(rng, {24, 16, k, k});
    Tensor packed = Tensor::empty(DType::f32(), {conv2d_packed_size(24, 1, 16 * k * k)});
    call("gemm.conv2d_pack", {Value(w), shape_value({1, 0}), Value(packed)});
    const std::vector<int64_t> p =
        with_epilogue({1, 1, k / 2, k / 2, 1, 1, 1, k, k, 0}, 1, 0.0f, std::numeric_limits<float>::infinity());
    each_isa_at_1_and_2_threads([&] {
      Tensor whole = Tensor::empty(DType::f32(), {2, 24, 7, 9}), split = Tensor::empty(DType::f32(), {2, 24, 7, 9});
      call("gemm.conv2d_packed", {Value(x), Value(packed), shape_value(p), Value(b), Value(whole)});
      call("gemm.conv2d_packed", {x_parts, Value(packed), shape_value(p), Value(b), Value(split)});
      CHECK(std::memcmp(whole.data(), split.data(), whole.nbytes()) == 0);
    });
    REQUIRE(set_kernel_isa(""));
  }
  // Refused: parts of other heights, of another rank or type, none at all; channels that do not make the
  // weights' 16; parts for the im2col layout.
  Tensor w = random_tensor(rng, {24, 16, 3, 3});
  Tensor packed = Tensor::empty(DType::f32(), {conv2d_packed_size(24, 1, 144)});
  call("gemm.conv2d_pack", {Value(w), shape_value({1, 0}), Value(packed)});
  Tensor y = Tensor::empty(DType::f32(), {2, 24, 7, 9});
  const Value p = shape_value({1, 1, 1, 1, 1, 1, 1, 3, 3, 0});
  auto refused = [&](std::vector<Value> fields, const Value& params) {
    return call("gemm.conv2d_packed", {Value(make_tuple(std::move(fields))), Value(packed), params, Value(y)});
  };
  Tensor low = random_tensor(rng, {2, 11, 6, 9}), flat = random_tensor(rng, {2, 11, 63}),
         ints = Tensor::empty(DType::i32(), {2, 11, 7, 9}), four = random_tensor(rng, {2, 4, 7, 9});
  CHECK_THROWS_WITH_AS(refused({Value(parts[0]), Value(low)}, p),
                       doctest::Contains("must agree but in dim 1, got f32[2, 11, 6, 9]"), Error);
  CHECK_THROWS_WITH_AS(refused({Value(parts[0]), Value(flat)}, p), doctest::Contains("f32 tensors of rank 4"), Error);
  CHECK_THROWS_WITH_AS(refused({Value(parts[0]), Value(ints)}, p), doctest::Contains("f32 tensors of rank 4"), Error);
  CHECK_THROWS_WITH_AS(refused({}, p), doctest::Contains("no parts"), Error);
  CHECK_THROWS_WITH_AS(refused({Value(parts[0]), Value(four)}, p), doctest::Contains("the packed weights must hold"),
                       Error);
  CHECK_THROWS_WITH_AS(refused({Value(parts[0]), Value(parts[2])}, shape_value({1, 1, 1, 1, 1, 1, 1, 3, 3, 1})),
                       doctest::Contains("x in parts needs layout 0"), Error);
}
