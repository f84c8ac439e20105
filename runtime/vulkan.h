// The Vulkan device runtime, part 1: the loader and the devices.
//
// libvulkan is opened with dlopen when first needed, never linked: the
// runtime builds and starts everywhere, and says why Vulkan is unavailable
// (no loader, no driver, no device with compute) instead of failing to
// load. Every entry point used is listed once (RELAX_VK_*_FUNCTIONS in
// vulkan.cc) and fetched through vkGetInstanceProcAddr.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace relax::rt {

// What a compute device offers, as the code generator and the planner need
// to know it (limits the kernels must respect, optional features).
struct VulkanDeviceInfo {
  int index = 0;             // the --device number
  std::string name;          // "llvmpipe (LLVM 15.0.6, 256 bits)", "NVIDIA H100 80GB HBM3"
  std::string type;          // "cpu", "integrated-gpu", "discrete-gpu", "virtual-gpu", "other"
  std::string api_version;   // "1.3.230"
  std::string driver;        // driver name and version info, when the device reports them
  uint32_t vendor_id = 0, device_id = 0;
  uint64_t max_storage_buffer_range = 0;   // bytes one storage-buffer binding may span
  uint32_t max_shared_memory = 0;          // maxComputeSharedMemorySize, bytes per workgroup
  uint32_t max_workgroup_invocations = 0;  // maxComputeWorkGroupInvocations
  uint32_t max_workgroup_size[3] = {0, 0, 0};
  uint32_t max_workgroup_count[3] = {0, 0, 0};
  uint32_t max_push_constants = 0;  // bytes
  uint32_t subgroup_size = 0;       // 0 when the device does not say (Vulkan 1.0)
  bool subgroup_arithmetic = false; // subgroup add/min/max in compute shaders
  bool float16 = false, float64 = false, int8 = false, int16 = false, int64 = false;
  bool storage8 = false, storage16 = false;  // 8- and 16-bit types in storage buffers
  uint64_t device_local_bytes = 0;           // the largest device-local heap
};

// The compute-capable devices, in the order --device numbers them.
// Throws rt::Error saying why when Vulkan is unavailable (no loader, no
// instance, no device).
std::vector<VulkanDeviceInfo> vulkan_devices();

// Whether Vulkan can run here; when not, `why` says what is missing.
bool vulkan_available(std::string* why = nullptr);

}  // namespace relax::rt
