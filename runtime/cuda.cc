#include "runtime/cuda.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <vector>

#include "runtime/allocator.h"
#include "runtime/bytecode.h"
#include "runtime/dtype.h"
#include "runtime/error.h"
#include "runtime/tensor.h"

namespace relax::rt {
namespace {

// The driver API's types, as cuda.h declares them.
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using Handle = void*;                       // CUcontext, CUmodule, CUfunction, CUstream
constexpr unsigned kAttachGlobal = 1;       // CU_MEM_ATTACH_GLOBAL
constexpr int kJitErrorLogBuffer = 5;       // CU_JIT_ERROR_LOG_BUFFER
constexpr int kJitErrorLogBufferBytes = 6;  // CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES

// Every driver function the runtime calls, listed once: member, symbol, signature.
#define RELAX_CUDA_FUNCTIONS(X)                                                                                \
  X(init, "cuInit", CUresult (*)(unsigned))                                                                    \
  X(driver_version, "cuDriverGetVersion", CUresult (*)(int*))                                                  \
  X(device_count, "cuDeviceGetCount", CUresult (*)(int*))                                                      \
  X(device_get, "cuDeviceGet", CUresult (*)(CUdevice*, int))                                                   \
  X(primary_retain, "cuDevicePrimaryCtxRetain", CUresult (*)(Handle*, CUdevice))                               \
  X(primary_release, "cuDevicePrimaryCtxRelease_v2", CUresult (*)(CUdevice))                                   \
  X(ctx_set_current, "cuCtxSetCurrent", CUresult (*)(Handle))                                                  \
  X(ctx_synchronize, "cuCtxSynchronize", CUresult (*)())                                                       \
  X(module_load, "cuModuleLoadDataEx", CUresult (*)(Handle*, const void*, unsigned, int*, void**))             \
  X(module_unload, "cuModuleUnload", CUresult (*)(Handle))                                                     \
  X(module_function, "cuModuleGetFunction", CUresult (*)(Handle*, Handle, const char*))                        \
  X(mem_alloc_managed, "cuMemAllocManaged", CUresult (*)(CUdeviceptr*, size_t, unsigned))                      \
  X(mem_free, "cuMemFree_v2", CUresult (*)(CUdeviceptr))                                                       \
  X(launch, "cuLaunchKernel",                                                                                  \
    CUresult (*)(Handle, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, Handle, void**, \
                 void**))                                                                                      \
  X(error_string, "cuGetErrorString", CUresult (*)(CUresult, const char**))

struct Driver {
#define X(member, symbol, type) \
  using member##_fn = type;     \
  member##_fn member = nullptr;
  RELAX_CUDA_FUNCTIONS(X)
#undef X
  void* lib = nullptr;
  std::string why_not;  // empty when usable
  int version = 0, devices = 0;

  std::string error(CUresult r) const {
    const char* s = nullptr;
    if (error_string) error_string(r, &s);
    return s ? std::string(s) + " (" + std::to_string(r) + ")" : "CUDA error " + std::to_string(r);
  }
};

// The process's driver, opened once.
const Driver& driver() {
  static Driver d;
  static std::once_flag once;
  std::call_once(once, [] {
    d.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!d.lib) {
      const char* e = dlerror();
      d.why_not = std::string("no CUDA driver (") + (e ? e : "libcuda.so.1 not found") + ")";
      return;
    }
#define X(member, symbol, type)                            \
  d.member = reinterpret_cast<type>(dlsym(d.lib, symbol)); \
  if (!d.member && d.why_not.empty()) d.why_not = std::string("libcuda.so.1 lacks ") + symbol;
    RELAX_CUDA_FUNCTIONS(X)
#undef X
    if (!d.why_not.empty()) return;
    if (CUresult r = d.init(0); r != 0) {
      d.why_not = "the CUDA driver failed to initialise: " + d.error(r);
      return;
    }
    d.driver_version(&d.version);
    d.device_count(&d.devices);
    if (d.devices == 0) d.why_not = "the CUDA driver sees no device";
  });
  return d;
}

}  // namespace

CudaDriverStatus cuda_driver_status() {
  const Driver& d = driver();
  CudaDriverStatus s;
  s.present = d.lib && d.why_not.empty();
  s.devices = d.devices;
  s.detail = !d.why_not.empty()
                 ? d.why_not
                 : "CUDA driver " + std::to_string(d.version / 1000) + "." + std::to_string(d.version % 1000 / 10) +
                       ", " + std::to_string(d.devices) + (d.devices == 1 ? " device" : " devices");
  return s;
}

