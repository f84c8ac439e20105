// CPU backend: whole kernels run against values computed here: elementwise
// and broadcast with symbolic sizes, the corpus's softmax, layer norm,
// gather, sym_params and index arithmetic, loops of every cpu kind.
#include <doctest/doctest.h>

#include <cmath>
#include <numeric>
#include <random>

#include "backends/cpu/codegen.h"
#include "cpu_test_util.h"
#include "passes/passes.h"

namespace relax::cpu::test {
namespace {

std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -2, float hi = 2) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

const char* kScale = R"(
prog @scale(x: Buffer[(n,), f32]) -> (y: Buffer[(n,), f32]) {
  for i in vectorized(n) {
    y[i] = x[i] * 2.0f32 + 1.0f32
  }
}
)";

TEST_CASE("cpu: elementwise over a symbolic n, vector tails included") {
  Library lib(compile_programs(programs_of(kScale), {}));
  Kernel k = lib.kernel("scale");
  for (int64_t n : {0, 1, 3, 7, 8, 9, 16, 31, 33, 1000, 1027}) {
    CAPTURE(n);
    std::vector<float> x = random_floats(size_t(n), uint32_t(n)), y(size_t(n) + 1, -7.0f);
    REQUIRE(call(k, {x.data(), y.data()}, {n, n}) == 0);
    for (int64_t i = 0; i < n; ++i) CHECK(y[i] == x[i] * 2.0f + 1.0f);
    CHECK(y[n] == -7.0f);  // nothing written past the end
  }
}

TEST_CASE("cpu: a vectorized f32 loop becomes <8 x float> code on an AVX2 cpu") {
  std::string ir = emit_llvm_ir(programs_of(kScale), {"x86-64-v3", 3});
  CHECK(ir.find("<8 x float>") != std::string::npos);
  CHECK(ir.find("fmul <8 x float>") != std::string::npos);
  // Without AVX the same loop uses SSE's 4 lanes at most.
  std::string sse = emit_llvm_ir(programs_of(kScale), {"x86-64", 3});
  CHECK(sse.find("<8 x float>") == std::string::npos);
  CHECK(sse.find("<4 x float>") != std::string::npos);
}

TEST_CASE("cpu: the corpus's vectorized loops vectorise for AVX2 (bias add, softmax, layer norm, gather)") {
  for (const char* file :
       {"26_call_tir.relax", "30_tir_softmax.relax", "31_tir_layer_norm.relax", "39_tir_gather.relax"}) {
    CAPTURE(file);
    std::string ir = emit_llvm_ir(corpus_programs(file), {"x86-64-v3", 3});
    size_t count = 0;
    for (size_t p = ir.find("<8 x float>"); p != std::string::npos; p = ir.find("<8 x float>", p + 1)) ++count;
    CHECK(count > 0);
  }
}

TEST_CASE("cpu: every opt level and a named cpu compile and agree") {
  for (int level : {0, 1, 2, 3}) {
    CAPTURE(level);
    Library lib(compile_programs(programs_of(kScale), {"x86-64", level}));
    std::vector<float> x = random_floats(37, 5), y(37);
    REQUIRE(call(lib.kernel("scale"), {x.data(), y.data()}, {37, 37}) == 0);
    for (int i = 0; i < 37; ++i) CHECK(y[i] == x[i] * 2.0f + 1.0f);
  }
}

