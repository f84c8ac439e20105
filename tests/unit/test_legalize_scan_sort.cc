// Legalisers of the scan/sort, signal, random, extra and data-dependent ops
// (passes/legalize/{scan_sort,random,attention,dynamic}.cc): each op
// legalises on a few shapes, the module verifies and no call of the op is
// left. The ops that become builtins alone run on the VM (no kernels).
#include <doctest/doctest.h>

#include <cstring>

#include "backends/vm/lower.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/legalize/legalize.h"
#include "passes/passes.h"
#include "runtime/vm.h"

using namespace relax;

namespace {

// The legalised module's text; fails the test when it does not verify or
// when `op` is still called.
std::string legalized(const std::string& text, const std::vector<std::string>& ops) {
  IRModule mod = legalize(parse_module(text));
  std::vector<std::string> errors = verify(mod);
  for (const std::string& e : errors) FAIL_CHECK(e);
  std::string out = print_module(mod);
  for (const std::string& op : ops) {
    INFO(op, "\n", out);
    CHECK(out.find("= " + op + "(") == std::string::npos);
  }
  return out;
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

rt::Value run(const std::string& text, std::vector<rt::Value> args) {
  IRModule mod = legalize(parse_module(text));
  VMLowered l = lower_to_vm(mod);
  rt::VirtualMachine vm(
      l.exe, [](const std::string&) { return rt::Tensor(); }, nullptr);
  return vm.invoke("main", std::move(args));
}

rt::Tensor f32s(std::vector<int64_t> shape, std::vector<float> v) {
  rt::Tensor t = rt::Tensor::empty(rt::DType::f32(), std::move(shape));
  std::memcpy(t.data(), v.data(), v.size() * 4);
  return t;
}

std::vector<int64_t> i64s(const rt::Value& v) {
  const rt::Tensor& t = v.tensor();
  return std::vector<int64_t>(t.data_as<int64_t>(), t.data_as<int64_t>() + t.numel());
}

}  // namespace

TEST_CASE("legalize: einsum contracts any equation") {
  std::string out = legalized(R"(
fn @main(a: Tensor[(n, 8), f32], b: Tensor[(8, 3), f32], c: Tensor[(2, n, 8), f16], d: Tensor[(4, 4), f32],
         e: Tensor[(5, 2, 3), f32]) -> Tensor[(n, 3), f32] {
  dataflow {
    %m: Tensor[(n, 3), f32] = einsum((a, b), subscripts="ij,jk->ik")
    %i: Tensor[(n, 3), f32] = einsum((a, b), subscripts="ij,jk")
    %t: Tensor[(), f32] = einsum((d,), subscripts="ii->")
    %g: Tensor[(4,), f32] = einsum((d,), subscripts="ii->i")
    %x: Tensor[(2, 8, n), f16] = einsum((c,), subscripts="...ij->...ji")
    %y: Tensor[(5, 2, 3), f32] = einsum((e, d), subscripts="bij,kk->bij")
    r: Tensor[(n, 3), f32] = add(%m, %i)
  }
  return r
}
)",
                              {"einsum"});
  CHECK(has(out, "call_tir(@einsum"));
}

TEST_CASE("legalize: cumsum, cumprod and hardmax") {
  legalized(R"(
fn @main(x: Tensor[(n, 6), f32], k: Tensor[(), i32], y: Tensor[(3, 4, 5), i64]) -> Tensor[(n, 6), f32] {
  dataflow {
    %a: Tensor[(n, 6), f32] = cumsum(x, axis=1, exclusive=true, reverse=true)
    %b: Tensor[(n, 6), f32] = cumprod(x, axis=0)
    %c: Tensor[(n, 6), f32] = cumsum(x, k)
    %d: Tensor[(3, 4, 5), i64] = cumsum(y, axis=-2, reverse=true)
    %h: Tensor[(n, 6), f32] = hardmax(x, axis=1)
    %e: Tensor[(n, 6), f32] = add(%a, %b)
    %f: Tensor[(n, 6), f32] = add(%e, %c)
    r: Tensor[(n, 6), f32] = add(%f, %h)
  }
  return r
}
)",
            {"cumsum", "cumprod", "hardmax"});
}

