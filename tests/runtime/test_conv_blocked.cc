// gemm.conv2d_packed in the blocked channel layout (layout 4,
// runtime/conv_blocked.h): dense and depthwise convolutions of every shape
// the tiles take (a product across rows, padded 3x3, strided, dilated, 5x5,
// channel counts that are not multiples of 16, an odd number of output
// blocks, a plain x) against a plain NCHW convolution in double, each ISA bitwise
// equal to the plain loops at one and two threads; the epilogue (biases,
// residual, clamp, hardswish) on the blocked output; the refusals.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "runtime/conv_blocked.h"
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

namespace {

struct Layer {
  int64_t N, C, H, W, O, KH, KW, s, pad, d, groups;
  bool plain_x = false;  // x (N, C, H, W) as it is
  int64_t pad_end = -1;  // the padding after (-1: pad)
};

// x (N, C, H, W) as (N, C / 16, H, W, 16), zeros past C.
Tensor blocked(const Tensor& x) {
  const auto& s = x.shape();
  const int64_t Cb = channel_blocks(s[1]), plane = s[2] * s[3];
  Tensor out = Tensor::empty(DType::f32(), {s[0], Cb, s[2], s[3], kChannelBlock});
  float* o = static_cast<float*>(out.data());
  std::memset(o, 0, out.nbytes());
  const float* xd = static_cast<const float*>(x.data());
  for (int64_t n = 0; n < s[0]; ++n)
    for (int64_t c = 0; c < s[1]; ++c)
      for (int64_t p = 0; p < plane; ++p)
        o[((n * Cb + c / 16) * plane + p) * 16 + c % 16] = xd[(n * s[1] + c) * plane + p];
  return out;
}

float at_blocked(const Tensor& y, int64_t n, int64_t o, int64_t p) {
  const auto& s = y.shape();
  return static_cast<const float*>(y.data())[((n * s[1] + o / 16) * s[2] * s[3] + p) * 16 + o % 16];
}

std::vector<int64_t> params(const Layer& l, int64_t groups_padded) {
  return {l.s, l.s, l.pad, l.pad, l.d, l.d, groups_padded, l.KH, l.KW, 4};
}

int64_t out_size(int64_t in, int64_t k, const Layer& l) {
  return (in + l.pad + (l.pad_end < 0 ? l.pad : l.pad_end) - l.d * (k - 1) - 1) / l.s + 1;
}

}  // namespace

