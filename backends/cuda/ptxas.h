// ptxas, CUDA's PTX assembler, run on a module to check it: where the CUDA
// toolkit is installed (RELAX_PTXAS, then PATH, then CUDA_HOME/bin and
// /usr/local/cuda/bin), every PTX module relax-build writes goes through it,
// and its register and spill figures per kernel go into the package.
#pragma once

#include <map>
#include <optional>
#include <string>

namespace relax::cuda {

struct PtxasKernel {
  int registers = 0;
  int spill_stores = 0, spill_loads = 0;  // bytes
  int stack = 0;                          // bytes of stack frame
};

struct PtxasReport {
  std::string version;  // "13.0.48"
  std::map<std::string, PtxasKernel> kernels;
};

// ptxas's path; nullopt when it is not installed.
std::optional<std::string> find_ptxas();

// ptxas's version ("13.0.48"; empty when it does not say), asked once per
// path and process (a parent that forks workers asks first, for them).
std::string ptxas_version(const std::string& ptxas);

// Assembles `ptx` for `arch` with -v; throws relax::Error with ptxas's
// messages when it rejects the module.
PtxasReport run_ptxas(const std::string& ptxas, const std::string& ptx, const std::string& arch);

}  // namespace relax::cuda
