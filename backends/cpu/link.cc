// The cpu target machine (x86-64, --cpu), object emission and the
// in-process link into a shared object with lld.
#include <lld/Common/CommonLinkerContext.h>
#include <lld/Common/Driver.h>
#include <llvm/Analysis/TargetLibraryInfo.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/ErrorHandling.h>
#include <llvm/Support/Host.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "backends/cpu/cpu_codegen.h"
#include "ir/error.h"
#include "runtime/cpu_isa.h"
#include "runtime/file_util.h"
#include "runtime/package.h"

namespace relax::cpu {

namespace {

constexpr const char* kTriple = "x86_64-unknown-linux-gnu";

void init_llvm() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvmgen::install_llvm_fatal_error_handler();
    LLVMInitializeX86TargetInfo();
    LLVMInitializeX86Target();
    LLVMInitializeX86TargetMC();
    LLVMInitializeX86AsmPrinter();
  });
}

std::string host_features() {
  llvm::StringMap<bool> features;
  if (!llvm::sys::getHostCPUFeatures(features)) return "";
  std::string out;
  for (auto& f : features) {
    if (!out.empty()) out += ",";
    out += (f.second ? "+" : "-") + f.first().str();
  }
  return out;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), std::streamsize(bytes.size()));
  if (!f) fail("cpu codegen: cannot write ", path);
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  if (!f) fail("cpu codegen: cannot read ", path);
  return ss.str();
}

// lld keeps its state in globals, so links are serialised; each one ends by
// resetting that state so that the next starts clean.
void run_lld(const std::vector<std::string>& args) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::vector<const char*> argv{"ld.lld"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  std::string out, err;
  llvm::raw_string_ostream out_os(out), err_os(err);
  bool ok = lld::elf::link(argv, out_os, err_os, /*exitEarly=*/false, /*disableOutput=*/false);
  lld::CommonLinkerContext::destroy();
  if (!ok) fail("cpu codegen: linking the shared object failed: ", err_os.str());
}

}  // namespace

std::string cpu_key(const std::string& cpu) {
  if (cpu != "host") return cpu;
  std::string f = host_features();
  return "host:" + llvm::sys::getHostCPUName().str() + ":" + rt::checksum64_hex(f.data(), f.size());
}

bool cpu_has_avx512(const std::string& cpu) {
  CpuOptions opts;
  opts.cpu = cpu;
  return make_target_machine(opts)->getMCSubtargetInfo()->checkFeatures("+avx512f");
}

std::string cpu_kernel_features(const std::string& cpu) {
  CpuOptions opts;
  opts.cpu = cpu;
  std::unique_ptr<llvm::TargetMachine> tm = make_target_machine(opts);
  std::string out;
  for (const std::string& f : rt::x86_feature_names())
    if (tm->getMCSubtargetInfo()->checkFeatures("+" + f)) out += (out.empty() ? "" : " ") + f;
  return out;
}

std::unique_ptr<llvm::TargetMachine> make_target_machine(const CpuOptions& opts) {
  init_llvm();
  if (opts.opt_level < 0 || opts.opt_level > 3) fail("cpu codegen: opt_level must be 0..3, got ", opts.opt_level);
  std::string error;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(kTriple, error);
  if (!target) fail("cpu codegen: no x86-64 target in this LLVM: ", error);
  std::string cpu = opts.cpu, features;
  if (cpu == "host") {
    cpu = llvm::sys::getHostCPUName().str();
    features = host_features();
  }
  std::unique_ptr<llvm::MCSubtargetInfo> sti(target->createMCSubtargetInfo(kTriple, "", ""));
  if (!sti || !sti->isCPUStringValid(cpu)) fail("cpu codegen: unknown cpu '", opts.cpu, "'");
  llvm::CodeGenOpt::Level level = opts.opt_level == 0   ? llvm::CodeGenOpt::None
                                  : opts.opt_level == 1 ? llvm::CodeGenOpt::Less
                                  : opts.opt_level == 2 ? llvm::CodeGenOpt::Default
                                                        : llvm::CodeGenOpt::Aggressive;
  llvm::TargetOptions to;
  std::unique_ptr<llvm::TargetMachine> tm(
      target->createTargetMachine(kTriple, cpu, features, to, llvm::Reloc::PIC_, llvm::CodeModel::Small, level));
  if (!tm) fail("cpu codegen: cannot create a target machine for cpu '", opts.cpu, "'");
  return tm;
}

std::string emit_object(llvm::Module& m, llvm::TargetMachine& tm) {
  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream os(buffer);
  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, os, nullptr, llvm::CGFT_ObjectFile))
    fail("cpu codegen: the target cannot emit an object file");
  pm.run(m);
  return std::string(buffer.begin(), buffer.end());
}

// The kernels call libm (expf, erff, ...) and libc (malloc); the object
// records that need as DT_NEEDED entries. lld only writes those for shared
// libraries given as inputs, so it links against empty stand-ins that carry
// the real sonames: the result does not depend on where (or whether) the
// build machine keeps libm.so.6.
std::string link_shared_object(const std::vector<std::string>& objects, llvm::TargetMachine& tm) {
  rt::TempDir dir("relax-cpu");  // the linker's files, removed however the link ends
  llvm::LLVMContext ctx;
  llvm::Module empty("relax_stub", ctx);
  empty.setTargetTriple(tm.getTargetTriple().str());
  empty.setDataLayout(tm.createDataLayout());
  write_file(dir.file("stub.o"), emit_object(empty, tm));
  std::vector<std::string> needed;
  for (const char* soname : {"libm.so.6", "libc.so.6"}) {
    std::string path = dir.file(soname);
    run_lld({"-shared", "--threads=1", "-soname", soname, "-o", path, dir.file("stub.o")});
    needed.push_back(path);
  }
  std::vector<std::string> args{"-shared",     "--threads=1", "-z", "noexecstack", "-z", "relro", "-z", "now",
                                "--no-as-needed", "-o",          dir.file("kernels.so")};
  for (size_t k = 0; k < objects.size(); ++k) {
    std::string path = dir.file("kernels" + std::to_string(k) + ".o");
    write_file(path, objects[k]);
    args.push_back(path);
  }
  args.insert(args.end(), needed.begin(), needed.end());
  run_lld(args);
  return read_file(dir.file("kernels.so"));
}

}  // namespace relax::cpu
