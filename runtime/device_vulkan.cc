// The vulkan device (runtime/device.h): kernels.vulkan and
// kernels.vulkan.spv on a Vulkan device (runtime/vulkan.h).
#include <nlohmann/json.hpp>
#include <ostream>

#include "runtime/device.h"
#include "runtime/error.h"
#include "runtime/vulkan.h"

namespace relax::rt {

bool VulkanKernels::time_calls(bool on) const {
  set_profiling(on);
  return true;
}

std::vector<KernelProfile> VulkanKernels::call_times() const {
  std::vector<KernelProfile> rows;
  for (const KernelTime& t : profile()) rows.push_back({t.name, t.calls, t.ms});
  return rows;
}

void VulkanKernels::report(nlohmann::json& rep, int runs, std::ostream* text) const {
  VulkanStats s = stats();
  double n = std::max(runs, 1);
  nlohmann::json j{{"runs", runs},
                   {"kernel_calls", s.kernel_calls / n},
                   {"dispatches", s.dispatches / n},
                   {"row_dispatches", s.row_dispatches / n},
                   {"shared_dispatches", s.shared_dispatches / n},
                   {"barriers", s.barriers / n},
                   {"submits", s.submits / n},
                   {"bytes_uploaded", s.bytes_uploaded / n},
                   {"bytes_downloaded", s.bytes_downloaded / n},
                   {"resident_bytes", s.resident_bytes}};
  rep["vulkan"] = j;
  if (text)
    *text << "vulkan, per run: " << j["kernel_calls"] << " kernel calls, " << j["dispatches"] << " dispatches ("
          << j["row_dispatches"] << " a workgroup per row, " << j["shared_dispatches"] << " shared-memory tiles), "
          << j["barriers"] << " barriers, " << j["submits"] << " submits, " << j["bytes_uploaded"]
          << " bytes uploaded, " << j["bytes_downloaded"] << " bytes downloaded; " << s.resident_bytes
          << " bytes resident on the device\n";
}

namespace {

// --list-devices: the Vulkan devices (--device numbers them) and what each
// offers, or why there are none.
int list_vulkan(nlohmann::json& rep, std::ostream* text) {
  rep["vulkan"] = nlohmann::json::array();
  std::string why;
  std::vector<VulkanDeviceInfo> found;
  try {
    found = vulkan_devices();
  } catch (const Error& e) {
    why = e.what();
  }
  for (const VulkanDeviceInfo& d : found) {
    nlohmann::json j{{"index", d.index},
                     {"name", d.name},
                     {"type", d.type},
                     {"api_version", d.api_version},
                     {"driver", d.driver},
                     {"max_storage_buffer_range", d.max_storage_buffer_range},
                     {"max_shared_memory", d.max_shared_memory},
                     {"max_workgroup_invocations", d.max_workgroup_invocations},
                     {"max_push_constants", d.max_push_constants},
                     {"subgroup_size", d.subgroup_size},
                     {"subgroup_arithmetic", d.subgroup_arithmetic},
                     {"device_local_bytes", d.device_local_bytes}};
    nlohmann::json types = nlohmann::json::array();
    for (auto [ok, name] : {std::pair{d.float16, "f16"},
                            {d.float64, "f64"},
                            {d.int8, "i8"},
                            {d.int16, "i16"},
                            {d.int64, "i64"},
                            {d.storage8, "storage8"},
                            {d.storage16, "storage16"}})
      if (ok) types.push_back(name);
    j["features"] = types;
    rep["vulkan"].push_back(j);
  }
  if (!why.empty()) rep["vulkan_unavailable"] = why;
  if (text && found.empty()) *text << "no Vulkan device: " << why << "\n";
  if (text)
    for (const nlohmann::json& j : rep["vulkan"]) {
      *text << "vulkan " << j["index"].get<int>() << ": " << j["name"].get<std::string>() << " ("
            << j["type"].get<std::string>() << ", Vulkan " << j["api_version"].get<std::string>() << ")\n";
      *text << "  storage buffer range " << j["max_storage_buffer_range"] << " bytes, shared memory "
            << j["max_shared_memory"] << " bytes, subgroup " << j["subgroup_size"] << ", features";
      for (const auto& f : j["features"]) *text << " " << f.get<std::string>();
      *text << "\n";
    }
  return int(found.size());
}

}  // namespace

Device vulkan_device() {
  Device d;
  d.name = "vulkan";
  d.section = "kernels.vulkan";
  d.load = [](const SectionLookup& sections, const nlohmann::json&, int device,
              const std::string& label) -> std::unique_ptr<Kernels> {
    auto meta = sections("kernels.vulkan");
    if (!meta) return nullptr;
    auto spv = sections("kernels.vulkan.spv");
    if (!spv) rt_fail(label, ": has kernels.vulkan but no kernels.vulkan.spv");
    return VulkanKernels::load(std::string_view(reinterpret_cast<const char*>(meta->data()), meta->size()), *spv,
                               device, label + ":kernels.vulkan");
  };
  d.list = list_vulkan;
  return d;
}

}  // namespace relax::rt
