#include "runtime/vulkan.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>

#include "runtime/error.h"

#if RELAX_HAVE_VULKAN_HEADERS
#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>
#endif

namespace relax::rt {

#if RELAX_HAVE_VULKAN_HEADERS
namespace {

// Entry points, listed once: global ones (no instance) and instance ones.
#define RELAX_VK_GLOBAL_FUNCTIONS(X) X(vkCreateInstance) X(vkEnumerateInstanceVersion)
#define RELAX_VK_INSTANCE_FUNCTIONS(X)                                                         \
  X(vkDestroyInstance)                                                                         \
  X(vkEnumeratePhysicalDevices) X(vkGetPhysicalDeviceProperties) X(vkGetPhysicalDeviceProperties2) \
      X(vkGetPhysicalDeviceFeatures) X(vkGetPhysicalDeviceFeatures2)                           \
          X(vkGetPhysicalDeviceQueueFamilyProperties) X(vkGetPhysicalDeviceMemoryProperties)

struct Loader {
  void* lib = nullptr;
  std::string error;  // why Vulkan is unavailable, when lib is null
  PFN_vkGetInstanceProcAddr get_proc = nullptr;
#define X(f) PFN_##f f = nullptr;
  RELAX_VK_GLOBAL_FUNCTIONS(X)
#undef X
};

const Loader& loader() {
  static Loader l = [] {
    Loader out;
    for (const char* name : {"libvulkan.so.1", "libvulkan.so"}) {
      out.lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (out.lib) break;
    }
    if (!out.lib) {
      const char* e = dlerror();
      out.error = std::string("the Vulkan loader (libvulkan.so.1) is not installed") + (e ? ": " + std::string(e) : "");
      return out;
    }
    out.get_proc = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(out.lib, "vkGetInstanceProcAddr"));
    if (!out.get_proc) {
      out.error = "libvulkan.so.1 has no vkGetInstanceProcAddr";
      out.lib = nullptr;
      return out;
    }
#define X(f) out.f = reinterpret_cast<PFN_##f>(out.get_proc(nullptr, #f));
    RELAX_VK_GLOBAL_FUNCTIONS(X)
#undef X
    if (!out.vkCreateInstance) {
      out.error = "the Vulkan loader lacks vkCreateInstance";
      out.lib = nullptr;
    }
    return out;
  }();
  return l;
}

std::string result_name(VkResult r) {
  switch (r) {
    case VK_ERROR_INCOMPATIBLE_DRIVER:
      return "VK_ERROR_INCOMPATIBLE_DRIVER (no Vulkan driver is installed, or none supports the version asked)";
    case VK_ERROR_INITIALIZATION_FAILED:
      return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_OUT_OF_HOST_MEMORY:
      return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
      return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_LAYER_NOT_PRESENT:
      return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT:
      return "VK_ERROR_EXTENSION_NOT_PRESENT";
    default:
      return "VkResult " + std::to_string(int(r));
  }
}

std::string version_text(uint32_t v) {
  return std::to_string(VK_API_VERSION_MAJOR(v)) + "." + std::to_string(VK_API_VERSION_MINOR(v)) + "." +
         std::to_string(VK_API_VERSION_PATCH(v));
}

const char* type_text(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return "cpu";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return "integrated-gpu";
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return "discrete-gpu";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return "virtual-gpu";
    default:
      return "other";
  }
}

// An instance with its entry points, destroyed with it.
struct Instance {
  VkInstance handle = VK_NULL_HANDLE;
  uint32_t version = VK_API_VERSION_1_0;
#define X(f) PFN_##f f = nullptr;
  RELAX_VK_INSTANCE_FUNCTIONS(X)
#undef X
  ~Instance() {
    if (handle && vkDestroyInstance) vkDestroyInstance(handle, nullptr);
  }
};

std::unique_ptr<Instance> create_instance() {
  const Loader& l = loader();
  if (!l.lib) rt_fail("Vulkan is unavailable: ", l.error);
  auto inst = std::make_unique<Instance>();
  if (l.vkEnumerateInstanceVersion) l.vkEnumerateInstanceVersion(&inst->version);
  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "relax";
  app.pEngineName = "relax";
  app.apiVersion = std::min<uint32_t>(inst->version, VK_API_VERSION_1_3);
  VkInstanceCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  ci.pApplicationInfo = &app;
  VkResult r = l.vkCreateInstance(&ci, nullptr, &inst->handle);
  if (r != VK_SUCCESS) rt_fail("Vulkan is unavailable: vkCreateInstance failed: ", result_name(r));
#define X(f) inst->f = reinterpret_cast<PFN_##f>(l.get_proc(inst->handle, #f));
  RELAX_VK_INSTANCE_FUNCTIONS(X)
#undef X
  if (!inst->vkEnumeratePhysicalDevices || !inst->vkGetPhysicalDeviceProperties)
    rt_fail("Vulkan is unavailable: the instance lacks vkEnumeratePhysicalDevices");
  return inst;
}

