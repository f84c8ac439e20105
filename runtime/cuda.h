// The CUDA runtime: libcuda opened with dlopen at run time (the runtime
// builds and starts on machines without it, and says so when a cuda
// package is loaded there).
//
// CudaKernels runs a package's kernels.cuda (backends/cuda/codegen.h): the
// PTX module is loaded once (cuModuleLoadData: the driver compiles it for
// the GPU at hand), each stage's function looked up once. Tensors live in
// managed memory (cuMemAllocManaged): the VM's pool and the weights, so
// the host and the kernels use the same pointers and a kernel call passes
// them as they are; a buffer from elsewhere (a caller's input on the host
// heap) is copied into managed memory for the call and, for an output,
// back after it. Kernel calls are launched on the runtime's stream without
// waiting; synchronize() waits (the VM calls it before the host touches
// tensor data).
//
// Matmuls may call cuBLAS (cublas.matmul), and runs of launches are
// captured as CUDA graphs and replayed (cuda.graph_run; docs/cuda.md).
// This file has been compiled and its no-driver path tested; no GPU was
// available to run the rest.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/kernel_library.h"

namespace relax::rt {

struct CudaDriverStatus {
  bool present = false;  // libcuda.so.1 loaded and cuInit succeeded
  int devices = 0;
  std::string detail;           // "no CUDA driver (libcuda.so.1: cannot open ...)", "CUDA driver 13.0, 1 device"
  std::string name;             // device 0's, when present
  double peak_bytes_per_s = 0;  // device 0's memory bandwidth by its clock and bus width (0: unknown)
};

CudaDriverStatus cuda_driver_status();

// Whether cuBLAS loads and has every function the runtime calls (it needs
// no driver for that); `detail` is the library's path, or why not.
struct CublasStatus {
  bool present = false;
  std::string detail;
};
CublasStatus cublas_status();

// A kernel's launches when profiling: their count, total time (between
// two events around each launch), and the bytes of the buffers they were
// given (what a memory-bound kernel moves at least once).
struct CudaKernelTime {
  std::string name;  // the program, with its variant: "(rows)", "(shared)", "(plain)"; or "cublas.matmul"
  uint64_t calls = 0;
  double ms = 0;
  double bytes = 0;
};

// cublas.matmul's calls for numpy matmul of row-major a (shape `a`) and b:
// row-major C = A B is column-major C^T = B^T A^T, so each call is
// cublasGemmStridedBatchedEx(m = N, n = M, k = K, A = b + b_offset with
// ld_b and b_stride, B = a + a_offset with ld_a and a_stride, C + c_offset
// with ld_c and c_stride, batch); offsets and strides in elements. One
// call when each operand is one matrix for every batch or has the whole
// output batch, else one per output matrix. Throws rt::Error on shapes
// that do not multiply, or dims beyond cuBLAS's int.
struct CublasGemm {
  int64_t m = 0, n = 0, k = 0, ld_a = 1, ld_b = 1, ld_c = 1;
  int64_t a_offset = 0, b_offset = 0, c_offset = 0, a_stride = 0, b_stride = 0, c_stride = 0, batch = 1;
};
struct CublasMatmulPlan {
  int64_t M = 0, N = 0, K = 0, batch = 1;  // the output: batch x M x N
  std::vector<CublasGemm> calls;           // none when the output or K is empty
};
CublasMatmulPlan plan_cublas_matmul(std::vector<int64_t> a, std::vector<int64_t> b);

// What the CUDA graphs of a CudaKernels did so far (relax-run --profile).
struct CudaGraphStats {
  int64_t captures = 0;  // regions captured and instantiated
  int64_t replays = 0;   // launches of an instantiated graph, the first included
  int64_t direct = 0;    // region runs launched kernel by kernel (graphs off, or a region that failed to capture)
  int64_t failed = 0;    // captures the driver refused (the region then runs directly)
};

class CudaKernels : public Kernels {
 public:
  // Throws rt::Error naming `label` when there is no driver or device
  // `device`, or the module does not load (with the driver's log).
  static std::unique_ptr<CudaKernels> load(std::string_view metadata, std::string_view ptx, int device,
                                           const std::string& label);
  ~CudaKernels() override;
  KernelCall kernel_call(std::string_view name) const override;
  std::shared_ptr<PoolAllocator> make_pool() const override;
  Tensor place_constant(const Tensor& t) const override;
  void synchronize() const override;
  CudaGraphStats graph_stats() const;
  // Profiling: each launch waited for and timed on its own (graphs off);
  // profile() lists the kernels by total time, most first.
  void set_profiling(bool on) const;
  std::vector<CudaKernelTime> profile() const;
  // The generic forms (runtime/device_cuda.cc): the profile with each
  // kernel's bytes, the device's bandwidth, and the graphs' counts under
  // the report's key "cuda_graphs".
  bool time_calls(bool on) const override;
  std::vector<KernelProfile> call_times() const override;
  double peak_bytes_per_s() const override;
  void report(nlohmann::json& rep, int runs, std::ostream* text) const override;

  struct Impl;
  Impl& impl() const { return *impl_; }

 private:
  explicit CudaKernels(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<Impl> impl_;
};

}  // namespace relax::rt
