#include "runtime/cpu_isa.h"

#include <atomic>
#include <cstdlib>
#include <utility>

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

namespace {

// __builtin_cpu_supports takes its name as a literal.
#if defined(__x86_64__) || defined(__i386__)
#define RELAX_FEATURE(name) {name, [] { return bool(__builtin_cpu_supports(name)); }}
#else
#define RELAX_FEATURE(name) {name, [] { return false; }}
#endif
const std::vector<std::pair<std::string, bool (*)()>>& feature_table() {
  static const std::vector<std::pair<std::string, bool (*)()>> table = {
      RELAX_FEATURE("sse4.1"),     RELAX_FEATURE("sse4.2"),          RELAX_FEATURE("popcnt"),
      RELAX_FEATURE("avx"),        RELAX_FEATURE("avx2"),            RELAX_FEATURE("fma"),
      RELAX_FEATURE("bmi"),        RELAX_FEATURE("bmi2"),            RELAX_FEATURE("avx512f"),
      RELAX_FEATURE("avx512bw"),   RELAX_FEATURE("avx512cd"),        RELAX_FEATURE("avx512dq"),
      RELAX_FEATURE("avx512vl"),   RELAX_FEATURE("avx512vnni"),      RELAX_FEATURE("avx512bf16"),
      RELAX_FEATURE("avx512vbmi"), RELAX_FEATURE("avx512vbmi2"),     RELAX_FEATURE("avx512ifma"),
      RELAX_FEATURE("avx512bitalg"), RELAX_FEATURE("avx512vpopcntdq"), RELAX_FEATURE("avx512vp2intersect"),
  };
  return table;
}
#undef RELAX_FEATURE

}  // namespace

const std::vector<std::string>& x86_feature_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& [name, has] : feature_table()) out.push_back(name);
    return out;
  }();
  return names;
}

bool cpu_has_feature(const std::string& name) {
  // $RELAX_CPU_WITHOUT=avx512f,avx512bw: taken as absent, to check that a
  // package refuses an older CPU without one at hand.
  if (const char* without = std::getenv("RELAX_CPU_WITHOUT")) {
    std::string list = std::string(",") + without + ",";
    if (list.find("," + name + ",") != std::string::npos) return false;
  }
  for (const auto& [n, has] : feature_table())
    if (n == name) return has();
  return false;
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
