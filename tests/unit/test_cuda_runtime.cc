// The CUDA runtime's parts that run without a GPU: the driver's and
// cuBLAS's status, persistent storage (the same block every call, which
// CUDA graph regions rely on), and the refusal of library calls outside
// the CUDA runtime. Kernels on a GPU: tests/tools/test_cuda_build.py.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "backends/vm/lower.h"
#include "ir/parser.h"
#include "runtime/cuda.h"
#include "runtime/cuda_testing.h"
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

// The fake driver (runtime/cuda_testing.h) for a scope, and packages loaded
// on it.
struct FakeGpu {
  rt::FakeCuda fake;
  rt::FakeCuda* previous;
  FakeGpu() : previous(rt::use_fake_cuda_driver(&fake)) {}
  ~FakeGpu() { rt::use_fake_cuda_driver(previous); }
  FakeGpu(const FakeGpu&) = delete;
  FakeGpu& operator=(const FakeGpu&) = delete;

  struct Run {
    std::unique_ptr<rt::CudaKernels> kernels;
    std::unique_ptr<rt::VirtualMachine> vm;
  };
  // `exe` with the kernels of `meta` (the "kernels.cuda" index), and no weights.
  static Run load(const rt::Executable& exe, const nlohmann::json& meta, const std::string& label) {
    Run r;
    r.kernels = rt::CudaKernels::load(meta.dump(), "fake PTX", 0, label);
    r.vm = std::make_unique<rt::VirtualMachine>(
        exe, [](const std::string&) { return rt::Tensor(); }, r.kernels.get(), r.kernels->make_pool());
    return r;
  }
};

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

