// Loads the cpu kernels of a package: the bytes of its `kernels.cpu` section,
// an ELF shared object written by the cpu backend (docs/runtime_abi.md,
// section 2). The bytes go to an anonymous memory file (memfd_create), or a
// private temporary file removed right after dlopen, so nothing is left on
// disk. After dlopen the loader checks `relax_abi_version` and fills the
// object's `relax_runtime_hooks` so that kernels reach the thread pool.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "runtime/tensor.h"

namespace relax::rt {

class ThreadPool;
class PoolAllocator;

// The hooks struct of the kernel ABI, field for field.
struct RelaxRuntimeHooks {
  int32_t version;
  int32_t num_threads;
  void (*parallel_for)(int64_t n, void (*body)(int64_t begin, int64_t end, void* ctx), void* ctx);
};

// A compiled tensor program: buffers (inputs then outputs), then shape_args.
using KernelFn = int32_t (*)(void* const* buffers, const int64_t* shape_args);

constexpr int32_t kKernelAbiVersion = 1;

// A kernel as the VM calls it: buffers (inputs then outputs), then
// shape_args (each parameter's dims, then the symbolic arguments); 0 on
// success.
using KernelCall = std::function<int32_t(void* const* buffers, const int64_t* shape_args)>;

// A kernel's time as a device measured it (relax-run --profile).
struct KernelProfile {
  std::string name;
  uint64_t calls = 0;
  double ms = 0;
  double bytes = -1;         // of the kernel's buffers, or < 0 when unknown
  double flops = 0;          // counted by library kernels, else 0
  bool integer_ops = false;  // flops are integer operations: GOP/s, no FMA share
};

// Where the VM finds a package's kernels: the cpu shared object
// (KernelLibrary), the Vulkan pipelines (runtime/vulkan.h), the CUDA module
// (runtime/cuda.h). runtime/device.h picks one for a package.
class Kernels {
 public:
  virtual ~Kernels() = default;
  // Throws rt::Error naming `name` when absent. A call may only be
  // recorded (a device's command buffer): its outputs are ready after
  // synchronize().
  virtual KernelCall kernel_call(std::string_view name) const = 0;
  // The allocator for the tensors the kernels read and write (device memory
  // the host maps); null: the host heap.
  virtual std::shared_ptr<PoolAllocator> make_pool() const { return nullptr; }
  // `t` where the kernels read it best (a weight, at load): `t` itself, or a
  // copy in device memory.
  virtual Tensor place_constant(const Tensor& t) const { return t; }
  // Waits until every kernel call made so far has finished and its outputs
  // are in host-visible memory. The VM calls it before the host reads or
  // writes tensor data.
  virtual void synchronize() const {}

  // What relax-run asks of any device. Turns the device's own timing of
  // kernel calls on; false when it has none (a host device: the VM times
  // its calls, kernels and builtins alike).
  virtual bool time_calls(bool on) const { return false; }
  // The device's timings by total time, most first.
  virtual std::vector<KernelProfile> call_times() const { return {}; }
  // Its memory's bandwidth in bytes per second (0: unknown).
  virtual double peak_bytes_per_s() const { return 0; }
  // Adds what it did over `runs` runs to `rep` under a key of its own,
  // and a line of text to `text` when given.
  virtual void report(nlohmann::json& rep, int runs, std::ostream* text) const {}
};

class KernelLibrary : public Kernels {
 public:
  // Loads a shared object from its bytes. `label` names it in messages (the
  // package path and section). Kernels run on ThreadPool::global(); its
  // thread count is what they are told. Throws rt::Error when the object
  // does not load, lacks relax_abi_version or relax_runtime_hooks, or has
  // another ABI version.
  static std::unique_ptr<KernelLibrary> load(std::span<const uint8_t> so_bytes, std::string label);
  ~KernelLibrary() override;  // dlclose
  KernelLibrary(const KernelLibrary&) = delete;
  KernelLibrary& operator=(const KernelLibrary&) = delete;

  // The kernel exported as `symbol`; throws rt::Error naming it when absent.
  KernelFn kernel(std::string_view symbol) const;
  KernelCall kernel_call(std::string_view symbol) const override { return kernel(symbol); }
  // nullptr when absent.
  void* find_symbol(std::string_view symbol) const;
  const std::string& label() const { return label_; }

 private:
  KernelLibrary(void* handle, int fd, std::string label) : handle_(handle), fd_(fd), label_(std::move(label)) {}

  void* handle_;
  int fd_;  // the memfd, kept open while loaded (see kernel_library.cc); -1 if none
  std::string label_;
};

}  // namespace relax::rt
