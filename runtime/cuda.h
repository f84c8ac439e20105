// The CUDA driver, as the runtime will use it: libcuda is opened with
// dlopen at run time (the runtime builds and starts on machines without
// it). For now it answers whether a driver and devices are there; running
// cuda packages (loading PTX, launching, CUDA Graphs) is not written yet.
#pragma once

#include <string>

namespace relax::rt {

struct CudaDriverStatus {
  bool present = false;  // libcuda.so.1 loaded and cuInit succeeded
  int devices = 0;
  std::string detail;  // "no CUDA driver (libcuda.so.1: cannot open ...)", "CUDA driver 13.0, 1 device"
};

CudaDriverStatus cuda_driver_status();

}  // namespace relax::rt