TEST_CASE("cpu: broadcast add (add_bias, parallel + vectorized) calls parallel_for when it has the work") {
  Library lib(compile_programs(corpus_programs("26_call_tir.relax"), {}));
  Kernel k = lib.kernel("add_bias");
  // Per element a store, an add and two loads: 4 operations, so 128 * n * 4
  // against kParallelMinWork (2^15): up to 5 rows on the calling thread, 256
  // rows on the pool.
  for (int64_t n : {0, 1, 5, 256}) {
    CAPTURE(n);
    std::vector<float> x = random_floats(size_t(n * 128), 1), b = random_floats(128, 2), y(size_t(n * 128));
    int before = parallel_calls;
    REQUIRE(call(k, {x.data(), b.data(), y.data()}, {n, 128, 128, n, 128}) == 0);
    CHECK(parallel_calls - before == (n * 128 * 4 >= cpu::kParallelMinWork ? 1 : 0));
    CHECK((n >= 256) == (parallel_calls - before == 1));
    for (int64_t i = 0; i < n; ++i)
      for (int j = 0; j < 128; ++j) CHECK(y[i * 128 + j] == x[i * 128 + j] + b[j]);
  }
}

TEST_CASE("cpu: parallel loops run serially when the runtime installs no parallel_for") {
  Library lib(compile_programs(corpus_programs("26_call_tir.relax"), {}), /*with_pool=*/false);
  std::vector<float> x = random_floats(3 * 128, 3), b = random_floats(128, 4), y(3 * 128);
  int before = parallel_calls;
  REQUIRE(call(lib.kernel("add_bias"), {x.data(), b.data(), y.data()}, {3, 128, 128, 3, 128}) == 0);
  CHECK(parallel_calls == before);
  for (int i = 0; i < 3 * 128; ++i) CHECK(y[i] == x[i] + b[i % 128]);
}

TEST_CASE("cpu: sym_params (split_rows) bind k from shape_args after the buffer dims") {
  Library lib(compile_programs(corpus_programs("26_call_tir.relax"), {}));
  Kernel k = lib.kernel("split_rows");
  const int64_t n = 5, kk = 2;
  std::vector<float> x(n * 4), lo(kk * 4), hi((n - kk) * 4);
  std::iota(x.begin(), x.end(), 0.0f);
  REQUIRE(call(k, {x.data(), lo.data(), hi.data()}, {n, 4, kk, 4, n - kk, 4, kk}) == 0);
  for (int i = 0; i < kk * 4; ++i) CHECK(lo[i] == x[i]);
  for (int i = 0; i < (n - kk) * 4; ++i) CHECK(hi[i] == x[kk * 4 + i]);
  // A dim that contradicts the program's shapes is refused before any write.
  std::fill(hi.begin(), hi.end(), -1.0f);
  CHECK(call(k, {x.data(), lo.data(), hi.data()}, {n, 4, kk, 4, n - kk + 1, 4, kk}) == 2);
  CHECK(hi[0] == -1.0f);
}

TEST_CASE("cpu: softmax rows (corpus 30) with local buffers inside a parallel loop") {
  Library lib(compile_programs(corpus_programs("30_tir_softmax.relax"), {}));
  for (int64_t n : {1, 3, 17}) {
    CAPTURE(n);
    std::vector<float> x = random_floats(size_t(n * 128), 7, -10, 10), y(size_t(n * 128));
    REQUIRE(call(lib.kernel("softmax_rows"), {x.data(), y.data()}, {n, 128, n, 128}) == 0);
    for (int64_t i = 0; i < n; ++i) {
      float m = -INFINITY, s = 0;
      for (int j = 0; j < 128; ++j) m = std::max(m, x[i * 128 + j]);
      for (int j = 0; j < 128; ++j) s += std::exp(x[i * 128 + j] - m);
      for (int j = 0; j < 128; ++j) CHECK(same(y[i * 128 + j], std::exp(x[i * 128 + j] - m) / s, 1e-5));
    }
  }
}

