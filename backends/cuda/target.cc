// The cuda target (backends/target.h): kernels.cuda (JSON) and
// kernels.cuda.ptx (one PTX module), with cuBLAS offload and CUDA graph
// regions decided by the passes from the module's attributes.
#include "backends/target.h"

#include <algorithm>
#include <cstdlib>

#include "backends/cuda/codegen.h"

namespace relax {
namespace {

class CudaTarget : public Target {
 public:
  std::string name() const override { return "cuda"; }
  std::vector<TargetOption> options() const override {
    return {
        {"arch", "--arch", "sm_80", "cuda: the GPU to compile for: sm_80 (A100), sm_86, sm_89, sm_90 (H100)"},
        {"cublas", "--no-cublas", "1", "cuda: generate every matmul instead of calling cuBLAS for the large ones"},
        {"cuda_graph", "--no-cuda-graph", "1",
         "cuda: launch every kernel from the host instead of capturing runs of them as CUDA graphs to replay"},
    };
  }
  // A GPU with cuBLAS for large matmuls (its recommended workspace: 32 MiB
  // on Hopper and later, 4 MiB before) and CUDA graphs, unless
  // --no-cublas or --no-cuda-graph; blocks of up to 1024 threads and 48 KiB
  // of static shared memory.
  TargetTraits traits(const TargetOptions& opts) const override {
    TargetTraits t;
    t.gpu = true;
    t.host_kernels = false;
    if (opts.at("cublas") != "0") {
      const std::string& arch = opts.at("arch");
      int sm = arch.size() > 3 ? std::atoi(arch.c_str() + 3) : 80;
      t.matmul_library = "cublas";
      t.matmul_workspace = sm >= 90 ? int64_t(32) << 20 : int64_t(4) << 20;
    }
    t.capture = opts.at("cuda_graph") != "0";
    t.max_threads = 1024;
    t.shared_memory = 48 << 10;
    t.precisions = {"f32", "f64"};
    return t;
  }
  TargetArtifact compile(const std::vector<tir::Program>& programs, const TargetOptions& opts) const override {
    cuda::CudaArtifact art = cuda::compile_cuda(programs, cuda_options(opts, traits(opts)));
    TargetArtifact out;
    out.sections.emplace_back("kernels.cuda", std::move(art.metadata));
    out.sections.emplace_back("kernels.cuda.ptx", std::move(art.ptx));
    return out;
  }
  std::string emit_source(const std::vector<tir::Program>& programs, const TargetOptions& opts) const override {
    return cuda::cuda_ptx(programs, cuda_options(opts, traits(opts)));
  }

 private:
  // Blocks of 256 threads (within the traits' limit), tiles within the
  // traits' shared memory.
  static cuda::CudaOptions cuda_options(const TargetOptions& opts, const TargetTraits& t) {
    cuda::CudaOptions co;
    co.arch = opts.at("arch");
    co.block = int(std::min<int64_t>(co.block, t.max_threads));
    co.max_shared_bytes = t.shared_memory;
    return co;
  }
};

}  // namespace

std::unique_ptr<Target> make_cuda_target() { return std::make_unique<CudaTarget>(); }

}  // namespace relax