TEST_CASE("gemm.conv2d_packed layout 4: blocked convolutions, dense and depthwise, on every ISA") {
  std::mt19937 rng(11);
  // A 1x1 product over 7x7 with 40 -> 72 channels (5 output blocks: a pair
  // tile and a single); 3x3 padded over 14x13, two images; 3x3 stride 2;
  // 1x1 stride 2 (ResNet's downsampling); 3x3 dilation 2; a 1x1 plane;
  // depthwise 3x3 pad 1 over 20 channels, 5x5 stride 2, 3x3 stride 3 (no
  // tiles), and one whose padding leaves rows without taps.
  const Layer layers[] = {{1, 40, 7, 7, 72, 1, 1, 1, 0, 1, 1},     {2, 16, 14, 13, 32, 3, 3, 1, 1, 1, 1},
                          {1, 24, 15, 15, 48, 3, 3, 2, 1, 1, 1},   {1, 32, 14, 14, 64, 1, 1, 2, 0, 1, 1},
                          {1, 16, 12, 12, 16, 3, 3, 1, 2, 2, 1},   {2, 64, 1, 1, 40, 1, 1, 1, 0, 1, 1},
                          {2, 20, 9, 11, 20, 3, 3, 1, 1, 1, 20},   {1, 48, 28, 28, 48, 5, 5, 2, 2, 1, 48},
                          {1, 32, 10, 10, 32, 3, 3, 3, 1, 1, 32},  {1, 16, 2, 2, 16, 3, 3, 1, 2, 1, 16},
                          // From a plain x: a stem (3 channels, 3x3 stride 2), a product over 20 channels (a
                          // second, partial input block), a 3x3 stride 3 (tiles of one position).
                          {1, 3, 15, 17, 32, 3, 3, 2, 1, 1, 1, true},   {2, 20, 6, 6, 40, 1, 1, 1, 0, 1, 1, true},
                          {1, 5, 10, 11, 16, 3, 3, 3, 1, 1, 1, true},
                          // Padding at the ends only (TensorFlow's "same" at stride 2): dense blocked, dense
                          // from a plain x, depthwise.
                          {1, 24, 10, 12, 40, 3, 3, 2, 0, 1, 1, false, 1}, {1, 4, 10, 12, 24, 3, 3, 2, 0, 1, 1, true, 1},
                          {1, 72, 10, 12, 72, 3, 3, 2, 0, 1, 72, false, 1}};
  for (const Layer& l : layers) {
    CAPTURE(l.C);
    CAPTURE(l.O);
    CAPTURE(l.KH);
    CAPTURE(l.s);
    CAPTURE(l.groups);
    const int64_t Cg = l.C / l.groups, OH = out_size(l.H, l.KH, l), OW = out_size(l.W, l.KW, l);
    const int64_t Cp = channel_blocks(l.C) * 16, Op = channel_blocks(l.O) * 16;
    Tensor x = random_tensor(rng, {l.N, l.C, l.H, l.W}), w = random_tensor(rng, {l.O, Cg, l.KH, l.KW});
    Tensor bias = random_tensor(rng, {Op}), r = random_tensor(rng, {l.N, Op / 16, OH, OW, 16});
    CAPTURE(l.plain_x);
    Tensor xb = l.plain_x ? x : blocked(x);
    const int64_t size = conv2d_blocked_packed_size(l.O, Cg, l.groups, l.KH, l.KW);
    REQUIRE(size > 0);
    Tensor packed = Tensor::empty(DType::f32(), {size});
    call("gemm.conv2d_pack", {Value(w), shape_value({l.groups, 4}), Value(packed)});
    const std::vector<int64_t> p = params(l, l.groups == 1 ? 1 : Cp);
    // The plain loops (portable, one thread): the reference every ISA matches bitwise.
    REQUIRE(set_kernel_isa("portable"));
    ThreadPool::set_global_num_threads(1);
    Tensor ref = Tensor::empty(DType::f32(), {l.N, Op / 16, OH, OW, 16});
    call("gemm.conv2d_packed", {Value(xb), Value(packed), shape_value(p), Value(ref)});
    // Against the convolution in double; padded lanes zero.
    const float *xd = static_cast<const float*>(x.data()), *wd = static_cast<const float*>(w.data());
    double worst = 0.0;
    for (int64_t n = 0; n < l.N; ++n)
      for (int64_t o = 0; o < Op; ++o)
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow) {
            double s = 0.0;
            if (o < l.O)
              for (int64_t c = 0; c < Cg; ++c)
                for (int64_t kh = 0; kh < l.KH; ++kh)
                  for (int64_t kw = 0; kw < l.KW; ++kw) {
                    const int64_t ih = oh * l.s - l.pad + kh * l.d, iw = ow * l.s - l.pad + kw * l.d;
                    if (ih < 0 || ih >= l.H || iw < 0 || iw >= l.W) continue;
                    const int64_t ci = l.groups == 1 ? c : o;
                    s += double(xd[((n * l.C + ci) * l.H + ih) * l.W + iw]) *
                         double(wd[((o * Cg + c) * l.KH + kh) * l.KW + kw]);
                  }
            worst = std::max(worst, std::fabs(s - double(at_blocked(ref, n, o, oh * OW + ow))));
          }
    CHECK(worst < 1e-4 * double(Cg * l.KH * l.KW));
    // The epilogue: bias, residual, clamp [-0.5, 0.75]; and bias, hardswish.
    auto bits = [](float f) {
      uint32_t u;
      std::memcpy(&u, &f, sizeof u);
      return int64_t(u);
    };
    std::vector<int64_t> clamp = p, hswish = p;
    for (int64_t v : {int64_t(1 | 4), bits(-0.5f), bits(0.75f), bits(1.0f), bits(0.0f), bits(1.0f)}) clamp.push_back(v);
    for (int64_t v : {int64_t(1 | 8192), bits(0.0f), bits(1.0f), bits(1.0f / 6), bits(0.5f), bits(1.0f)})
      hswish.push_back(v);
    const float* rd = static_cast<const float*>(ref.data());
    const float *bd = static_cast<const float*>(bias.data()), *res = static_cast<const float*>(r.data());
    each_isa_at_1_and_2_threads([&] {
      Tensor y = Tensor::empty(DType::f32(), ref.shape()), y1 = Tensor::empty(DType::f32(), ref.shape()),
             y2 = Tensor::empty(DType::f32(), ref.shape());
      call("gemm.conv2d_packed", {Value(xb), Value(packed), shape_value(p), Value(y)});
      CHECK(std::memcmp(y.data(), ref.data(), ref.nbytes()) == 0);
      call("gemm.conv2d_packed", {Value(xb), Value(packed), shape_value(clamp), Value(bias), Value(r), Value(y1)});
      call("gemm.conv2d_packed", {Value(xb), Value(packed), shape_value(hswish), Value(bias), Value(y2)});
      const float *e1 = static_cast<const float*>(y1.data()), *e2 = static_cast<const float*>(y2.data());
      int64_t wrong = 0;
      for (int64_t i = 0; i < ref.numel(); ++i) {
        const float b = bd[i / (OH * OW * 16) % (Op / 16) * 16 + i % 16];
        const float v1 = std::min(std::max(rd[i] + b + res[i], -0.5f), 0.75f);
        const float s = rd[i] + b, v2 = s * std::min(std::max(s * (1.0f / 6) + 0.5f, 0.0f), 1.0f);
        wrong += e1[i] != v1 || std::fabs(e2[i] - v2) > 1e-6f * std::max(1.0f, std::fabs(v2));
      }
      CHECK(wrong == 0);
    });
  }
}