TEST_CASE("cpu: layer norm (corpus 31)") {
  Library lib(compile_programs(corpus_programs("31_tir_layer_norm.relax"), {}));
  const int64_t n = 3, d = 768;
  std::vector<float> x = random_floats(n * d, 8), g = random_floats(d, 9), b = random_floats(d, 10), y(n * d);
  REQUIRE(call(lib.kernel("layer_norm"), {x.data(), g.data(), b.data(), y.data()}, {n, d, d, d, n, d}) == 0);
  for (int64_t i = 0; i < n; ++i) {
    double mean = 0, var = 0;
    for (int k = 0; k < d; ++k) mean += x[i * d + k], var += double(x[i * d + k]) * x[i * d + k];
    mean /= d;
    var = var / d - mean * mean;
    for (int k = 0; k < d; ++k) {
      double want = (x[i * d + k] - mean) / std::sqrt(var + 1e-5) * g[k] + b[k];
      CHECK(same(y[i * d + k], want, 1e-3));
    }
  }
}

TEST_CASE("cpu: gather with loaded i64 indices and a histogram (corpus 39)") {
  Library lib(compile_programs(corpus_programs("39_tir_gather.relax"), {}));
  const int64_t v = 5, s = 7, d = 768;
  std::vector<float> table = random_floats(v * d, 11), out(s * d);
  std::vector<int64_t> ids{4, 0, 2, 2, 4, 1, 4};
  std::vector<int32_t> hist(v, 0);
  REQUIRE(call(lib.kernel("embedding"), {table.data(), ids.data(), out.data(), hist.data()}, {v, d, s, s, d, v}) == 0);
  for (int i = 0; i < s; ++i)
    for (int j = 0; j < d; ++j) CHECK(out[i * d + j] == table[ids[i] * d + j]);
  CHECK(hist == std::vector<int32_t>{1, 1, 2, 0, 3});
}

TEST_CASE("cpu: causal mask with a sym_param offset (corpus 40)") {
  Library lib(compile_programs(corpus_programs("40_tir_sym_params.relax"), {}));
  const int64_t h = 2, q = 3, kv = 5, offset = 2;
  std::vector<float> s = random_floats(h * q * kv, 12), out(h * q * kv);
  REQUIRE(call(lib.kernel("causal_mask"), {s.data(), out.data()}, {h, q, kv, h, q, kv, offset}) == 0);
  for (int a = 0; a < h; ++a)
    for (int i = 0; i < q; ++i)
      for (int j = 0; j < kv; ++j) {
        int64_t at = (a * q + i) * kv + j;
        CHECK(out[at] == (j <= i + offset ? s[at] : -INFINITY));
      }
}

TEST_CASE("cpu: index arithmetic with // % min max (corpus 41)") {
  Library lib(compile_programs(corpus_programs("41_tir_index_arith.relax"), {}));
  for (auto [n, m] : std::vector<std::pair<int64_t, int64_t>>{{3, 5}, {1, 1}, {7, 20}}) {
    std::vector<float> x = random_floats(n * m, 13), y(n * m);
    REQUIRE(call(lib.kernel("transpose_flat"), {x.data(), y.data()}, {n, m, m, n}) == 0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) CHECK(y[j * n + i] == x[i * m + j]);
  }
  for (int64_t n : {1, 4, 9}) {
    std::vector<float> x = random_floats(n, 14), y(n);
    REQUIRE(call(lib.kernel("tail"), {x.data(), y.data()}, {n, n}) == 0);
    for (int64_t i = 0; i < n; ++i) CHECK(y[i] == x[std::max<int64_t>(i - 1, 0)]);
  }
}

TEST_CASE("cpu: local allocations, symbolic (heap) and constant (stack) (corpus 42)") {
  Library lib(compile_programs(corpus_programs("42_tir_alloc_scopes.relax"), {}));
  std::vector<float> x{1, 2, 3, 4}, y(4);
  REQUIRE(call(lib.kernel("two_phase"), {x.data(), y.data()}, {4, 4}) == 0);
  CHECK(y == std::vector<float>{21, 5, 7, 9});  // y = 2x, y[0] = sum(y), then +1
}

