#include "runtime/vulkan.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>

#include <nlohmann/json.hpp>

#include "runtime/bytecode.h"
#include "runtime/dtype.h"
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
          X(vkGetPhysicalDeviceQueueFamilyProperties) X(vkGetPhysicalDeviceMemoryProperties) X(vkCreateDevice) \
              X(vkGetDeviceProcAddr)
#define RELAX_VK_DEVICE_FUNCTIONS(X)                                                                            \
  X(vkDestroyDevice)                                                                                            \
  X(vkGetDeviceQueue) X(vkCreateBuffer) X(vkDestroyBuffer) X(vkGetBufferMemoryRequirements) X(vkAllocateMemory)  \
      X(vkFreeMemory) X(vkBindBufferMemory) X(vkMapMemory) X(vkUnmapMemory) X(vkCreateShaderModule)             \
          X(vkDestroyShaderModule) X(vkCreateDescriptorSetLayout) X(vkDestroyDescriptorSetLayout)               \
              X(vkCreatePipelineLayout) X(vkDestroyPipelineLayout) X(vkCreateComputePipelines) X(vkDestroyPipeline) \
                  X(vkCreateDescriptorPool) X(vkDestroyDescriptorPool) X(vkResetDescriptorPool)                 \
                      X(vkAllocateDescriptorSets) X(vkUpdateDescriptorSets) X(vkCreateCommandPool)              \
                          X(vkDestroyCommandPool) X(vkAllocateCommandBuffers) X(vkBeginCommandBuffer)           \
                              X(vkEndCommandBuffer) X(vkResetCommandBuffer) X(vkCmdBindPipeline)                \
                                  X(vkCmdBindDescriptorSets) X(vkCmdPushConstants) X(vkCmdDispatch)             \
                                      X(vkCmdPipelineBarrier) X(vkCmdCopyBuffer) X(vkQueueSubmit)               \
                                          X(vkCreateFence) X(vkDestroyFence) X(vkWaitForFences) X(vkResetFences) \
                                              X(vkDeviceWaitIdle)

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

// The first queue family with compute, or -1.
int compute_family(const Instance& inst, VkPhysicalDevice pd) {
  uint32_t n = 0;
  inst.vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, nullptr);
  std::vector<VkQueueFamilyProperties> q(n);
  inst.vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, q.data());
  for (uint32_t i = 0; i < n; ++i)
    if (q[i].queueFlags & VK_QUEUE_COMPUTE_BIT) return int(i);
  return -1;
}
bool has_compute_queue(const Instance& inst, VkPhysicalDevice pd) { return compute_family(inst, pd) >= 0; }

// The compute devices of `inst`, in --device order.
std::vector<VkPhysicalDevice> compute_devices(const Instance& inst) {
  uint32_t n = 0;
  VkResult r = inst.vkEnumeratePhysicalDevices(inst.handle, &n, nullptr);
  if (r != VK_SUCCESS) rt_fail("Vulkan is unavailable: vkEnumeratePhysicalDevices failed: ", result_name(r));
  std::vector<VkPhysicalDevice> pds(n);
  if (n) inst.vkEnumeratePhysicalDevices(inst.handle, &n, pds.data());
  std::vector<VkPhysicalDevice> out;
  for (VkPhysicalDevice pd : pds)
    if (has_compute_queue(inst, pd)) out.push_back(pd);
  return out;
}

void check(VkResult r, const char* what) {
  if (r != VK_SUCCESS) rt_fail("vulkan: ", what, " failed: ", result_name(r));
}

}  // namespace

std::vector<VulkanDeviceInfo> vulkan_devices() {
  std::unique_ptr<Instance> inst = create_instance();
  std::vector<VulkanDeviceInfo> out;
  for (VkPhysicalDevice pd : compute_devices(*inst)) {
    out.push_back(describe(*inst, pd));
    out.back().index = int(out.size() - 1);
  }
  if (out.empty())
    rt_fail("Vulkan is unavailable: the loader found no device with a compute queue (no driver installed? on a "
            "machine without a GPU, Mesa's lavapipe, package mesa-vulkan-drivers, provides one)");
  return out;
}

