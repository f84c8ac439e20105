// Which vector instructions the runtime's own kernels (runtime/gemm.h,
// runtime/conv_direct.h) use: the widest this CPU runs, unless a test or
// benchmark asks for a narrower one to compare. Every choice computes the
// same chains of fused multiply-adds, so results are bitwise equal.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

// The runtime's x86 kernels (intrinsics, functions compiled per target
// attribute) exist on x86 hosts only.
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define RELAX_X86_KERNELS 1
#endif

namespace relax::rt {

enum class KernelIsa { portable, avx2, avx512 };

const char* kernel_isa_name(KernelIsa isa);  // "portable", "avx2", "avx512"
bool cpu_runs(KernelIsa isa);
// The kernels' current choice.
KernelIsa kernel_isa();
// Picks the kernels by name; "" restores the widest. False (and nothing
// changes) for a name unknown or one this CPU cannot run.
bool set_kernel_isa(const std::string& name);

// The x86 extensions a package's compiled kernels may use, by the names
// LLVM and GCC share ("avx2", "avx512f"): the cpu target lists those its
// kernels were built with (section kernels.cpu.features), and a package
// whose list names one this CPU lacks is refused at load, naming it,
// instead of stopping on an illegal instruction.
const std::vector<std::string>& x86_feature_names();
// Whether this CPU has the extension; false for a name not in the list.
bool cpu_has_feature(const std::string& name);

#ifdef RELAX_X86_KERNELS
// AVX-512: p[0], p[2], ..., p[2 * (n - 1)] in the first n lanes (n <= 16),
// zeros after: two loads masked to the 2 * n - 1 floats read (nothing past
// them is touched) and a permute keeping the even lanes. For kernels that
// step two inputs per output (stride-2 convolutions and pools).
__attribute__((target("avx512f"), always_inline)) inline __m512 even_lanes_avx512(const float* p, int64_t n) {
  const int64_t reads = 2 * n - 1;
  const __mmask16 lo = reads >= 16 ? __mmask16(0xffff) : __mmask16((1u << reads) - 1);
  const __mmask16 hi = reads > 16 ? __mmask16((1u << (reads - 16)) - 1) : __mmask16(0);
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  return _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(lo, p), even, _mm512_maskz_loadu_ps(hi, p + 16));
}
#endif

}  // namespace relax::rt