TEST_CASE("cpu: if / else (corpus 34) and unrolled loops") {
  Library lib(compile_programs(corpus_programs("34_tir_if_else.relax"), {}));
  std::vector<float> x{-1, 0, 3, 6, 7, NAN}, y(6);
  REQUIRE(call(lib.kernel("relu6"), {x.data(), y.data()}, {6, 6}) == 0);
  CHECK(y[0] == 0);
  CHECK(y[2] == 3);
  CHECK(y[3] == 6);
  CHECK(y[4] == 6);
  CHECK(std::isnan(y[5]));

  auto progs = programs_of(R"(
prog @unroll(x: Buffer[(n, 4), i32]) -> (y: Buffer[(n,), i32]) {
  for i in range(n) {
    y[i] = 0i32
    for u in unrolled(4) {
      y[i] = y[i] * 10i32 + x[i, u]
    }
  }
}
)");
  CHECK(emit_llvm_ir(progs, {"x86-64", 3}).find("llvm.loop.unroll") == std::string::npos);  // fully unrolled
  Library lib2(compile_programs(progs, {}));
  std::vector<int32_t> xi{1, 2, 3, 4, 5, 6, 7, 8}, yi(2);
  REQUIRE(call(lib2.kernel("unroll"), {xi.data(), yi.data()}, {2, 4, 2}) == 0);
  CHECK(yi == std::vector<int32_t>{1234, 5678});
}

TEST_CASE("cpu: nested parallel loops: the inner one runs serially inside the outer body") {
  Library lib(compile_programs(programs_of(R"(
prog @nested(x: Buffer[(n, m), f32]) -> (y: Buffer[(n, m), f32]) {
  for i in parallel(n) {
    for j in parallel(m) {
      y[i, j] = x[i, j] + 1.0f32
    }
  }
}
)"),
                               {}));
  std::vector<float> x = random_floats(64 * 256, 15), y(64 * 256);
  int before = parallel_calls;
  REQUIRE(call(lib.kernel("nested"), {x.data(), y.data()}, {64, 256, 64, 256}) == 0);
  CHECK(parallel_calls - before == 1);
  for (int i = 0; i < 64 * 256; ++i) CHECK(y[i] == x[i] + 1.0f);
}

TEST_CASE("cpu: a fused index [t // 192, t % 192, i, j] is affine in t: the channel loop around a 2x2 plane vectorises") {
  // simplify-tir leaves this (the plane's loops unrolled); the offset
  // t * 4 + i * 2 + j comes from simplifying it as one expression.
  const char* text = R"(
prog @silu22(x: Buffer[(n, 192, 2, 2), f32]) -> (y: Buffer[(n, 192, 2, 2), f32]) {
  for t in range(n * 192) {
    for i in unrolled(2) {
      for j in unrolled(2) {
        y[t // 192, t % 192, i, j] = x[t // 192, t % 192, i, j] * sigmoid(x[t // 192, t % 192, i, j])
      }
    }
  }
}
)";
  std::string ir = emit_llvm_ir(programs_of(text), {"x86-64-v3", 3});
  CHECK(ir.find("x float>") != std::string::npos);
  CHECK(ir.find("sdiv") == std::string::npos);  // no division left in the addresses
  Library lib(compile_programs(programs_of(text), {}));
  const int64_t n = 3;
  std::vector<float> x = random_floats(size_t(n * 192 * 4), 17), y(x.size());
  REQUIRE(call(lib.kernel("silu22"), {x.data(), y.data()}, {n, 192, 2, 2, n, 192, 2, 2}) == 0);
  for (size_t k = 0; k < x.size(); ++k)
    CHECK(y[k] == doctest::Approx(x[k] / (1 + std::exp(-x[k]))).epsilon(1e-6));
}

