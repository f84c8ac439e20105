// The cpu device (runtime/device.h): kernels.cpu, a shared object loaded
// into this process (runtime/kernel_library.h), after checking that this
// CPU has the extensions the package's kernels use (kernels.cpu.features).
#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

#include "runtime/cpu_isa.h"
#include "runtime/device.h"
#include "runtime/error.h"

namespace relax::rt {
namespace {

// Kernels built for extensions this CPU lacks would stop on an illegal
// instruction; the package says which it was built with (packages from
// before that section are not checked).
void check_cpu_features(const SectionLookup& sections, const nlohmann::json& manifest, const std::string& label) {
  auto sec = sections("kernels.cpu.features");
  if (!sec) return;
  std::string list(reinterpret_cast<const char*>(sec->data()), sec->size()), missing;
  std::istringstream words(list);
  const std::vector<std::string>& known = x86_feature_names();
  for (std::string f; words >> f;) {
    if (std::find(known.begin(), known.end(), f) == known.end())
      rt_fail(label, ": its kernels use the x86 extension '", f, "', which this runtime does not know");
    if (!cpu_has_feature(f)) missing += (missing.empty() ? "" : ", ") + f;
  }
  if (!missing.empty()) {
    std::string built = manifest.value("/target/cpu"_json_pointer, std::string("?"));
    rt_fail(label, ": its kernels were built for --cpu ", built, " and use ", missing,
            ", which this CPU does not have; build it again with --cpu host, or a lower level such as x86-64-v2");
  }
}

}  // namespace

Device cpu_device() {
  Device d;
  d.name = "cpu";
  d.section = "kernels.cpu";
  d.host = true;
  d.load = [](const SectionLookup& sections, const nlohmann::json& manifest, int,
              const std::string& label) -> std::unique_ptr<Kernels> {
    check_cpu_features(sections, manifest, label);
    auto so = sections("kernels.cpu");
    if (!so) return nullptr;
    return KernelLibrary::load(*so, label + ":kernels.cpu");
  };
  return d;
}

}  // namespace relax::rt
