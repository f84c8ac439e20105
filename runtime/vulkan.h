// The Vulkan device runtime, part 1: the loader and the devices.
//
// libvulkan is opened with dlopen when first needed, never linked: the
// runtime builds and starts everywhere, and says why Vulkan is unavailable
// (no loader, no driver, no device with compute) instead of failing to
// load. Every entry point used is listed once (RELAX_VK_*_FUNCTIONS in
// vulkan.cc) and fetched through vkGetInstanceProcAddr.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/kernel_library.h"

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

// An opened device: one compute queue, buffers, kernels (compute pipelines
// from SPIR-V), dispatches. Not thread-safe: one user at a time.
class VulkanDevice {
 public:
  class Buffer;
  class Kernel;

  // Opens device `index` of vulkan_devices(); throws rt::Error saying why not.
  static std::shared_ptr<VulkanDevice> open(int index = 0);
  ~VulkanDevice();
  VulkanDevice(const VulkanDevice&) = delete;
  VulkanDevice& operator=(const VulkanDevice&) = delete;

  const VulkanDeviceInfo& info() const { return info_; }

  // A storage buffer of `bytes` (at least 4) in device memory; refused
  // beyond the device's storage-buffer range.
  std::shared_ptr<Buffer> alloc(uint64_t bytes);
  void upload(Buffer& dst, const void* src, uint64_t bytes);
  void download(const Buffer& src, void* dst, uint64_t bytes);

  // A compute pipeline of `spirv` (entry point "main") reading `num_buffers`
  // storage buffers at bindings 0.. of set 0 and `push_bytes` of push
  // constants; `name` is for messages.
  std::shared_ptr<Kernel> load_kernel(const std::string& name, const std::vector<uint32_t>& spirv,
                                      uint32_t num_buffers, uint32_t push_bytes);

  // Runs `kernel` over groups[0] x groups[1] x groups[2] workgroups with
  // `buffers` bound in order and `push` as its push constants, and waits.
  void dispatch(const Kernel& kernel, const std::vector<const Buffer*>& buffers, const void* push,
                uint32_t push_bytes, const uint32_t groups[3]);

  struct Impl;

 private:
  VulkanDevice(std::shared_ptr<Impl> impl, VulkanDeviceInfo info);
  std::shared_ptr<Impl> impl_;  // buffers and kernels hold it too: the device outlives them
  VulkanDeviceInfo info_;
};

// A package's Vulkan kernels (sections "kernels.vulkan" and
// "kernels.vulkan.spv", backends/vulkan/codegen.h) on an opened device:
// pipelines created once, at load. The device must have every feature the
// package needs (an rt::Error names the missing one).
//
// First version of the data path: tensors live in host memory and each
// kernel call copies its inputs to device buffers, runs its stages (one
// dispatch each, in order) and copies its outputs back. Device-resident
// tensors planned by the memory plan, and one command buffer per call,
// come next.
class VulkanKernels : public Kernels {
 public:
  static std::unique_ptr<VulkanKernels> load(std::string_view metadata, std::span<const uint8_t> spirv, int device,
                                             const std::string& label);
  ~VulkanKernels() override;
  KernelCall kernel_call(std::string_view name) const override;
  const VulkanDevice& device() const { return *device_; }

  struct Entry;

 private:
  VulkanKernels() = default;
  std::shared_ptr<VulkanDevice> device_;
  std::vector<std::shared_ptr<Entry>> entries_;
  std::string label_;
};

}  // namespace relax::rt