TEST_CASE("cuda runtime: CUDA graph regions are captured once per key and replayed (fake driver)") {
  // The golden output of rewrite-cuda-graph: a region of three launches
  // (exp, relu, sigmoid) over persistent storage, then a host builtin and
  // a launch outside it.
  std::ifstream f(std::string(RELAX_SOURCE_DIR) + "/tests/golden/rewrite-cuda-graph/breaks.out");
  std::stringstream text;
  text << f.rdbuf();
  rt::Executable exe = rt::Executable::deserialize(lower_to_vm(parse_module(text.str())).exe.serialize());
  nlohmann::json meta{{"block", 256}, {"kernels", nlohmann::json::array()}};
  for (const std::string& k : exe.kernels)  // (x: f32[n, 8]) -> f32[n, 8]; n threads
    meta["kernels"].push_back({{"name", k},
                               {"num_inputs", 1},
                               {"slots", 4},
                               {"params", {{{"dtype", "f32"}, {"ndim", 2}}, {{"dtype", "f32"}, {"ndim", 2}}}},
                               {"stages", {{{"symbol", "k_" + k}, {"threads", {1, 0}}}}}});
  FakeGpu gpu;
  rt::FakeCuda& fake = gpu.fake;
  FakeGpu::Run vm_run = FakeGpu::load(exe, meta, "fake.rpkg");
  rt::CudaKernels* kernels = vm_run.kernels.get();
  rt::VirtualMachine& vm = *vm_run.vm;
  uint64_t host_x = 0;
  auto run = [&](int64_t n) {
    fake.launches.clear();
    rt::Tensor x = rt::Tensor::zeros(rt::DType::f32(), {n, 8});  // the caller's, on the host heap
    host_x = uint64_t(reinterpret_cast<uintptr_t>(x.data()));
    vm.invoke("main", {x});
    std::vector<std::string> names;
    for (const auto& l : fake.launches) names.push_back(l.kernel + (l.replayed ? " (graph)" : ""));
    return names;
  };
  const std::vector<std::string> each_run = {"k_exp (graph)", "k_relu (graph)", "k_sigmoid (graph)", "k_tanh"};
  // First run: the region is captured (its launches do not run while
  // capturing), instantiated and launched; then the rest runs directly.
  CHECK(run(4) == each_run);
  CHECK(fake.captures == 1);
  CHECK(fake.instantiated == 1);
  CHECK(fake.synchronizations_while_capturing == 0);
  // Same shapes: the persistent storage and the staging buffer for the
  // caller's x keep their addresses, so the graph replays.
  uint64_t staged = 0;
  for (int i = 0; i < 3; ++i) {
    CHECK(run(4) == each_run);
    CHECK(fake.launches[0].first_arg != 0);
    CHECK(fake.launches[0].first_arg != host_x);
    if (staged) CHECK(fake.launches[0].first_arg == staged);  // x through the region's staging buffer
    staged = fake.launches[0].first_arg;
  }
  CHECK(fake.captures == 1);
  CHECK(fake.graph_launches == 4);
  CHECK(kernels->graph_stats().replays == 4);
  // Another binding of n: captured anew (launches sized for it), then replayed.
  CHECK(run(100) == each_run);
  CHECK(fake.launches[0].grid == 1);  // ceil(100 / 256) blocks
  CHECK(run(100) == each_run);
  CHECK(fake.captures == 2);
  // The first binding's graph is still cached... but its storage grew for n = 100 (the same
  // persistent blocks, other shapes): one more capture, then replays.
  run(4);
  run(4);
  CHECK(fake.captures == 3);
  rt::CudaGraphStats s = kernels->graph_stats();
  CHECK(s.captures == 3);
  CHECK(s.replays == 8);
  CHECK(s.failed == 0);
  CHECK(fake.synchronizations_while_capturing == 0);

  // A capture the driver refuses: the region runs directly from then on.
  FakeGpu::Run vm2_run = FakeGpu::load(exe, meta, "fake2.rpkg");
  rt::CudaKernels* k2 = vm2_run.kernels.get();
  rt::VirtualMachine& vm2 = *vm2_run.vm;
  fake.refuse_capture = true;
  fake.launches.clear();
  vm2.invoke("main", {rt::Tensor::zeros(rt::DType::f32(), {4, 8})});
  std::vector<std::string> direct;
  for (const auto& l : fake.launches) direct.push_back(l.kernel + (l.replayed ? " (graph)" : ""));
  CHECK(direct == std::vector<std::string>{"k_exp", "k_relu", "k_sigmoid", "k_tanh"});
  fake.refuse_capture = false;
  int before = fake.captures;
  vm2.invoke("main", {rt::Tensor::zeros(rt::DType::f32(), {4, 8})});
  CHECK(fake.captures == before);  // not tried again
  CHECK(k2->graph_stats().failed == 1);
  CHECK(k2->graph_stats().direct == 2);

  // A region whose key changes every call (here: a new n each time) stops
  // being captured after 4 captures without a replay.
  FakeGpu::Run vm3_run = FakeGpu::load(exe, meta, "fake3.rpkg");
  rt::CudaKernels* k3 = vm3_run.kernels.get();
  rt::VirtualMachine& vm3 = *vm3_run.vm;
  for (int64_t n = 1; n <= 6; ++n) vm3.invoke("main", {rt::Tensor::zeros(rt::DType::f32(), {n, 8})});
  CHECK(k3->graph_stats().captures == 4);
  CHECK(k3->graph_stats().direct == 2);
}

