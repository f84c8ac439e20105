#include "runtime/vulkan.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>

#include "runtime/dtype.h"
#include "runtime/error.h"

#if RELAX_HAVE_VULKAN_HEADERS
#include "runtime/vulkan_internal.h"
#endif

namespace relax::rt {

#if RELAX_HAVE_VULKAN_HEADERS
namespace vk {

// Entry points, listed once: global ones (no instance) and instance ones.
#define RELAX_VK_GLOBAL_FUNCTIONS(X) X(vkCreateInstance) X(vkEnumerateInstanceVersion)
#define RELAX_VK_INSTANCE_FUNCTIONS(X)                                                         \
  X(vkDestroyInstance)                                                                         \
  X(vkEnumeratePhysicalDevices) X(vkGetPhysicalDeviceProperties) X(vkGetPhysicalDeviceProperties2) \
      X(vkGetPhysicalDeviceFeatures) X(vkGetPhysicalDeviceFeatures2)                           \
          X(vkGetPhysicalDeviceQueueFamilyProperties) X(vkGetPhysicalDeviceMemoryProperties) X(vkCreateDevice) \
              X(vkGetDeviceProcAddr)

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
  d.min_storage_offset_alignment = lim.minStorageBufferOffsetAlignment;

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

}  // namespace vk
using namespace vk;

VulkanDevice::Impl::~Impl() {
  if (!dev) return;
  vkDeviceWaitIdle(dev);
  if (fence) vkDestroyFence(dev, fence, nullptr);
  if (pool) vkDestroyCommandPool(dev, pool, nullptr);
  vkDestroyDevice(dev, nullptr);
}

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

std::shared_ptr<VulkanDevice::Buffer> VulkanDevice::alloc(uint64_t bytes, Memory where, bool in_chunks) {
  if (bytes > info_.max_storage_buffer_range && !in_chunks && where != Memory::Staging) {
    if (where == Memory::Mapped) return nullptr;
    rt_fail("vulkan: a buffer of ", bytes, " bytes exceeds the device's storage-buffer range of ",
            info_.max_storage_buffer_range, " bytes (", info_.name, ")");
  }
  Impl& d = *impl_;
  auto b = std::make_shared<Buffer>();
  b->owner = impl_;
  b->bytes = std::max<uint64_t>(bytes, 4);
  VkBufferCreateInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  bi.size = b->bytes;
  bi.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  if (where != Memory::Staging) bi.usage |= VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  check(d.vkCreateBuffer(d.dev, &bi, nullptr, &b->buffer), "vkCreateBuffer");
  VkMemoryRequirements req{};
  d.vkGetBufferMemoryRequirements(d.dev, b->buffer, &req);
  constexpr VkMemoryPropertyFlags local = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
  constexpr VkMemoryPropertyFlags host = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  int type = -1;
  switch (where) {
    case Memory::Device:
      type = d.memory_type(req.memoryTypeBits, local, 0);
      if (type < 0) type = d.memory_type(req.memoryTypeBits, 0, 0);
      break;
    case Memory::Mapped:
      type = d.memory_type(req.memoryTypeBits, host | local, 0);
      break;
    case Memory::Staging:
      type = d.memory_type(req.memoryTypeBits, host, VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
      break;
  }
  if (type < 0) {
    if (where == Memory::Mapped) return nullptr;
    rt_fail("vulkan: no memory type for a ", where == Memory::Staging ? "staging" : "storage", " buffer");
  }
  VkMemoryAllocateInfo mi{};
  mi.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  mi.allocationSize = req.size;
  mi.memoryTypeIndex = uint32_t(type);
  VkResult r = d.vkAllocateMemory(d.dev, &mi, nullptr, &b->memory);
  if (r != VK_SUCCESS) {
    if (where == Memory::Mapped) return nullptr;  // the caller falls back to host memory
    rt_fail("vulkan: allocating ", bytes, " bytes of device memory failed: ", result_name(r));
  }
  check(d.vkBindBufferMemory(d.dev, b->buffer, b->memory, 0), "vkBindBufferMemory");
  VkMemoryPropertyFlags flags = d.mem.memoryTypes[type].propertyFlags;
  b->device_local = flags & local;
  if ((flags & host) == host) check(d.vkMapMemory(d.dev, b->memory, 0, VK_WHOLE_SIZE, 0, &b->mapped), "vkMapMemory");
  return b;
}

void VulkanDevice::copy(const Buffer& from, uint64_t from_offset, const Buffer& to, uint64_t to_offset,
                        uint64_t bytes) {
  if (bytes == 0) return;
  Impl& d = *impl_;
  d.begin();
  VkBufferCopy region{from_offset, to_offset, bytes};
  d.vkCmdCopyBuffer(d.cmd, from.buffer, to.buffer, 1, &region);
  d.submit_and_wait();
}

void VulkanDevice::upload(Buffer& dst, const void* src, uint64_t bytes) {
  if (bytes > dst.bytes) rt_fail("vulkan: upload of ", bytes, " bytes into a buffer of ", dst.bytes);
  if (bytes == 0) return;
  if (dst.mapped) {
    std::memcpy(dst.mapped, src, bytes);
    return;
  }
  auto s = alloc(bytes, Memory::Staging);
  std::memcpy(s->mapped, src, bytes);
  copy(*s, 0, dst, 0, bytes);
}

void VulkanDevice::download(const Buffer& src, void* dst, uint64_t bytes) {
  if (bytes > src.bytes) rt_fail("vulkan: download of ", bytes, " bytes from a buffer of ", src.bytes);
  if (bytes == 0) return;
  if (src.mapped) {
    std::memcpy(dst, src.mapped, bytes);
    return;
  }
  auto s = alloc(bytes, Memory::Staging);
  copy(src, 0, *s, 0, bytes);
  std::memcpy(dst, s->mapped, bytes);
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
  for (size_t i = 0; i < buffers.size(); ++i) infos[i] = {buffers[i]->buffer, 0, VK_WHOLE_SIZE};
  d.write_descriptors(set, infos);
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

#else

std::shared_ptr<VulkanDevice> VulkanDevice::open(int) {
  rt_fail("Vulkan is unavailable: this runtime was built without the Vulkan headers (package libvulkan-dev)");
}
VulkanDevice::~VulkanDevice() = default;

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
