// The LLVM code generator's parts that need no LLVM header: the kernels'
// symbol names and the handling of LLVM's fatal errors. Shared by the cpu
// and cuda backends (backends/llvm/codegen.h is the code generator itself).
#pragma once

#include <string>
#include <vector>

#include "ir/tir.h"

namespace relax::llvmgen {

// The exported symbol of each program, in order: "relax_k_" + the name with
// every character outside [A-Za-z0-9_] replaced by '_', "_1", "_2", ...
// appended on a clash.
std::vector<std::string> kernel_symbols(const std::vector<tir::Program>& programs);

// LLVM's fatal errors (report_fatal_error: a code generator bug, never bad
// input) end the process with exit status 1 and one line on standard error
// naming what LLVM was doing, "<tool>: error: LLVM failed while emitting
// PTX for sm_80: <reason> (an internal error: please report it)", instead
// of an abort with a stack dump. The cpu and cuda code generators install
// the handler with their targets; LlvmTask names the work for its lifetime.
// Packages are written after code generation, so nothing is left half
// written.
void install_llvm_fatal_error_handler();
class LlvmTask {
 public:
  explicit LlvmTask(std::string what);
  ~LlvmTask();
  LlvmTask(const LlvmTask&) = delete;
  LlvmTask& operator=(const LlvmTask&) = delete;

 private:
  std::string previous_;
};
// Raises an LLVM fatal error (tests of the handler, in a child process).
[[noreturn]] void llvm_fatal_error_for_test(const std::string& reason);

}  // namespace relax::llvmgen
