// Tensor programs on Vulkan, differentially against the CPU backend: each
// program of a legalised (and, at -O2, fused) module is compiled by both
// code generators and run on the same random inputs at several symbolic
// sizes; integer and bool outputs must agree exactly, float ones within the
// GPU's transcendental accuracy. Runs on lavapipe in CI.
#include <doctest/doctest.h>

#include <cstring>
#include <random>

#include "../cpu/cpu_test_util.h"
#include "backends/gpu/schedule.h"
#include "backends/vulkan/codegen_glsl.h"
#include "backends/vulkan/spirv.h"
#include "ir/printer.h"
#include "passes/legalize/legalize.h"
#include "passes/pass.h"
#include "vulkan_test_util.h"
#include "runtime/vulkan.h"

using namespace relax;

namespace {

struct HostBuffer {
  DataType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

// Random contents: floats ~N(0, 1); integers in [-9, 9] without 0 (so
// they can divide); bools half and half.
void fill(HostBuffer& b, std::mt19937& rng) {
  size_t es = size_t(b.dtype.storage_bits() / 8);
  b.bytes.assign(size_t(b.numel()) * es, 0);
  std::normal_distribution<double> normal;
  std::uniform_int_distribution<int> digit(1, 9), coin(0, 1);
  for (int64_t i = 0; i < b.numel(); ++i) {
    uint8_t* p = b.bytes.data() + size_t(i) * es;
    if (b.dtype == DataType::f32()) {
      float v = float(normal(rng));
      std::memcpy(p, &v, 4);
    } else if (b.dtype.is_bool()) {
      *p = uint8_t(coin(rng));
    } else if (b.dtype.is_integer()) {
      int64_t v = digit(rng) * (b.dtype.is_int() && coin(rng) ? -1 : 1);
      std::memcpy(p, &v, es);  // little-endian: the low bytes
    } else {
      FAIL("test input dtype ", b.dtype.str());
    }
  }
}

double element(const HostBuffer& b, int64_t i) {
  const uint8_t* p = b.bytes.data() + size_t(i) * size_t(b.dtype.storage_bits() / 8);
  if (b.dtype == DataType::f32()) {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  if (b.dtype.is_bool()) return *p;
  if (b.dtype == DataType::i64()) {
    int64_t v;
    std::memcpy(&v, p, 8);
    return double(v);
  }
  if (b.dtype == DataType::i32()) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  FAIL("test output dtype ", b.dtype.str());
  return 0;
}

int programs_with_rows = 0;    // programs whose stages have a workgroup schedule
int programs_with_shared = 0;  // ... tiles through shared memory

// Runs `p` on the CPU backend and on the Vulkan device with `env` binding
// its symbolic variables; checks the outputs agree.
void check_program(const tir::Program& p, const SymMap<int64_t>& env, rt::VulkanDevice& dev, std::mt19937& rng) {
  CAPTURE(p->name);
  std::vector<HostBuffer> bufs;
  std::vector<int64_t> shape_args;
  for (const auto* list : {&p->inputs, &p->outputs})
    for (const tir::Buffer& b : *list) {
      HostBuffer h{b->dtype, {}, {}};
      for (const SymExpr& d : b->shape) {
        std::optional<int64_t> v = evaluate(d, env);
        REQUIRE(v);
        h.shape.push_back(*v);
        shape_args.push_back(*v);
      }
      fill(h, rng);
      bufs.push_back(std::move(h));
    }
  for (const SymExpr& s : p->sym_params) shape_args.push_back(*evaluate(s, env));

  // CPU.
  std::vector<HostBuffer> cpu = bufs;
  cpu::CpuArtifact art = cpu::compile_programs({p}, {});
  cpu::test::Library lib(art);
  std::vector<void*> ptrs;
  for (HostBuffer& h : cpu) ptrs.push_back(h.bytes.data());
  REQUIRE(cpu::test::call(lib.kernel(p->name), ptrs, shape_args) == 0);

  // Vulkan: each stage with a thread per row, then again with the
  // workgroup schedule where a stage has one (one row per workgroup), its
  // reductions through subgroup arithmetic and through a shared-memory tree.
  vulkan::GlslSchedule every_row;  // a workgroup schedule however short the rows
  every_row.min_row_work = 0;
  vulkan::GlslProgram g = vulkan::glsl_program(p, {}, 256, every_row);
  vulkan::GlslFeatures no_subgroups;
  no_subgroups.subgroup_arithmetic = false;
  vulkan::GlslProgram tree = vulkan::glsl_program(p, no_subgroups, 256, every_row);
  std::vector<int32_t> push;
  for (const SymExpr& v : g.push_vars) push.push_back(int32_t(*evaluate(v, env)));
  bool has_rows = false, has_plain = false, has_shared = false;
  for (const vulkan::GlslStage& st : g.stages) {
    has_rows = has_rows || !st.rows_source.empty();
    has_plain = has_plain || !st.plain_source.empty();
    has_shared = has_shared || !st.shared_source.empty();
  }
  if (has_rows) ++programs_with_rows;
  if (has_shared) ++programs_with_shared;
  // Thread per row (register tiles where chosen); workgroup per row with
  // subgroups; with a tree; thread per row without register tiles; tiles
  // through shared memory.
  for (int mode : {0, 1, 2, 3, 4}) {
    bool rows = mode == 1 || mode == 2;
    if (rows && !has_rows) continue;
    if (mode == 3 && !has_plain) continue;
    if (mode == 4 && !has_shared) continue;
    CAPTURE(mode);
    std::vector<std::shared_ptr<rt::VulkanDevice::Buffer>> dbufs;
    std::vector<const rt::VulkanDevice::Buffer*> bound;
    for (const HostBuffer& h : bufs) {
      dbufs.push_back(dev.alloc(h.bytes.size()));
      dev.upload(*dbufs.back(), h.bytes.data(), h.bytes.size());
      bound.push_back(dbufs.back().get());
    }
    // More push constants than every device has: a buffer bound last.
    std::shared_ptr<rt::VulkanDevice::Buffer> push_buf;
    if (g.push_in_buffer) {
      push_buf = dev.alloc(push.size() * 4);
      dev.upload(*push_buf, push.data(), push.size() * 4);
      bound.push_back(push_buf.get());
    }
    uint32_t push_bytes = g.push_in_buffer ? 0 : uint32_t(push.size() * 4);
    for (const vulkan::GlslStage& st : mode == 2 ? tree.stages : g.stages) {
      bool use_rows = rows && !st.rows_source.empty();
      bool use_plain = mode == 3 && !st.plain_source.empty();
      bool use_shared = mode == 4 && !st.shared_source.empty();
      if (use_rows) CHECK((mode == 1) == (st.rows_source.find("subgroup") != std::string::npos));
      const std::string& source = use_rows     ? st.rows_source
                                  : use_plain  ? st.plain_source
                                  : use_shared ? st.shared_source
                                               : st.source;
      CAPTURE(source);
      std::vector<uint32_t> spirv = vulkan::compile_glsl(source, st.name);
      auto k = dev.load_kernel(st.name, spirv, uint32_t(bound.size()), push_bytes);
      int64_t threads = 1;
      for (const SymExpr& e : use_rows     ? st.rows_extents
                              : use_plain  ? st.plain_extents
                              : use_shared ? st.shared_extents
                                           : st.extents)
        threads *= *evaluate(e, env);
      int64_t groups = use_rows || use_shared ? threads : (threads + g.block - 1) / g.block;
      uint32_t grid[3] = {uint32_t(std::clamp<int64_t>(groups, 1, 65535)), 1, 1};
      dev.dispatch(*k, bound, push.data(), push_bytes, grid);
    }
    size_t first_out = p->inputs.size();
    for (size_t k = first_out; k < bufs.size(); ++k) {
      HostBuffer gpu = bufs[k];
      dev.download(*dbufs[k], gpu.bytes.data(), gpu.bytes.size());
      int wrong = 0;
      double worst = 0;
      for (int64_t i = 0; i < gpu.numel(); ++i) {
        double a = element(gpu, i), b = element(cpu[k], i);
        bool ok = gpu.dtype.is_float() ? cpu::test::same(a, b, 2e-5) : a == b;
        if (!ok) {
          ++wrong;
          worst = std::max(worst, std::fabs(a - b));
        }
      }
      CAPTURE(k);
      CAPTURE(worst);
      CHECK(wrong == 0);
    }
  }
}

const char* kOps = R"(
fn @main(x: Tensor[(n, 16), f32], y: Tensor[(16,), f32], a: Tensor[(n, 16), i64], b: Tensor[(16,), i64], w: Tensor[(4, 1, 3, 3), f32], im: Tensor[(n, 4, 9, 7), f32], ia: Tensor[(n, 16), i32], ib: Tensor[(16, 5), i32], fw: Tensor[(8, 4, 3, 3), f32], fm: Tensor[(16, 8), f32], gx: Tensor[(3, n, 5), f32], gw: Tensor[(1, 12, 5), f32], gr: Tensor[(1, 12, 4), f32]) -> Tuple[Tensor[(n, 16), f32], Tensor[(n,), f32], Tensor[(n, 16), f32], Tensor[(n, 16), i64], Tensor[(n, 16), i64], Tensor[(n, 16), f32], Tensor[(n, 16), i32], Tensor[(n, 32), f32], Tensor[(n, 4, 9, 7), f32], Tensor[(n, 4, 4, 3), f32], Tensor[(n, 5), i32], Tensor[(n, 16), f32], Tensor[(n, 8, 9, 7), f32], Tensor[(n, 8), f32], Tensor[(1, n, 4), f32], Tensor[(n,), f32], Tensor[(n,), f32], Tensor[(n,), i32]] {
  dataflow {
    %s: Tensor[(n, 16), f32] = add(x, y)
    %r: Tensor[(n,), f32] = sum(x, axis=[1])
    %m: Tensor[(n, 16), f32] = softmax(x, axis=1)
    %fd: Tensor[(n, 16), i64] = floor_divide(a, b)
    %md: Tensor[(n, 16), i64] = mod(a, b)
    %c: Tensor[(n, 16), bool] = less(x, y)
    %t: Tensor[(n, 16), f32] = tanh(x)
    %e: Tensor[(n, 16), f32] = erf(x)
    %wh: Tensor[(n, 16), f32] = where(%c, %t, %e)
    %i: Tensor[(n, 16), i32] = astype(x, dtype=i32)
    %cc: Tensor[(n, 32), f32] = concat((x, %s), axis=1)
    %dw: Tensor[(n, 4, 9, 7), f32] = conv(im, w, padding=[1, 1, 1, 1], groups=4)
    %mp: Tensor[(n, 4, 4, 3), f32] = max_pool(im, pool_size=[2, 2], strides=[2, 2])
    %mm: Tensor[(n, 5), i32] = matmul(ia, ib)
    %ln: Tensor[(n, 16), f32] = layer_norm(x, y, y, axes=[1])
    %fc: Tensor[(n, 8, 9, 7), f32] = conv(im, fw, padding=[1, 1, 1, 1])
    %fmm: Tensor[(n, 8), f32] = matmul(x, fm)
    %g: Tuple[Tensor[(3, 1, n, 4), f32], Tensor[(1, n, 4), f32]] = gru(gx, gw, gr, hidden_size=4)
    %gh: Tensor[(1, n, 4), f32] = %g[1]
    %s3: Tensor[(n,), f32] = sum(im, axis=[1, 2, 3])
    %mx: Tensor[(n,), f32] = max(x, axis=[1])
    %mn: Tensor[(n,), i32] = min(ia, axis=[1])
    out: Tuple[Tensor[(n, 16), f32], Tensor[(n,), f32], Tensor[(n, 16), f32], Tensor[(n, 16), i64], Tensor[(n, 16), i64], Tensor[(n, 16), f32], Tensor[(n, 16), i32], Tensor[(n, 32), f32], Tensor[(n, 4, 9, 7), f32], Tensor[(n, 4, 4, 3), f32], Tensor[(n, 5), i32], Tensor[(n, 16), f32], Tensor[(n, 8, 9, 7), f32], Tensor[(n, 8), f32], Tensor[(1, n, 4), f32], Tensor[(n,), f32], Tensor[(n,), f32], Tensor[(n,), i32]] = (%s, %r, %m, %fd, %md, %wh, %i, %cc, %dw, %mp, %mm, %ln, %fc, %fmm, %gh, %s3, %mx, %mn)
  }
  return out
}
)";

}  // namespace

TEST_CASE("vulkan codegen: legalised and fused programs agree with the cpu backend") {
  std::string why;
  if (!rt::vulkan_available(&why)) {
    FAIL("no Vulkan device (scripts/setup.sh installs lavapipe): ", why);
    return;
  }
  auto dev = rt::VulkanDevice::open(0);
  std::mt19937 rng(7);
  // For the vulkan target: no library calls (f32 matmul and conv become
  // programs too), and the GRU's time loop on the host (a loop op whose
  // body launches a step's kernels) at every level.
  IRModule mod = parse_module(kOps);
  configure_vulkan(mod);
  for (const char* level : {"O0", "O2"}) {
    CAPTURE(level);
    IRModule lowered = run_passes(mod, pipeline(level, TargetTraits::of(mod)));
    std::string printed = print_module(lowered);
    CHECK(printed.find("call_library") == std::string::npos);
    CHECK(printed.find("= loop(") != std::string::npos);
    std::vector<tir::Program> progs = cpu::test::programs_in(lowered);
    REQUIRE(progs.size() >= 5);
    for (int64_t n : {1, 37, 300}) {
      CAPTURE(n);
      for (const tir::Program& p : progs) {
        SymMap<int64_t> env;
        for (const auto* list : {&p->inputs, &p->outputs})
          for (const tir::Buffer& b : *list)
            for (const SymExpr& d : b->shape)
              for (const SymExpr& v : free_vars(d)) env[v] = n;
        for (const SymExpr& s : p->sym_params)
          for (const SymExpr& v : free_vars(s)) env[v] = n;
        check_program(p, env, *dev, rng);
      }
    }
  }
  // sum, softmax, layer_norm, the matmuls: rows split over a workgroup.
  CHECK(programs_with_rows >= 8);
  // The matmuls (f32 and i32) and the full convolution, at each level.
  CHECK(programs_with_shared >= 6);
}

TEST_CASE("vulkan codegen: a row that reads back what it wrote waits for its workgroup") {
  // y's row is written by the threads of the workgroup, then summed by
  // them: each must see the others' writes (memoryBarrierBuffer + barrier).
  std::vector<tir::Program> progs = cpu::test::programs_of(R"(
prog @write_then_sum(x: Buffer[(n, 300), f32]) -> (y: Buffer[(n, 300), f32], z: Buffer[(n,), f32]) {
  for i0 in parallel(n) {
    alloc a: Buffer[(1,), f32, local]
    for k0 in range(300) {
      y[i0, k0] = x[i0, k0] * 2.0f32
    }
    a[0] = 0.0f32
    for k1 in range(300) {
      a[0] = a[0] + y[i0, 299 - k1]
    }
    z[i0] = a[0]
  }
}
)");
  REQUIRE(progs.size() == 1);
  std::vector<GpuStage> st = gpu_stages(progs[0]);
  REQUIRE(st.size() == 1);
  std::optional<GpuRows> rows = gpu_rows(st[0]);
  REQUIRE(rows);
  REQUIRE(rows->steps.size() == 4);
  CHECK(rows->steps[0].kind == GpuRowStep::Kind::Spread);
  CHECK(rows->steps[0].barrier_after);
  CHECK(rows->steps[2].kind == GpuRowStep::Kind::Reduce);
  CHECK(!rows->steps[2].barrier_after);
  std::string why;
  if (!rt::vulkan_available(&why)) {
    FAIL("no Vulkan device (scripts/setup.sh installs lavapipe): ", why);
    return;
  }
  auto dev = rt::VulkanDevice::open(0);
  std::mt19937 rng(11);
  for (int64_t n : {1, 37}) {
    SymMap<int64_t> env;
    for (const SymExpr& v : free_vars(progs[0]->inputs[0]->shape[0])) env[v] = n;
    check_program(progs[0], env, *dev, rng);
  }
}

TEST_CASE("vulkan codegen: math where GLSL and lavapipe are loose agrees with the cpu backend") {
  // pow of negative bases (GLSL's pow is undefined there), tanh, log1p and
  // expm1 near 0 (their exponential forms cancel), sin of an f64 angle
  // (GLSL has no f64 sin: an f32 one is off by 1e-3 here), and an i32
  // widened to i64 then compared (lavapipe compares a plain conversion as
  // unsigned).
  std::vector<tir::Program> progs = cpu::test::programs_of(R"(
prog @edges(x: Buffer[(n, 16), f32], k: Buffer[(n, 16), i32]) -> (pw: Buffer[(n, 16), f32], th: Buffer[(n, 16), f32], lp: Buffer[(n, 16), f32], em: Buffer[(n, 16), f32], sn: Buffer[(n, 16), f32], neg: Buffer[(n, 16), i64]) {
  for i in parallel(n) {
    for j in range(16) {
      pw[i, j] = pow(x[i, j], 3.0f32)
      th[i, j] = tanh(x[i, j] * 0.001f32)
      lp[i, j] = log1p(exp(x[i, j] - 9.0f32))
      em[i, j] = expm1(x[i, j] * 0.001f32)
      sn[i, j] = cast(f32, sin(cast(f64, x[i, j]) * 100000.0f64))
      neg[i, j] = select(cast(i64, k[i, j]) < 0, 1, 2)
    }
  }
}
)");
  REQUIRE(progs.size() == 1);
  std::string why;
  if (!rt::vulkan_available(&why)) {
    FAIL("no Vulkan device (scripts/setup.sh installs lavapipe): ", why);
    return;
  }
  auto dev = rt::VulkanDevice::open(0);
  std::mt19937 rng(13);
  SymMap<int64_t> env;
  for (const SymExpr& v : free_vars(progs[0]->inputs[0]->shape[0])) env[v] = 64;
  check_program(progs[0], env, *dev, rng);
}

TEST_CASE("vulkan codegen: more symbolic sizes than push constants hold come in a buffer") {
  // 6 inputs of rank 6, every dim its own variable: 144 bytes of sizes,
  // beyond the 128 that every device has for push constants (a detector's
  // post-processing needed 360).
  std::string params, body;
  auto dims = [](int k) {
    std::string d;
    for (int j = 0; j < 6; ++j) d += (j ? ", " : "") + ("n" + std::to_string(k) + "_" + std::to_string(j));
    return d;
  };
  for (int k = 0; k < 6; ++k) {
    std::string last;
    for (int j = 0; j < 6; ++j) last += (j ? ", " : "") + ("n" + std::to_string(k) + "_" + std::to_string(j) + " - 1");
    params += (k ? ", " : "") + ("x" + std::to_string(k)) + ": Buffer[(" + dims(k) + "), f32]";
    body += (k ? " + " : "") + ("x" + std::to_string(k)) + "[" + last + "]";
  }
  std::vector<tir::Program> progs = cpu::test::programs_of(
      "prog @many(" + params + ") -> (y: Buffer[(n0_0,), f32]) {\n  for i0 in parallel(n0_0) {\n    y[i0] = x0[i0, 0, 0, 0, 0, 0] * (" +
      body + ")\n  }\n}\n");
  REQUIRE(progs.size() == 1);
  vulkan::GlslProgram g = vulkan::glsl_program(progs[0], {}, 256, {});
  CHECK(g.push_vars.size() == 36);
  REQUIRE(g.push_in_buffer);
  CHECK(g.stages.at(0).source.find("push_constant") == std::string::npos);
  CHECK(g.stages.at(0).source.find("binding = 7) readonly buffer Push") != std::string::npos);
  std::string why;
  if (!rt::vulkan_available(&why)) {
    FAIL("no Vulkan device (scripts/setup.sh installs lavapipe): ", why);
    return;
  }
  auto dev = rt::VulkanDevice::open(0);
  std::mt19937 rng(12);
  SymMap<int64_t> env;
  int64_t next = 0;
  for (const tir::Buffer& b : progs[0]->inputs)
    for (const SymExpr& d : b->shape)
      for (const SymExpr& v : free_vars(d)) env[v] = 1 + (next++ % 3);
  check_program(progs[0], env, *dev, rng);
}