struct CudaKernels::Impl {
  const Driver* d = nullptr;
  CUdevice device = 0;
  Handle ctx = nullptr, module = nullptr;
  std::string label;
  int block = 256;
  struct Stage {
    Handle fn = nullptr;
    std::vector<int64_t> threads;  // postfix code over the shape args
    // The stage without its register tile, when it has one.
    Handle plain_fn = nullptr;
    std::vector<int64_t> plain_threads;
    int64_t tile = 1;
    // The stage tiled through shared memory, when the compiler made it.
    Handle shared_fn = nullptr;
    std::vector<int64_t> blocks, rows, cols, depth;  // postfix code
    int64_t block_threads = 0, block_rows = 1, block_cols = 1, block_depth = 1;
  };
  int force_shared = -1;  // RELAX_CUDA_SHARED=0|1
  struct Entry {
    std::string name;
    std::vector<std::pair<DType, size_t>> params;  // dtype, ndim
    size_t num_inputs = 0;
    int64_t slots = 0;
    std::vector<Stage> stages;
  };
  std::map<std::string, Entry, std::less<>> entries;
  // The managed memory this runtime allocated (pool blocks, weights): the
  // kernels take pointers into it as they are.
  mutable std::mutex mu;
  std::map<uintptr_t, size_t> ranges;

  ~Impl() {
    if (module) d->module_unload(module);
    if (ctx) d->primary_release(device);
  }

  void check(CUresult r, const std::string& what) const {
    if (r != 0) rt_fail(label, ": ", what, ": ", d->error(r));
  }

  void* alloc_managed(size_t bytes) {
    CUdeviceptr p = 0;
    check(d->ctx_set_current(ctx), "cuCtxSetCurrent");
    check(d->mem_alloc_managed(&p, std::max<size_t>(bytes, 64), kAttachGlobal),
          "cannot allocate " + std::to_string(bytes) + " bytes of managed memory");
    std::lock_guard<std::mutex> lock(mu);
    ranges[uintptr_t(p)] = std::max<size_t>(bytes, 64);
    return reinterpret_cast<void*>(p);
  }

  void free_managed(void* p) {
    {
      std::lock_guard<std::mutex> lock(mu);
      ranges.erase(uintptr_t(p));
    }
    d->mem_free(CUdeviceptr(reinterpret_cast<uintptr_t>(p)));
  }

  bool owns(const void* p, size_t bytes) const {
    std::lock_guard<std::mutex> lock(mu);
    auto it = ranges.upper_bound(uintptr_t(p));
    if (it == ranges.begin()) return false;
    --it;
    return uintptr_t(p) + bytes <= it->first + it->second;
  }

  // Shared-memory tiles when the blocks are at least half used and a chunk
  // of reduction steps is full (as on Vulkan GPUs: runtime/vulkan_exec.cc).
  bool use_shared(const Stage& st, int64_t rows, int64_t cols, int64_t depth) const {
    if (force_shared >= 0) return force_shared;
    int64_t blocks = (rows + st.block_rows - 1) / st.block_rows * ((cols + st.block_cols - 1) / st.block_cols);
    return depth >= st.block_depth && 2 * rows * cols >= blocks * st.block_rows * st.block_cols;
  }