TEST_CASE("legalize: det by LU with pivoting") {
  std::string out = legalized(R"(
fn @main(x: Tensor[(2, 3, 3), f32], y: Tensor[(m, m), f64]) -> Tensor[(2,), f32] {
  dataflow {
    %d: Tensor[(2,), f32] = det(x)
    %e: Tensor[(), f64] = det(y)
    r: Tensor[(2,), f32] = add(%d, %d)
  }
  return r
}
)",
                              {"det"});
  CHECK(has(out, "call_tir(@det"));
}

TEST_CASE("legalize: dft, stft, window and mel_weight_matrix") {
  legalized(R"(
fn @main(x: Tensor[(2, 8, 1), f32], z: Tensor[(2, 8, 2), f32], s: Tensor[(1, 64, 1), f32], w: Tensor[(16,), f32],
         sr: Tensor[(), i64], lo: Tensor[(), f32], hi: Tensor[(), f32], ax: Tensor[(), i64]) -> Tensor[(2, 8, 2), f32] {
  dataflow {
    %a: Tensor[(2, 8, 2), f32] = dft(x, axis=1)
    %b: Tensor[(2, 5, 2), f32] = dft(x, axis=1, onesided=true)
    %c: Tensor[(2, 8, 2), f32] = dft(z, axis=1, inverse=true)
    %d: Tensor[(2, 10, 2), f32] = dft(z, axis=1, length=10)
    %e: Tensor[(2, 14, 1), f32] = dft(z, axis=1, inverse=true, onesided=true)
    %f: Tensor[(1, 7, 9, 2), f32] = stft(s, w, frame_step=8)
    %g: Tensor[(1, 15, 8, 2), f32] = stft(s, frame_step=4, frame_length=8, onesided=false)
    %h: Tensor[(16,), f32] = window(kind="hann", size=16)
    %i: Tensor[(10,), f64] = window(kind="hamming", size=10, periodic=false, dtype=f64)
    %j: Tensor[(7,), f32] = window(kind="blackman", size=7)
    %k: Tensor[(9, 8), f32] = mel_weight_matrix(sr, lo, hi, num_mel_bins=8, dft_length=16)
    r: Tensor[(2, 8, 2), f32] = add(%a, %c)
  }
  l: Tensor[ndim=3, f32] = dft(x, ax, onesided=true)
  return r
}
)",
            {"dft", "stft", "window", "mel_weight_matrix"});
}

TEST_CASE("legalize: random ops with the Philox generator") {
  std::string out = legalized(R"(
fn @main(x: Tensor[(b, 10), f32]) -> Tensor[(b, 3), i64] {
  dataflow {
    %u: Tensor[(2, 3), f32] = random_uniform(shape(2, 3), dtype=f32, low=-1.0, high=2.0, seed=7)
    %v: Tensor[(b, 4), f64] = random_normal(shape(b, 4), dtype=f64, seed=1)
    %w: Tensor[(4,), f16] = random_normal(shape(4), dtype=f16, mean=1.0, scale=0.5, seed=3)
    r: Tensor[(b, 3), i64] = multinomial(x, sample_size=3, seed=9, dtype=i64)
  }
  return r
}
)",
                              {"random_uniform", "random_normal", "multinomial"});
  CHECK(has(out, "3528531795u64"));  // 0xD2511F53, a Philox multiplier
}

TEST_CASE("legalize: linear_attention for every update rule") {
  legalized(R"(
fn @main(q: Tensor[(1, 4, 5, 8), f32], k: Tensor[(1, 2, 5, 8), f32], v: Tensor[(1, 2, 5, 6), f32],
         s: Tensor[(1, 2, 8, 6), f32], g: Tensor[(1, 2, 5, 1), f32], b: Tensor[(1, 1, 5, 1), f32])
    -> Tuple[Tensor[(1, 4, 5, 6), f32], Tensor[(1, 2, 8, 6), f32]] {
  dataflow {
    %a: Tuple[Tensor[(1, 4, 5, 6), f32], Tensor[(1, 2, 8, 6), f32]] = linear_attention(q, k, v, s, update_rule="linear")
    %c: Tuple[Tensor[(1, 4, 5, 6), f32], Tensor[(1, 2, 8, 6), f32]] = linear_attention(q, k, v, s, g, update_rule="gated")
    %d: Tuple[Tensor[(1, 4, 5, 6), f32], Tensor[(1, 2, 8, 6), f32]] = linear_attention(q, k, v, s, b, update_rule="delta", scale=0.5)
    r: Tuple[Tensor[(1, 4, 5, 6), f32], Tensor[(1, 2, 8, 6), f32]] = linear_attention(q, k, v, s, g, b)
  }
  return r
}
)",
            {"linear_attention"});
}

