// Real cuda packages (the exported GPT-2, BERT and CNN, built by the
// compiler) through the CUDA runtime against the fake driver
// (runtime/cuda_testing.h): the package's kernel index loads, every
// launch, cuBLAS call and CUDA graph region goes where it should, nothing
// synchronises while a region is captured, and repeated runs at one shape
// replay the graphs. No kernel runs, so outputs are not checked here;
// tests/tools/test_cuda_build.py compares them with PyTorch's on a GPU.
#include <doctest/doctest.h>

#include <filesystem>

#include "runtime/cuda.h"
#include "runtime/cuda_testing.h"
#include "runtime/model.h"
#include "runtime/tensor_proto.h"
#include "tools/driver/build.h"

using namespace relax;
namespace fs = std::filesystem;

namespace {

const std::string kModels = std::string(RELAX_SOURCE_DIR) + "/tests/models";

// The inputs of one exported case, in order.
std::vector<rt::Tensor> inputs_of(const std::string& dir) {
  std::vector<rt::Tensor> out;
  for (int i = 0; fs::exists(dir + "/input_" + std::to_string(i) + ".pb"); ++i)
    out.push_back(rt::read_tensor_proto(dir + "/input_" + std::to_string(i) + ".pb").tensor);
  return out;
}

size_t calls_of(const rt::Executable& exe, const std::string& builtin) {
  size_t n = 0;
  for (const auto& f : exe.functions)
    for (const rt::Instr& in : f.code)
      if (in.op == rt::Opcode::Call && in.callee_kind == rt::CalleeKind::Builtin &&
          exe.builtins[size_t(in.callee)] == builtin)
        ++n;
  return n;
}

}  // namespace

// The exported models use math functions, which come from CUDA's libdevice
// (tests/cuda/main.cc skips the binary without it).
TEST_CASE(
    "cuda packages: the exported models' regions are captured at most twice per shape, then replayed (fake driver)") {
  fs::path tmp = fs::temp_directory_path() / ("relax_cuda_packages_" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } cleanup{tmp};
  for (const std::string m : {"gpt2_tiny", "bert_tiny", "cnn_tiny"}) {
    CAPTURE(m);
    BuildOptions opts;
    opts.target = "cuda";
    std::string pkg = (tmp / (m + ".cuda.rpkg")).string();
    build_package(kModels + "/" + m + ".onnx", pkg, opts);
    rt::FakeCuda fake;
    struct Installed {
      rt::FakeCuda* previous;
      ~Installed() { rt::use_fake_cuda_driver(previous); }
    } installed{rt::use_fake_cuda_driver(&fake)};
    std::unique_ptr<rt::Model> model = rt::Model::load(pkg);
    const auto* kernels = dynamic_cast<const rt::CudaKernels*>(model->kernels());
    REQUIRE(kernels);
    size_t regions = calls_of(model->vm().exe(), "cuda.graph_run");
    CHECK(regions > 0);
    for (const auto& c : fs::directory_iterator(kModels + "/data/" + m)) {
      CAPTURE(c.path().filename().string());
      std::vector<rt::Tensor> in = inputs_of(c.path().string());
      // Two runs capture each region at most twice: a region that reads an
      // output of the run before it (a KV cache the caller got, in memory
      // the pool hands out again) sees one of two addresses. From then on
      // every run replays.
      rt::CudaGraphStats before = kernels->graph_stats();
      for (int run = 0; run < 2; ++run) model->run(in);
      rt::CudaGraphStats warm = kernels->graph_stats();
      CHECK(warm.captures - before.captures >= int64_t(regions));
      CHECK(warm.captures - before.captures <= int64_t(2 * regions));
      for (int run = 0; run < 4; ++run) model->run(in);
      rt::CudaGraphStats s = kernels->graph_stats();
      CHECK(s.failed == 0);
      CHECK(s.captures == warm.captures);
      CHECK(s.replays - before.replays == int64_t(6 * regions));
      CHECK(s.direct == before.direct);
    }
    CHECK(fake.synchronizations_while_capturing == 0);
    CHECK(fake.blas_handles_while_capturing == 0);
    size_t replayed = 0;
    for (const auto& l : fake.launches) replayed += l.replayed;
    CHECK(replayed > 0);
    MESSAGE(m << ": " << regions << " regions, " << fake.launches.size() << " launches, " << replayed
              << " of them from graphs, " << fake.captures << " captures");
  }
}
