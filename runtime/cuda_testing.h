// A fake CUDA driver for the CUDA runtime's own unit tests, on machines
// without a GPU (CI): it records what the runtime asks of the driver
// (launches, stream captures, graph instantiations and launches,
// synchronisations) and runs no kernel. It checks the runtime's
// orchestration (which launches go into which graph, when a graph is
// captured and when replayed, that nothing synchronises while capturing),
// never results; tests/tools/test_cuda_build.py runs real packages on a GPU.
// Not for use outside tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace relax::rt {

struct FakeCuda {
  struct Launch {
    std::string kernel;  // the function's symbol
    unsigned grid = 0, block = 0;
    uint64_t first_arg = 0;  // the first kernel parameter (a device pointer)
    bool replayed = false;   // run as part of a graph launch
  };
  std::vector<Launch> launches;  // what ran on the "device", in order
  int captures = 0, instantiated = 0, graph_launches = 0, synchronizations = 0;
  int synchronizations_while_capturing = 0;  // each also fails, as the driver's do
  bool refuse_capture = false;               // cuStreamEndCapture reports the capture invalidated
  // cuBLAS, faked too: handles made (and whether while capturing), the
  // workspace last set, and each GEMM, recorded as a launch named
  // "cublasGemmStridedBatchedEx". An f32 GEMM outside a capture is also
  // computed on the (host) memory, as cuBLAS documents it, so a test sees
  // whether the runtime passed the right operands, strides and offsets.
  int blas_handles = 0, blas_handles_while_capturing = 0;
  uint64_t workspace = 0;
  size_t workspace_bytes = 0;
};

// From now on the CUDA runtime talks to `fake` instead of libcuda and
// cuBLAS (nullptr: back to them); returns the fake installed before.
// CudaKernels loaded before keep the driver and cuBLAS they have, but a
// fake records into whichever FakeCuda is installed.
FakeCuda* use_fake_cuda_driver(FakeCuda* fake);

}  // namespace relax::rt
