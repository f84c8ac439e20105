#include "runtime/cpu_peak.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace relax::rt {
namespace {

using Clock = std::chrono::steady_clock;

template <typename F>
double best_seconds(F f, int reps) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    auto t = Clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t).count());
  }
  return best;
}

constexpr int kSteps = 500000;

// Independent accumulator chains, enough to cover two FMA pipes' latency.
#if defined(__x86_64__)
__attribute__((target("avx2,fma"), noinline)) float fma_loop_avx2() {
  __m256 a[10];
  for (int i = 0; i < 10; ++i) a[i] = _mm256_set1_ps(float(i));
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  for (int k = 0; k < kSteps; ++k)
#pragma GCC unroll 10
    for (int i = 0; i < 10; ++i) a[i] = _mm256_fmadd_ps(a[i], m, c);
  float s = 0;
  for (int i = 0; i < 10; ++i) s += _mm256_cvtss_f32(a[i]);
  return s;
}
__attribute__((target("avx512f"), noinline)) float fma_loop_avx512() {
  __m512 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(float(i));
  const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  for (int k = 0; k < kSteps; ++k)
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) a[i] = _mm512_fmadd_ps(a[i], m, c);
  float s = 0;
  for (int i = 0; i < 12; ++i) s += _mm512_cvtss_f32(a[i]);
  return s;
}
#endif

__attribute__((noinline)) float fma_loop_scalar() {
  float a[8];
  for (int i = 0; i < 8; ++i) a[i] = float(i);
  for (int k = 0; k < kSteps; ++k)
    for (int i = 0; i < 8; ++i) a[i] = a[i] * 0.999999f + 1e-7f;
  float s = 0;
  for (float v : a) s += v;
  return s;
}

CpuPeak measure() {
  CpuPeak p;
  volatile float sink = 0;
  auto gflops = [&](float (*f)(), double flops_per_step) {
    return flops_per_step * kSteps / best_seconds([&] { sink = sink + f(); }, 8) / 1e9;
  };
  p.isa = "scalar";
  p.fma_gflops = gflops(fma_loop_scalar, 8 * 2);
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    p.isa = "AVX2";
    p.fma_gflops = gflops(fma_loop_avx2, 10 * 8 * 2);
  }
  if (__builtin_cpu_supports("avx512f")) {
    // The ISA is the widest the CPU has; the peak is the faster of the two
    // (Zen 4 runs 512-bit FMAs as two halves: the same peak as AVX2, and
    // which one measured higher was noise that changed the printed ISA).
    p.isa = "AVX-512";
    p.fma_gflops = std::max(p.fma_gflops, gflops(fma_loop_avx512, 12 * 16 * 2));
  }
#endif
  // 64 MiB copied: past every cache level of this machine's CPUs.
  std::vector<char> src(size_t(64) << 20, 1), dst(src.size());
  double s = best_seconds([&] { std::memcpy(dst.data(), src.data(), src.size()); }, 4);
  p.copy_bytes_per_s = 2.0 * double(src.size()) / s;
  return p;
}

}  // namespace

const CpuPeak& measured_cpu_peak() {
  static const CpuPeak p = measure();
  return p;
}

}  // namespace relax::rt
