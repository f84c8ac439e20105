#include "runtime/device.h"

#include "runtime/error.h"

namespace relax::rt {

// The registry: one line per device.
const std::vector<Device>& devices() {
  static const std::vector<Device> all = {cpu_device(), vulkan_device(), cuda_device()};
  return all;
}

const Device& device_for(const SectionLookup& sections, const std::string& kind, const std::string& label) {
  for (const Device& d : devices())
    if (sections(d.section)) return d;
  for (const Device& d : devices())
    if (d.name == kind) return d;
  std::string known;
  for (const Device& d : devices()) known += (known.empty() ? "" : ", ") + d.name;
  rt_fail(label, ": built for target '", kind, "', which this runtime cannot run (it runs ", known, ")");
}

}  // namespace relax::rt
