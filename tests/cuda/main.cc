// The entry point of relax-cuda-tests. Its cases build the exported models
// for cuda, whose math comes from CUDA's libdevice: without the CUDA
// toolkit it says so and exits 77, which ctest reports as skipped.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "backends/cuda/codegen.h"

int main(int argc, char** argv) {
  if (relax::cuda::find_libdevice().empty()) {
    std::printf("skipped: no CUDA libdevice (set CUDA_HOME to the CUDA toolkit)\n");
    return 77;
  }
  return doctest::Context(argc, argv).run();
}