TEST_CASE("legalize: reduce_dynamic and dynamic_strided_slice take their parameters from a builtin") {
  std::string out = legalized(R"(
fn @main(x: Tensor[(n, 4, 6), f32], axes: Tensor[(1,), i64], b: Tensor[(2,), i64], e: Tensor[(2,), i64],
         a: Tensor[(2,), i64], s: Tensor[(2,), i64]) -> Tensor[ndim=3, f32] {
  r: Tensor[ndim=3, f32] = reduce_dynamic(x, axes, kind="mean", keepdims=true)
  q: Tensor[ndim=2, f32] = reduce_dynamic(x, axes, kind="max")
  t: Tensor[ndim=3, f32] = dynamic_strided_slice(x, b, e, a, s)
  return t
}
)",
                              {"reduce_dynamic", "dynamic_strided_slice"});
  CHECK(has(out, "relax.reduce_dynamic_params"));
  CHECK(has(out, "relax.slice_params"));
}

TEST_CASE("legalize: topk, nonzero, unique and non_max_suppression run as builtins") {
  const char* topk = R"(
fn @main(x: Tensor[(2, 4), f32]) -> Tuple[Tensor[(2, 2), f32], Tensor[(2, 2), i64]] {
  t: Tuple[Tensor[(2, 2), f32], Tensor[(2, 2), i64]] = topk(x, k=2, axis=1, largest=false)
  return t
}
)";
  legalized(topk, {"topk"});
  rt::Value t = run(topk, {f32s({2, 4}, {3, 1, 1, 2, 0, 5, -1, 7})});
  CHECK(i64s(t.tuple()[1]) == std::vector<int64_t>{1, 2, 2, 0});

  const char* nz = R"(
fn @main(x: Tensor[(2, 3), f32]) -> Tensor[ndim=2, i64] {
  t: Tensor[ndim=2, i64] = nonzero(x)
  return t
}
)";
  legalized(nz, {"nonzero"});
  rt::Value n = run(nz, {f32s({2, 3}, {0, 1, 0, 2, 0, 3})});
  CHECK(n.tensor().shape() == std::vector<int64_t>{2, 3});
  CHECK(i64s(n) == std::vector<int64_t>{0, 1, 1, 1, 0, 2});

  const char* uq = R"(
fn @main(x: Tensor[(5,), f32]) -> Tuple[Tensor[ndim=1, f32], Tensor[ndim=1, i64], Tensor[(5,), i64], Tensor[ndim=1, i64]] {
  t: Tuple[Tensor[ndim=1, f32], Tensor[ndim=1, i64], Tensor[(5,), i64], Tensor[ndim=1, i64]] = unique(x, sorted=false)
  return t
}
)";
  legalized(uq, {"unique"});
  rt::Value u = run(uq, {f32s({5}, {2, 1, 2, 3, 1})});
  CHECK(i64s(u.tuple()[1]) == std::vector<int64_t>{0, 1, 3});
  CHECK(i64s(u.tuple()[2]) == std::vector<int64_t>{0, 1, 0, 2, 1});
  CHECK(i64s(u.tuple()[3]) == std::vector<int64_t>{2, 2, 1});

  const char* nms = R"(
fn @main(b: Tensor[(1, 3, 4), f32], s: Tensor[(1, 1, 3), f32], m: Tensor[(1,), i64], i: Tensor[(1,), f32])
    -> Tensor[ndim=2, i64] {
  t: Tensor[ndim=2, i64] = non_max_suppression(b, s, m, i)
  return t
}
)";
  legalized(nms, {"non_max_suppression"});
  rt::Tensor m = rt::Tensor::empty(rt::DType::i64(), {1});
  m.data_as<int64_t>()[0] = 3;
  rt::Value r = run(nms, {f32s({1, 3, 4}, {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, 5, 1, 6}),
                          f32s({1, 1, 3}, {0.9f, 0.8f, 0.7f}), m, f32s({1}, {0.5f})});
  CHECK(i64s(r) == std::vector<int64_t>{0, 0, 0, 0, 0, 2});
}