TEST_CASE("gemm.conv2d_packed layout 4 refuses operands that do not fit") {
  std::mt19937 rng(3);
  Tensor w = random_tensor(rng, {32, 16, 3, 3});
  Tensor packed = Tensor::empty(DType::f32(), {conv2d_blocked_packed_size(32, 16, 1, 3, 3)});
  call("gemm.conv2d_pack", {Value(w), shape_value({1, 4}), Value(packed)});
  // Grouped (not depthwise) weights have no blocked packing.
  Tensor wg = random_tensor(rng, {32, 8, 3, 3}), pg = Tensor::empty(DType::f32(), {100});
  CHECK_THROWS_WITH_AS(call("gemm.conv2d_pack", {Value(wg), shape_value({2, 4}), Value(pg)}),
                       doctest::Contains("layout 4 needs groups 1"), Error);
  const std::vector<int64_t> p = {1, 1, 1, 1, 1, 1, 1, 3, 3, 4};
  // x of rank 3, and x with the wrong number of blocks.
  Tensor x3 = random_tensor(rng, {16, 8, 8}), y = Tensor::empty(DType::f32(), {1, 2, 8, 8, 16});
  CHECK_THROWS_WITH_AS(call("gemm.conv2d_packed", {Value(x3), Value(packed), shape_value(p), Value(y)}),
                       doctest::Contains("layout 4 needs x f32 of rank 5 (or 4: plain)"), Error);
  Tensor x2 = random_tensor(rng, {1, 2, 8, 8, 16});
  CHECK_THROWS_WITH_AS(call("gemm.conv2d_packed", {Value(x2), Value(packed), shape_value(p), Value(y)}),
                       doctest::Contains("packed weights must hold"), Error);
}
