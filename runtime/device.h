// The runtime's devices, by the kernel section of a package.
//
// A device is what runs a package's kernels: the cpu (a shared object in
// this process), Vulkan, CUDA. Each is one entry of the registry, defined in
// its own file beside its kernels (kernel_library.cc, vulkan.cc, cuda.cc)
// and listed once in device.cc; Model::load and relax-run name none of them.
// A package selects its device by the kernel section it carries
// ("kernels.cpu"), or, without kernels, by its manifest's target kind.
#pragma once

#include <functional>
#include <iosfwd>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "runtime/kernel_library.h"

namespace relax::rt {

// A package's sections by name (Package::find, or sections in memory).
using SectionLookup = std::function<std::optional<std::span<const uint8_t>>(const std::string& name)>;

struct Device {
  std::string name;     // the target kind of packages for it ("cpu")
  std::string section;  // the kernel section that selects it ("kernels.cpu")
  // Kernels run on this process's threads: runs may overlap (a VM each), and
  // the VM times the calls against the CPU's peaks. Otherwise one run at a
  // time, and the device times its own calls.
  bool host = false;
  // The kernels of a package (null: a package without kernels, run by the
  // VM's builtins alone); `manifest` is the package's, `device` the index
  // relax-run --device gives, `label` names the package in errors.
  std::function<std::unique_ptr<Kernels>(const SectionLookup& sections, const nlohmann::json& manifest, int device,
                                         const std::string& label)>
      load;
  // relax-run --list-devices: adds this kind's devices (or why there are
  // none) to `rep` and prints them to `text` when given; returns how many.
  // Null: the kind has nothing to list.
  std::function<int(nlohmann::json& rep, std::ostream* text)> list;
};

// Every device, in registry order.
const std::vector<Device>& devices();
// The device for a package: the first whose kernel section it has, else the
// one named by its target kind; an rt::Error naming `label` otherwise.
const Device& device_for(const SectionLookup& sections, const std::string& kind, const std::string& label);

// The registry's entries (each defined in its device's file).
Device cpu_device();
Device vulkan_device();
Device cuda_device();

}  // namespace relax::rt