  int32_t call(const Entry& e, void* const* buffers, const int64_t* shape_args) {
    check(d->ctx_set_current(ctx), "cuCtxSetCurrent");
    struct Mirror {
      void* host;
      void* managed;
      size_t bytes;
      bool output;
    };
    std::vector<Mirror> mirrors;
    std::vector<CUdeviceptr> ptrs(e.params.size(), 0);
    int64_t slot = 0;
    for (size_t k = 0; k < e.params.size(); ++k) {
      int64_t numel = 1;
      for (size_t i = 0; i < e.params[k].second; ++i) numel *= shape_args[slot++];
      size_t bytes = size_t(e.params[k].first.storage_bytes(numel));
      bool output = k >= e.num_inputs;
      if (!buffers[k] || bytes == 0 || owns(buffers[k], bytes)) {
        ptrs[k] = CUdeviceptr(reinterpret_cast<uintptr_t>(buffers[k]));
        continue;
      }
      // Not ours (a caller's tensor on the host heap): through managed memory.
      void* m = alloc_managed(bytes);
      if (!output) std::memcpy(m, buffers[k], bytes);
      mirrors.push_back({buffers[k], m, bytes, output});
      ptrs[k] = CUdeviceptr(reinterpret_cast<uintptr_t>(m));
    }
    std::vector<void*> args;
    for (CUdeviceptr& p : ptrs) args.push_back(&p);
    for (int64_t s = 0; s < e.slots; ++s) args.push_back(const_cast<int64_t*>(shape_args + s));
    auto eval = [&](const std::vector<int64_t>& code) {
      return eval_shape_code(code.data(), int64_t(code.size()), shape_args, e.slots);
    };
    for (const Stage& st : e.stages) {
      if (st.shared_fn && use_shared(st, eval(st.rows), eval(st.cols), eval(st.depth))) {
        int64_t blocks = eval(st.blocks);
        if (blocks <= 0) continue;
        if (blocks > INT32_MAX) rt_fail(label, ": kernel ", e.name, ": ", blocks, " blocks are beyond one launch");
        check(d->launch(st.shared_fn, unsigned(blocks), 1, 1, unsigned(st.block_threads), 1, 1, 0, nullptr, args.data(),
                        nullptr),
              "launching " + e.name + " (shared-memory tiles)");
        continue;
      }
      int64_t threads = eval(st.threads);
      Handle fn = st.fn;
      if (st.plain_fn) {
        // Tiles mostly past the extents (a matmul of one row) compute
        // clamped copies for nothing: one row per thread then.
        int64_t plain = eval(st.plain_threads);
        if (threads * st.tile >= 2 * plain) fn = st.plain_fn, threads = plain;
      }
      if (threads <= 0) continue;
      int64_t blocks = (threads + block - 1) / block;
      if (blocks > INT32_MAX) rt_fail(label, ": kernel ", e.name, ": ", threads, " threads are beyond one launch");
      check(d->launch(fn, unsigned(blocks), 1, 1, unsigned(block), 1, 1, 0, nullptr, args.data(), nullptr),
            "launching " + e.name);
    }
    if (!mirrors.empty()) {
      check(d->ctx_synchronize(), "running " + e.name);
      for (const Mirror& m : mirrors) {
        if (m.output) std::memcpy(m.host, m.managed, m.bytes);
        free_managed(m.managed);
      }
    }
    return 0;
  }
};

namespace {

// The VM's pool blocks, in managed memory.
struct ManagedBlocks : BlockSource {
  explicit ManagedBlocks(std::shared_ptr<CudaKernels::Impl> impl) : impl_(std::move(impl)) {}
  void* allocate(size_t bytes) override { return impl_->alloc_managed(bytes); }
  void release(void* block) override { impl_->free_managed(block); }
  std::shared_ptr<CudaKernels::Impl> impl_;
};

}  // namespace