VulkanDeviceInfo describe(const Instance& inst, VkPhysicalDevice pd) {
  VulkanDeviceInfo d;
  VkPhysicalDeviceProperties p{};
  inst.vkGetPhysicalDeviceProperties(pd, &p);
  d.name = p.deviceName;
  d.type = type_text(p.deviceType);
  d.api_version = version_text(p.apiVersion);
  d.vendor_id = p.vendorID;
  d.device_id = p.deviceID;
  const VkPhysicalDeviceLimits& lim = p.limits;
  d.max_storage_buffer_range = lim.maxStorageBufferRange;
  d.max_shared_memory = lim.maxComputeSharedMemorySize;
  d.max_workgroup_invocations = lim.maxComputeWorkGroupInvocations;
  for (int i = 0; i < 3; ++i) {
    d.max_workgroup_size[i] = lim.maxComputeWorkGroupSize[i];
    d.max_workgroup_count[i] = lim.maxComputeWorkGroupCount[i];
  }
  d.max_push_constants = lim.maxPushConstantsSize;

  VkPhysicalDeviceFeatures f{};
  inst.vkGetPhysicalDeviceFeatures(pd, &f);
  d.float64 = f.shaderFloat64;
  d.int16 = f.shaderInt16;
  d.int64 = f.shaderInt64;

  bool v11 = inst.version >= VK_API_VERSION_1_1 && p.apiVersion >= VK_API_VERSION_1_1 &&
             inst.vkGetPhysicalDeviceProperties2 && inst.vkGetPhysicalDeviceFeatures2;
  bool v12 = v11 && p.apiVersion >= VK_API_VERSION_1_2;
  if (v11) {
    VkPhysicalDeviceSubgroupProperties sub{};
    sub.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES;
    VkPhysicalDeviceDriverProperties drv{};
    drv.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES;
    if (v12) sub.pNext = &drv;
    VkPhysicalDeviceProperties2 p2{};
    p2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
    p2.pNext = &sub;
    inst.vkGetPhysicalDeviceProperties2(pd, &p2);
    d.subgroup_size = sub.subgroupSize;
    d.subgroup_arithmetic = (sub.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                            (sub.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
    if (v12) d.driver = std::string(drv.driverName) + (drv.driverInfo[0] ? std::string(" ") + drv.driverInfo : "");

    VkPhysicalDevice16BitStorageFeatures s16{};
    s16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES;
    VkPhysicalDevice8BitStorageFeatures s8{};
    s8.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES;
    VkPhysicalDeviceShaderFloat16Int8Features f16{};
    f16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES;
    if (v12) {
      s16.pNext = &s8;
      s8.pNext = &f16;
    }
    VkPhysicalDeviceFeatures2 f2{};
    f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    f2.pNext = &s16;
    inst.vkGetPhysicalDeviceFeatures2(pd, &f2);
    d.storage16 = s16.storageBuffer16BitAccess;
    if (v12) {
      d.storage8 = s8.storageBuffer8BitAccess;
      d.float16 = f16.shaderFloat16;
      d.int8 = f16.shaderInt8;
    }
  }

  VkPhysicalDeviceMemoryProperties mem{};
  inst.vkGetPhysicalDeviceMemoryProperties(pd, &mem);
  for (uint32_t h = 0; h < mem.memoryHeapCount; ++h)
    if (mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
      d.device_local_bytes = std::max<uint64_t>(d.device_local_bytes, mem.memoryHeaps[h].size);
  return d;
}

bool has_compute_queue(const Instance& inst, VkPhysicalDevice pd) {
  uint32_t n = 0;
  inst.vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, nullptr);
  std::vector<VkQueueFamilyProperties> q(n);
  inst.vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, q.data());
  for (const VkQueueFamilyProperties& f : q)
    if (f.queueFlags & VK_QUEUE_COMPUTE_BIT) return true;
  return false;
}

}  // namespace

std::vector<VulkanDeviceInfo> vulkan_devices() {
  std::unique_ptr<Instance> inst = create_instance();
  uint32_t n = 0;
  VkResult r = inst->vkEnumeratePhysicalDevices(inst->handle, &n, nullptr);
  if (r != VK_SUCCESS) rt_fail("Vulkan is unavailable: vkEnumeratePhysicalDevices failed: ", result_name(r));
  std::vector<VkPhysicalDevice> pds(n);
  if (n) inst->vkEnumeratePhysicalDevices(inst->handle, &n, pds.data());
  std::vector<VulkanDeviceInfo> out;
  for (VkPhysicalDevice pd : pds) {
    if (!has_compute_queue(*inst, pd)) continue;
    out.push_back(describe(*inst, pd));
    out.back().index = int(out.size() - 1);
  }
  if (out.empty())
    rt_fail("Vulkan is unavailable: the loader found no device with a compute queue (no driver installed? on a "
            "machine without a GPU, Mesa's lavapipe, package mesa-vulkan-drivers, provides one)");
  return out;
}

#else

std::vector<VulkanDeviceInfo> vulkan_devices() {
  rt_fail("Vulkan is unavailable: this runtime was built without the Vulkan headers (package libvulkan-dev)");
}

#endif

bool vulkan_available(std::string* why) {
  try {
    vulkan_devices();
    return true;
  } catch (const Error& e) {
    if (why) *why = e.what();
    return false;
  }
}

}  // namespace relax::rt
