// CPU backend: the semantics of TIR arithmetic: integer division that never
// traps, floor division and modulo (Python), NaN-propagating min/max,
// shifts, comparisons, and every intrinsic on ordinary and special values.
#include <doctest/doctest.h>

#include <climits>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>

#include "cpu_test_util.h"

namespace relax::cpu::test {
namespace {

// One program per expression over inputs a, b (dtype T), output o (dtype R).
struct Exprs {
  std::string t, r;
  std::vector<std::pair<std::string, std::string>> cases;  // name, expression over a[i], b[i]
  std::string text() const {
    std::string s;
    for (auto& [name, e] : cases)
      s += "prog @" + name + "(a: Buffer[(n,), " + t + "], b: Buffer[(n,), " + t + "]) -> (o: Buffer[(n,), " + r +
           "]) {\n  for i in range(n) {\n    o[i] = " + e + "\n  }\n}\n";
    return s;
  }
};

template <typename T, typename R>
std::vector<R> run(const Library& lib, const std::string& name, const std::vector<T>& a, const std::vector<T>& b) {
  std::vector<R> o(a.size());
  int64_t n = int64_t(a.size());
  REQUIRE(call(lib.kernel(name), {(void*)a.data(), (void*)b.data(), o.data()}, {n, n, n}) == 0);
  return o;
}

int64_t py_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
int64_t py_floormod(int64_t a, int64_t b) { return a - py_floordiv(a, b) * b; }

TEST_CASE("cpu: integer division and modulo by zero and INT_MIN / -1 do not trap") {
  Exprs e{"i32", "i32", {{"div", "a[i] / b[i]"}, {"fdiv", "a[i] // b[i]"}, {"fmod", "a[i] % b[i]"}}};
  Exprs u{"u8", "u8", {{"udiv", "a[i] / b[i]"}, {"umod", "a[i] % b[i]"}}};
  Library lib(compile_programs(programs_of(e.text() + u.text()), {}));
  std::vector<int32_t> a{7, -7, 7, -7, 5, INT_MIN, INT_MIN, 0, 9, -9};
  std::vector<int32_t> b{2, 2, -2, -2, 0, -1, 1, 0, 3, 3};
  auto div = run<int32_t, int32_t>(lib, "div", a, b);
  auto fdiv = run<int32_t, int32_t>(lib, "fdiv", a, b);
  auto fmod = run<int32_t, int32_t>(lib, "fmod", a, b);
  for (size_t i = 0; i < a.size(); ++i) {
    CAPTURE(i);
    if (b[i] == 0) continue;  // unspecified, but it returned
    if (a[i] == INT_MIN && b[i] == -1) {
      CHECK(div[i] == INT_MIN);  // wraps
      CHECK(fmod[i] == 0);
      continue;
    }
    CHECK(div[i] == a[i] / b[i]);
    CHECK(fdiv[i] == py_floordiv(a[i], b[i]));
    CHECK(fmod[i] == py_floormod(a[i], b[i]));
  }
  CHECK(fdiv[1] == -4);  // -7 // 2
  CHECK(fmod[1] == 1);   // -7 % 2
  CHECK(fmod[2] == -1);  // 7 % -2
  std::vector<uint8_t> ua{200, 7, 9}, ub{7, 0, 255};
  auto ud = run<uint8_t, uint8_t>(lib, "udiv", ua, ub);
  auto um = run<uint8_t, uint8_t>(lib, "umod", ua, ub);
  CHECK(ud[0] == 28);
  CHECK(um[0] == 4);
  CHECK(ud[2] == 0);
  CHECK(um[2] == 9);
}

TEST_CASE("cpu: float floordiv / floormod round toward -inf; min / max propagate NaN") {
  Exprs e{"f32",
          "f32",
          {{"ffdiv", "a[i] // b[i]"},
           {"ffmod", "a[i] % b[i]"},
           {"fmin", "min(a[i], b[i])"},
           {"fmax", "max(a[i], b[i])"},
           {"fdiv_true", "a[i] / b[i]"}}};
  Library lib(compile_programs(programs_of(e.text()), {}));
  std::vector<float> a{7, -7, 7, -7, 5.5f, NAN, 1, 3}, b{2, 2, -2, -2, 0.5f, 1, NAN, 0};
  auto fd = run<float, float>(lib, "ffdiv", a, b);
  auto fm = run<float, float>(lib, "ffmod", a, b);
  auto mn = run<float, float>(lib, "fmin", a, b);
  auto mx = run<float, float>(lib, "fmax", a, b);
  auto dv = run<float, float>(lib, "fdiv_true", a, b);
  CHECK(fd[0] == 3);
  CHECK(fd[1] == -4);
  CHECK(fd[2] == -4);
  CHECK(fd[3] == 3);
  CHECK(fm[0] == 1);
  CHECK(fm[1] == 1);
  CHECK(fm[2] == -1);
  CHECK(fm[3] == -1);
  CHECK(fm[4] == 0);
  CHECK(mn[0] == 2);
  CHECK(mx[0] == 7);
  CHECK(mn[1] == -7);
  CHECK(std::isnan(mn[5]));
  CHECK(std::isnan(mx[5]));
  CHECK(std::isnan(mn[6]));
  CHECK(std::isnan(mx[6]));
  CHECK(dv[7] == INFINITY);
}

TEST_CASE("cpu: shifts by the width or more give 0 (or the sign), never poison") {
  Exprs e{"i32", "i32", {{"shl", "a[i] << b[i]"}, {"shr", "a[i] >> b[i]"}}};
  Exprs u{"u16", "u16", {{"ushr", "a[i] >> b[i]"}, {"ushl", "a[i] << b[i]"}}};
  Library lib(compile_programs(programs_of(e.text() + u.text()), {}));
  std::vector<int32_t> a{1, -16, 5, -5, 3}, b{3, 2, 32, 40, -1};
  auto l = run<int32_t, int32_t>(lib, "shl", a, b);
  auto r = run<int32_t, int32_t>(lib, "shr", a, b);
  CHECK(l == std::vector<int32_t>{8, -64, 0, 0, 0});
  CHECK(r == std::vector<int32_t>{0, -4, 0, -1, 0});
  std::vector<uint16_t> ua{0x8000, 0xFFFF, 1}, ub{15, 16, 3};
  CHECK(run<uint16_t, uint16_t>(lib, "ushr", ua, ub) == std::vector<uint16_t>{1, 0, 0});
  CHECK(run<uint16_t, uint16_t>(lib, "ushl", ua, ub) == std::vector<uint16_t>{0, 0, 8});
}

TEST_CASE("cpu: comparisons, logic and bitwise ops (corpus 35)") {
  Library lib(compile_programs(corpus_programs("35_tir_binary_ops.relax"), {}));
  std::vector<int32_t> a{6, -3, 0}, b{3, 5, 0};
  std::vector<float> f{1, NAN, 2}, g{2, 1, 2};
  std::vector<int32_t> o(3);
  std::vector<float> p(3);
  std::vector<uint8_t> q(3, 7);
  REQUIRE(call(lib.kernel("binary_ops"), {a.data(), b.data(), f.data(), g.data(), o.data(), p.data(), q.data()},
               {3, 3, 3, 3, 3, 3, 3}) == 0);
  for (int i = 0; i < 3; ++i) {
    CAPTURE(i);
    uint32_t sh = uint32_t(a[i]) << 2;
    int32_t want_o = b[i] < 0 || b[i] >= 32 ? (int32_t(sh) < 0 ? -1 : 0) : int32_t(sh) >> b[i];
    CHECK(o[i] == want_o);
    float want_p = f[i] - (g[i] - f[i]) * (f[i] + g[i]);
    CHECK(same(p[i], want_p));
    bool eq = a[i] == b[i], fne = f[i] != g[i];
    CHECK(q[i] == uint8_t(eq != fne));
  }
}

TEST_CASE("cpu: every intrinsic on ordinary values, NaN and infinities, f32 and f64") {
  using F = std::function<double(double, double, double)>;
  const std::map<std::string, std::pair<std::string, F>> unary = {
      {"exp", {"exp(a[i])", [](double x, double, double) { return std::exp(x); }}},
      {"exp2", {"exp2(a[i])", [](double x, double, double) { return std::exp2(x); }}},
      {"log", {"log(a[i])", [](double x, double, double) { return std::log(x); }}},
      {"log2", {"log2(a[i])", [](double x, double, double) { return std::log2(x); }}},
      {"log1p", {"log1p(a[i])", [](double x, double, double) { return std::log1p(x); }}},
      {"expm1", {"expm1(a[i])", [](double x, double, double) { return std::expm1(x); }}},
      {"sqrt", {"sqrt(a[i])", [](double x, double, double) { return std::sqrt(x); }}},
      {"rsqrt", {"rsqrt(a[i])", [](double x, double, double) { return 1 / std::sqrt(x); }}},
      {"tanh", {"tanh(a[i])", [](double x, double, double) { return std::tanh(x); }}},
      {"sigmoid", {"sigmoid(a[i])", [](double x, double, double) { return 1 / (1 + std::exp(-x)); }}},
      {"erf", {"erf(a[i])", [](double x, double, double) { return std::erf(x); }}},
      {"sin", {"sin(a[i])", [](double x, double, double) { return std::sin(x); }}},
      {"cos", {"cos(a[i])", [](double x, double, double) { return std::cos(x); }}},
      {"tan", {"tan(a[i])", [](double x, double, double) { return std::tan(x); }}},
      {"asin", {"asin(a[i])", [](double x, double, double) { return std::asin(x); }}},
      {"acos", {"acos(a[i])", [](double x, double, double) { return std::acos(x); }}},
      {"atan", {"atan(a[i])", [](double x, double, double) { return std::atan(x); }}},
      {"sinh", {"sinh(a[i])", [](double x, double, double) { return std::sinh(x); }}},
      {"cosh", {"cosh(a[i])", [](double x, double, double) { return std::cosh(x); }}},
      {"asinh", {"asinh(a[i])", [](double x, double, double) { return std::asinh(x); }}},
      {"acosh", {"acosh(a[i])", [](double x, double, double) { return std::acosh(x); }}},
      {"atanh", {"atanh(a[i])", [](double x, double, double) { return std::atanh(x); }}},
      {"abs", {"abs(a[i])", [](double x, double, double) { return std::fabs(x); }}},
      {"floor", {"floor(a[i])", [](double x, double, double) { return std::floor(x); }}},
      {"ceil", {"ceil(a[i])", [](double x, double, double) { return std::ceil(x); }}},
      {"round", {"round(a[i])", [](double x, double, double) { return std::nearbyint(x); }}},
      {"trunc", {"trunc(a[i])", [](double x, double, double) { return std::trunc(x); }}},
      {"pow", {"pow(a[i], b[i])", [](double x, double y, double) { return std::pow(x, y); }}},
      {"atan2", {"atan2(a[i], b[i])", [](double x, double y, double) { return std::atan2(x, y); }}},
      {"fmod", {"fmod(a[i], b[i])", [](double x, double y, double) { return std::fmod(x, y); }}},
      {"copysign", {"copysign(a[i], b[i])", [](double x, double y, double) { return std::copysign(x, y); }}},
      {"fma", {"fma(a[i], b[i], a[i])", [](double x, double y, double) { return std::fma(x, y, x); }}},
      {"isnan", {"select(isnan(a[i]), 1.0T, 0.0T)", [](double x, double, double) { return double(std::isnan(x)); }}},
      {"isinf", {"select(isinf(a[i]), 1.0T, 0.0T)", [](double x, double, double) { return double(std::isinf(x)); }}},
      {"isfinite",
       {"select(isfinite(a[i]), 1.0T, 0.0T)", [](double x, double, double) { return double(std::isfinite(x)); }}},
  };
  const std::vector<double> xs{-2.5, -1, -0.5, -0.0, 0.0, 0.5, 0.75, 1, 1.5, 2.5, 3, 20, NAN, INFINITY, -INFINITY};
  const std::vector<double> ys{2, 0.5, -3, 1, -1, 2, 3, -0.5, 0.25, 2, -2, 1, 1, 2, NAN};
  for (std::string t : {"f32", "f64"}) {
    CAPTURE(t);
    Exprs e{t, t, {}};
    for (auto& [name, def] : unary) {
      std::string expr = def.first;
      for (size_t p; (p = expr.find("T)")) != std::string::npos || (p = expr.find("T,")) != std::string::npos;)
        expr.replace(p, 1, t);
      e.cases.push_back({name, expr});
    }
    Library lib(compile_programs(programs_of(e.text()), {}));
    for (auto& [name, def] : unary) {
      CAPTURE(name);
      std::vector<double> got;
      if (t == "f32") {
        std::vector<float> a(xs.begin(), xs.end()), b(ys.begin(), ys.end());
        for (float v : run<float, float>(lib, name, a, b)) got.push_back(v);
      } else {
        got = run<double, double>(lib, name, xs, ys);
      }
      for (size_t i = 0; i < xs.size(); ++i) {
        CAPTURE(xs[i]);
        CAPTURE(ys[i]);
        double want = def.second(xs[i], ys[i], 0);
        if (t == "f32") {
          float fx = float(xs[i]), fy = float(ys[i]);
          want = double(float(def.second(fx, fy, 0)));
        }
        CHECK(same(got[i], want, t == "f32" ? 2e-6 : 1e-12));
      }
    }
  }
}

TEST_CASE("cpu: integer intrinsics, negation and bitwise not (corpus 36)") {
  Library lib(compile_programs(corpus_programs("36_tir_intrinsics.relax"), {}));
  std::vector<float> x{0.5f, 2, NAN}, y(3);
  std::vector<int32_t> k{-5, 7, INT_MIN}, z(3);
  std::vector<uint8_t> w(3);
  REQUIRE(call(lib.kernel("math"), {x.data(), k.data(), y.data(), z.data(), w.data()}, {3, 3, 3, 3, 3}) == 0);
  CHECK(z[0] == 4);  // -(k + 1)
  CHECK(z[1] == -8);
  CHECK(w == std::vector<uint8_t>{0, 0, 1});
  float v = 0.5f;
  CHECK(same(y[0], std::floor(v) + std::ceil(v) + std::nearbyint(v) + std::trunc(v) + std::exp2(v) + std::log1p(v),
             1e-6));

  Exprs e{"i32", "i32", {{"popc", "popcount(a[i])"}, {"iabs", "abs(a[i])"}}};
  Library lib2(compile_programs(programs_of(e.text()), {}));
  std::vector<int32_t> a{0, 7, -1, INT_MIN, -9}, b(5);
  CHECK(run<int32_t, int32_t>(lib2, "popc", a, b) == std::vector<int32_t>{0, 3, 32, 1, 31});
  CHECK(run<int32_t, int32_t>(lib2, "iabs", a, b) == std::vector<int32_t>{0, 7, 1, INT_MIN, 9});
}

// f32 exp, tanh, sigmoid and erf are computed inline (backends/llvm/expr.cc),
// not by libm: within a few units in the last place of the double result
// over their whole range (subnormal and overflowing results of exp
// included), and a vectorized loop of them calls nothing.
TEST_CASE("cpu: inline f32 exp, tanh, sigmoid and erf stay within 4 ulp, and vectorised loops call no libm") {
  const char* text = R"(
prog @ex(a: Buffer[(n,), f32]) -> (o: Buffer[(n,), f32]) {
  for i in vectorized(n) {
    o[i] = exp(a[i])
  }
}
prog @th(a: Buffer[(n,), f32]) -> (o: Buffer[(n,), f32]) {
  for i in vectorized(n) {
    o[i] = tanh(a[i])
  }
}
prog @sg(a: Buffer[(n,), f32]) -> (o: Buffer[(n,), f32]) {
  for i in vectorized(n) {
    o[i] = sigmoid(a[i])
  }
}
prog @ef(a: Buffer[(n,), f32]) -> (o: Buffer[(n,), f32]) {
  for i in vectorized(n) {
    o[i] = erf(a[i])
  }
}
)";
  Library lib(compile_programs(programs_of(text), {}));
  auto eval = [&](const std::string& name, const std::vector<float>& a) {
    std::vector<float> o(a.size());
    int64_t n = int64_t(a.size());
    REQUIRE(call(lib.kernel(name), {(void*)a.data(), o.data()}, {n, n}) == 0);
    return o;
  };
  // Distance in representable floats (same sign), large when the signs differ.
  auto ulps = [](float x, double want) {
    float w = float(want);
    if (std::isnan(w)) return std::isnan(x) ? 0.0 : 1e9;
    if (x == w) return 0.0;
    int32_t a, b;
    std::memcpy(&a, &x, 4);
    std::memcpy(&b, &w, 4);
    if ((a < 0) != (b < 0)) return 1e9;
    return std::fabs(double(a) - double(b));
  };
  std::vector<float> xs;
  for (double x = -110; x <= 95; x += 0.01171875) xs.push_back(float(x));
  for (double x = -1; x <= 1; x += 1.0 / 4096) xs.push_back(float(x));
  for (double x = -5; x <= 5; x += 1.0 / 1024) xs.push_back(float(x));
  for (float x : {1e-30f, -1e-30f, 1e-7f, 0.99999994f, 1.0f, 3.9199998f, 3.92f, 0.49999997f, 0.5f, 0.50000006f, 88.72f, 88.7229f, -87.34f, -103.9f})
    xs.push_back(x);
  struct Fn {
    const char* name;
    double (*ref)(double);
  };
  for (Fn f : {Fn{"ex", [](double x) { return std::exp(x); }}, Fn{"th", [](double x) { return std::tanh(x); }},
               Fn{"sg", [](double x) { return 1 / (1 + std::exp(-x)); }},
               Fn{"ef", [](double x) { return std::erf(x); }}}) {
    CAPTURE(f.name);
    std::vector<float> got = eval(f.name, xs);
    double worst = 0, at = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      double want = f.ref(double(xs[i]));
      // Below the smallest normal float only the absolute error counts.
      double u = std::fabs(want) < 1.2e-38 ? std::fabs(got[i] - want) / 1.4e-45 : ulps(got[i], want);
      if (u > worst) worst = u, at = xs[i];
    }
    CAPTURE(at);
    CHECK(worst <= 4);
  }
  std::string ir = emit_llvm_ir(programs_of(text), {"x86-64-v3", 3});
  CHECK(ir.find("<8 x float>") != std::string::npos);
  CHECK(ir.find("@expf") == std::string::npos);
  CHECK(ir.find("@tanhf") == std::string::npos);
  CHECK(ir.find("@erff") == std::string::npos);
  CHECK(ir.find("llvm.exp.") == std::string::npos);
}

