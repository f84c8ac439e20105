// Convolution GFLOP/s of the runtime's library convolution (gemm.conv2d,
// runtime/conv_direct.h: what the cpu target's convolutions call) on the
// layers of a real CNN, each way it can run (its own choice, direct, im2col
// + its own GEMM, the blocked channel layout's kernel, runtime/conv_blocked.h,
// on the layer's tensors held blocked) beside im2col + OpenBLAS's cblas_sgemm, and this
// machine's FMA peak. "relax" and "direct" read weights packed once, as a
// package holds them (a build folds gemm.conv2d_pack); "im2col" packs its
// A on every call, as gemm.conv2d does. The
// default layers are torchvision ResNet-50's at
// 224x224, batch 1, each with how often the network runs it, so the last
// line is the network's convolution time each way.
//
//   build/bin/relax-bench-conv [--reps-ms 200] [--threads 1] [--cold]
//       [--layer C,H,W,O,K,stride,pad,count[,batch] ...]
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "bench/best_time.h"
#include "runtime/conv_blocked.h"
#include "runtime/conv_direct.h"
#include "runtime/cpu_peak.h"
#include "runtime/thread_pool.h"

using relax::rt::ConvMethod;
using relax::rt::Conv2dGeometry;
using relax::rt::ThreadPool;

namespace {

// With --cold, every timed call starts with the caches flushed (a pass
// over 64 MiB), as a layer deep in a network finds its weights.
bool cold = false;
void flush_caches() {
  if (!cold) return;
  static std::vector<char> junk(size_t(64) << 20);
  for (size_t i = 0; i < junk.size(); i += 64) junk[i] = char(junk[i] + 1);
}
double best_time(const std::function<void()>& f, double budget) { return relax::bench::best_time(f, budget, flush_caches); }

struct Layer {
  int64_t C, H, W, O, K, stride, pad, count, N = 1;
};

// torchvision ResNet-50, 224x224: the stem, then per stage the first
// block's (reduce, 3x3 with the stage's stride, expand, downsample) and
// the other blocks' (reduce, 3x3, expand) convolutions.
std::vector<Layer> resnet50() {
  std::vector<Layer> l = {{3, 224, 224, 64, 7, 2, 3, 1}};
  struct Stage {
    int64_t in, mid, out, size, stride, blocks;
  };
  for (Stage s : {Stage{64, 64, 256, 56, 1, 3}, Stage{256, 128, 512, 56, 2, 4}, Stage{512, 256, 1024, 28, 2, 6},
                  Stage{1024, 512, 2048, 14, 2, 3}}) {
    int64_t o = s.size / s.stride;
    l.push_back({s.in, s.size, s.size, s.mid, 1, 1, 0, 1});
    l.push_back({s.mid, s.size, s.size, s.mid, 3, s.stride, 1, 1});
    l.push_back({s.mid, o, o, s.out, 1, 1, 0, 1});
    l.push_back({s.in, s.size, s.size, s.out, 1, s.stride, 0, 1});
    l.push_back({s.out, o, o, s.mid, 1, 1, 0, s.blocks - 1});
    l.push_back({s.mid, o, o, s.mid, 3, 1, 1, s.blocks - 1});
    l.push_back({s.mid, o, o, s.out, 1, 1, 0, s.blocks - 1});
  }
  return l;
}

// Per image, im2col (zeros where the padding is) then cblas_sgemm.
void im2col_blas(const Conv2dGeometry& g, const float* x, const float* w, float* y, float* col) {
  const int64_t K = g.C * g.KH * g.KW, P = g.OH * g.OW;
  for (int64_t n = 0; n < g.N; ++n) {
    const float* xn = x + n * g.C * g.H * g.W;
    const float* b = xn;
    if (!relax::rt::conv2d_is_product(g)) {
      for (int64_t r = 0; r < K; ++r) {
        int64_t c = r / (g.KH * g.KW), kh = r / g.KW % g.KH, kw = r % g.KW;
        for (int64_t oh = 0; oh < g.OH; ++oh)
          for (int64_t ow = 0; ow < g.OW; ++ow) {
            int64_t ih = oh * g.sh + kh - g.ph, iw = ow * g.sw + kw - g.pw;
            col[r * P + oh * g.OW + ow] =
                ih < 0 || ih >= g.H || iw < 0 || iw >= g.W ? 0.0f : xn[(c * g.H + ih) * g.W + iw];
          }
      }
      b = col;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(g.O), int(P), int(K), 1.0f, w, int(K), b, int(P),
                0.0f, y + n * g.O * P, int(P));
  }
}

}  // namespace

