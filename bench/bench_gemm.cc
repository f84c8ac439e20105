// GEMM GFLOP/s of the runtime's own product (runtime/gemm.h, what the cpu
// target's convolutions call, and gemv_f32 for M = 1, what its matmuls of
// one row call, and since issue 44 its other f32 matmuls too) beside
// OpenBLAS's cblas_sgemm on the same shapes, at 1 and 2 threads, and this machine's
// FMA peak as runtime/cpu_peak.h measures it.
//
//   build/bin/relax-bench-gemm [--reps-ms 300] [--shape BATCH,M,N,K ...]
//
// Then the 8-bit product (runtime/qgemm.h, matmul_integer's: u8 x i8
// with zero points, B packed once as a constant weight is) on the same
// shapes, in GOP/s (2 per multiply-add) beside the runtime's f32 product
// (gemv_f32 for one row, as in the first table).
//
// The shapes are issue 20's: square, transformer projections (M = 1, 64,
// 512 by K = N = 768 and 3072) and attention's batched QK^T and PV.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench/best_time.h"
#include "runtime/cpu_peak.h"
#include "runtime/gemm.h"
#include "runtime/qgemm.h"
#include "runtime/thread_pool.h"


using relax::rt::ThreadPool;
using relax::bench::best_time;

namespace {

struct Shape {
  std::string what;
  int64_t batch, M, N, K;
};

// The runtime's own f32 product of each batch entry, as the cpu target
// calls it: gemm_f32, or for one row (M = 1, decode) gemv_f32 over column
// slices of 16 per thread, as blas.matmul does.
void relax_f32(const Shape& s, const float* a, const float* b, float* c, ThreadPool& pool) {
  for (int64_t i = 0; i < s.batch; ++i) {
    const float* ai = a + i * s.M * s.K;
    const float* bi = b + i * s.K * s.N;
    float* ci = c + i * s.M * s.N;
    if (s.M != 1) {
      relax::rt::gemm_f32(s.M, s.N, s.K, ai, s.K, bi, s.N, ci, s.N, &pool);
      continue;
    }
    int64_t slices = std::min<int64_t>(pool.num_threads(), (s.N + 15) / 16), width = (s.N + slices - 1) / slices;
    width = (width + 15) / 16 * 16;
    pool.parallel_for(slices, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        int64_t j0 = t * width, nj = std::min(width, s.N - j0);
        if (nj > 0) relax::rt::gemv_f32(nj, s.K, ai, bi + j0, s.N, ci + j0);
      }
    });
  }
}

}  // namespace