TEST_CASE("cpu: a parallel loop with little work runs on the calling thread; a math call weighs 16") {
  Library lib(compile_programs(programs_of(R"(
prog @plain(x: Buffer[(n, 64), f32]) -> (y: Buffer[(n, 64), f32]) {
  for i in parallel(n) {
    for j in range(64) {
      y[i, j] = x[i, j] + 1.0f32
    }
  }
}
prog @expo(x: Buffer[(n, 64), f32]) -> (y: Buffer[(n, 64), f32]) {
  for i in parallel(n) {
    for j in range(64) {
      y[i, j] = exp(x[i, j])
    }
  }
}
)"),
                               {}));
  // 32 rows: plain does 32 * 64 * 3 operations (2^12.6), under the bound;
  // expo 32 * 64 * 18 (2^15.2), over it.
  const int64_t n = 32;
  std::vector<float> x = random_floats(size_t(n * 64), 16), y(size_t(n * 64));
  int before = parallel_calls;
  REQUIRE(call(lib.kernel("plain"), {x.data(), y.data()}, {n, 64, n, 64}) == 0);
  CHECK(parallel_calls == before);
  for (int64_t i = 0; i < n * 64; ++i) CHECK(y[size_t(i)] == x[size_t(i)] + 1.0f);
  REQUIRE(call(lib.kernel("expo"), {x.data(), y.data()}, {n, 64, n, 64}) == 0);
  CHECK(parallel_calls == before + 1);
  for (int64_t i = 0; i < n * 64; ++i) CHECK(y[size_t(i)] == doctest::Approx(std::exp(x[size_t(i)])).epsilon(1e-6));
}

TEST_CASE("cpu: kernel symbols are sanitised and unique, one per program in order") {
  auto progs = programs_of(R"(
prog @"a.b"(x: Buffer[(1,), f32]) -> (y: Buffer[(1,), f32]) {
  y[0] = x[0]
}
prog @a_b(x: Buffer[(1,), f32]) -> (y: Buffer[(1,), f32]) {
  y[0] = x[0] + 1.0f32
}
)");
  CpuArtifact a = compile_programs(progs, {});
  REQUIRE(a.kernels.size() == 2);
  CHECK(a.kernels[0].program == "a.b");
  CHECK(a.kernels[0].symbol == "relax_k_a_b");
  CHECK(a.kernels[1].program == "a_b");
  CHECK(a.kernels[1].symbol == "relax_k_a_b_1");
  Library lib(a);
  float x = 2, y = 0;
  REQUIRE(call(lib.kernel("a_b"), {&x, &y}, {1, 1}) == 0);
  CHECK(y == 3);
}

