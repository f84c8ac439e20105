// The Vulkan runtime's internals, shared by runtime/vulkan.cc (loader,
// devices, buffers, pipelines) and runtime/vulkan_exec.cc (a package's
// kernels, device-resident tensors, recorded command buffers). Included
// only where the Vulkan headers are (RELAX_HAVE_VULKAN_HEADERS).
#pragma once

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <memory>
#include <string>
#include <vector>

#include "runtime/vulkan.h"

namespace relax::rt {

// Device-level entry points, listed once; fetched with vkGetDeviceProcAddr.
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

namespace vk {
struct Instance;  // vulkan.cc
// Throws rt::Error "vulkan: <what> failed: <result>" unless r is VK_SUCCESS.
void check(VkResult r, const char* what);
std::string result_name(VkResult r);
}  // namespace vk

struct VulkanDevice::Impl {
  std::unique_ptr<vk::Instance> inst;
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

  ~Impl();  // vulkan.cc (the instance's type is private to it)

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

  // Points bindings 0.. of `set` at `infos`, in order (storage buffers).
  void write_descriptors(VkDescriptorSet set, const std::vector<VkDescriptorBufferInfo>& infos) {
    std::vector<VkWriteDescriptorSet> writes(infos.size());
    for (size_t i = 0; i < infos.size(); ++i) {
      writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
      writes[i].dstSet = set;
      writes[i].dstBinding = uint32_t(i);
      writes[i].descriptorCount = 1;
      writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      writes[i].pBufferInfo = &infos[i];
    }
    vkUpdateDescriptorSets(dev, uint32_t(writes.size()), writes.data(), 0, nullptr);
  }

  void begin() {
    vk::check(vkResetCommandBuffer(cmd, 0), "vkResetCommandBuffer");
    VkCommandBufferBeginInfo bi{};
    bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    vk::check(vkBeginCommandBuffer(cmd, &bi), "vkBeginCommandBuffer");
  }
  void submit_and_wait() {
    vk::check(vkEndCommandBuffer(cmd), "vkEndCommandBuffer");
    VkSubmitInfo si{};
    si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
    si.commandBufferCount = 1;
    si.pCommandBuffers = &cmd;
    vk::check(vkQueueSubmit(queue, 1, &si, fence), "vkQueueSubmit");
    vk::check(vkWaitForFences(dev, 1, &fence, VK_TRUE, UINT64_MAX), "vkWaitForFences");
    vk::check(vkResetFences(dev, 1, &fence), "vkResetFences");
  }
};

class VulkanDevice::Buffer {
 public:
  std::shared_ptr<VulkanDevice::Impl> owner;
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  uint64_t bytes = 0;
  void* mapped = nullptr;  // when the memory is host-visible (and coherent)
  bool device_local = false;
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

}  // namespace relax::rt
