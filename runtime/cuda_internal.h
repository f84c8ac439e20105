// The CUDA runtime's view of the driver API and of cuBLAS, shared by the
// runtime (runtime/cuda.cc, which opens them with dlopen) and the fake that
// stands in for them in its tests (runtime/cuda_fake.cc,
// runtime/cuda_testing.h): the types and constants as cuda.h and
// cublas_api.h declare them, and every function called, listed once.
#pragma once

#include <cstddef>
#include <string>

namespace relax::rt::cuda_api {

// The driver API's types, as cuda.h declares them.
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using Handle = void*;                       // CUcontext, CUmodule, CUfunction, CUstream, CUgraph, CUgraphExec
constexpr unsigned kAttachGlobal = 1;       // CU_MEM_ATTACH_GLOBAL
constexpr unsigned kStreamNonBlocking = 1;  // CU_STREAM_NON_BLOCKING
constexpr int kCaptureThreadLocal = 1;      // CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
constexpr int kAttrMemoryClockKHz = 36;     // CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE
constexpr int kAttrMemoryBusBits = 37;      // CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH
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
  X(stream_create, "cuStreamCreate", CUresult (*)(Handle*, unsigned))                                          \
  X(stream_destroy, "cuStreamDestroy_v2", CUresult (*)(Handle))                                                \
  X(device_name, "cuDeviceGetName", CUresult (*)(char*, int, CUdevice))                                        \
  X(device_attribute, "cuDeviceGetAttribute", CUresult (*)(int*, int, CUdevice))                               \
  X(event_create, "cuEventCreate", CUresult (*)(Handle*, unsigned))                                            \
  X(event_destroy, "cuEventDestroy_v2", CUresult (*)(Handle))                                                  \
  X(event_record, "cuEventRecord", CUresult (*)(Handle, Handle))                                               \
  X(event_synchronize, "cuEventSynchronize", CUresult (*)(Handle))                                             \
  X(event_elapsed, "cuEventElapsedTime", CUresult (*)(float*, Handle, Handle))                                 \
  X(stream_synchronize, "cuStreamSynchronize", CUresult (*)(Handle))                                           \
  X(memset_async, "cuMemsetD8Async", CUresult (*)(CUdeviceptr, unsigned char, size_t, Handle))                 \
  X(begin_capture, "cuStreamBeginCapture_v2", CUresult (*)(Handle, int))                                       \
  X(end_capture, "cuStreamEndCapture", CUresult (*)(Handle, Handle*))                                          \
  X(graph_instantiate, "cuGraphInstantiateWithFlags", CUresult (*)(Handle*, Handle, unsigned long long))       \
  X(graph_launch, "cuGraphLaunch", CUresult (*)(Handle, Handle))                                               \
  X(graph_exec_destroy, "cuGraphExecDestroy", CUresult (*)(Handle))                                            \
  X(graph_destroy, "cuGraphDestroy", CUresult (*)(Handle))                                                     \
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
  // Optional (looked up, never required): cuMemPrefetchAsync, the form
  // before CUDA 12.2's CUmemLocation one, which drivers still export.
  CUresult (*mem_prefetch)(CUdeviceptr, size_t, CUdevice, Handle) = nullptr;
  void* lib = nullptr;
  std::string why_not;  // empty when usable
  int version = 0, devices = 0;

  std::string error(CUresult r) const {
    const char* s = nullptr;
    if (error_string) error_string(r, &s);
    return s ? std::string(s) + " (" + std::to_string(r) + ")" : "CUDA error " + std::to_string(r);
  }
};

// ---- cuBLAS ---------------------------------------------------------------------------

// cublas_api.h's values.
using BlasStatus = int;
constexpr int kBlasOpN = 0;           // CUBLAS_OP_N
constexpr int kBlasGemmDefault = -1;  // CUBLAS_GEMM_DEFAULT
constexpr int kBlasCompute32F = 68;   // CUBLAS_COMPUTE_32F
constexpr int kBlasCompute64F = 70;   // CUBLAS_COMPUTE_64F
// library_types.h's cudaDataType.
constexpr int kCudaR32F = 0, kCudaR64F = 1, kCudaR16F = 2, kCudaR16BF = 14;

// Every cuBLAS function the runtime calls, listed once.
#define RELAX_CUBLAS_FUNCTIONS(X)                                                                                    \
  X(create, "cublasCreate_v2", BlasStatus (*)(Handle*))                                                              \
  X(destroy, "cublasDestroy_v2", BlasStatus (*)(Handle))                                                             \
  X(set_stream, "cublasSetStream_v2", BlasStatus (*)(Handle, Handle))                                                \
  X(set_workspace, "cublasSetWorkspace_v2", BlasStatus (*)(Handle, void*, size_t))                                   \
  X(gemm, "cublasGemmStridedBatchedEx",                                                                              \
    BlasStatus (*)(Handle, int, int, int, int, int, const void*, const void*, int, int, long long, const void*, int, \
                   int, long long, const void*, void*, int, int, long long, int, int, int))                          \
  X(status_string, "cublasGetStatusString", const char* (*)(BlasStatus))

struct Cublas {
#define X(member, symbol, type) \
  using member##_fn = type;     \
  member##_fn member = nullptr;
  RELAX_CUBLAS_FUNCTIONS(X)
#undef X
  void* lib = nullptr;
  std::string path, why_not;

  std::string error(BlasStatus r) const {
    const char* s = status_string ? status_string(r) : nullptr;
    return s ? std::string(s) + " (" + std::to_string(r) + ")" : "cuBLAS status " + std::to_string(r);
  }
};

// The fake driver and cuBLAS when a test installed them
// (use_fake_cuda_driver), else null.
const Driver* installed_fake_driver();
const Cublas* installed_fake_cublas();

}  // namespace relax::rt::cuda_api
