// The Vulkan runtime, part 2: a package's kernels on an opened device, the
// tensors they use (device-resident where the host can map device memory)
// and the command buffer their calls are recorded into (runtime/vulkan.h).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "runtime/allocator.h"
#include "runtime/bytecode.h"
#include "runtime/error.h"
#include "runtime/vulkan.h"

#if RELAX_HAVE_VULKAN_HEADERS
#include "runtime/vulkan_internal.h"
#endif

namespace relax::rt {

#if RELAX_HAVE_VULKAN_HEADERS

using vk::check;
using Buffer = VulkanDevice::Buffer;

struct VulkanKernels::Entry {
  std::string name;
  size_t num_inputs = 0;
  std::vector<std::pair<DType, size_t>> params;  // dtype, ndim
  // Bindings of each parameter: 1, or chunks of kChunkBytes (a large
  // weight: the first at its binding, the rest after all parameters').
  std::vector<int64_t> chunks;
  static constexpr uint64_t kChunkBytes = uint64_t(1) << 27;  // the code generator's (kGlslChunkBytes)
  std::vector<int64_t> push;                     // shape-args slot of each push constant
  bool push_buffer = false;  // the push constants in a storage buffer at the last binding
  struct Stage {
    std::shared_ptr<VulkanDevice::Kernel> kernel;
    std::vector<int64_t> threads;  // postfix code over the shape args
    std::vector<int64_t> loop_iters;  // a row's most iterations of one loop in one invocation (empty: none)
    // The workgroup schedule: one row (what a thread of `kernel` does) per
    // workgroup; null when the stage has none.
    std::shared_ptr<VulkanDevice::Kernel> rows;
    std::vector<int64_t> work;   // loop iterations per row
    std::vector<int64_t> count;  // rows (`threads` may count register tiles of rows)
    // `kernel` without its register tile (one row per thread); null when
    // `kernel` has none.
    std::shared_ptr<VulkanDevice::Kernel> plain;
    std::vector<int64_t> plain_threads;
    int64_t tile = 1;
    // The stage tiled through shared memory: `groups` workgroups, each a
    // block of a rows x cols output; null when the stage has none.
    std::shared_ptr<VulkanDevice::Kernel> shared;
    std::vector<int64_t> groups, out_rows, out_cols, depth;
    int64_t block_rows = 1, block_cols = 1, block_depth = 1;
    // The parameters the stage loads and stores (by position); a package
    // without the lists (older ones) reads every parameter, writes the outputs.
    std::vector<int64_t> reads, writes;
  };
  std::vector<Stage> stages;
  int64_t num_slots = 0;
};

// The execution state of one package on one device: which host memory is
// device memory, and the command buffer being recorded.
struct VulkanKernels::Exec {
  std::shared_ptr<VulkanDevice> dev;
  VulkanDevice::Impl& d;
  uint64_t align;          // binding offsets are multiples of this
  bool residency = true;   // tensors may live in mapped device memory
  static constexpr uint32_t kBlock = 256;  // threads per workgroup (the code generator's)
  int force_rows = -1;  // RELAX_VULKAN_ROWS=0|1: never or always the workgroup schedule (tests, tuning)
  int force_shared = -1;  // RELAX_VULKAN_SHARED=0|1: never or always the shared-memory tiles
  bool cpu_device = false;

  // Host ranges that are device memory (pool blocks, weight arenas), by
  // first byte. Pool blocks come and go from any thread.
  struct Resident {
    std::shared_ptr<Buffer> buffer;
    size_t size;
  };
  mutable std::mutex mu;
  std::map<const char*, Resident> resident;
  uint64_t resident_bytes = 0;

  // Recording.
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  VkFence fence = VK_NULL_HANDLE;
  bool recording = false;
  std::vector<VkDescriptorPool> pools;
  size_t pool_at = 0;
  std::vector<std::shared_ptr<const void>> keep;  // what the recorded commands use, until they finish
  std::map<std::pair<const void*, uint64_t>, std::shared_ptr<Buffer>> mirrors;  // host memory uploaded
  struct Download {
    void* host;
    std::shared_ptr<Buffer> from;  // a kernel's output; copied through staging when not mapped
    uint64_t bytes;
  };
  std::vector<Download> downloads;
  std::unordered_set<VkBuffer> read, written;  // since the last barrier
  // RELAX_VULKAN_HOST_MEMORY=staged: copies go through staging buffers even
  // where device memory is mapped (what a discrete GPU without mappable
  // memory does; lets lavapipe test it).
  bool staged = false;
  // The weights' arena being filled (place_constant); each weight's storage
  // holds its arena.
  std::weak_ptr<const void> arena;
  char* arena_base = nullptr;
  uint64_t arena_size = 0, arena_used = 0;
  VulkanStats stats;
  bool profiling = false;
  std::map<std::string, VulkanKernels::KernelTime> times;