TEST_CASE("cuda runtime: cublas.matmul passes cuBLAS the right operands, and its handle is made outside captures") {
  FakeGpu gpu;
  rt::FakeCuda& fake = gpu.fake;
  // A batched product with b broadcast, through the VM and the builtin;
  // then the same in a CUDA graph region with a planned workspace.
  IRModule mod = parse_module(R"(
module_attrs {target="cuda"}

fn @main(a: Tensor[(2, 3, 4), f32], b: Tensor[(4, 5), f32]) -> Tensor[(2, 3, 5), f32] {
  r: Tuple[Tensor[(2, 3, 5), f32], Tensor[(256,), u8]] = call_library("cublas.matmul", (a, b), out=Tuple[Tensor[(2, 3, 5), f32], Tensor[(256,), u8]])
  y: Tensor[(2, 3, 5), f32] = r[0]
  return y
}

extern @cublas.matmul
)");
  rt::Executable exe = rt::Executable::deserialize(lower_to_vm(mod).exe.serialize());
  nlohmann::json meta{{"block", 256}, {"kernels", nlohmann::json::array()}};
  FakeGpu::Run vm_run = FakeGpu::load(exe, meta, "fake.rpkg");
  rt::VirtualMachine& vm = *vm_run.vm;
  rt::Tensor a = rt::Tensor::zeros(rt::DType::f32(), {2, 3, 4}), b = rt::Tensor::zeros(rt::DType::f32(), {4, 5});
  for (int64_t i = 0; i < a.numel(); ++i) a.data_as<float>()[i] = float(i % 7) - 3;
  for (int64_t i = 0; i < b.numel(); ++i) b.data_as<float>()[i] = float(i % 5) / 2;
  rt::Tensor y = vm.invoke("main", {a, b}).tensor();
  REQUIRE(y.shape() == std::vector<int64_t>{2, 3, 5});
  for (int64_t q = 0; q < 2; ++q)
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 5; ++j) {
        float want = 0;
        for (int64_t p = 0; p < 4; ++p) want += a.data_as<float>()[(q * 3 + i) * 4 + p] * b.data_as<float>()[p * 5 + j];
        CHECK(y.data_as<float>()[(q * 3 + i) * 5 + j] == want);
      }
  CHECK(fake.launches.size() == 1);  // one strided batched GEMM (b broadcast with stride 0)
  CHECK(fake.workspace_bytes == 256);
  CHECK(fake.blas_handles == 1);

  // In a region: the handle exists before the capture begins.
  FakeGpu gpu2;
  rt::FakeCuda& fake2 = gpu2.fake;
  IRModule mod2 = parse_module(R"(
module_attrs {target="cuda"}

fn @main(a: Tensor[(3, 4), f32], b: Tensor[(4, 5), f32]) -> Tensor[(3, 5), f32] {
  storage0: Object = alloc_storage(shape(60), persistent="@main/storage0")
  storage1: Object = alloc_storage(shape(256), persistent="@main/storage1")
  y_buf: Tensor[(3, 5), f32] = alloc_tensor(storage0, shape(3, 5), dtype=f32)
  w_buf: Tensor[(256,), u8] = alloc_tensor(storage1, shape(256), dtype=u8)
  z_buf: Tensor[(3, 5), f32] = alloc_tensor(storage0, shape(3, 5), dtype=f32)
  cuda_graph_0: Func[() -> Tuple[], impure] = fn () -> Tuple[] attrs {pure=false, cuda_graph="@main/0"} {
    r: Tuple[Tensor[(3, 5), f32], Tensor[(256,), u8]] = call_library_dps("cublas.matmul", (a, b), (y_buf, w_buf))
    r2: Tuple[Tensor[(3, 5), f32], Tensor[(256,), u8]] = call_library_dps("cublas.matmul", (a, b), (z_buf, w_buf))
    return ()
  }
  cuda_graph_0_run: Tuple[] = call_builtin("cuda.graph_run", (cuda_graph_0, "@main/0"), out=Tuple[])
  out: Tensor[(3, 5), f32] = call_builtin("relax.move", (z_buf,), out=Tensor[(3, 5), f32])
  return out
}

extern @cublas.matmul
)");
  rt::Executable exe2 = rt::Executable::deserialize(lower_to_vm(mod2).exe.serialize());
  FakeGpu::Run vm2_run = FakeGpu::load(exe2, meta, "fake2.rpkg");
  rt::CudaKernels* k2 = vm2_run.kernels.get();
  rt::VirtualMachine& vm2 = *vm2_run.vm;
  rt::Tensor a2 = rt::Tensor::zeros(rt::DType::f32(), {3, 4}), b2 = rt::Tensor::zeros(rt::DType::f32(), {4, 5});
  vm2.invoke("main", {a2, b2});
  vm2.invoke("main", {a2, b2});
  CHECK(fake2.blas_handles == 1);
  CHECK(fake2.blas_handles_while_capturing == 0);
  CHECK(fake2.captures == 1);
  CHECK(fake2.graph_launches == 2);
  CHECK(fake2.launches.size() == 4);  // two GEMMs per run, replayed from the graph
  for (const auto& l : fake2.launches) CHECK(l.replayed);
  CHECK(k2->graph_stats().failed == 0);
}