// ---- An opened device --------------------------------------------------------------

struct VulkanDevice::Impl {
  std::unique_ptr<Instance> inst;
  VkPhysicalDevice pd = VK_NULL_HANDLE;
  VkDevice dev = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  uint32_t family = 0;
  VkPhysicalDeviceMemoryProperties mem{};
  VkCommandPool pool = VK_NULL_HANDLE;
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  VkFence fence = VK_NULL_HANDLE;
#define X(f) PFN_##f f = nullptr;
  RELAX_VK_DEVICE_FUNCTIONS(X)
#undef X

  ~Impl() {
    if (!dev) return;
    vkDeviceWaitIdle(dev);
    if (fence) vkDestroyFence(dev, fence, nullptr);
    if (pool) vkDestroyCommandPool(dev, pool, nullptr);
    vkDestroyDevice(dev, nullptr);
  }

  // A memory type among `bits` with all of `want`, preferring one with
  // `prefer` too; -1 when none.
  int memory_type(uint32_t bits, VkMemoryPropertyFlags want, VkMemoryPropertyFlags prefer) const {
    int found = -1;
    for (uint32_t i = 0; i < mem.memoryTypeCount; ++i) {
      if (!(bits & (1u << i)) || (mem.memoryTypes[i].propertyFlags & want) != want) continue;
      if ((mem.memoryTypes[i].propertyFlags & prefer) == prefer) return int(i);
      if (found < 0) found = int(i);
    }
    return found;
  }

  void begin() {
    check(vkResetCommandBuffer(cmd, 0), "vkResetCommandBuffer");
    VkCommandBufferBeginInfo bi{};
    bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    check(vkBeginCommandBuffer(cmd, &bi), "vkBeginCommandBuffer");
  }
  void submit_and_wait() {
    check(vkEndCommandBuffer(cmd), "vkEndCommandBuffer");
    VkSubmitInfo si{};
    si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
    si.commandBufferCount = 1;
    si.pCommandBuffers = &cmd;
    check(vkQueueSubmit(queue, 1, &si, fence), "vkQueueSubmit");
    check(vkWaitForFences(dev, 1, &fence, VK_TRUE, UINT64_MAX), "vkWaitForFences");
    check(vkResetFences(dev, 1, &fence), "vkResetFences");
  }
};

class VulkanDevice::Buffer {
 public:
  std::shared_ptr<VulkanDevice::Impl> owner;
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  uint64_t bytes = 0;
  void* mapped = nullptr;  // when the memory is host-visible
  ~Buffer() {
    if (mapped) owner->vkUnmapMemory(owner->dev, memory);
    if (buffer) owner->vkDestroyBuffer(owner->dev, buffer, nullptr);
    if (memory) owner->vkFreeMemory(owner->dev, memory, nullptr);
  }
};

class VulkanDevice::Kernel {
 public:
  std::shared_ptr<VulkanDevice::Impl> owner;
  std::string name;
  uint32_t num_buffers = 0, push_bytes = 0;
  VkShaderModule module = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
  VkDescriptorPool descriptors = VK_NULL_HANDLE;
  ~Kernel() {
    VkDevice d = owner->dev;
    if (descriptors) owner->vkDestroyDescriptorPool(d, descriptors, nullptr);
    if (pipeline) owner->vkDestroyPipeline(d, pipeline, nullptr);
    if (layout) owner->vkDestroyPipelineLayout(d, layout, nullptr);
    if (set_layout) owner->vkDestroyDescriptorSetLayout(d, set_layout, nullptr);
    if (module) owner->vkDestroyShaderModule(d, module, nullptr);
  }
};

VulkanDevice::VulkanDevice(std::shared_ptr<Impl> impl, VulkanDeviceInfo info)
    : impl_(std::move(impl)), info_(std::move(info)) {}
VulkanDevice::~VulkanDevice() = default;