  explicit Exec(std::shared_ptr<VulkanDevice> device) : dev(std::move(device)), d(dev->impl()) {
    align = std::max<uint64_t>(dev->info().min_storage_offset_alignment, 64);
    const char* env = std::getenv("RELAX_VULKAN_HOST_MEMORY");
    residency = !(env && *env && std::string(env) != "0");
    staged = env && std::string(env) == "staged";
    if (const char* r = std::getenv("RELAX_VULKAN_ROWS"); r && *r) force_rows = std::string(r) != "0";
    if (const char* r = std::getenv("RELAX_VULKAN_SHARED"); r && *r) force_shared = std::string(r) != "0";
    cpu_device = dev->info().type == "cpu";
    VkCommandBufferAllocateInfo ai{};
    ai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
    ai.commandPool = d.pool;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    check(d.vkAllocateCommandBuffers(d.dev, &ai, &cmd), "vkAllocateCommandBuffers");
    VkFenceCreateInfo fi{};
    fi.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
    check(d.vkCreateFence(d.dev, &fi, nullptr, &fence), "vkCreateFence");
  }

  ~Exec() {
    // Whatever was recorded and never submitted is dropped; a submitted
    // buffer was waited for.
    if (recording) d.vkEndCommandBuffer(cmd);
    for (VkDescriptorPool p : pools) d.vkDestroyDescriptorPool(d.dev, p, nullptr);
    if (fence) d.vkDestroyFence(d.dev, fence, nullptr);
  }

  // Whether a stage with a workgroup schedule (one row per workgroup, the
  // row's loops split over its threads) uses it for `rows` rows of `work`
  // loop iterations each, rather than a thread per row. On a GPU: when the
  // rows are too few to fill it and have work to split, or are long. On a
  // CPU device (lavapipe), where a workgroup barrier costs tens of
  // microseconds: only for long rows (lavapipe also stops any loop after
  // 65535 iterations).
  bool use_rows(int64_t rows, int64_t work) const {
    if (force_rows >= 0) return force_rows;
    if (cpu_device) return work > 8192 || (rows < 16 && work > 2048);
    return work > 16384 || (rows < 65536 && work >= 256);
  }

  // Whether a matmul-like stage runs tiled through shared memory: a `rows`
  // x `cols` output reducing `depth` steps, in blocks of the stage's. On a
  // GPU: when the blocks are at least half used and a chunk of reduction
  // steps is full. On a CPU device, where each chunk's two barriers cost
  // more than the loads they save, never (unless forced).
  bool use_shared(const Entry::Stage& st, int64_t rows, int64_t cols, int64_t depth) const {
    if (force_shared >= 0) return force_shared;
    if (cpu_device) return false;
    int64_t blocks = (rows + st.block_rows - 1) / st.block_rows * ((cols + st.block_cols - 1) / st.block_cols);
    return depth >= st.block_depth && 2 * rows * cols >= blocks * st.block_rows * st.block_cols;
  }

  // ---- Residency ----

  void add_resident(const void* base, std::shared_ptr<Buffer> buffer, size_t size) {
    std::lock_guard lock(mu);
    resident[static_cast<const char*>(base)] = {std::move(buffer), size};
    resident_bytes += size;
  }

  // Forgets the range at `base`; its buffer is destroyed once no recorded
  // command uses it.
  void drop_resident(const void* base) {
    std::shared_ptr<Buffer> buffer;
    {
      std::lock_guard lock(mu);
      auto it = resident.find(static_cast<const char*>(base));
      if (it == resident.end()) return;
      buffer = std::move(it->second.buffer);
      resident_bytes -= it->second.size;
      resident.erase(it);
    }
    if (recording) keep.push_back(std::move(buffer));
  }