// A float sum into one accumulator (softmax's denominator, a mean) is
// vectorised: partial sums per lane, in the same order for every row, so
// equal rows still give equal sums.
TEST_CASE("cpu: a float sum reduction loop vectorises, and equal rows sum equally") {
  const char* text = R"(
prog @rowsum(a: Buffer[(r, n), f32]) -> (o: Buffer[(r,), f32]) {
  for i in range(r) {
    alloc s: Buffer[(1,), f32, local]
    s[0] = 0.0f32
    for k in range(n) {
      s[0] = s[0] + a[i, k]
    }
    o[i] = s[0]
  }
}
)";
  std::string ir = emit_llvm_ir(programs_of(text), {"x86-64-v3", 3});
  CHECK(ir.find("vector.reduce.fadd") != std::string::npos);
  Library lib(compile_programs(programs_of(text), {}));
  int64_t rows = 3, n = 1001;
  std::vector<float> a(size_t(rows * n)), o(static_cast<size_t>(rows));
  for (int64_t k = 0; k < n; ++k) a[size_t(k)] = a[size_t(n + k)] = float(k % 17) * 0.1f - 0.7f, a[size_t(2 * n + k)] = 1.0f;
  REQUIRE(call(lib.kernel("rowsum"), {a.data(), o.data()}, {rows, n, rows}) == 0);
  double want = 0;
  for (int64_t k = 0; k < n; ++k) want += double(a[size_t(k)]);
  CHECK(std::fabs(o[0] - want) < 1e-3);
  CHECK(o[0] == o[1]);
  CHECK(o[2] == float(n));
}

}  // namespace
}  // namespace relax::cpu::test
