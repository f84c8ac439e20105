// Internals of the cpu backend: its kernel entry around the LLVM code
// generator (codegen.cc) and the target machine, object and link steps
// (link.cc).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/codegen.h"
#include "backends/llvm/codegen.h"

namespace relax::cpu {

// A program as a kernel of the host ABI (docs/runtime_abi.md section 2):
// `int32_t symbol(void* const* buffers, const int64_t* shape_args)`,
// returning 2 when the shape arguments contradict the declared shapes;
// parallel loops run through relax_runtime_hooks.parallel_for.
class CpuCodegen : public llvmgen::ProgramCodegen {
 public:
  using ProgramCodegen::ProgramCodegen;
  void run();

 protected:
  const char* backend_name() const override { return "cpu"; }
  const char* device_name() const override { return "cpu"; }
  void emit_parallel(const tir::ForNode& f) override;

 private:
  void emit_prologue(llvm::Value* buffers, llvm::Value* shape_args);
  // An estimate of a statement's scalar operations, as a run-time value.
  llvm::Value* emit_work(const tir::Stmt& s);
};

std::unique_ptr<llvm::TargetMachine> make_target_machine(const CpuOptions& opts);
std::string emit_object(llvm::Module& m, llvm::TargetMachine& tm);
// Links the objects into one shared object with lld, in-process.
std::string link_shared_object(const std::vector<std::string>& objects, llvm::TargetMachine& tm);

}  // namespace relax::cpu