  // The device buffer and offset of host bytes [p, p + n), when resident.
  bool find_resident(const void* p, uint64_t n, std::shared_ptr<Buffer>& buffer, uint64_t& offset) const {
    const char* c = static_cast<const char*>(p);
    std::lock_guard lock(mu);
    auto it = resident.upper_bound(c);
    if (it == resident.begin()) return false;
    --it;
    uint64_t off = uint64_t(c - it->first);
    if (off + n > it->second.size) return false;
    buffer = it->second.buffer;
    offset = off;
    return true;
  }

  // ---- Recording ----

  void begin() {
    if (recording) return;
    check(d.vkResetCommandBuffer(cmd, 0), "vkResetCommandBuffer");
    VkCommandBufferBeginInfo bi{};
    bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    check(d.vkBeginCommandBuffer(cmd, &bi), "vkBeginCommandBuffer");
    recording = true;
  }

  void barrier(VkAccessFlags dst_access, VkPipelineStageFlags dst_stage) {
    VkMemoryBarrier mb{};
    mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = dst_access;
    d.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, dst_stage, 0,
                           1, &mb, 0, nullptr, 0, nullptr);
  }

  // Before a command that reads `reads` and writes `writes`: a barrier when
  // it depends on a command since the last one (read after write, write
  // after write, write after read).
  void order(std::initializer_list<VkBuffer> reads, std::initializer_list<VkBuffer> writes) {
    order(std::vector<VkBuffer>(reads), std::vector<VkBuffer>(writes));
  }
  void order(const std::vector<VkBuffer>& reads, const std::vector<VkBuffer>& writes) {
    bool need = false;
    for (VkBuffer b : reads) need = need || written.count(b);
    for (VkBuffer b : writes) need = need || written.count(b) || read.count(b);
    if (need) {
      barrier(VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                  VK_ACCESS_TRANSFER_WRITE_BIT,
              VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT);
      ++stats.barriers;
      read.clear();
      written.clear();
    }
    read.insert(reads.begin(), reads.end());
    written.insert(writes.begin(), writes.end());
  }

  void record_copy(const Buffer& from, uint64_t from_offset, const Buffer& to, uint64_t to_offset, uint64_t bytes) {
    if (bytes == 0) return;
    order({from.buffer}, {to.buffer});
    VkBufferCopy region{from_offset, to_offset, bytes};
    d.vkCmdCopyBuffer(cmd, from.buffer, to.buffer, 1, &region);
  }

