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

namespace {

// cublasGemmStridedBatchedEx with no transposes, as cuBLAS documents it:
// column-major, C[i + j*ldc] = sum_p A[i + p*lda] * B[p + j*ldb], each
// batch at its stride.
void reference_gemm(const rt::CublasGemm& g, const float* a, const float* b, float* c) {
  const float* A = b + g.b_offset;  // cuBLAS's A is the right operand (C^T = B^T A^T)
  const float* B = a + g.a_offset;
  float* C = c + g.c_offset;
  for (int64_t q = 0; q < g.batch; ++q)
    for (int64_t j = 0; j < g.n; ++j)
      for (int64_t i = 0; i < g.m; ++i) {
        double s = 0;
        for (int64_t p = 0; p < g.k; ++p)
          s += double(A[q * g.b_stride + i + p * g.ld_b]) * double(B[q * g.a_stride + p + j * g.ld_a]);
        C[q * g.c_stride + i + j * g.ld_c] = float(s);
      }
}

// numpy matmul of row-major a and b, written out plainly.
std::vector<float> numpy_matmul(std::vector<int64_t> as, const std::vector<float>& a, std::vector<int64_t> bs,
                                const std::vector<float>& b) {
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  size_t rank = std::max(as.size(), bs.size()) - 2;
  std::vector<int64_t> ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  ab.insert(ab.begin(), rank - ab.size(), 1);
  bb.insert(bb.begin(), rank - bb.size(), 1);
  std::vector<int64_t> ob(rank);
  int64_t batch = 1;
  for (size_t i = 0; i < rank; ++i) batch *= (ob[i] = std::max(ab[i], bb[i]));
  std::vector<float> out(size_t(batch * M * N));
  for (int64_t q = 0; q < batch; ++q) {
    int64_t rest = q, ia = 0, ib = 0, sa = 1, sb = 1;
    for (size_t k = rank; k-- > 0;) {
      int64_t x = rest % ob[k];
      rest /= ob[k];
      ia += (ab[k] == 1 ? 0 : x) * sa, ib += (bb[k] == 1 ? 0 : x) * sb;
      sa *= ab[k], sb *= bb[k];
    }
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t p = 0; p < K; ++p)
          s += double(a[size_t((ia * M + i) * K + p)]) * double(b[size_t((ib * K + p) * N + j)]);
        out[size_t((q * M + i) * N + j)] = float(s);
      }
  }
  return out;
}

}  // namespace

TEST_CASE("cuda runtime: cublas.matmul's calls compute numpy's matmul (1-D operands, batch broadcasting)") {
  using Shape = std::vector<int64_t>;
  const std::vector<std::pair<Shape, Shape>> cases = {{{3, 4}, {4, 5}},
                                                      {{4}, {4, 5}},
                                                      {{3, 4}, {4}},
                                                      {{4}, {4}},
                                                      {{2, 3, 4}, {4, 5}},
                                                      {{3, 4}, {2, 4, 5}},
                                                      {{2, 3, 4}, {2, 4, 5}},
                                                      {{2, 1, 3, 4}, {1, 3, 4, 5}},
                                                      {{3, 1, 2, 4}, {2, 4, 5}},
                                                      {{1, 3, 4}, {2, 1, 4, 5}},
                                                      {{2, 3, 1, 4}, {4}},
                                                      {{1, 1}, {1, 7}}};
  uint32_t seed = 1;
  auto next = [&] { return float(int((seed = seed * 1103515245u + 12345u) >> 16) % 17 - 8) / 4; };
  for (const auto& [as, bs] : cases) {
    auto numel = [](const Shape& s) {
      int64_t n = 1;
      for (int64_t d : s) n *= d;
      return n;
    };
    std::vector<float> a(size_t(numel(as))), b(size_t(numel(bs)));
    for (float& x : a) x = next();
    for (float& x : b) x = next();
    std::vector<float> want = numpy_matmul(as, a, bs, b);
    rt::CublasMatmulPlan plan = rt::plan_cublas_matmul(as, bs);
    CHECK(size_t(plan.batch * plan.M * plan.N) == want.size());
    std::vector<float> got(want.size(), -1000.f);
    for (const rt::CublasGemm& g : plan.calls) reference_gemm(g, a.data(), b.data(), got.data());
    INFO("a " << as.size() << "-D, b " << bs.size() << "-D, " << plan.calls.size() << " calls");
    CHECK(got == want);
  }
  // One strided call where the batch broadcasts whole; one per matrix where partly.
  CHECK(rt::plan_cublas_matmul({2, 3, 4}, {4, 5}).calls.size() == 1);
  CHECK(rt::plan_cublas_matmul({2, 1, 3, 4}, {1, 3, 4, 5}).calls.size() == 6);
  CHECK(rt::plan_cublas_matmul({3, 0}, {0, 5}).calls.empty());  // K = 0: the runtime zeroes the output
  std::string e;
  try {
    rt::plan_cublas_matmul({2, 3, 4}, {3, 5, 6});
  } catch (const rt::Error& x) {
    e = x.what();
  }
  CHECK(e.find("inner dims 4 and 5 differ") != std::string::npos);
}
