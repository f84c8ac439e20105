// The direct convolution (runtime/conv_direct.h) against a double-precision
// loop nest: strides, dilations, asymmetric padding (an output narrower
// than the padded input allows), groups, channel counts that leave a
// partial block of 16 (or of 8: the narrow layers' tile), outputs whose
// positions leave a partial tile,
// one thread and a pool; and that equal windows give bitwise equal results
// wherever they sit, padding included. The i32 form (and its plain loops)
// exactly, overflowing sums wrapping. From weights packed once (what a
// build folds), vector and plain forms, bitwise equal to the above. The
// depthwise kernel against the
// same loop nest, its vector and plain forms bitwise equal, and so the
// channels-in-lanes depthwise kernel from packed weights. x in parts
// along its channels (a concat read in place) bitwise as x whole. A fused
// epilogue (biases, residual, clamps) bitwise as its formula says.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "runtime/conv_direct.h"
#include "runtime/epilogue.h"
#include "runtime/cpu_isa.h"
#include "runtime/thread_pool.h"

namespace relax::rt {
namespace {

std::vector<float> reference(const Conv2dGeometry& g, const std::vector<float>& x, const std::vector<float>& w) {
  int64_t Cg = g.C / g.groups, Og = g.O / g.groups;
  std::vector<float> y(size_t(g.N * g.O * g.OH * g.OW));
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t o = 0; o < g.O; ++o)
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          double acc = 0;
          int64_t gi = o / Og;
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t kh = 0; kh < g.KH; ++kh)
              for (int64_t kw = 0; kw < g.KW; ++kw) {
                int64_t ih = oh * g.sh + kh * g.dh - g.ph, iw = ow * g.sw + kw * g.dw - g.pw;
                if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
                acc += double(x[size_t(((n * g.C + gi * Cg + c) * g.H + ih) * g.W + iw)]) *
                       double(w[size_t(((o * Cg + c) * g.KH + kh) * g.KW + kw)]);
              }
          y[size_t(((n * g.O + o) * g.OH + oh) * g.OW + ow)] = float(acc);
        }
  return y;
}

// g with its outputs as ONNX computes them, the pads (ph, pw) at the start
// and 0 or the same at the end (odd pads: the same), to vary the end too.
Conv2dGeometry with_outputs(Conv2dGeometry g) {
  int64_t eh = g.ph % 2, ew = g.pw % 2;
  g.OH = (g.H + g.ph + eh - (g.KH - 1) * g.dh - 1) / g.sh + 1;
  g.OW = (g.W + g.pw + ew - (g.KW - 1) * g.dw - 1) / g.sw + 1;
  return g;
}

std::vector<float> random_floats(std::mt19937& rng, int64_t n) {
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& e : v) e = d(rng);
  return v;
}