  VkDescriptorSet descriptor_set(VkDescriptorSetLayout layout) {
    while (true) {
      if (pool_at == pools.size()) {
        VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 4096};
        VkDescriptorPoolCreateInfo pi{};
        pi.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
        pi.maxSets = 512;
        pi.poolSizeCount = 1;
        pi.pPoolSizes = &size;
        VkDescriptorPool p = VK_NULL_HANDLE;
        check(d.vkCreateDescriptorPool(d.dev, &pi, nullptr, &p), "vkCreateDescriptorPool");
        pools.push_back(p);
      }
      VkDescriptorSetAllocateInfo ai{};
      ai.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
      ai.descriptorPool = pools[pool_at];
      ai.descriptorSetCount = 1;
      ai.pSetLayouts = &layout;
      VkDescriptorSet set = VK_NULL_HANDLE;
      VkResult r = d.vkAllocateDescriptorSets(d.dev, &ai, &set);
      if (r == VK_SUCCESS) return set;
      if (r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL) check(r, "vkAllocateDescriptorSets");
      ++pool_at;  // this pool is full: the next one
    }
  }

  // Submits what was recorded, waits, and copies kernel outputs that live
  // in host memory back to it.
  void flush() {
    if (!recording) return;
    for (Download& dl : downloads)
      if (!dl.from->mapped || staged) {
        std::shared_ptr<Buffer> s = dev->alloc(dl.bytes, VulkanDevice::Memory::Staging);
        record_copy(*dl.from, 0, *s, 0, dl.bytes);
        dl.from = std::move(s);
      }
    barrier(VK_ACCESS_HOST_READ_BIT | VK_ACCESS_HOST_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT);
    recording = false;
    check(d.vkEndCommandBuffer(cmd), "vkEndCommandBuffer");
    VkSubmitInfo si{};
    si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
    si.commandBufferCount = 1;
    si.pCommandBuffers = &cmd;
    VkResult r = d.vkQueueSubmit(d.queue, 1, &si, fence);
    if (r == VK_SUCCESS) r = d.vkWaitForFences(d.dev, 1, &fence, VK_TRUE, UINT64_MAX);
    d.vkResetFences(d.dev, 1, &fence);
    ++stats.submits;
    if (r == VK_SUCCESS)
      for (const Download& dl : downloads) std::memcpy(dl.host, dl.from->mapped, dl.bytes);
    downloads.clear();
    mirrors.clear();
    keep.clear();
    read.clear();
    written.clear();
    for (VkDescriptorPool p : pools) d.vkResetDescriptorPool(d.dev, p, 0);
    pool_at = 0;
    check(r, "running the recorded kernels");
  }

  // A fresh device buffer holding host bytes [p, p + n), copied in when
  // `fill`; once per command buffer for the same bytes.
  std::shared_ptr<Buffer> mirror(const void* p, uint64_t n, bool fill, bool in_chunks = false) {
    auto key = std::make_pair(p, n);
    if (fill) {
      auto it = mirrors.find(key);
      if (it != mirrors.end()) return it->second;
    }
    std::shared_ptr<Buffer> b = dev->alloc((n + 3) / 4 * 4, VulkanDevice::Memory::Device, in_chunks);  // whole words (packed types)
    keep.push_back(b);
    if (fill && n) {
      stats.bytes_uploaded += n;
      if (b->mapped && !staged) {
        std::memcpy(b->mapped, p, n);
      } else {
        std::shared_ptr<Buffer> s = dev->alloc(n, VulkanDevice::Memory::Staging);
        keep.push_back(s);
        std::memcpy(s->mapped, p, n);
        record_copy(*s, 0, *b, 0, n);
      }
    }
    mirrors[key] = b;
    return b;
  }

  // Records one call of `e` (when profiling: runs it alone, and times it).
  void call(const Entry& e, void* const* buffers, const int64_t* shape_args) {
    if (!profiling) return record(e, buffers, shape_args);
    flush();
    auto t0 = std::chrono::steady_clock::now();
    record(e, buffers, shape_args);
    flush();
    VulkanKernels::KernelTime& t = times[e.name];
    t.name = e.name;
    ++t.calls;
    t.ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }

  void check_loop_limit(const Entry& e, const Entry::Stage& st, int64_t threads, int64_t groups,
                        const int64_t* shape_args) const {
    constexpr int64_t kLavapipeLoopLimit = 65535;
    if (st.loop_iters.empty() || dev->info().name.find("llvmpipe") == std::string::npos) return;
    int64_t per_row = eval_shape_code(st.loop_iters.data(), int64_t(st.loop_iters.size()), shape_args, e.num_slots);
    int64_t rows = (threads + groups * kBlock - 1) / (groups * kBlock);  // a thread's rows (grid stride)
    if (per_row > kLavapipeLoopLimit / std::max<int64_t>(rows, 1))
      rt_fail("vulkan kernel ", e.name, ": one invocation would run ", per_row * rows,
              " iterations of one loop; ", dev->info().name,
              " (lavapipe) ends a loop after 65,535 without an error, which would give wrong results. Run this "
              "model on another device or target (docs/vulkan.md)");
  }

  void record(const Entry& e, void* const* buffers, const int64_t* shape_args) {
    struct Bound {
      std::shared_ptr<Buffer> buffer;
      uint64_t offset = 0, bytes = 0;
    };
    std::vector<Bound> bound(e.params.size());
    std::vector<uint64_t> sizes;
    size_t slot = 0;
    for (size_t i = 0; i < e.params.size(); ++i) {
      int64_t numel = 1;
      for (size_t k = 0; k < e.params[i].second; ++k) numel *= shape_args[slot++];
      if (numel >= (int64_t(1) << 31))
        rt_fail("vulkan kernel ", e.name, ": a tensor of ", numel, " elements is beyond 32-bit indexing");
      sizes.push_back(uint64_t(e.params[i].first.storage_bytes(numel)));
      uint64_t span = e.chunks[i] > 1 ? std::min(Entry::kChunkBytes, dev->info().max_storage_buffer_range)
                                      : dev->info().max_storage_buffer_range;
      if (e.chunks[i] > 1 && (sizes.back() > uint64_t(e.chunks[i]) * Entry::kChunkBytes ||
                              sizes.back() <= uint64_t(e.chunks[i] - 1) * Entry::kChunkBytes))
        rt_fail("vulkan kernel ", e.name, ": input ", i, " (", sizes.back(), " bytes) does not fill its ",
                e.chunks[i], " chunks of ", Entry::kChunkBytes, " bytes");
      if (sizes.back() > uint64_t(e.chunks[i]) * span)
        rt_fail("vulkan kernel ", e.name, ": ", i < e.num_inputs ? "input " : "output ",
                i < e.num_inputs ? i : i - e.num_inputs, " (", e.params[i].first.str(), ", ", sizes.back(),
                " bytes) exceeds the device's storage-buffer range of ", dev->info().max_storage_buffer_range,
                " bytes (", dev->info().name, ")");
    }
    std::vector<int32_t> push;
    for (int64_t s : e.push) {
      int64_t v = shape_args[s];
      if (v < INT32_MIN || v > INT32_MAX) rt_fail("vulkan kernel ", e.name, ": the size ", v, " is beyond 32 bits");
      push.push_back(int32_t(v));
    }
    // Too many for push constants: a small mapped buffer bound last.
    std::shared_ptr<Buffer> push_buf;
    if (e.push_buffer) {
      push_buf = dev->alloc(std::max<uint64_t>(push.size() * 4, 4), VulkanDevice::Memory::Mapped);
      std::memcpy(push_buf->mapped, push.data(), push.size() * 4);
      keep.push_back(push_buf);
    }
    begin();
    // Where each parameter is on the device. Resident memory at an offset
    // the device cannot bind, and host memory, go through a fresh buffer.
    bool sync_after = false;
    struct CopyBack {  // a misaligned output: its home and where in it
      size_t param;
      std::shared_ptr<Buffer> home;
      uint64_t offset;
    };
    std::vector<CopyBack> copy_back;
    for (size_t i = 0; i < bound.size(); ++i) {
      bool output = i >= e.num_inputs;
      Bound& b = bound[i];
      b.bytes = sizes[i];
      std::shared_ptr<Buffer> home;
      uint64_t off = 0;
      if (residency && find_resident(buffers[i], sizes[i], home, off)) {
        if (off % align == 0) {
          b.buffer = std::move(home);
          b.offset = off;
        } else {
          b.buffer = dev->alloc((sizes[i] + 3) / 4 * 4, VulkanDevice::Memory::Device, e.chunks[i] > 1);
          record_copy(*home, off, *b.buffer, 0, sizes[i]);
          if (output) copy_back.push_back({i, home, off});
        }
        keep.push_back(b.buffer);
        continue;
      }
      b.buffer = mirror(buffers[i], sizes[i], !output, e.chunks[i] > 1);
      if (output) {
        downloads.push_back({buffers[i], b.buffer, sizes[i]});
        stats.bytes_downloaded += sizes[i];
        sync_after = true;  // the host may read it next; no later call may see stale bytes
      }
    }
    for (const Entry::Stage& st : e.stages) {
      int64_t threads = eval_shape_code(st.threads.data(), int64_t(st.threads.size()), shape_args, e.num_slots);
      const VulkanDevice::Kernel* kp = st.kernel.get();
      if (st.plain) {
        // Tiles mostly past the extents (a matmul of one row) compute
        // clamped copies for nothing: one row per thread then.
        int64_t plain = eval_shape_code(st.plain_threads.data(), int64_t(st.plain_threads.size()), shape_args,
                                        e.num_slots);
        if (threads * st.tile >= 2 * plain) {
          kp = st.plain.get();
          threads = plain;
        }
      }
      int64_t groups = (threads + kBlock - 1) / kBlock;
      if (st.rows) {
        // A workgroup per row when rows are few and have work to split, or
        // are long (a thread looping over a long row is slow, and lavapipe
        // stops any loop after 65535 iterations).
        int64_t work = eval_shape_code(st.work.data(), int64_t(st.work.size()), shape_args, e.num_slots);
        int64_t rows = eval_shape_code(st.count.data(), int64_t(st.count.size()), shape_args, e.num_slots);
        if (use_rows(rows, work)) {
          kp = st.rows.get();
          groups = rows;
          ++stats.row_dispatches;
        }
      }
      if (st.shared) {
        auto eval = [&](const std::vector<int64_t>& code) {
          return eval_shape_code(code.data(), int64_t(code.size()), shape_args, e.num_slots);
        };
        if (use_shared(st, eval(st.out_rows), eval(st.out_cols), eval(st.depth))) {
          kp = st.shared.get();
          groups = eval(st.groups);
          ++stats.shared_dispatches;
        }
      }
      groups = std::clamp<int64_t>(groups, 1, int64_t(dev->info().max_workgroup_count[0]));
      // lavapipe (llvmpipe) ends any loop after 65,535 iterations in one
      // invocation, counted across the loops around it, without an error:
      // refuse what would run past that rather than return wrong values.
      if (kp == st.kernel.get() || kp == st.plain.get()) check_loop_limit(e, st, threads, groups, shape_args);
      const VulkanDevice::Kernel& k = *kp;
      VkDescriptorSet set = descriptor_set(k.set_layout);
      std::vector<VkDescriptorBufferInfo> infos(bound.size());
      for (size_t i = 0; i < bound.size(); ++i) {
        // Whole 32-bit words (packed 2- and 4-bit types are read as words),
        // within the buffer; a chunked parameter's first chunk here, the
        // others after all parameters'.
        uint64_t bytes = e.chunks[i] > 1 ? std::min(bound[i].bytes, Entry::kChunkBytes) : bound[i].bytes;
        uint64_t range = std::min((bytes + 3) / 4 * 4, bound[i].buffer->bytes - bound[i].offset);
        infos[i] = {bound[i].buffer->buffer, bound[i].offset, range ? range : VK_WHOLE_SIZE};
      }
      for (size_t i = 0; i < bound.size(); ++i)
        for (int64_t c = 1; c < e.chunks[i]; ++c) {
          uint64_t at = uint64_t(c) * Entry::kChunkBytes;  // below bytes (checked above)
          uint64_t range = std::min((bound[i].bytes - at + 3) / 4 * 4, Entry::kChunkBytes);
          range = std::min(range, bound[i].buffer->bytes - bound[i].offset - at);
          infos.push_back({bound[i].buffer->buffer, bound[i].offset + at, range});
        }
      if (push_buf) infos.push_back({push_buf->buffer, 0, VK_WHOLE_SIZE});
      d.write_descriptors(set, infos);
      std::vector<VkBuffer> reads, writes;
      for (int64_t i : st.reads) reads.push_back(bound[size_t(i)].buffer->buffer);
      for (int64_t i : st.writes) writes.push_back(bound[size_t(i)].buffer->buffer);
      order(reads, writes);
      d.vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, k.pipeline);
      d.vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, k.layout, 0, 1, &set, 0, nullptr);
      if (!push.empty() && !push_buf)
        d.vkCmdPushConstants(cmd, k.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, uint32_t(push.size() * 4), push.data());
      d.vkCmdDispatch(cmd, uint32_t(groups), 1, 1);
      ++stats.dispatches;
    }
    for (const CopyBack& c : copy_back) record_copy(*bound[c.param].buffer, 0, *c.home, c.offset, sizes[c.param]);
    ++stats.kernel_calls;
    if (sync_after) flush();
  }
};

