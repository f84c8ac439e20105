// The cpu_portable target (backends/target.h): kernels.cpu for x86-64-v2,
// whatever CPU builds it, through the cpu target's code generator. Its
// packages run on the runtime's cpu device.
#include "backends/target.h"

#include "backends/cpu/codegen.h"

namespace relax {
namespace {

constexpr const char* kLevel = "x86-64-v2";

class CpuPortableTarget : public Target {
 public:
  std::string name() const override { return "cpu_portable"; }
  TargetTraits traits(const TargetOptions&) const override { return TargetTraits(); }  // host, 256-bit vectors
  // Its packages are for other machines: weight-only work (packing for the
  // CPU's kernels) runs at load, on the machine that runs them.
  bool folds_here(const TargetOptions&) const override { return false; }
  std::string options_key(const TargetOptions&) const override { return std::string("cpu=") + kLevel; }
  TargetArtifact compile(const std::vector<tir::Program>& programs, const TargetOptions&) const override {
    cpu::CpuArtifact art = cpu::compile_programs(programs, cpu_options());
    TargetArtifact out;
    out.sections.emplace_back("kernels.cpu", std::move(art.shared_object));
    out.sections.emplace_back("kernels.cpu.features", cpu::cpu_kernel_features(kLevel));
    for (const cpu::KernelInfo& k : art.kernels) out.kernel_names[k.program] = k.symbol;
    return out;
  }
  std::string emit_source(const std::vector<tir::Program>& programs, const TargetOptions&) const override {
    return cpu::emit_llvm_ir(programs, cpu_options());
  }

 private:
  static cpu::CpuOptions cpu_options() {
    cpu::CpuOptions co;
    co.cpu = kLevel;
    return co;
  }
};

}  // namespace

std::unique_ptr<Target> make_cpu_portable_target() { return std::make_unique<CpuPortableTarget>(); }

}  // namespace relax
