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
  uint64_t min_storage_offset_alignment = 0;  // a binding's offset is a multiple of this
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

  // Where a buffer's memory is. Device: device-local when the device has
  // such memory (mapped too when it is host-visible and coherent, as on
  // lavapipe or with resizable BAR). Mapped: host-visible, coherent and
  // device-local; nullptr instead of an error when the device has none, or
  // none left, or `bytes` exceeds the storage-buffer range (unless
  // `in_chunks`). Staging:
  // host-visible, for copies only.
  enum class Memory { Device, Mapped, Staging };

  // A buffer of `bytes` (at least 4); a storage buffer unless Staging.
  // Device buffers beyond the device's storage-buffer range are refused,
  // unless `in_chunks` (a large weight bound in several bindings).
  std::shared_ptr<Buffer> alloc(uint64_t bytes, Memory where = Memory::Device, bool in_chunks = false);
  // Synchronous copies (each waits for the device).
  void upload(Buffer& dst, const void* src, uint64_t bytes);
  void download(const Buffer& src, void* dst, uint64_t bytes);
  void copy(const Buffer& from, uint64_t from_offset, const Buffer& to, uint64_t to_offset, uint64_t bytes);

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
  Impl& impl() const { return *impl_; }
  const std::shared_ptr<Impl>& impl_ptr() const { return impl_; }

 private:
  VulkanDevice(std::shared_ptr<Impl> impl, VulkanDeviceInfo info);
  std::shared_ptr<Impl> impl_;  // buffers and kernels hold it too: the device outlives them
  VulkanDeviceInfo info_;
};

// What a package's kernels did on the device since load.
struct VulkanStats {
  uint64_t kernel_calls = 0;
  uint64_t dispatches = 0;
  uint64_t row_dispatches = 0;  // ... of which one workgroup per row (reductions split over threads)
  uint64_t shared_dispatches = 0;  // ... of which tiled through shared memory (matmul, conv)
  uint64_t barriers = 0;        // pipeline barriers the data flow needed between them
  uint64_t submits = 0;         // command buffers submitted (each waited for)
  uint64_t bytes_uploaded = 0;  // host memory copied to the device (tensors not device-resident)
  uint64_t bytes_downloaded = 0;
  uint64_t resident_bytes = 0;  // device memory now holding tensors and weights the host maps
};

// A package's Vulkan kernels (sections "kernels.vulkan" and
// "kernels.vulkan.spv", backends/vulkan/codegen.h) on an opened device:
// pipelines created once, at load. The device must have every feature the
// package needs (an rt::Error names the missing one).
//
// Tensors are device-resident: the VM's pool (make_pool) and the weights
// (place_constant) live in device memory that the host maps (device-local
// and host-visible: lavapipe, integrated GPUs, discrete GPUs with resizable
// BAR), so a kernel call binds them where they are. Kernel calls are
// recorded into one command buffer, with a pipeline barrier only where a
// dispatch reads or writes what an earlier one since the last barrier
// wrote (or writes what it read); synchronize() submits it and waits, and
// the VM calls it before the host touches tensor data. Memory the device
// does not map (host tensors given as inputs; everything, on a device
// without mappable memory or with RELAX_VULKAN_HOST_MEMORY=1; through
// staging buffers where the device memory is not mapped, or with
// RELAX_VULKAN_HOST_MEMORY=staged) is copied to
// a device buffer once per command buffer, and a kernel output there is
// copied back when it completes.
class VulkanKernels : public Kernels {
 public:
  static std::unique_ptr<VulkanKernels> load(std::string_view metadata, std::span<const uint8_t> spirv, int device,
                                             const std::string& label);
  ~VulkanKernels() override;
  KernelCall kernel_call(std::string_view name) const override;
  std::shared_ptr<PoolAllocator> make_pool() const override;
  Tensor place_constant(const Tensor& t) const override;
  void synchronize() const override;
  const VulkanDevice& device() const { return *device_; }
  VulkanStats stats() const;

  // Profiling: each kernel call is submitted and waited for on its own and
  // timed (wall clock, recording included); profile() lists the kernels by
  // total time, most first.
  struct KernelTime {
    std::string name;
    uint64_t calls = 0;
    double ms = 0;
  };
  void set_profiling(bool on) const;
  std::vector<KernelTime> profile() const;
  // The generic forms (runtime/device_vulkan.cc): the profile, and the
  // stats per run under the report's key "vulkan".
  bool time_calls(bool on) const override;
  std::vector<KernelProfile> call_times() const override;
  void report(nlohmann::json& rep, int runs, std::ostream* text) const override;

  struct Entry;
  struct Exec;

 private:
  VulkanKernels() = default;
  std::shared_ptr<VulkanDevice> device_;
  std::vector<std::shared_ptr<Entry>> entries_;
  std::shared_ptr<Exec> exec_;
  std::string label_;
};

}  // namespace relax::rt