namespace {

// The VM pool's blocks, from device memory the host maps.
class MappedBlocks : public BlockSource {
 public:
  explicit MappedBlocks(std::shared_ptr<VulkanKernels::Exec> exec) : exec_(std::move(exec)) {}
  void* allocate(size_t bytes) override {
    std::shared_ptr<Buffer> b = exec_->dev->alloc(bytes, VulkanDevice::Memory::Mapped);
    if (!b) return nullptr;
    exec_->add_resident(b->mapped, b, bytes);
    return b->mapped;
  }
  void release(void* block) override { exec_->drop_resident(block); }

 private:
  std::shared_ptr<VulkanKernels::Exec> exec_;  // outlives every block
};

// Owns a resident weight: forgets its range when the last tensor lets go.
struct ResidentOwner {
  ResidentOwner(std::shared_ptr<VulkanKernels::Exec> e, const void* b) : exec(std::move(e)), base(b) {}
  ResidentOwner(const ResidentOwner&) = delete;
  ResidentOwner& operator=(const ResidentOwner&) = delete;
  ~ResidentOwner() { exec->drop_resident(base); }
  std::shared_ptr<VulkanKernels::Exec> exec;
  const void* base;
};

}  // namespace

VulkanKernels::~VulkanKernels() {
  try {
    if (exec_) exec_->flush();
  } catch (const Error&) {
    // Destruction cannot report; the device is waited for when it closes.
  }
}