std::shared_ptr<VulkanDevice> VulkanDevice::open(int index) {
  auto impl = std::make_shared<Impl>();
  impl->inst = create_instance();
  Instance& inst = *impl->inst;
  std::vector<VkPhysicalDevice> pds = compute_devices(inst);
  if (pds.empty()) rt_fail("Vulkan is unavailable: no device with a compute queue");
  if (index < 0 || size_t(index) >= pds.size())
    rt_fail("vulkan: --device ", index, " does not exist (", pds.size(), " device", pds.size() == 1 ? "" : "s",
            ": relax-run --list-devices)");
  impl->pd = pds[size_t(index)];
  VulkanDeviceInfo info = describe(inst, impl->pd);
  info.index = index;
  impl->family = uint32_t(compute_family(inst, impl->pd));
  inst.vkGetPhysicalDeviceMemoryProperties(impl->pd, &impl->mem);

  float priority = 1.0f;
  VkDeviceQueueCreateInfo qi{};
  qi.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  qi.queueFamilyIndex = impl->family;
  qi.queueCount = 1;
  qi.pQueuePriorities = &priority;
  VkDeviceCreateInfo di{};
  di.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  di.queueCreateInfoCount = 1;
  di.pQueueCreateInfos = &qi;
  // Enable what the device has of what kernels may use: 64/16-bit integers,
  // f64, and (Vulkan 1.1/1.2 structures) 8/16-bit storage, f16 and i8
  // arithmetic.
  VkPhysicalDeviceFeatures features{};
  features.shaderInt64 = info.int64;
  features.shaderInt16 = info.int16;
  features.shaderFloat64 = info.float64;
  di.pEnabledFeatures = &features;
  VkPhysicalDevice16BitStorageFeatures s16{};
  s16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES;
  s16.storageBuffer16BitAccess = info.storage16;
  VkPhysicalDevice8BitStorageFeatures s8{};
  s8.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES;
  s8.storageBuffer8BitAccess = info.storage8;
  VkPhysicalDeviceShaderFloat16Int8Features f16{};
  f16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES;
  f16.shaderFloat16 = info.float16;
  f16.shaderInt8 = info.int8;
  const void** tail = &di.pNext;
  if (info.storage16) {
    *tail = &s16;
    tail = const_cast<const void**>(&s16.pNext);
  }
  if (info.storage8) {
    *tail = &s8;
    tail = const_cast<const void**>(&s8.pNext);
  }
  if (info.float16 || info.int8) *tail = &f16;
  check(inst.vkCreateDevice(impl->pd, &di, nullptr, &impl->dev), "vkCreateDevice");
#define X(f) impl->f = reinterpret_cast<PFN_##f>(inst.vkGetDeviceProcAddr(impl->dev, #f));
  RELAX_VK_DEVICE_FUNCTIONS(X)
#undef X
  impl->vkGetDeviceQueue(impl->dev, impl->family, 0, &impl->queue);
  VkCommandPoolCreateInfo pi{};
  pi.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pi.queueFamilyIndex = impl->family;
  check(impl->vkCreateCommandPool(impl->dev, &pi, nullptr, &impl->pool), "vkCreateCommandPool");
  VkCommandBufferAllocateInfo ai{};
  ai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  ai.commandPool = impl->pool;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  check(impl->vkAllocateCommandBuffers(impl->dev, &ai, &impl->cmd), "vkAllocateCommandBuffers");
  VkFenceCreateInfo fi{};
  fi.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  check(impl->vkCreateFence(impl->dev, &fi, nullptr, &impl->fence), "vkCreateFence");
  return std::shared_ptr<VulkanDevice>(new VulkanDevice(std::move(impl), std::move(info)));
}

