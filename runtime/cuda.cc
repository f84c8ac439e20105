#include "runtime/cuda.h"

#include <dlfcn.h>

namespace relax::rt {

CudaDriverStatus cuda_driver_status() {
  CudaDriverStatus s;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    s.detail = std::string("no CUDA driver (") + (e ? e : "libcuda.so.1 not found") + ")";
    return s;
  }
  using InitFn = int (*)(unsigned);
  using CountFn = int (*)(int*);
  using VersionFn = int (*)(int*);
  auto init = reinterpret_cast<InitFn>(dlsym(lib, "cuInit"));
  auto count = reinterpret_cast<CountFn>(dlsym(lib, "cuDeviceGetCount"));
  auto version = reinterpret_cast<VersionFn>(dlsym(lib, "cuDriverGetVersion"));
  if (!init || !count || !version) {
    s.detail = "libcuda.so.1 lacks cuInit, cuDeviceGetCount or cuDriverGetVersion";
  } else if (int rc = init(0); rc != 0) {
    s.detail = "the CUDA driver failed to initialise (cuInit error " + std::to_string(rc) + ")";
  } else {
    int v = 0;
    version(&v);
    count(&s.devices);
    s.present = true;
    s.detail = "CUDA driver " + std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10) + ", " +
               std::to_string(s.devices) + (s.devices == 1 ? " device" : " devices");
  }
  dlclose(lib);
  return s;
}

}  // namespace relax::rt
