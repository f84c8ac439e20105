// Which vector instructions the runtime's own kernels (runtime/gemm.h,
// runtime/conv_direct.h) use: the widest this CPU runs, unless a test or
// benchmark asks for a narrower one to compare. Every choice computes the
// same chains of fused multiply-adds, so results are bitwise equal.
#pragma once

#include <string>

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

}  // namespace relax::rt