std::shared_ptr<VulkanDevice::Buffer> VulkanDevice::alloc(uint64_t bytes) {
  if (bytes > info_.max_storage_buffer_range)
    rt_fail("vulkan: a buffer of ", bytes, " bytes exceeds the device's storage-buffer range of ",
            info_.max_storage_buffer_range, " bytes (", info_.name, ")");
  Impl& d = *impl_;
  auto b = std::make_shared<Buffer>();
  b->owner = impl_;
  b->bytes = std::max<uint64_t>(bytes, 4);
  VkBufferCreateInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  bi.size = b->bytes;
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  check(d.vkCreateBuffer(d.dev, &bi, nullptr, &b->buffer), "vkCreateBuffer");
  VkMemoryRequirements req{};
  d.vkGetBufferMemoryRequirements(d.dev, b->buffer, &req);
  int type = d.memory_type(req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
  if (type < 0) type = d.memory_type(req.memoryTypeBits, 0, 0);
  if (type < 0) rt_fail("vulkan: no memory type for a storage buffer");
  VkMemoryAllocateInfo mi{};
  mi.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  mi.allocationSize = req.size;
  mi.memoryTypeIndex = uint32_t(type);
  check(d.vkAllocateMemory(d.dev, &mi, nullptr, &b->memory), "vkAllocateMemory");
  check(d.vkBindBufferMemory(d.dev, b->buffer, b->memory, 0), "vkBindBufferMemory");
  VkMemoryPropertyFlags flags = d.mem.memoryTypes[type].propertyFlags;
  if ((flags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) && (flags & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT))
    check(d.vkMapMemory(d.dev, b->memory, 0, VK_WHOLE_SIZE, 0, &b->mapped), "vkMapMemory");
  return b;
}

namespace {

// A host-visible buffer for copies to and from device-local memory.
struct Staging {
  std::shared_ptr<VulkanDevice::Impl> d;
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  void* mapped = nullptr;
  Staging(std::shared_ptr<VulkanDevice::Impl> dev, uint64_t bytes) : d(std::move(dev)) {
    VkBufferCreateInfo bi{};
    bi.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
    bi.size = bytes;
    bi.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    check(d->vkCreateBuffer(d->dev, &bi, nullptr, &buffer), "vkCreateBuffer (staging)");
    VkMemoryRequirements req{};
    d->vkGetBufferMemoryRequirements(d->dev, buffer, &req);
    int type = d->memory_type(req.memoryTypeBits,
                              VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                              VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
    if (type < 0) rt_fail("vulkan: no host-visible memory for staging");
    VkMemoryAllocateInfo mi{};
    mi.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
    mi.allocationSize = req.size;
    mi.memoryTypeIndex = uint32_t(type);
    check(d->vkAllocateMemory(d->dev, &mi, nullptr, &memory), "vkAllocateMemory (staging)");
    check(d->vkBindBufferMemory(d->dev, buffer, memory, 0), "vkBindBufferMemory (staging)");
    check(d->vkMapMemory(d->dev, memory, 0, VK_WHOLE_SIZE, 0, &mapped), "vkMapMemory (staging)");
  }
  ~Staging() {
    d->vkUnmapMemory(d->dev, memory);
    d->vkDestroyBuffer(d->dev, buffer, nullptr);
    d->vkFreeMemory(d->dev, memory, nullptr);
  }
  void copy(VkBuffer from, VkBuffer to, uint64_t bytes) {
    d->begin();
    VkBufferCopy region{0, 0, bytes};
    d->vkCmdCopyBuffer(d->cmd, from, to, 1, &region);
    d->submit_and_wait();
  }
};

}  // namespace

void VulkanDevice::upload(Buffer& dst, const void* src, uint64_t bytes) {
  if (bytes > dst.bytes) rt_fail("vulkan: upload of ", bytes, " bytes into a buffer of ", dst.bytes);
  if (bytes == 0) return;
  if (dst.mapped) {
    std::memcpy(dst.mapped, src, bytes);
    return;
  }
  Staging s(impl_, bytes);
  std::memcpy(s.mapped, src, bytes);
  s.copy(s.buffer, dst.buffer, bytes);
}

void VulkanDevice::download(const Buffer& src, void* dst, uint64_t bytes) {
  if (bytes > src.bytes) rt_fail("vulkan: download of ", bytes, " bytes from a buffer of ", src.bytes);
  if (bytes == 0) return;
  if (src.mapped) {
    std::memcpy(dst, src.mapped, bytes);
    return;
  }
  Staging s(impl_, bytes);
  s.copy(src.buffer, s.buffer, bytes);
  std::memcpy(dst, s.mapped, bytes);
}

std::shared_ptr<VulkanDevice::Kernel> VulkanDevice::load_kernel(const std::string& name,
                                                                const std::vector<uint32_t>& spirv,
                                                                uint32_t num_buffers, uint32_t push_bytes) {
  if (push_bytes > info_.max_push_constants)
    rt_fail("vulkan: kernel '", name, "' needs ", push_bytes, " bytes of push constants; the device has ",
            info_.max_push_constants);
  Impl& d = *impl_;
  auto k = std::make_shared<Kernel>();
  k->owner = impl_;
  k->name = name;
  k->num_buffers = num_buffers;
  k->push_bytes = push_bytes;
  VkShaderModuleCreateInfo si{};
  si.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  si.codeSize = spirv.size() * sizeof(uint32_t);
  si.pCode = spirv.data();
  check(d.vkCreateShaderModule(d.dev, &si, nullptr, &k->module), "vkCreateShaderModule");
  std::vector<VkDescriptorSetLayoutBinding> bindings(num_buffers);
  for (uint32_t i = 0; i < num_buffers; ++i) {
    bindings[i].binding = i;
    bindings[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    bindings[i].descriptorCount = 1;
    bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo li{};
  li.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  li.bindingCount = num_buffers;
  li.pBindings = bindings.data();
  check(d.vkCreateDescriptorSetLayout(d.dev, &li, nullptr, &k->set_layout), "vkCreateDescriptorSetLayout");
  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
  VkPipelineLayoutCreateInfo pli{};
  pli.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  pli.setLayoutCount = 1;
  pli.pSetLayouts = &k->set_layout;
  pli.pushConstantRangeCount = push_bytes ? 1 : 0;
  pli.pPushConstantRanges = push_bytes ? &range : nullptr;
  check(d.vkCreatePipelineLayout(d.dev, &pli, nullptr, &k->layout), "vkCreatePipelineLayout");
  VkComputePipelineCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = k->module;
  ci.stage.pName = "main";
  ci.layout = k->layout;
  VkResult r = d.vkCreateComputePipelines(d.dev, VK_NULL_HANDLE, 1, &ci, nullptr, &k->pipeline);
  if (r != VK_SUCCESS) rt_fail("vulkan: kernel '", name, "': vkCreateComputePipelines failed: ", result_name(r));
  VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, std::max<uint32_t>(num_buffers, 1)};
  VkDescriptorPoolCreateInfo dpi{};
  dpi.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
  dpi.maxSets = 1;
  dpi.poolSizeCount = 1;
  dpi.pPoolSizes = &size;
  check(d.vkCreateDescriptorPool(d.dev, &dpi, nullptr, &k->descriptors), "vkCreateDescriptorPool");
  return k;
}

void VulkanDevice::dispatch(const Kernel& k, const std::vector<const Buffer*>& buffers, const void* push,
                            uint32_t push_bytes, const uint32_t groups[3]) {
  if (buffers.size() != k.num_buffers)
    rt_fail("vulkan: kernel '", k.name, "' takes ", k.num_buffers, " buffers, got ", buffers.size());
  if (push_bytes != k.push_bytes)
    rt_fail("vulkan: kernel '", k.name, "' takes ", k.push_bytes, " bytes of push constants, got ", push_bytes);
  for (int i = 0; i < 3; ++i)
    if (groups[i] > info_.max_workgroup_count[i])
      rt_fail("vulkan: kernel '", k.name, "': ", groups[i], " workgroups along axis ", i, " exceed the device's ",
              info_.max_workgroup_count[i]);
  Impl& d = *impl_;
  check(d.vkResetDescriptorPool(d.dev, k.descriptors, 0), "vkResetDescriptorPool");
  VkDescriptorSet set = VK_NULL_HANDLE;
  VkDescriptorSetAllocateInfo ai{};
  ai.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
  ai.descriptorPool = k.descriptors;
  ai.descriptorSetCount = 1;
  ai.pSetLayouts = &k.set_layout;
  check(d.vkAllocateDescriptorSets(d.dev, &ai, &set), "vkAllocateDescriptorSets");
  std::vector<VkDescriptorBufferInfo> infos(buffers.size());
  std::vector<VkWriteDescriptorSet> writes(buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    infos[i] = {buffers[i]->buffer, 0, VK_WHOLE_SIZE};
    writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    writes[i].dstSet = set;
    writes[i].dstBinding = uint32_t(i);
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
  }
  d.vkUpdateDescriptorSets(d.dev, uint32_t(writes.size()), writes.data(), 0, nullptr);
  d.begin();
  d.vkCmdBindPipeline(d.cmd, VK_PIPELINE_BIND_POINT_COMPUTE, k.pipeline);
  d.vkCmdBindDescriptorSets(d.cmd, VK_PIPELINE_BIND_POINT_COMPUTE, k.layout, 0, 1, &set, 0, nullptr);
  if (push_bytes) d.vkCmdPushConstants(d.cmd, k.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes, push);
  d.vkCmdDispatch(d.cmd, groups[0], groups[1], groups[2]);
  // Make the results visible to the host (mapped reads) and to later copies.
  VkMemoryBarrier mb{};
  mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_SHADER_READ_BIT;
  d.vkCmdPipelineBarrier(d.cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                         VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT |
                             VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                         0, 1, &mb, 0, nullptr, 0, nullptr);
  d.submit_and_wait();
}

// ---- A package's kernels ------------------------------------------------------------

struct VulkanKernels::Entry {
  std::string name;
  size_t num_inputs = 0;
  std::vector<std::pair<DType, size_t>> params;  // dtype, ndim
  std::vector<int64_t> push;                     // shape-args slot of each push constant
  struct Stage {
    std::shared_ptr<VulkanDevice::Kernel> kernel;
    std::vector<int64_t> threads;  // postfix code over the shape args
  };
  std::vector<Stage> stages;
  int64_t num_slots = 0;
};

VulkanKernels::~VulkanKernels() = default;

std::unique_ptr<VulkanKernels> VulkanKernels::load(std::string_view metadata, std::span<const uint8_t> spirv,
                                                   int device, const std::string& label) {
  auto out = std::unique_ptr<VulkanKernels>(new VulkanKernels);
  out->label_ = label;
  out->device_ = VulkanDevice::open(device);
  const VulkanDeviceInfo& info = out->device_->info();
  if (spirv.size() % 4 != 0) rt_fail(label, ": the SPIR-V section is not whole 32-bit words");
  try {
    nlohmann::json meta = nlohmann::json::parse(metadata);
    for (const std::string& need : meta.at("needs").get<std::vector<std::string>>()) {
      bool ok = need == "int64"       ? info.int64
                : need == "int16"     ? info.int16
                : need == "int8"      ? info.int8
                : need == "float16"   ? info.float16
                : need == "float64"   ? info.float64
                : need == "storage8"  ? info.storage8
                : need == "storage16" ? info.storage16
                                      : false;
      if (!ok)
        rt_fail(label, ": the package's kernels need the device feature '", need, "', which ", info.name,
                " lacks (relax-run --list-devices shows what each device has)");
    }
    size_t total_words = spirv.size() / 4;
    for (const auto& k : meta.at("kernels")) {
      auto e = std::make_shared<Entry>();
      e->name = k.at("name");
      e->num_inputs = k.at("num_inputs");
      for (const auto& p : k.at("params")) {
        auto dt = DType::parse(p.at("dtype").get<std::string>());
        if (!dt) rt_fail(label, ": kernel ", e->name, ": unknown dtype ", p.at("dtype").dump());
        e->params.emplace_back(*dt, p.at("ndim").get<size_t>());
        e->num_slots += int64_t(e->params.back().second);
      }
      e->push = k.at("push").get<std::vector<int64_t>>();
      int64_t syms = 0;
      for (int64_t s : e->push) syms = std::max(syms, s + 1 - e->num_slots);
      e->num_slots += syms;
      for (const auto& st : k.at("stages")) {
        size_t off = st.at("offset"), n = st.at("words");
        if (off > total_words || n > total_words - off) rt_fail(label, ": kernel ", e->name, ": SPIR-V out of range");
        std::vector<uint32_t> words(n);
        std::memcpy(words.data(), spirv.data() + off * 4, n * 4);
        Entry::Stage stage;
        stage.kernel = out->device_->load_kernel(st.at("name").get<std::string>(), words, uint32_t(e->params.size()),
                                                 uint32_t(e->push.size() * 4));
        stage.threads = st.at("threads").get<std::vector<int64_t>>();
        e->stages.push_back(std::move(stage));
      }
      out->entries_.push_back(std::move(e));
    }
    out->label_ += " (block " + std::to_string(meta.value("block", 256)) + ")";
  } catch (const nlohmann::json::exception& e) {
    rt_fail(label, ": the Vulkan kernel index is malformed: ", e.what());
  }
  return out;
}

KernelCall VulkanKernels::kernel_call(std::string_view name) const {
  std::shared_ptr<Entry> entry;
  for (const auto& e : entries_)
    if (e->name == name) entry = e;
  if (!entry) rt_fail(label_, ": no Vulkan kernel '", name, "'");
  std::shared_ptr<VulkanDevice> dev = device_;
  return [entry, dev](void* const* buffers, const int64_t* shape_args) -> int32_t {
    const Entry& e = *entry;
    std::vector<std::shared_ptr<VulkanDevice::Buffer>> bufs;
    std::vector<const VulkanDevice::Buffer*> bound;
    std::vector<uint64_t> bytes;
    size_t slot = 0;
    for (size_t i = 0; i < e.params.size(); ++i) {
      int64_t numel = 1;
      for (size_t d = 0; d < e.params[i].second; ++d) numel *= shape_args[slot++];
      if (numel >= (int64_t(1) << 31))
        rt_fail("vulkan kernel ", e.name, ": a tensor of ", numel, " elements is beyond 32-bit indexing");
      bytes.push_back(uint64_t(e.params[i].first.storage_bytes(numel)));
      bufs.push_back(dev->alloc(bytes.back()));
      bound.push_back(bufs.back().get());
      if (i < e.num_inputs) dev->upload(*bufs.back(), buffers[i], bytes.back());
    }
    std::vector<int32_t> push;
    for (int64_t s : e.push) {
      int64_t v = shape_args[s];
      if (v < INT32_MIN || v > INT32_MAX) rt_fail("vulkan kernel ", e.name, ": the size ", v, " is beyond 32 bits");
      push.push_back(int32_t(v));
    }
    const uint32_t block = 256;
    for (const Entry::Stage& st : e.stages) {
      int64_t threads = eval_shape_code(st.threads.data(), int64_t(st.threads.size()), shape_args, e.num_slots);
      int64_t groups = std::clamp<int64_t>((threads + block - 1) / block, 1,
                                           int64_t(dev->info().max_workgroup_count[0]));
      uint32_t g[3] = {uint32_t(groups), 1, 1};
      dev->dispatch(*st.kernel, bound, push.data(), uint32_t(push.size() * 4), g);
    }
    for (size_t i = e.num_inputs; i < e.params.size(); ++i) dev->download(*bufs[i], buffers[i], bytes[i]);
    return 0;
  };
}

#else

std::shared_ptr<VulkanDevice> VulkanDevice::open(int) {
  rt_fail("Vulkan is unavailable: this runtime was built without the Vulkan headers (package libvulkan-dev)");
}
VulkanDevice::~VulkanDevice() = default;

std::vector<VulkanDeviceInfo> vulkan_devices() {
  rt_fail("Vulkan is unavailable: this runtime was built without the Vulkan headers (package libvulkan-dev)");
}

VulkanKernels::~VulkanKernels() = default;
std::unique_ptr<VulkanKernels> VulkanKernels::load(std::string_view, std::span<const uint8_t>, int,
                                                   const std::string& label) {
  rt_fail(label, ": this runtime was built without Vulkan (package libvulkan-dev)");
}
KernelCall VulkanKernels::kernel_call(std::string_view) const { return {}; }

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
