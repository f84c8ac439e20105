// The CUDA runtime's parts that run without a GPU: the driver's and
// cuBLAS's status, persistent storage (the same block every call, which
// CUDA graph regions rely on), and the refusal of library calls outside
// the CUDA runtime. Kernels on a GPU: tests/tools/test_cuda_build.py.
#include <doctest/doctest.h>

#include <filesystem>

#include "backends/common/vm_lower.h"
#include "ir/parser.h"
#include "runtime/cuda.h"
#include "runtime/error.h"
#include "runtime/vm.h"

using namespace relax;

namespace {

std::unique_ptr<rt::VirtualMachine> make_vm(const std::string& text) {
  IRModule mod = parse_module(text);
  rt::Executable exe = rt::Executable::deserialize(lower_to_vm(mod).exe.serialize());
  return std::make_unique<rt::VirtualMachine>(
      std::move(exe), [](const std::string&) { return rt::Tensor(); }, nullptr);
}

}  // namespace

TEST_CASE("cuda runtime: the driver's status says why when there is none") {
  rt::CudaDriverStatus s = rt::cuda_driver_status();
  CHECK(!s.detail.empty());
  if (!s.present)
    CHECK((s.detail.find("CUDA driver") != std::string::npos || s.detail.find("device") != std::string::npos));
  if (s.present) CHECK(s.devices > 0);
}

TEST_CASE("cuda runtime: cuBLAS loads with every function the runtime calls where the toolkit has it") {
  rt::CublasStatus s = rt::cublas_status();
  bool installed = std::filesystem::exists("/usr/local/cuda/lib64/libcublas.so");
  INFO(s.detail);
  if (installed) CHECK(s.present);
  if (!s.present)
    CHECK((s.detail.find("no cuBLAS") != std::string::npos || s.detail.find("lacks") != std::string::npos));
}

TEST_CASE("vm: persistent storage is the same block every call while it is big enough") {
  auto vm = make_vm(R"(
fn @main(x: Tensor[(n,), f32]) -> Object {
  s: Object = alloc_storage(shape(n * 4), persistent="@main/s")
  return s
}
)");
  auto run = [&](int64_t n) { return vm->invoke("main", {rt::Tensor::zeros(rt::DType::f32(), {n})}).tensor().data(); };
  void* first = run(16);
  CHECK(run(16) == first);
  CHECK(run(8) == first);  // smaller: the same block
  void* grown = run(1024);
  CHECK(run(1024) == grown);
  CHECK(run(4) == grown);
}

TEST_CASE("vm: cublas.matmul outside the CUDA runtime is refused by name") {
  auto vm = make_vm(R"(
fn @main(a: Tensor[(2, 3), f32], b: Tensor[(3, 4), f32], c: Tensor[(2, 4), f32], w: Tensor[(64,), u8]) -> Tuple[] {
  r: Tuple[] = call_builtin("cublas.matmul", (a, b, c, w), out=Tuple[])
  return ()
}
)");
  std::string e;
  try {
    vm->invoke("main", {rt::Tensor::zeros(rt::DType::f32(), {2, 3}), rt::Tensor::zeros(rt::DType::f32(), {3, 4}),
                        rt::Tensor::zeros(rt::DType::f32(), {2, 4}), rt::Tensor::zeros(rt::DType::u(8), {64})});
  } catch (const rt::Error& x) {
    e = x.what();
  }
  CHECK(e.find("cublas.matmul: runs only under the CUDA runtime") != std::string::npos);
}