std::unique_ptr<VulkanKernels> VulkanKernels::load(std::string_view metadata, std::span<const uint8_t> spirv,
                                                   int device, const std::string& label) {
  auto out = std::unique_ptr<VulkanKernels>(new VulkanKernels);
  out->label_ = label;
  out->device_ = VulkanDevice::open(device);
  out->exec_ = std::make_shared<Exec>(out->device_);
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
        e->chunks.push_back(p.value("chunks", int64_t(1)));
        if (e->chunks.back() < 1 || e->chunks.back() > 64) rt_fail(label, ": kernel ", e->name, ": malformed chunks");
        e->num_slots += int64_t(e->params.back().second);
      }
      if (e->num_inputs > e->params.size()) rt_fail(label, ": kernel ", e->name, ": more inputs than parameters");
      e->push = k.at("push").get<std::vector<int64_t>>();
      e->push_buffer = k.value("push_buffer", false);
      int64_t syms = 0;
      for (int64_t s : e->push) syms = std::max(syms, s + 1 - e->num_slots);
      e->num_slots += syms;
      for (const auto& st : k.at("stages")) {
        // A pipeline of the SPIR-V words that `j` ("offset", "words") names.
        auto pipeline = [&](const nlohmann::json& j, const std::string& name) {
          size_t off = j.at("offset"), n = j.at("words");
          if (off > total_words || n > total_words - off) rt_fail(label, ": kernel ", e->name, ": SPIR-V out of range");
          std::vector<uint32_t> words(n);
          std::memcpy(words.data(), spirv.data() + off * 4, n * 4);
          uint32_t bindings = e->push_buffer ? 1 : 0;
          for (int64_t c : e->chunks) bindings += uint32_t(c);
          return out->device_->load_kernel(name, words, bindings, e->push_buffer ? 0 : uint32_t(e->push.size() * 4));
        };
        std::string name = st.at("name");
        Entry::Stage stage;
        stage.kernel = pipeline(st, name);
        stage.threads = st.at("threads").get<std::vector<int64_t>>();
        if (st.contains("reads") && st.contains("writes")) {
          stage.reads = st.at("reads").get<std::vector<int64_t>>();
          stage.writes = st.at("writes").get<std::vector<int64_t>>();
          for (const auto* list : {&stage.reads, &stage.writes})
            for (int64_t i : *list)
              if (i < 0 || size_t(i) >= e->chunks.size())
                rt_fail(label, ": kernel ", e->name, ": a stage's access names parameter ", i, " of ",
                        e->chunks.size());
        } else {  // outputs read too: a later stage reads an earlier one's
          for (size_t i = 0; i < e->chunks.size(); ++i) {
            stage.reads.push_back(int64_t(i));
            if (i >= e->num_inputs) stage.writes.push_back(int64_t(i));
          }
        }
        if (st.contains("loop_iters")) stage.loop_iters = st.at("loop_iters").get<std::vector<int64_t>>();
        if (st.contains("plain")) {
          stage.plain = pipeline(st.at("plain"), name + "_plain");
          stage.plain_threads = st.at("plain").at("threads").get<std::vector<int64_t>>();
          stage.tile = st.at("plain").at("tile");
        }
        bool rows_ok = st.contains("rows");
        if (rows_ok)
          for (const std::string& need : st.at("rows").value("needs", std::vector<std::string>{}))
            rows_ok = rows_ok && need == "subgroup_arithmetic" && info.subgroup_arithmetic;
        if (rows_ok) {
          stage.rows = pipeline(st.at("rows"), name + "_rows");
          stage.work = st.at("rows").at("work").get<std::vector<int64_t>>();
          stage.count = st.at("rows").at("count").get<std::vector<int64_t>>();
        }
        if (st.contains("shared")) {
          const nlohmann::json& sh = st.at("shared");
          stage.shared = pipeline(sh, name + "_shared");
          stage.groups = sh.at("count").get<std::vector<int64_t>>();
          stage.out_rows = sh.at("rows").get<std::vector<int64_t>>();
          stage.out_cols = sh.at("cols").get<std::vector<int64_t>>();
          stage.depth = sh.at("depth").get<std::vector<int64_t>>();
          std::vector<int64_t> block = sh.at("block").get<std::vector<int64_t>>();
          if (block.size() != 3 || block[0] < 1 || block[1] < 1 || block[2] < 1)
            rt_fail(label, ": kernel ", e->name, ": malformed shared-memory block");
          stage.block_rows = block[0];
          stage.block_cols = block[1];
          stage.block_depth = block[2];
        }
        e->stages.push_back(std::move(stage));
      }
      out->entries_.push_back(std::move(e));
    }
    if (meta.value("block", 256) != int(Exec::kBlock))
      rt_fail(label, ": the kernels were built for workgroups of ", meta.value("block", 256), " threads, not ",
              Exec::kBlock);
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
  std::shared_ptr<Exec> exec = exec_;
  return [entry, exec](void* const* buffers, const int64_t* shape_args) -> int32_t {
    exec->call(*entry, buffers, shape_args);
    return 0;
  };
}

