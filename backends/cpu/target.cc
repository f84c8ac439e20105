// The cpu target (backends/target.h): kernels.cpu, one shared object.
#include "backends/target.h"

#include <algorithm>

#include "backends/cpu/codegen.h"

namespace relax {
namespace {

class CpuTarget : public Target {
 public:
  std::string name() const override { return "cpu"; }
  std::vector<TargetOption> options() const override {
    return {{"cpu", "--cpu", "host", "the CPU to compile for: host, x86-64, x86-64-v2, x86-64-v3, znver3, ..."}};
  }
  // A host target with the runtime's host kernels and VNNI products; the
  // vector width picks the layout a convolution's weights are packed in
  // (runtime/conv_direct.h conv2d_direct_pays).
  TargetTraits traits(const TargetOptions& opts) const override {
    TargetTraits t;
    t.vector_bits = cpu::cpu_has_avx512(opts.at("cpu")) ? 512 : 256;
    return t;
  }
  bool folds_here(const TargetOptions& opts) const override { return opts.at("cpu") == "host"; }
  std::string options_key(const TargetOptions& opts) const override { return "cpu=" + cpu::cpu_key(opts.at("cpu")); }
  TargetArtifact compile(const std::vector<tir::Program>& programs, const TargetOptions& opts) const override {
    cpu::CpuArtifact art = cpu::compile_programs(programs, cpu_options(opts));
    TargetArtifact out;
    out.sections.emplace_back("kernels.cpu", std::move(art.shared_object));
    out.sections.emplace_back("kernels.cpu.features", cpu::cpu_kernel_features(opts.at("cpu")));
    for (const cpu::KernelInfo& k : art.kernels) out.kernel_names[k.program] = k.symbol;
    return out;
  }
  std::string emit_source(const std::vector<tir::Program>& programs, const TargetOptions& opts) const override {
    return cpu::emit_llvm_ir(programs, cpu_options(opts));
  }

 private:
  static cpu::CpuOptions cpu_options(const TargetOptions& opts) {
    cpu::CpuOptions co;
    co.cpu = opts.at("cpu");
    return co;
  }
};

}  // namespace

std::unique_ptr<Target> make_cpu_target() { return std::make_unique<CpuTarget>(); }

}  // namespace relax
