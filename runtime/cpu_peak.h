// This machine's arithmetic and memory peaks, measured (not read from a
// table): one core's fused multiply-add throughput at the widest vector
// width the CPU has (AVX-512, AVX2 + FMA, else scalar), and the bandwidth
// of a large memory copy. relax-run --profile reports each kernel's
// GFLOP/s and GB/s as a share of them; bench/bench_gemm.cc prints them.
// Measuring takes about 0.1 s; the result is kept for the process.
#pragma once

#include <string>

namespace relax::rt {

struct CpuPeak {
  std::string isa;             // "AVX-512", "AVX2", "scalar"
  double fma_gflops = 0;       // one core, f32
  double copy_bytes_per_s = 0; // read + written, one thread
};

const CpuPeak& measured_cpu_peak();

}  // namespace relax::rt