std::shared_ptr<PoolAllocator> VulkanKernels::make_pool() const {
  if (!exec_->residency) return nullptr;
  return std::make_shared<PoolAllocator>(SIZE_MAX, std::make_shared<MappedBlocks>(exec_));
}

Tensor VulkanKernels::place_constant(const Tensor& t) const {
  if (!exec_->residency) return t;
  Exec& x = *exec_;
  uint64_t n = std::max<uint64_t>((t.nbytes() + 3) / 4 * 4, 4);  // whole words (packed types)
  uint64_t at = (x.arena_used + x.align - 1) / x.align * x.align;
  std::shared_ptr<const void> arena = x.arena.lock();
  if (!arena || at + n > x.arena_size) {
    // A new arena, for many weights (devices limit the number of
    // allocations): twice the last one, from 1 MiB up to 64 MiB, or the
    // weight's own size when larger.
    uint64_t size = std::clamp<uint64_t>(2 * x.arena_size, uint64_t(1) << 20, uint64_t(64) << 20);
    size = std::min<uint64_t>(std::max(size, n), device_->info().max_storage_buffer_range);
    std::shared_ptr<Buffer> b;
    if (n > size) {
      // Beyond one binding's range: its own buffer, which kernels bind in
      // chunks (codegen_glsl.h's kGlslChunkBytes) or refuse.
      b = device_->alloc(n, VulkanDevice::Memory::Mapped, true);
    } else {
      b = device_->alloc(size, VulkanDevice::Memory::Mapped);
      if (!b && size > n) b = device_->alloc(n, VulkanDevice::Memory::Mapped);
    }
    if (!b) return t;  // a kernel call copies it, or says it is beyond the storage-buffer range
    x.add_resident(b->mapped, b, b->bytes);
    arena = std::make_shared<ResidentOwner>(exec_, b->mapped);
    x.arena = arena;
    x.arena_size = b->bytes;
    x.arena_base = static_cast<char*>(b->mapped);
    at = 0;
  }
  x.arena_used = at + n;
  std::memcpy(x.arena_base + at, t.data(), t.nbytes());
  return Tensor(Storage::wrap(x.arena_base + at, t.nbytes(), std::move(arena)), t.dtype(), t.shape());
}