TEST_CASE("conv2d_direct_f32 matches a double-precision loop nest") {
  if (!conv2d_direct_available()) return;  // no AVX2: the runtime uses im2col instead
  std::mt19937 rng(11);
  ThreadPool pool(2);
  //                    N  C   H   W   O  KH KW  sh sw ph pw dh dw groups (OH, OW from pad_end = 0 or ph)
  std::vector<Conv2dGeometry> cases = {
      {1, 3, 7, 9, 16, 3, 3, 0, 0, 1, 1, 1, 1, 1, 1, 1},
      {2, 5, 12, 10, 20, 3, 3, 0, 0, 2, 2, 1, 1, 1, 1, 1},
      {1, 4, 9, 11, 8, 5, 3, 0, 0, 1, 2, 2, 1, 2, 1, 1},
      {3, 8, 6, 6, 24, 3, 3, 0, 0, 1, 1, 1, 1, 1, 1, 2},
      {1, 2, 2, 2, 16, 3, 3, 0, 0, 1, 1, 1, 1, 1, 1, 1},
      {1, 6, 15, 4, 33, 7, 1, 0, 0, 3, 1, 3, 0, 1, 1, 3},
      {2, 16, 13, 13, 40, 3, 3, 0, 0, 2, 2, 0, 0, 1, 1, 1},
      {1, 3, 20, 17, 9, 4, 4, 0, 0, 2, 3, 1, 2, 1, 1, 1},
      // At most 8 outputs per group: the 8-channel tile (6 of its 8 lanes here; 8 positions a tile).
      {2, 6, 10, 13, 12, 3, 3, 0, 0, 1, 2, 1, 1, 2, 1, 2},
      // AVX-512's row tiles: rows of 30 in three parts of 10, three blocks (a pair and one), stride 2
      // rows of 15 (8 + 7), two rows of 7 per tile and an odd last row, dilation 2, stride 3 (the
      // 6-position tile).
      {1, 5, 32, 32, 40, 3, 3, 0, 0, 1, 1, 1, 1, 1, 1, 1},
      {1, 7, 30, 30, 48, 3, 3, 0, 0, 2, 2, 1, 1, 1, 1, 1},
      {2, 9, 7, 7, 32, 3, 3, 0, 0, 1, 1, 1, 1, 1, 1, 1},
      {1, 4, 19, 24, 17, 3, 3, 0, 0, 1, 1, 2, 2, 2, 2, 1},
      {1, 3, 23, 23, 16, 5, 5, 0, 0, 3, 3, 2, 2, 1, 1, 1},
      // AVX-512's lane tiles (at most 8 channels per group, column stride 1): a row of 40 (three vectors,
      // the last masked), rows of 66 in two parts with row stride 2 and dilation 2, rows of 5.
      {1, 5, 9, 40, 8, 3, 3, 0, 0, 1, 1, 1, 1, 1, 1, 1},
      {2, 6, 9, 70, 12, 3, 3, 0, 0, 2, 1, 1, 0, 1, 2, 2},
      {1, 3, 5, 5, 4, 3, 3, 0, 0, 1, 1, 1, 1, 1, 1, 1},
      // ... at column stride 2 (two loads and a permute a vector): a stem's 3 channels of 32 x 32 onto 8,
      // rows of 36 (three vectors, the last of 4 positions), dilation 2.
      {1, 3, 32, 32, 8, 3, 3, 0, 0, 2, 2, 1, 1, 1, 1, 1},
      {2, 4, 9, 71, 6, 3, 3, 0, 0, 2, 2, 1, 1, 1, 1, 1},
      {1, 5, 12, 40, 8, 3, 3, 0, 0, 1, 2, 1, 1, 2, 2, 1},
      // Block tiles (fewer than 8 positions per image): a 1x1 plane by 3 blocks; 3 images of 2x2 (12
      // positions in 3 tiles) by 9 blocks; 5 images of 1x1 (tiles of 3 and 2) by 19 blocks, the last
      // partial; a strided 3x3 with padding onto 2x2 by 9 blocks; 2x3 planes in 2 groups of 20.
      {1, 288, 1, 1, 48, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 1},
      {3, 24, 2, 2, 144, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 1},
      {5, 17, 1, 1, 300, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 1},
      {1, 64, 3, 3, 130, 3, 3, 0, 0, 2, 2, 1, 1, 1, 1, 1},
      {2, 20, 2, 3, 40, 3, 3, 0, 0, 1, 1, 1, 1, 1, 1, 2},
      // The padded copy: rows of 152 (10 vectors, past the 8 whose masks are reckoned once); a copy of
      // 16 x 66 x 66, split over the pool; a strided 1x1 kernel (no padding: no copy).
      {1, 2, 3, 150, 16, 3, 3, 0, 0, 1, 1, 1, 1, 1, 1, 1},
      {1, 16, 64, 64, 16, 3, 3, 0, 0, 1, 1, 1, 1, 1, 1, 1},
      {2, 16, 12, 10, 16, 1, 1, 0, 0, 2, 2, 0, 0, 1, 1, 1},
  };
  for (Conv2dGeometry g : cases) {
    g = with_outputs(g);
    std::vector<float> x = random_floats(rng, g.N * g.C * g.H * g.W),
                       w = random_floats(rng, g.O * (g.C / g.groups) * g.KH * g.KW);
    std::vector<float> want = reference(g, x, w);
    // The weights packed once, as a build folds them.
    int64_t K = g.C / g.groups * g.KH * g.KW;
    std::vector<float> packed(size_t(conv2d_packed_size(g.O, g.groups, K)), 5.0f);
    conv2d_pack_weights_f32(w.data(), g.O, g.groups, K, packed.data(), &pool);
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
      std::vector<float> y(want.size(), 7.0f), scratch;
      conv2d_direct_f32(g, x.data(), w.data(), y.data(), scratch, p);
      double worst = 0;
      for (size_t i = 0; i < y.size(); ++i) worst = std::max(worst, double(std::abs(y[i] - want[i])));
      CAPTURE(g.C);
      CAPTURE(g.O);
      CAPTURE(g.OH);
      CAPTURE(g.OW);
      CHECK(worst < 1e-4);
      // From the packed weights, vector and plain: the same sums, bitwise.
      for (bool vector : {true, false}) {
        CAPTURE(vector);
        std::vector<float> yp(want.size(), 7.0f);
        conv2d_direct_packed_f32(g, x.data(), packed.data(), yp.data(), scratch, p, vector);
        CHECK(std::memcmp(yp.data(), y.data(), y.size() * sizeof(float)) == 0);
      }
      // Each vector ISA this CPU runs (AVX-512's row tiles, AVX2's tiles): bitwise the same.
      for (KernelIsa isa : {KernelIsa::avx512, KernelIsa::avx2}) {
        if (!cpu_runs(isa)) continue;
        CAPTURE(kernel_isa_name(isa));
        REQUIRE(set_kernel_isa(kernel_isa_name(isa)));
        std::vector<float> yp(want.size(), 7.0f), yr(want.size(), 7.0f);
        conv2d_direct_packed_f32(g, x.data(), packed.data(), yp.data(), scratch, p);
        conv2d_direct_f32(g, x.data(), w.data(), yr.data(), scratch, p);
        CHECK(std::memcmp(yp.data(), y.data(), y.size() * sizeof(float)) == 0);
        CHECK(std::memcmp(yr.data(), y.data(), y.size() * sizeof(float)) == 0);
      }
      REQUIRE(set_kernel_isa(""));
      // x as parts along its channels (a concat the convolution reads in
      // place): the first channel, none, the rest; bitwise the same sums,
      // padded or not, vector and plain, each ISA.
      if (g.C > 1) {
        ChannelParts parts;
        std::vector<std::vector<float>> held;
        for (auto [c0, c1] : {std::pair<int64_t, int64_t>{0, 1}, {1, 1}, {1, g.C}}) {
          std::vector<float> part;
          for (int64_t n = 0; n < g.N; ++n)
            part.insert(part.end(), x.begin() + (n * g.C + c0) * g.H * g.W, x.begin() + (n * g.C + c1) * g.H * g.W);
          held.push_back(std::move(part));
          parts.channels.push_back(c1 - c0);
        }
        for (const std::vector<float>& part : held) parts.data.push_back(part.data());
        std::vector<float> whole(x.size(), 3.0f);
        gather_channel_parts(g, parts, 1, g.N * g.C, whole.data() + g.H * g.W);
        gather_channel_parts(g, parts, 0, 1, whole.data());
        CHECK(whole == x);
        for (bool vector : {true, false}) {
          CAPTURE(vector);
          std::vector<float> yp(want.size(), 7.0f);
          conv2d_direct_packed_parts_f32(g, parts, packed.data(), yp.data(), scratch, p, vector);
          CHECK(std::memcmp(yp.data(), y.data(), y.size() * sizeof(float)) == 0);
        }
        for (KernelIsa isa : {KernelIsa::avx512, KernelIsa::avx2}) {
          if (!cpu_runs(isa)) continue;
          CAPTURE(kernel_isa_name(isa));
          REQUIRE(set_kernel_isa(kernel_isa_name(isa)));
          std::vector<float> yp(want.size(), 7.0f);
          conv2d_direct_packed_parts_f32(g, parts, packed.data(), yp.data(), scratch, p);
          CHECK(std::memcmp(yp.data(), y.data(), y.size() * sizeof(float)) == 0);
        }
        REQUIRE(set_kernel_isa(""));
      }
      // An epilogue (two biases, a residual, both clamps) over the sums, as
      // gemm.conv2d_packed applies one fused into it: bitwise the formula.
      const int64_t P = g.OH * g.OW;
      std::vector<float> b0 = random_floats(rng, g.O), b1 = random_floats(rng, g.O),
                         res = random_floats(rng, int64_t(y.size())), want_ep(y.size());
      Epilogue ep;
      ep.bias[0] = b0.data(), ep.bias[1] = b1.data(), ep.residual = res.data(), ep.lo = -0.5f, ep.hi = 0.7f;
      for (size_t i = 0; i < y.size(); ++i) {
        size_t o = i / size_t(P) % size_t(g.O);
        want_ep[i] = std::min(std::max(y[i] + (b0[o] + b1[o]) + res[i], -0.5f), 0.7f);
      }
      for (KernelIsa isa : {KernelIsa::avx512, KernelIsa::avx2}) {
        if (!cpu_runs(isa)) continue;
        REQUIRE(set_kernel_isa(kernel_isa_name(isa)));
        CAPTURE(kernel_isa_name(isa));
        std::vector<float> yp = y;
        ep.apply_all(yp.data(), g.N, g.O, P, p);
        CHECK(std::memcmp(yp.data(), want_ep.data(), y.size() * sizeof(float)) == 0);
      }
      REQUIRE(set_kernel_isa(""));
    }
  }
}