int main(int argc, char** argv) {
  double budget = 0.3;
  std::vector<Shape> only;
  for (int i = 1; i < argc; ++i) {
    long long b, m, n, k;
    if (!std::strcmp(argv[i], "--reps-ms") && i + 1 < argc) {
      budget = std::atof(argv[++i]) / 1000;
    } else if (!std::strcmp(argv[i], "--shape") && i + 1 < argc &&
               std::sscanf(argv[i + 1], "%lld,%lld,%lld,%lld", &b, &m, &n, &k) == 4) {
      only.push_back({"asked", b, m, n, k});
      ++i;
    } else {
      std::fprintf(stderr, "usage: %s [--reps-ms MS] [--shape BATCH,M,N,K]...\n", argv[0]);
      return 2;
    }
  }
  const relax::rt::CpuPeak& cpu = relax::rt::measured_cpu_peak();
  double peak = cpu.fma_gflops;
  const char* isa = cpu.isa.c_str();
  std::printf("FMA peak, one core, measured: %.1f GFLOP/s (%s); two cores: %.1f\n\n", peak, isa, 2 * peak);
  std::vector<Shape> shapes = {
      {"square", 1, 256, 256, 256},        {"square", 1, 1024, 1024, 1024},  {"square", 1, 2048, 2048, 2048},
      {"decode", 1, 1, 768, 768},          {"decode", 1, 1, 3072, 768},      {"decode", 1, 1, 768, 3072},
      {"prompt", 1, 64, 768, 768},         {"prompt", 1, 64, 3072, 768},     {"prompt", 1, 64, 768, 3072},
      {"batch", 1, 512, 768, 768},         {"batch", 1, 512, 3072, 768},     {"batch", 1, 512, 768, 3072},
      {"QK^T 12x", 12, 128, 128, 64},      {"PV 12x", 12, 128, 64, 128},     {"QK^T 12x", 12, 512, 512, 64},
      {"PV 12x", 12, 512, 64, 512},
  };
  if (!only.empty()) shapes = only;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::printf("%-10s %6s %5s %5s %5s | %-23s | %-23s\n", "shape", "batch", "M", "N", "K", "1 thread: relax  BLAS",
              "2 threads: relax  BLAS");
  for (const Shape& s : shapes) {
    std::vector<float> a(size_t(s.batch * s.M * s.K)), b(size_t(s.batch * s.K * s.N)), c(size_t(s.batch * s.M * s.N));
    for (float& x : a) x = dist(rng);
    for (float& x : b) x = dist(rng);
    double flops = 2.0 * double(s.batch * s.M) * double(s.N) * double(s.K);
    std::printf("%-10s %6lld %5lld %5lld %5lld |", s.what.c_str(), (long long)s.batch, (long long)s.M,
                (long long)s.N, (long long)s.K);
    for (int threads : {1, 2}) {
      ThreadPool::set_global_num_threads(threads);
      std::shared_ptr<ThreadPool> pool = ThreadPool::global();
      openblas_set_num_threads(threads);
      double ours = best_time([&] { relax_f32(s, a.data(), b.data(), c.data(), *pool); }, budget);
      double blas = best_time(
          [&] {
            for (int64_t i = 0; i < s.batch; ++i)
              cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(s.M), int(s.N), int(s.K), 1.0f,
                          a.data() + i * s.M * s.K, int(s.K), b.data() + i * s.K * s.N, int(s.N), 0.0f,
                          c.data() + i * s.M * s.N, int(s.N));
          },
          budget);
      std::printf(" %7.1f %7.1f (%4.2f) |", flops / ours / 1e9, flops / blas / 1e9, blas / ours);
    }
    std::printf("\n");
  }
  std::printf("\nGFLOP/s; in parentheses relax's speed as a share of OpenBLAS's (above 1: faster)\n");

  std::printf("\n8-bit (u8 x i8, zero points, B packed; kernels %s)\n", relax::rt::qgemm_kernel_name());
  std::printf("%-10s %6s %5s %5s %5s | %-22s | %-22s\n", "shape", "batch", "M", "N", "K", "1 thread: int8  f32",
              "2 threads: int8  f32");
  std::uniform_int_distribution<int> bytes(0, 255);
  for (const Shape& s : shapes) {
    std::vector<uint8_t> a(size_t(s.batch * s.M * s.K)), b(size_t(s.batch * s.K * s.N));
    for (uint8_t& x : a) x = uint8_t(bytes(rng));
    for (uint8_t& x : b) x = uint8_t(bytes(rng));
    std::vector<float> af(a.begin(), a.end()), bf(b.begin(), b.end()), cf(size_t(s.batch * s.M * s.N));
    std::vector<int32_t> c(size_t(s.batch * s.M * s.N));
    const int64_t psize = relax::rt::qgemm_packed_b_size(s.K, s.N);
    std::vector<uint8_t> bp(size_t(s.batch * psize));
    const int32_t za = 3, zb = -2;
    for (int64_t i = 0; i < s.batch; ++i)
      relax::rt::qgemm_pack_b(s.K, s.N, {b.data() + i * s.K * s.N, true, s.N}, &zb, 1, bp.data() + i * psize);
    double ops = 2.0 * double(s.batch * s.M) * double(s.N) * double(s.K);
    std::printf("%-10s %6lld %5lld %5lld %5lld |", s.what.c_str(), (long long)s.batch, (long long)s.M,
                (long long)s.N, (long long)s.K);
    for (int threads : {1, 2}) {
      ThreadPool::set_global_num_threads(threads);
      std::shared_ptr<ThreadPool> pool = ThreadPool::global();
      double q = best_time(
          [&] {
            for (int64_t i = 0; i < s.batch; ++i)
              relax::rt::qgemm_packed(s.M, s.N, s.K, {a.data() + i * s.M * s.K, false, s.K}, &za, 1,
                                      bp.data() + i * psize, c.data() + i * s.M * s.N, s.N, pool.get());
          },
          budget);
      double f = best_time([&] { relax_f32(s, af.data(), bf.data(), cf.data(), *pool); }, budget);
      std::printf(" %7.1f %7.1f (%4.2f) |", ops / q / 1e9, ops / f / 1e9, f / q);
    }
    std::printf("\n");
  }
  std::printf("\nGOP/s (int8) and GFLOP/s (the runtime's f32 product); in parentheses int8's speed over f32's\n");
  return 0;
}