void VulkanKernels::synchronize() const { exec_->flush(); }

void VulkanKernels::set_profiling(bool on) const { exec_->profiling = on; }

std::vector<VulkanKernels::KernelTime> VulkanKernels::profile() const {
  std::vector<KernelTime> out;
  for (const auto& [name, t] : exec_->times) out.push_back(t);
  std::sort(out.begin(), out.end(), [](const KernelTime& a, const KernelTime& b) { return a.ms > b.ms; });
  return out;
}

VulkanStats VulkanKernels::stats() const {
  VulkanStats s = exec_->stats;
  std::lock_guard lock(exec_->mu);
  s.resident_bytes = exec_->resident_bytes;
  return s;
}

#else

VulkanKernels::~VulkanKernels() = default;
std::unique_ptr<VulkanKernels> VulkanKernels::load(std::string_view, std::span<const uint8_t>, int,
                                                   const std::string& label) {
  rt_fail(label, ": this runtime was built without Vulkan (package libvulkan-dev)");
}
KernelCall VulkanKernels::kernel_call(std::string_view) const { return {}; }
std::shared_ptr<PoolAllocator> VulkanKernels::make_pool() const { return nullptr; }
Tensor VulkanKernels::place_constant(const Tensor& t) const { return t; }
void VulkanKernels::synchronize() const {}
VulkanStats VulkanKernels::stats() const { return {}; }
void VulkanKernels::set_profiling(bool) const {}
std::vector<VulkanKernels::KernelTime> VulkanKernels::profile() const { return {}; }

#endif

}  // namespace relax::rt