TEST_CASE("conv2d_direct_f32: equal windows give bitwise equal results") {
  if (!conv2d_direct_available()) return;
  // A constant image: every output whose window lies inside it is the
  // same sum, whichever tile or lane computes it.
  Conv2dGeometry g{1, 5, 11, 14, 19, 3, 3, 0, 0, 1, 1, 1, 1, 1, 1, 1};
  g.OH = g.H, g.OW = g.W;
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> x(size_t(g.C * g.H * g.W), 0.3f), w(size_t(g.O * g.C * 9)), y(size_t(g.O * g.H * g.W)), scratch;
  for (float& v : w) v = d(rng);
  conv2d_direct_f32(g, x.data(), w.data(), y.data(), scratch, nullptr);
  for (int64_t o = 0; o < g.O; ++o)
    for (int64_t h = 1; h + 1 < g.H; ++h)
      for (int64_t c = 1; c + 1 < g.W; ++c)
        CHECK(y[size_t((o * g.H + h) * g.W + c)] == y[size_t((o * g.H + 1) * g.W + 1)]);
}

TEST_CASE("conv2d_direct_i32 and its plain loops: exact, wrapping as i32 arithmetic does") {
  std::mt19937 rng(7);
  ThreadPool pool(2);
  std::vector<Conv2dGeometry> cases = {
      {2, 8, 9, 7, 8, 3, 3, 0, 0, 1, 1, 1, 1, 1, 1, 1},
      {1, 6, 10, 11, 20, 3, 2, 0, 0, 2, 1, 1, 0, 1, 2, 2},
      {1, 4, 1, 13, 9, 1, 3, 0, 0, 1, 1, 0, 1, 1, 1, 1},  // a 1-D convolution as height 1
  };
  for (Conv2dGeometry g : cases) {
    g.OH = (g.H + 2 * g.ph - (g.KH - 1) * g.dh - 1) / g.sh + 1;
    g.OW = (g.W + 2 * g.pw - (g.KW - 1) * g.dw - 1) / g.sw + 1;
    for (bool huge : {false, true}) {  // u8-sized operands, then ones whose sums wrap
      std::uniform_int_distribution<int32_t> d(huge ? -2000000000 : -255, huge ? 2000000000 : 255);
      std::vector<int32_t> x(size_t(g.N * g.C * g.H * g.W)), w(size_t(g.O * (g.C / g.groups) * g.KH * g.KW));
      for (int32_t& v : x) v = d(rng);
      for (int32_t& v : w) v = d(rng);
      int64_t Cg = g.C / g.groups, Og = g.O / g.groups;
      std::vector<int32_t> want(size_t(g.N * g.O * g.OH * g.OW));
      for (int64_t n = 0; n < g.N; ++n)
        for (int64_t o = 0; o < g.O; ++o)
          for (int64_t oh = 0; oh < g.OH; ++oh)
            for (int64_t ow = 0; ow < g.OW; ++ow) {
              uint32_t acc = 0;
              for (int64_t c = 0; c < Cg; ++c)
                for (int64_t kh = 0; kh < g.KH; ++kh)
                  for (int64_t kw = 0; kw < g.KW; ++kw) {
                    int64_t ih = oh * g.sh + kh * g.dh - g.ph, iw = ow * g.sw + kw * g.dw - g.pw;
                    if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
                    acc += uint32_t(x[size_t(((n * g.C + o / Og * Cg + c) * g.H + ih) * g.W + iw)]) *
                           uint32_t(w[size_t(((o * Cg + c) * g.KH + kh) * g.KW + kw)]);
                  }
              want[size_t(((n * g.O + o) * g.OH + oh) * g.OW + ow)] = int32_t(acc);
            }
      for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
        std::vector<int32_t> y(want.size(), 7), loops(want.size(), 7), scratch;
        conv2d_direct_i32(g, x.data(), w.data(), y.data(), scratch, p);
        conv2d_loops_i32(g, x.data(), w.data(), loops.data(), p);
        CAPTURE(g.O);
        CAPTURE(huge);
        CHECK(y == want);
        CHECK(loops == want);
      }
    }
  }
}

