// The fake CUDA driver and cuBLAS of the runtime's tests
// (runtime/cuda_testing.h): they record what the runtime asks and run no
// kernel; an f32 GEMM outside a capture is computed on host memory.
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "runtime/cuda_internal.h"
#include "runtime/cuda_testing.h"

namespace relax::rt {

using namespace cuda_api;

namespace {

FakeCuda* g_fake = nullptr;
struct FakeGraph {
  std::vector<FakeCuda::Launch> launches;
};
FakeGraph* g_capturing = nullptr;                  // the graph being captured
constexpr CUresult kFakeCaptureUnsupported = 900;  // CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
constexpr CUresult kFakeCaptureInvalidated = 901;  // CUDA_ERROR_STREAM_CAPTURE_INVALIDATED

CUresult fake_sync() {
  if (g_capturing) {
    ++g_fake->synchronizations_while_capturing;
    return kFakeCaptureUnsupported;
  }
  ++g_fake->synchronizations;
  return 0;
}

CUresult fake_launch(Handle fn, unsigned gx, unsigned, unsigned, unsigned bx, unsigned, unsigned, unsigned, Handle,
                     void** params, void**) {
  FakeCuda::Launch l{static_cast<const char*>(fn), gx, bx, *static_cast<CUdeviceptr*>(params[0]), false};
  (g_capturing ? g_capturing->launches : g_fake->launches).push_back(l);
  return 0;
}

const Driver& fake_driver() {
  static Driver f = [] {
    Driver d;
    d.init = [](unsigned) -> CUresult { return 0; };
    d.driver_version = [](int* v) -> CUresult { return *v = 13000, 0; };
    d.device_count = [](int* n) -> CUresult { return *n = 1, 0; };
    d.device_get = [](CUdevice* dev, int i) -> CUresult { return *dev = i, 0; };
    d.primary_retain = [](Handle* c, CUdevice) -> CUresult { return *c = reinterpret_cast<Handle>(1), 0; };
    d.primary_release = [](CUdevice) -> CUresult { return 0; };
    d.ctx_set_current = [](Handle) -> CUresult { return 0; };
    d.ctx_synchronize = [] { return fake_sync(); };
    d.module_load = [](Handle* m, const void*, unsigned, int*, void**) -> CUresult {
      return *m = reinterpret_cast<Handle>(2), 0;
    };
    d.module_unload = [](Handle) -> CUresult { return 0; };
    d.module_function = [](Handle* fn, Handle, const char* name) -> CUresult {
      static std::set<std::string> names;  // the handle is the symbol's interned text
      *fn = const_cast<char*>(names.insert(name).first->c_str());
      return 0;
    };
    d.mem_alloc_managed = [](CUdeviceptr* p, size_t n, unsigned) -> CUresult {
      *p = CUdeviceptr(reinterpret_cast<uintptr_t>(std::aligned_alloc(64, (n + 63) / 64 * 64)));
      return 0;
    };
    d.mem_free = [](CUdeviceptr p) -> CUresult { return std::free(reinterpret_cast<void*>(uintptr_t(p))), 0; };
    d.stream_create = [](Handle* s, unsigned) -> CUresult { return *s = reinterpret_cast<Handle>(3), 0; };
    d.stream_destroy = [](Handle) -> CUresult { return 0; };
    d.device_name = [](char* n, int len, CUdevice) -> CUresult { return std::strncpy(n, "fake GPU", size_t(len)), 0; };
    d.device_attribute = [](int* v, int a, CUdevice) -> CUresult {
      return *v = a == kAttrMemoryClockKHz ? 1000000 : 1024, 0;
    };
    d.event_create = [](Handle* e, unsigned) -> CUresult { return *e = reinterpret_cast<Handle>(4), 0; };
    d.event_destroy = [](Handle) -> CUresult { return 0; };
    d.event_record = [](Handle, Handle) -> CUresult { return 0; };
    d.event_synchronize = [](Handle) { return fake_sync(); };
    d.event_elapsed = [](float* ms, Handle, Handle) -> CUresult { return *ms = 0.001f, 0; };
    d.stream_synchronize = [](Handle) { return fake_sync(); };
    d.memset_async = [](CUdeviceptr, unsigned char, size_t, Handle) -> CUresult { return 0; };
    d.begin_capture = [](Handle, int) -> CUresult {
      g_capturing = new FakeGraph;
      ++g_fake->captures;
      return 0;
    };
    d.end_capture = [](Handle, Handle* g) -> CUresult {
      FakeGraph* c = g_capturing;
      g_capturing = nullptr;
      if (g_fake->refuse_capture) {
        delete c;
        *g = nullptr;
        return kFakeCaptureInvalidated;
      }
      *g = c;
      return 0;
    };
    d.graph_instantiate = [](Handle* e, Handle g, unsigned long long) -> CUresult {
      *e = new FakeGraph(*static_cast<FakeGraph*>(g));
      ++g_fake->instantiated;
      return 0;
    };
    d.graph_launch = [](Handle e, Handle) -> CUresult {
      ++g_fake->graph_launches;
      for (FakeCuda::Launch l : static_cast<FakeGraph*>(e)->launches) {
        l.replayed = true;
        g_fake->launches.push_back(l);
      }
      return 0;
    };
    d.graph_exec_destroy = [](Handle e) -> CUresult { return delete static_cast<FakeGraph*>(e), 0; };
    d.graph_destroy = [](Handle g) -> CUresult { return delete static_cast<FakeGraph*>(g), 0; };
    d.launch = fake_launch;
    d.error_string = [](CUresult r, const char** s) -> CUresult {
      *s = r == kFakeCaptureUnsupported ? "operation not permitted when stream is capturing (fake driver)"
                                        : "fake driver error";
      return 0;
    };
    d.lib = reinterpret_cast<void*>(1);
    d.version = 13000;
    d.devices = 1;
    return d;
  }();
  return f;
}

// cuBLAS against the fake driver (runtime/cuda_testing.h).
BlasStatus fake_gemm(Handle, int ta, int tb, int m, int n, int k, const void* alpha, const void* A, int at, int lda,
                     long long sa, const void* B, int bt, int ldb, long long sb, const void* beta, void* C, int ct,
                     int ldc, long long sc, int batch, int, int) {
  FakeCuda::Launch l{"cublasGemmStridedBatchedEx", unsigned(batch), 0, uint64_t(reinterpret_cast<uintptr_t>(C)), false};
  if (g_capturing) {
    g_capturing->launches.push_back(l);
    return 0;
  }
  g_fake->launches.push_back(l);
  if (ta != kBlasOpN || tb != kBlasOpN || at != kCudaR32F || bt != kCudaR32F || ct != kCudaR32F) return 0;
  float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  for (int q = 0; q < batch; ++q) {
    const float* a = static_cast<const float*>(A) + q * sa;
    const float* b = static_cast<const float*>(B) + q * sb;
    float* c = static_cast<float*>(C) + q * sc;
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) {
        double sum = 0;
        for (int p = 0; p < k; ++p) sum += double(a[i + p * lda]) * double(b[p + j * ldb]);
        c[i + j * ldc] = float(al * sum + (be == 0 ? 0 : be * c[i + j * ldc]));
      }
  }
  return 0;
}

const Cublas& fake_cublas() {
  static Cublas f = [] {
    Cublas b;
    b.create = [](Handle* h) -> BlasStatus {
      ++g_fake->blas_handles;
      if (g_capturing) ++g_fake->blas_handles_while_capturing;
      return *h = reinterpret_cast<Handle>(5), 0;
    };
    b.destroy = [](Handle) -> BlasStatus { return 0; };
    b.set_stream = [](Handle, Handle) -> BlasStatus { return 0; };
    b.set_workspace = [](Handle, void* w, size_t n) -> BlasStatus {
      g_fake->workspace = uint64_t(reinterpret_cast<uintptr_t>(w));
      g_fake->workspace_bytes = n;
      return 0;
    };
    b.gemm = fake_gemm;
    b.status_string = [](BlasStatus) -> const char* { return "fake cuBLAS status"; };
    b.lib = reinterpret_cast<void*>(1);
    b.path = "fake cuBLAS";
    return b;
  }();
  return f;
}

}  // namespace

FakeCuda* use_fake_cuda_driver(FakeCuda* fake) { return std::exchange(g_fake, fake); }

namespace cuda_api {

const Driver* installed_fake_driver() { return g_fake ? &fake_driver() : nullptr; }
const Cublas* installed_fake_cublas() { return g_fake ? &fake_cublas() : nullptr; }

}  // namespace cuda_api
}  // namespace relax::rt