// The cpu legaliser's max over a last axis (tests/golden/legalize/reduce/
// max_lanes.out): 16 running results, one per lane, folded at the end.
const char* kLaneMax = R"(
prog @max(x: Buffer[(n, 4, w), f32]) -> (out: Buffer[(n,), f32]) {
  for i0 in parallel(n) {
    alloc part: Buffer[(16,), f32, local]
    alloc acc: Buffer[(1,), f32, local]
    for l0 in vectorized(16) {
      part[l0] = -f32.inf
    }
    for k0 in range(4) {
      for kb in range(w // 16) {
        for l1 in vectorized(16) {
          part[l1] = max(part[l1], x[i0, k0, kb * 16 + l1])
        }
      }
      for kr in range(w % 16) {
        part[kr] = max(part[kr], x[i0, k0, kr + (w // 16) * 16])
      }
    }
    acc[0] = -f32.inf
    for l2 in range(16) {
      acc[0] = max(acc[0], part[l2])
    }
    out[i0] = acc[0]
  }
}
)";

TEST_CASE("cpu: a max over lanes equals the serial max, NaN winning in the vector part and in the tail") {
  Library lib(compile_programs(programs_of(kLaneMax), {}));
  Kernel k = lib.kernel("max");
  const int64_t n = 5;
  for (int64_t w : {1, 5, 16, 37, 64}) {
    CAPTURE(w);
    std::vector<float> x = random_floats(size_t(n * 4 * w), uint32_t(w)), y(size_t(n) + 1, -7.0f);
    x[size_t(1 * 4 * w + 2 * w + w - 1)] = std::nanf("");           // row 1: the last element (the tail)
    if (w >= 16) x[size_t(2 * 4 * w + 3)] = std::nanf("");          // row 2: inside a vector block
    x[size_t(3 * 4 * w + 4 * w - 1)] = 100.0f;                      // row 3: the largest last
    REQUIRE(call(k, {x.data(), y.data()}, {n, 4, w, n}) == 0);
    for (int64_t i = 0; i < n; ++i) {
      float want = -INFINITY;
      bool nan = false;
      for (int64_t j = 0; j < 4 * w; ++j) {
        float v = x[size_t(i * 4 * w + j)];
        nan = nan || std::isnan(v);
        want = std::max(want, v);
      }
      CAPTURE(i);
      if (nan)
        CHECK(std::isnan(y[size_t(i)]));
      else
        CHECK(y[size_t(i)] == want);
    }
    CHECK(y[size_t(n)] == -7.0f);
  }
}

// The fold of 16 lanes (tests/golden/legalize/reduce/max_lanes.out) is a
// tree of vector steps on one load of the lanes (backends/llvm/stmt.cc
// emit_lane_fold), min or max, NaN-propagating like the scalar op.
const char* kLaneFolds = R"(
prog @folds(x: Buffer[(16,), f32]) -> (out: Buffer[(2,), f32]) {
  alloc part: Buffer[(16,), f32, local]
  alloc acc: Buffer[(1,), f32, local]
  for l0 in vectorized(16) {
    part[l0] = x[l0]
  }
  acc[0] = f32.inf
  for l1 in range(16) {
    acc[0] = min(acc[0], part[l1])
  }
  out[0] = acc[0]
  acc[0] = -f32.inf
  for l2 in range(16) {
    acc[0] = max(acc[0], part[l2])
  }
  out[1] = acc[0]
}
)";

TEST_CASE("cpu: a fold of 16 lanes is a tree of vector steps, each lane's NaN and extreme found") {
  std::string ir = emit_llvm_ir(programs_of(kLaneFolds), {"x86-64-v3", 3});
  CHECK(ir.find("shufflevector <16 x float>") != std::string::npos);
  Library lib(compile_programs(programs_of(kLaneFolds), {}));
  Kernel k = lib.kernel("folds");
  for (int at = 0; at < 16; ++at) {
    CAPTURE(at);
    std::vector<float> x = random_floats(16, uint32_t(at)), y(2);
    x[size_t(at)] = -50.0f;
    x[size_t(15 - at)] = 50.0f;
    REQUIRE(call(k, {x.data(), y.data()}, {16, 2}) == 0);
    CHECK(y[0] == (at == 15 - at ? 50.0f : -50.0f));
    CHECK(y[1] == 50.0f);
    x[size_t(at)] = std::nanf("");
    REQUIRE(call(k, {x.data(), y.data()}, {16, 2}) == 0);
    CHECK(std::isnan(y[0]));
    CHECK(std::isnan(y[1]));
  }
}

// A 3-tap sum with zero padding, as a depthwise convolution fused with its
// padding reads: each tap at the index clamped into the row, selected
// against the padding's zero.
const char* kPaddedTaps = R"(
prog @taps(x: Buffer[(n,), f32]) -> (y: Buffer[(n,), f32]) {
  for i in vectorized(n) {
    y[i] = 0.0f32
  }
  for k in range(3) {
    for i in vectorized(n) {
      y[i] = y[i] + select(i + k - 1 >= 0 && i + k - 1 < n, x[max(min(i + k - 1, n - 1), 0)], 0.0f32) * (1.0f32 + cast(f32, k))
    }
  }
}
)";