int main(int argc, char** argv) {
  double budget = 0.2;
  int threads = 1;
  std::vector<Layer> layers;
  for (int i = 1; i < argc; ++i) {
    long long v[9] = {0, 0, 0, 0, 0, 0, 0, 0, 1};
    if (!std::strcmp(argv[i], "--reps-ms") && i + 1 < argc) {
      budget = std::atof(argv[++i]) / 1000;
    } else if (!std::strcmp(argv[i], "--cold")) {
      cold = true;
    } else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) {
      threads = std::max(1, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--layer") && i + 1 < argc &&
               std::sscanf(argv[i + 1], "%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld", &v[0], &v[1], &v[2], &v[3], &v[4],
                           &v[5], &v[6], &v[7], &v[8]) >= 8) {
      layers.push_back({v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], std::max(1LL, v[8])});
      ++i;
    } else {
      std::fprintf(stderr, "usage: %s [--reps-ms MS] [--threads N] [--cold] [--layer C,H,W,O,K,stride,pad,count[,batch]]...\n",
                   argv[0]);
      return 2;
    }
  }
  if (layers.empty()) layers = resnet50();
  const relax::rt::CpuPeak& cpu = relax::rt::measured_cpu_peak();
  std::printf("FMA peak, one core, measured: %.1f GFLOP/s (%s); %d thread(s)\n\n", cpu.fma_gflops, cpu.isa.c_str(),
              threads);
  ThreadPool::set_global_num_threads(threads);
  openblas_set_num_threads(threads);
  std::shared_ptr<ThreadPool> pool = ThreadPool::global();
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1, 1);
  const char* names[] = {"relax", "direct", "im2col", "im2col+BLAS", "blocked"};
  std::printf("%5s %4s %4s %5s %2s %2s %3s | GFLOP/s: %7s %7s %7s %11s %7s | ms x count: relax  best\n", "C", "H",
              "W", "O", "K", "s", "n", names[0], names[1], names[2], names[3], names[4]);
  double total[5] = {0, 0, 0, 0, 0}, best_total = 0;
  for (const Layer& l : layers) {
    int64_t OH = (l.H + 2 * l.pad - l.K) / l.stride + 1, OW = (l.W + 2 * l.pad - l.K) / l.stride + 1;
    Conv2dGeometry g{l.N, l.C, l.H, l.W, l.O, l.K, l.K, OH, OW, l.stride, l.stride, l.pad, l.pad, 1, 1, 1};
    std::vector<float> x(size_t(l.N * l.C * l.H * l.W)), w(size_t(l.O * l.C * l.K * l.K)),
        y(size_t(l.N * l.O * OH * OW)), col(size_t(l.C * l.K * l.K * OH * OW));
    for (float& v : x) v = dist(rng);
    for (float& v : w) v = dist(rng);
    double flops = 2.0 * double(l.N * l.O * OH * OW) * double(l.C * l.K * l.K);
    double t[5];
    const int64_t K = l.C * l.K * l.K;
    std::vector<float> packed(size_t(relax::rt::conv2d_packed_size(l.O, 1, K))), scratch;
    relax::rt::conv2d_pack_weights_f32(w.data(), l.O, 1, K, packed.data(), nullptr);
    auto direct = [&] {
      relax::rt::conv2d_direct_packed_f32(g, x.data(), packed.data(), y.data(), scratch, pool.get());
    };
    auto im2col = [&] {
      relax::rt::conv2d_f32(g, x.data(), w.data(), y.data(), col.data(), pool.get(), ConvMethod::im2col);
    };
    t[1] = best_time(direct, budget);
    t[2] = best_time(im2col, budget);
    t[0] = relax::rt::conv2d_prefers_direct(g) ? t[1] : t[2];
    t[3] = best_time([&] { im2col_blas(g, x.data(), w.data(), y.data(), col.data()); }, budget);
    {
      using relax::rt::channel_blocks;
      const int64_t Cp = channel_blocks(l.C) * 16, Op = channel_blocks(l.O) * 16;
      Conv2dGeometry gb = g;
      gb.C = Cp, gb.O = Op;
      std::vector<float> xb(size_t(l.N * Cp * l.H * l.W)), yb(size_t(l.N * Op * OH * OW));
      for (float& v : xb) v = dist(rng);
      std::vector<float> wb(size_t(relax::rt::conv2d_blocked_packed_size(l.O, l.C, 1, l.K, l.K)));
      relax::rt::conv2d_blocked_pack_f32(w.data(), l.O, l.C, 1, l.K, l.K, wb.data());
      t[4] = best_time(
          [&] { relax::rt::conv2d_blocked_f32(gb, xb.data(), wb.data(), yb.data(), nullptr, scratch, pool.get()); },
          budget);
    }
    double best = *std::min_element(t, t + 5);
    for (int m = 0; m < 5; ++m) total[m] += t[m] * double(l.count);
    best_total += best * double(l.count);
    std::printf("%5lld %4lld %4lld %5lld %2lld %2lld %3lld |          %7.1f %7.1f %7.1f %11.1f %7.1f |  %9.2f %5.2f\n",
                (long long)l.C, (long long)l.H, (long long)l.W, (long long)l.O, (long long)l.K, (long long)l.stride,
                (long long)l.count, flops / t[0] / 1e9, flops / t[1] / 1e9, flops / t[2] / 1e9, flops / t[3] / 1e9,
                flops / t[4] / 1e9,
                t[0] * 1e3 * double(l.count), best * 1e3 * double(l.count));
  }
  std::printf(
      "\nall layers, ms: relax %.1f, direct %.1f, im2col %.1f, im2col+BLAS %.1f, blocked %.1f; the best of each layer "
      "%.1f\n",
      total[0] * 1e3, total[1] * 1e3, total[2] * 1e3, total[3] * 1e3, total[4] * 1e3, best_total * 1e3);
  return 0;
}
