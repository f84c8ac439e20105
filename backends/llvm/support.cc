#include "backends/llvm/support.h"

#include <llvm/Analysis/TargetLibraryInfo.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/ErrorHandling.h>
#include <llvm/Transforms/InstCombine/InstCombine.h>
#include <llvm/Transforms/Scalar/LICM.h>
#include <llvm/Transforms/Scalar/LoopPassManager.h>
#include <llvm/Transforms/Scalar/SCCP.h>
// GCC warns that LLVM 16's SROAPass has greater visibility than the type of
// one of its fields (a quirk of that header); the pass is only run here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wattributes"
#include <llvm/Transforms/Scalar/SROA.h>
#pragma GCC diagnostic pop
#include <llvm/Transforms/Scalar/SimplifyCFG.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <set>

#include "backends/llvm/codegen.h"

namespace relax::llvmgen {

std::vector<std::string> kernel_symbols(const std::vector<tir::Program>& programs) {
  std::vector<std::string> out;
  std::set<std::string> used;
  for (const tir::Program& p : programs) {
    std::string base = "relax_k_";
    for (char c : p->name) base += std::isalnum(static_cast<unsigned char>(c)) || c == '_' ? c : '_';
    std::string s = base;
    for (int n = 1; used.count(s); ++n) s = base + "_" + std::to_string(n);
    used.insert(s);
    out.push_back(s);
  }
  return out;
}

namespace {

// What LLVM is doing (LlvmTask), for the fatal error handler.
thread_local std::string llvm_task = "generating code";

void llvm_fatal_error(void*, const char* reason, bool) {
  std::string line = std::string(program_invocation_short_name) + ": error: LLVM failed while " + llvm_task + ": " +
                     (reason ? reason : "?") + " (an internal error: please report it)\n";
  ssize_t ignored = ::write(2, line.data(), line.size());
  (void)ignored;
  _exit(1);  // no unwinding through LLVM, no destructors of half-built LLVM state
}

}  // namespace

void install_llvm_fatal_error_handler() {
  static std::once_flag once;
  std::call_once(once, [] { llvm::install_fatal_error_handler(llvm_fatal_error, nullptr); });
}

LlvmTask::LlvmTask(std::string what) : previous_(std::exchange(llvm_task, std::move(what))) {}
LlvmTask::~LlvmTask() { llvm_task = std::move(previous_); }

void llvm_fatal_error_for_test(const std::string& reason) {
  install_llvm_fatal_error_handler();
  llvm::report_fatal_error(llvm::Twine(reason), false);
}

void optimize_module(llvm::Module& m, llvm::TargetMachine& tm, int opt_level) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions pto;
  pto.LoopVectorization = opt_level >= 2;
  pto.SLPVectorization = opt_level >= 2;
  pto.LoopUnrolling = opt_level >= 2;
  llvm::PassBuilder pb(&tm, pto);
  llvm::Triple triple(m.getTargetTriple());
  fam.registerPass([&] { return llvm::TargetLibraryAnalysis(llvm::TargetLibraryInfoImpl(triple)); });
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  // After the vectorizer: a reduction's running results kept lane-wise in
  // a small local array (`part`, passes/legalize/reduce.cc) were loaded
  // and stored through the stack on every step, the vectorized lane loop
  // being a one-trip loop the vectorizer marks not to unroll. SCCP finds
  // its back edge dead, SimplifyCFG removes it, LICM then holds the lanes
  // in a register across the scan and SROA makes the array a value: a
  // whole tensor's max (dynamic quantization's range) 12 -> 29 GB/s,
  // bert_dynquant 11% faster a run. Build times unchanged.
  if (opt_level >= 2)
    pb.registerOptimizerLastEPCallback([](llvm::ModulePassManager& mpm, llvm::OptimizationLevel) {
      llvm::FunctionPassManager fpm;
      fpm.addPass(llvm::SCCPPass());
      fpm.addPass(llvm::SimplifyCFGPass());
      fpm.addPass(llvm::createFunctionToLoopPassAdaptor(llvm::LICMPass(llvm::LICMOptions()), /*UseMemorySSA=*/true));
      fpm.addPass(llvm::SROAPass(llvm::SROAOptions::ModifyCFG));
      fpm.addPass(llvm::InstCombinePass());
      mpm.addPass(llvm::createModuleToFunctionPassAdaptor(std::move(fpm)));
    });
  static const llvm::OptimizationLevel levels[] = {llvm::OptimizationLevel::O0, llvm::OptimizationLevel::O1,
                                                   llvm::OptimizationLevel::O2, llvm::OptimizationLevel::O3};
  llvm::ModulePassManager mpm =
      opt_level == 0 ? pb.buildO0DefaultPipeline(levels[0]) : pb.buildPerModuleDefaultPipeline(levels[opt_level]);
  mpm.run(m, mam);
}

}  // namespace relax::llvmgen