TEST_CASE("cpu: padded reads in vector loops: masked contiguous loads with AVX-512, the same sums everywhere") {
  // With AVX-512 the clamp goes and the read is a masked load at i + k - 1
  // (no gather); for AVX2 the clamped form stays.
  std::string v4 = emit_llvm_ir(programs_of(kPaddedTaps), {"x86-64-v4", 3});
  CHECK(v4.find("llvm.masked.load") != std::string::npos);
  CHECK(v4.find("llvm.masked.gather") == std::string::npos);
  std::string v3 = emit_llvm_ir(programs_of(kPaddedTaps), {"x86-64-v3", 3});
  CHECK(v3.find("guarded.read") == std::string::npos);
  Library lib(compile_programs(programs_of(kPaddedTaps), {}));
  Kernel k = lib.kernel("taps");
  for (int64_t n : {1, 2, 3, 15, 16, 17, 37, 64}) {
    CAPTURE(n);
    std::vector<float> x = random_floats(size_t(n), uint32_t(n) + 5), y(size_t(n) + 1, -7.0f);
    REQUIRE(call(k, {x.data(), y.data()}, {n, n}) == 0);
    for (int64_t i = 0; i < n; ++i) {
      float want = 0;
      for (int64_t t = 0; t < 3; ++t) {
        int64_t j = i + t - 1;
        want = want + (j >= 0 && j < n ? x[size_t(j)] : 0.0f) * (1.0f + float(t));
      }
      CHECK(y[size_t(i)] == want);
    }
    CHECK(y[size_t(n)] == -7.0f);
  }
}


// A 3x3, stride-2, pad-1 max pool (the golden simplify-tir case
// partition_pool_window), run as written and after simplify-tir, which
// splits its row and column loops around the window's padding.
const char* kPoolWindow = R"(
prog @pool(x: Buffer[(h, w), f32]) -> (y: Buffer[((h + 1) // 2, (w + 1) // 2), f32]) {
  for i in range((h + 1) // 2) {
    for j in range((w + 1) // 2) {
      alloc acc: Buffer[(1,), f32, local]
      acc[0] = -f32.inf
      for k0 in range(3) {
        for k1 in range(3) {
          acc[0] = max(acc[0], select(i * 2 + k0 - 1 >= 0 && i * 2 + k0 - 1 < h && (j * 2 + k1 - 1 >= 0 && j * 2 + k1 - 1 < w), x[max(min(i * 2 + k0 - 1, h - 1), 0), max(min(j * 2 + k1 - 1, w - 1), 0)], -f32.inf))
        }
      }
      y[i, j] = acc[0]
    }
  }
}
)";

TEST_CASE("cpu: a pooling window's loops split around the padding give the same maxima at every size") {
  IRModule mod = parse_module(kPoolWindow);
  Library plain(compile_programs(programs_in(mod), {}));
  Library split(compile_programs(programs_in(simplify_tir(mod)), {}));
  for (int64_t h : {1, 2, 3, 4, 5, 8, 9, 17})
    for (int64_t w : {1, 2, 3, 6, 7, 16, 33}) {
      CAPTURE(h);
      CAPTURE(w);
      int64_t oh = (h + 1) / 2, ow = (w + 1) / 2;
      std::vector<float> x = random_floats(size_t(h * w), uint32_t(h * 100 + w), -5, 5);
      std::vector<float> a(size_t(oh * ow) + 1, 7.0f), b(size_t(oh * ow) + 1, 7.0f);
      REQUIRE(call(plain.kernel("pool"), {x.data(), a.data()}, {h, w, oh, ow}) == 0);
      REQUIRE(call(split.kernel("pool"), {x.data(), b.data()}, {h, w, oh, ow}) == 0);
      CHECK(a == b);
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          float m = -INFINITY;
          for (int64_t r = 2 * i - 1; r <= 2 * i + 1; ++r)
            for (int64_t c = 2 * j - 1; c <= 2 * j + 1; ++c)
              if (r >= 0 && r < h && c >= 0 && c < w) m = std::max(m, x[size_t(r * w + c)]);
          CHECK(b[size_t(i * ow + j)] == m);
        }
    }
}

}  // namespace
}  // namespace relax::cpu::test