std::unique_ptr<CudaKernels> CudaKernels::load(std::string_view metadata, std::string_view ptx, int device,
                                               const std::string& label) {
  const Driver& d = driver();
  if (!d.why_not.empty()) rt_fail(label, ": cannot run a cuda package: ", d.why_not);
  if (device < 0 || device >= d.devices)
    rt_fail(label, ": no CUDA device ", device, " (the driver sees ", d.devices, ")");
  auto impl = std::make_shared<Impl>();
  impl->d = &d;
  impl->label = label;
  if (const char* f = std::getenv("RELAX_CUDA_SHARED"); f && (*f == '0' || *f == '1')) impl->force_shared = *f - '0';
  impl->check(d.device_get(&impl->device, device), "cuDeviceGet");
  impl->check(d.primary_retain(&impl->ctx, impl->device), "cuDevicePrimaryCtxRetain");
  impl->check(d.ctx_set_current(impl->ctx), "cuCtxSetCurrent");
  std::string text(ptx);  // NUL-terminated for the driver
  char log[8192] = {};
  int options[] = {kJitErrorLogBuffer, kJitErrorLogBufferBytes};
  void* values[] = {log, reinterpret_cast<void*>(uintptr_t(sizeof log))};
  if (CUresult r = d.module_load(&impl->module, text.c_str(), 2, options, values); r != 0)
    rt_fail(label, ": the driver could not load the PTX: ", d.error(r), log[0] ? std::string(": ") + log : "");
  try {
    nlohmann::json meta = nlohmann::json::parse(metadata);
    impl->block = meta.value("block", 256);
    for (const auto& k : meta.at("kernels")) {
      Impl::Entry e;
      e.name = k.at("name");
      e.num_inputs = k.at("num_inputs");
      e.slots = k.at("slots");
      for (const auto& p : k.at("params")) {
        auto dt = DType::parse(p.at("dtype").get<std::string>());
        if (!dt) rt_fail(label, ": kernel ", e.name, ": unknown dtype ", p.at("dtype").dump());
        e.params.emplace_back(*dt, p.at("ndim").get<size_t>());
      }
      for (const auto& s : k.at("stages")) {
        Impl::Stage st;
        std::string symbol = s.at("symbol");
        impl->check(d.module_function(&st.fn, impl->module, symbol.c_str()), "kernel " + symbol);
        st.threads = s.at("threads").get<std::vector<int64_t>>();
        if (s.contains("plain")) {
          std::string psym = s.at("plain").at("symbol");
          impl->check(d.module_function(&st.plain_fn, impl->module, psym.c_str()), "kernel " + psym);
          st.plain_threads = s.at("plain").at("threads").get<std::vector<int64_t>>();
          st.tile = std::max<int64_t>(s.at("plain").at("tile").get<int64_t>(), 1);
        }
        if (s.contains("shared")) {
          const auto& sh = s.at("shared");
          std::string bsym = sh.at("symbol");
          impl->check(d.module_function(&st.shared_fn, impl->module, bsym.c_str()), "kernel " + bsym);
          st.blocks = sh.at("blocks").get<std::vector<int64_t>>();
          st.rows = sh.at("rows").get<std::vector<int64_t>>();
          st.cols = sh.at("cols").get<std::vector<int64_t>>();
          st.depth = sh.at("depth").get<std::vector<int64_t>>();
          st.block_threads = sh.at("threads");
          auto block = sh.at("block").get<std::vector<int64_t>>();
          if (block.size() != 3 || st.block_threads <= 0 || st.block_threads > 1024)
            rt_fail(label, ": kernel ", bsym, ": malformed shared-memory tile");
          st.block_rows = std::max<int64_t>(block[0], 1);
          st.block_cols = std::max<int64_t>(block[1], 1);
          st.block_depth = std::max<int64_t>(block[2], 1);
        }
        e.stages.push_back(std::move(st));
      }
      impl->entries[e.name] = std::move(e);
    }
  } catch (const nlohmann::json::exception& e) {
    rt_fail(label, ": the kernel index is malformed: ", e.what());
  }
  return std::unique_ptr<CudaKernels>(new CudaKernels(std::move(impl)));
}

CudaKernels::~CudaKernels() = default;

KernelCall CudaKernels::kernel_call(std::string_view name) const {
  auto it = impl_->entries.find(name);
  if (it == impl_->entries.end()) rt_fail(impl_->label, ": no kernel ", name);
  std::shared_ptr<Impl> impl = impl_;
  const Impl::Entry* e = &it->second;
  return [impl, e](void* const* buffers, const int64_t* shape_args) { return impl->call(*e, buffers, shape_args); };
}

std::shared_ptr<PoolAllocator> CudaKernels::make_pool() const {
  return std::make_shared<PoolAllocator>(SIZE_MAX, std::make_shared<ManagedBlocks>(impl_));
}

Tensor CudaKernels::place_constant(const Tensor& t) const {
  size_t n = t.nbytes();
  void* m = impl_->alloc_managed(n);
  if (n) std::memcpy(m, t.data(), n);
  std::shared_ptr<Impl> impl = impl_;
  std::shared_ptr<const void> owner(m, [impl](const void* p) { impl->free_managed(const_cast<void*>(p)); });
  return Tensor(Storage::wrap(m, std::max<size_t>(n, 1), owner), t.dtype(), t.shape());
}

void CudaKernels::synchronize() const {
  impl_->check(impl_->d->ctx_set_current(impl_->ctx), "cuCtxSetCurrent");
  impl_->check(impl_->d->ctx_synchronize(), "running the kernels");
}

}  // namespace relax::rt