TEST_CASE("cuda runtime: a stage's variant is chosen per call, and --profile names it (fake driver)") {
  FakeGpu gpu;
  rt::FakeCuda& fake = gpu.fake;
  // A row reduction y[r] = sum_k x[r, k]: shape args (r, k, r); a thread
  // per row, or a block of 256 threads per row ("rows", k iterations each).
  nlohmann::json meta{
      {"block", 256},
      {"kernels",
       {{{"name", "rowsum"},
         {"num_inputs", 1},
         {"slots", 3},
         {"params", {{{"dtype", "f32"}, {"ndim", 2}}, {{"dtype", "f32"}, {"ndim", 1}}}},
         {"stages",
          {{{"symbol", "k_thread"},
            {"threads", {1, 0}},
            {"rows", {{"symbol", "k_rows"}, {"blocks", {1, 0}}, {"threads", 256}, {"work", {1, 1}}}}}}}},
        // The same signature with 64x64 blocks tiled through shared memory
        // (rows r, cols k, depth k), taken when the blocks are half full.
        {{"name", "tiled"},
         {"num_inputs", 1},
         {"slots", 3},
         {"params", {{{"dtype", "f32"}, {"ndim", 2}}, {{"dtype", "f32"}, {"ndim", 1}}}},
         {"stages",
          {{{"symbol", "k_tiled_thread"},
            {"threads", {1, 0}},
            {"shared",
             {{"symbol", "k_tiled_shared"},
              {"blocks", {1, 0}},
              {"threads", 256},
              {"rows", {1, 0}},
              {"cols", {1, 1}},
              {"depth", {1, 1}},
              {"block", {64, 64, 16}}}}}}}}}}};
  std::unique_ptr<rt::CudaKernels> k = rt::CudaKernels::load(meta.dump(), "fake PTX", 0, "fake.rpkg");
  auto launched_by = [&](const char* kernel, int64_t r, int64_t kk) {
    fake.launches.clear();
    void* buffers[2] = {nullptr, nullptr};
    int64_t args[3] = {r, kk, r};
    k->kernel_call(kernel)(buffers, args);
    REQUIRE(fake.launches.size() == 1);
    return fake.launches[0];
  };
  auto launched = [&](int64_t r, int64_t kk) { return launched_by("rowsum", r, kk); };
  // Many short rows: a thread each, in blocks of 256.
  rt::FakeCuda::Launch l = launched(100000, 16);
  CHECK(l.kernel == "k_thread");
  CHECK(l.grid == (100000 + 255) / 256);
  CHECK(l.block == 256);
  // Few rows with work to split, or long rows: a block of 256 per row.
  l = launched(64, 4096);
  CHECK(l.kernel == "k_rows");
  CHECK(l.grid == 64);
  CHECK(launched(100000, 20000).kernel == "k_rows");
  CHECK(launched(64, 100).kernel == "k_thread");
  CHECK(launched_by("tiled", 1024, 1024).kernel == "k_tiled_shared");
  CHECK(launched_by("tiled", 1024, 8).kernel == "k_tiled_thread");  // a chunk of 16 steps not full
  // Profiling times each launch and names the variant.
  k->set_profiling(true);
  launched(64, 4096);
  launched(100000, 16);
  launched_by("tiled", 1024, 1024);
  std::vector<rt::CudaKernelTime> p = k->profile();
  std::set<std::string> names;
  for (const auto& t : p) names.insert(t.name);
  CHECK(names == std::set<std::string>{"rowsum", "rowsum (rows)", "tiled (shared)"});
  for (const auto& t : p) CHECK((t.calls == 1 && t.ms > 0 && t.bytes > 0));
}