TEST_CASE("conv2d_depthwise_f32 matches a double-precision loop nest; vector and plain loops agree bitwise") {
  std::mt19937 rng(5);
  ThreadPool pool(2);
  //   N  C   H   W   O  KH KW  sh sw ph pw dh dw groups (OH, OW below); widths around 8 and 32 lanes
  std::vector<Conv2dGeometry> cases = {
      {1, 3, 7, 9, 3, 3, 3, 0, 0, 1, 1, 1, 1, 1, 1, 3},
      {2, 4, 12, 33, 4, 3, 3, 0, 0, 2, 2, 1, 1, 1, 1, 4},
      {1, 2, 9, 40, 4, 5, 5, 0, 0, 1, 1, 2, 2, 1, 1, 2},
      {1, 5, 6, 17, 5, 3, 3, 0, 0, 3, 3, 1, 1, 2, 2, 5},
      {1, 1, 30, 64, 1, 3, 3, 0, 0, 1, 1, 1, 1, 1, 1, 1},
      {3, 2, 5, 8, 6, 1, 7, 0, 0, 1, 2, 0, 3, 1, 1, 2},
      {1, 6, 1, 50, 6, 1, 5, 0, 0, 1, 1, 0, 2, 1, 2, 6},
      {1, 1, 1, 1, 1, 3, 3, 0, 0, 1, 1, 1, 1, 1, 1, 1},
      {1, 4, 16, 16, 12, 3, 3, 0, 0, 2, 2, 0, 0, 1, 1, 4},
      // Small planes (at most 64 outputs: the channels-in-lanes kernel below): 8x8 = 64 at stride 2, 5x5 taps
      // onto 4x4 with two outputs per channel, a 2x2 plane under 5x5 taps mostly in the padding, a 1x1
      // output, 7x9 = 63 with dilation 2, three images.
      {1, 3, 16, 16, 3, 3, 3, 0, 0, 2, 2, 1, 1, 1, 1, 3},
      {2, 6, 8, 8, 12, 5, 5, 0, 0, 2, 2, 2, 2, 1, 1, 6},
      {1, 5, 2, 2, 5, 5, 5, 0, 0, 1, 1, 2, 2, 1, 1, 5},
      {1, 7, 2, 2, 7, 5, 5, 0, 0, 2, 2, 2, 2, 1, 1, 7},
      {3, 2, 9, 11, 2, 3, 3, 0, 0, 1, 1, 2, 2, 2, 2, 2},
      // Many channels (blocks of 16 at once, then one at a time, the last partial): 40 and 83; the
      // channels-last copies in 8 x 8 blocks and their edges (83 channels of 3 x 3; 48 of 16 x 16, three
      // images, as EfficientNet's stride-2 layers).
      {2, 40, 8, 8, 40, 5, 5, 0, 0, 2, 2, 2, 2, 1, 1, 40},
      {1, 83, 3, 3, 83, 3, 3, 0, 0, 1, 1, 1, 1, 1, 1, 83},
      {3, 48, 16, 16, 48, 3, 3, 0, 0, 2, 2, 1, 1, 1, 1, 48},
  };
  for (Conv2dGeometry g : cases) {
    g = with_outputs(g);
    std::vector<float> x = random_floats(rng, g.N * g.C * g.H * g.W), w = random_floats(rng, g.O * g.KH * g.KW);
    // Some zeros, negative and positive, times weights of both signs: a padded tap adds w * 0, whose
    // sign every form must get the same.
    for (size_t i = 0; i < x.size(); i += 5) x[i] = i % 2 ? -0.0f : 0.0f;
    std::vector<float> want = reference(g, x, w);
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
      std::vector<float> y(want.size() + 8, 7.0f), plain(want.size() + 8, 7.0f);
      conv2d_depthwise_f32(g, x.data(), w.data(), y.data(), p);
      conv2d_depthwise_f32(g, x.data(), w.data(), plain.data(), p, /*vector=*/false);
      double worst = 0;
      for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, double(std::abs(y[i] - want[i])));
      CAPTURE(g.C);
      CAPTURE(g.O);
      CAPTURE(g.OH);
      CAPTURE(g.OW);
      CHECK(worst < 1e-5);
      for (size_t i = want.size(); i < y.size(); ++i) CHECK(y[i] == 7.0f);  // nothing written past the end
      CHECK(std::memcmp(y.data(), plain.data(), y.size() * sizeof(float)) == 0);
      // Each vector ISA this CPU runs: bitwise the plain loops' sums.
      for (KernelIsa isa : {KernelIsa::avx512, KernelIsa::avx2}) {
        if (!cpu_runs(isa)) continue;
        CAPTURE(kernel_isa_name(isa));
        REQUIRE(set_kernel_isa(kernel_isa_name(isa)));
        std::vector<float> yi(want.size() + 8, 7.0f);
        conv2d_depthwise_f32(g, x.data(), w.data(), yi.data(), p);
        CHECK(std::memcmp(yi.data(), plain.data(), yi.size() * sizeof(float)) == 0);
      }
      REQUIRE(set_kernel_isa(""));
      // One output per channel: the channels-in-lanes kernel from packed weights, every ISA and the
      // plain loops, bitwise the same again.
      if (g.O == g.C) {
        const int64_t taps = g.KH * g.KW;
        std::vector<float> packed(size_t(conv2d_depthwise_packed_size(g.O, taps)), 5.0f), scratch;
        conv2d_depthwise_pack_f32(w.data(), g.O, taps, packed.data());
        for (const char* isa : {"avx512", "avx2", "plain"}) {
          bool vector = std::strcmp(isa, "plain") != 0;
          if (vector && !set_kernel_isa(isa)) continue;
          CAPTURE(isa);
          std::vector<float> yc(want.size() + 8, 7.0f);
          conv2d_depthwise_packed_f32(g, x.data(), packed.data(), yc.data(), scratch, p, vector);
          CHECK(std::memcmp(yc.data(), plain.data(), yc.size() * sizeof(float)) == 0);
        }
        REQUIRE(set_kernel_isa(""));
      }
    }
  }
}

}  // namespace
}  // namespace relax::rt
