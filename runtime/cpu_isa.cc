#include "runtime/cpu_isa.h"

#include <atomic>

namespace relax::rt {
namespace {

KernelIsa widest() {
  for (KernelIsa isa : {KernelIsa::avx512, KernelIsa::avx2})
    if (cpu_runs(isa)) return isa;
  return KernelIsa::portable;
}

std::atomic<KernelIsa>& current() {
  static std::atomic<KernelIsa> isa{widest()};
  return isa;
}

}  // namespace

const char* kernel_isa_name(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::avx512: return "avx512";
    case KernelIsa::avx2: return "avx2";
    case KernelIsa::portable: break;
  }
  return "portable";
}

bool cpu_runs(KernelIsa isa) {
#if defined(__x86_64__) || defined(__i386__)
  if (isa == KernelIsa::avx512) return __builtin_cpu_supports("avx512f");
  if (isa == KernelIsa::avx2) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
  return isa == KernelIsa::portable;
}

KernelIsa kernel_isa() { return current().load(std::memory_order_relaxed); }

bool set_kernel_isa(const std::string& name) {
  if (name.empty()) {
    current().store(widest());
    return true;
  }
  for (KernelIsa isa : {KernelIsa::avx512, KernelIsa::avx2, KernelIsa::portable})
    if (name == kernel_isa_name(isa)) {
      if (!cpu_runs(isa)) return false;
      current().store(isa);
      return true;
    }
  return false;
}

}  // namespace relax::rt
