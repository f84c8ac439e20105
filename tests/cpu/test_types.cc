// CPU backend: dtypes in memory and in casts: saturating float -> int,
// bool, f16 and bf16 rounding, the float8 kinds, f4e2m1 and packed i4/u4.
#include <doctest/doctest.h>

#include <bit>
#include <climits>
#include <cmath>
#include <limits>

#include "cpu_test_util.h"

namespace relax::cpu::test {
namespace {

std::string cast_prog(const std::string& name, const std::string& from, const std::string& to,
                      const std::string& expr = "cast(TO, x[i])") {
  std::string e = expr;
  for (size_t p; (p = e.find("TO")) != std::string::npos;) e.replace(p, 2, to);
  return "prog @" + name + "(x: Buffer[(n,), " + from + "]) -> (y: Buffer[(n,), " + to +
         "]) {\n  for i in range(n) {\n    y[i] = " + e + "\n  }\n}\n";
}

template <typename From, typename To>
std::vector<To> run_cast(const Library& lib, const std::string& name, const std::vector<From>& x) {
  std::vector<To> y(x.size());
  int64_t n = int64_t(x.size());
  REQUIRE(call(lib.kernel(name), {(void*)x.data(), y.data()}, {n, n}) == 0);
  return y;
}

uint16_t bf16_rne(float f) {
  uint32_t b = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) return uint16_t((b >> 16) | 0x40);
  return uint16_t((b + 0x7FFF + ((b >> 16) & 1)) >> 16);
}

TEST_CASE("cpu: float -> int truncates toward zero and saturates; NaN gives 0") {
  Library lib(compile_programs(programs_of(cast_prog("f2i8", "f32", "i8") + cast_prog("f2u8", "f32", "u8") +
                                           cast_prog("f2i32", "f32", "i32") + cast_prog("d2i64", "f64", "i64")),
                               {}));
  std::vector<float> x{1.9f, -1.9f, 300, -300, NAN, INFINITY, -INFINITY, 127.5f, -0.5f, 3e9f};
  CHECK(run_cast<float, int8_t>(lib, "f2i8", x) == std::vector<int8_t>{1, -1, 127, -128, 0, 127, -128, 127, 0, 127});
  CHECK(run_cast<float, uint8_t>(lib, "f2u8", x) == std::vector<uint8_t>{1, 0, 255, 0, 0, 255, 0, 127, 0, 255});
  auto i32 = run_cast<float, int32_t>(lib, "f2i32", x);
  CHECK(i32[0] == 1);
  CHECK(i32[1] == -1);
  CHECK(i32[4] == 0);
  CHECK(i32[5] == INT_MAX);
  CHECK(i32[6] == INT_MIN);
  CHECK(i32[9] == INT_MAX);
  std::vector<double> d{1e30, -1e30, -7.99, NAN};
  CHECK(run_cast<double, int64_t>(lib, "d2i64", d) == std::vector<int64_t>{LLONG_MAX, LLONG_MIN, -7, 0});
}

// The saturating conversion in vector loops (compares and selects around a
// plain conversion, not the lane-by-lane expansion of fptosi.sat) against
// a scalar reference, at every edge: the powers of two that bound each
// range, the floats just inside them, NaN and the infinities.
template <typename To, typename From>
To saturate_ref(From v) {
  if (std::isnan(v)) return 0;
  long double t = std::trunc((long double)v);
  if (t <= (long double)std::numeric_limits<To>::min()) return std::numeric_limits<To>::min();
  if (t >= (long double)std::numeric_limits<To>::max()) return std::numeric_limits<To>::max();
  return To(t);
}

template <typename To, typename From>
std::vector<To> saturate_all(const std::vector<From>& xs) {
  std::vector<To> r;
  for (From v : xs) r.push_back(saturate_ref<To>(v));
  return r;
}

TEST_CASE("cpu: float -> int in vector loops saturates lane by lane as the scalar cast") {
  auto vprog = [](const std::string& name, const std::string& from, const std::string& to) {
    return "prog @" + name + "(x: Buffer[(n,), " + from + "]) -> (y: Buffer[(n,), " + to +
           "]) {\n  for i in vectorized(n) {\n    y[i] = cast(" + to + ", x[i])\n  }\n}\n";
  };
  Library lib(compile_programs(programs_of(vprog("vi8", "f32", "i8") + vprog("vu8", "f32", "u8") +
                                           vprog("vi32", "f32", "i32") + vprog("vu32", "f32", "u32") +
                                           vprog("vi64", "f32", "i64") + vprog("di32", "f64", "i32")),
                               {}));
  std::vector<float> x{0.0f, -0.0f, 1.9f, -1.9f, 127.9f, 128.0f, -128.9f, -129.0f, 255.9f, 256.0f, -0.99f, -1.0f,
                       NAN, INFINITY, -INFINITY, 2147483520.0f, 2147483648.0f, -2147483648.0f, -2147483904.0f,
                       4294967040.0f, 4294967296.0f, 9.2233715e18f, 9.223372e18f, -9.223372e18f, -1e19f, 3e9f};
  while (x.size() < 67) x.push_back(float(x.size()) * 37.25f - 1000.0f);  // a vector body and a tail
  CHECK(run_cast<float, int8_t>(lib, "vi8", x) == saturate_all<int8_t>(x));
  CHECK(run_cast<float, uint8_t>(lib, "vu8", x) == saturate_all<uint8_t>(x));
  CHECK(run_cast<float, int32_t>(lib, "vi32", x) == saturate_all<int32_t>(x));
  CHECK(run_cast<float, uint32_t>(lib, "vu32", x) == saturate_all<uint32_t>(x));
  CHECK(run_cast<float, int64_t>(lib, "vi64", x) == saturate_all<int64_t>(x));
  std::vector<double> d{2147483647.9, 2147483648.0, -2147483648.9, -2147483649.0, NAN, -INFINITY, 1e300, -0.5};
  while (d.size() < 35) d.push_back(double(d.size()) * 1e8 - 1.5e9);
  CHECK(run_cast<double, int32_t>(lib, "di32", d) == saturate_all<int32_t>(d));
}

TEST_CASE("cpu: bool is a byte 0/1; int and float -> bool is != 0") {
  Library lib(compile_programs(
      programs_of(cast_prog("i2b", "i32", "bool") + cast_prog("f2b", "f32", "bool") + cast_prog("b2f", "bool", "f32") +
                  cast_prog("b2i", "bool", "i64") + cast_prog("bnot", "bool", "bool", "!x[i]")),
      {}));
  CHECK(run_cast<int32_t, uint8_t>(lib, "i2b", {0, 1, -1, 256}) == std::vector<uint8_t>{0, 1, 1, 1});
  CHECK(run_cast<float, uint8_t>(lib, "f2b", {0.0f, -0.0f, 0.1f, NAN, -INFINITY}) ==
        std::vector<uint8_t>{0, 0, 1, 1, 1});
  CHECK(run_cast<uint8_t, float>(lib, "b2f", {0, 1}) == std::vector<float>{0, 1});
  CHECK(run_cast<uint8_t, int64_t>(lib, "b2i", {0, 1}) == std::vector<int64_t>{0, 1});
  CHECK(run_cast<uint8_t, uint8_t>(lib, "bnot", {0, 1}) == std::vector<uint8_t>{1, 0});
}

TEST_CASE("cpu: f16 round trips and rounding; int widening and narrowing") {
  Library lib(compile_programs(
      programs_of(cast_prog("f2h", "f32", "f16") + cast_prog("h2f", "f16", "f32") +
                  cast_prog("hadd", "f16", "f16", "x[i] + x[i] * 0.5f16") + cast_prog("i2l", "i8", "i64") +
                  cast_prog("u2l", "u8", "i64") + cast_prog("l2i", "i64", "i8") + cast_prog("l2d", "i64", "f64") +
                  cast_prog("d2h", "f64", "f16")),
      {}));
  std::vector<float> x{1.0f, 0.1f, 65504.0f, 70000.0f, -2.5f, NAN, 1.0f + 1.0f / 2048};
  auto h = run_cast<float, uint16_t>(lib, "f2h", x);
  CHECK(h[0] == 0x3C00);
  CHECK(h[1] == 0x2E66);  // 0.1 rounded to nearest
  CHECK(h[2] == 0x7BFF);
  CHECK(h[3] == 0x7C00);  // overflow -> inf
  CHECK(h[4] == 0xC100);
  CHECK((h[5] & 0x7C00) == 0x7C00);
  CHECK((h[5] & 0x3FF) != 0);
  CHECK(h[6] == 0x3C00);  // a tie rounds to even
  auto back = run_cast<uint16_t, float>(lib, "h2f", h);
  CHECK(back[0] == 1.0f);
  CHECK(back[1] == doctest::Approx(0.1f).epsilon(1e-3));
  CHECK(back[2] == 65504.0f);
  CHECK(back[3] == INFINITY);
  CHECK(std::isnan(back[5]));
  CHECK(run_cast<uint16_t, uint16_t>(lib, "hadd", {0x4000}) == std::vector<uint16_t>{0x4200});  // 2 + 1 = 3
  // f64 -> f16 rounds once: 1 + 2^-11 + 2^-40 is above the tie and rounds up
  // (through f32 with nearest-even it would tie and round down).
  std::vector<double> d{1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40), 1e300, -0.1, 1.0 + std::ldexp(1.0, -11)};
  CHECK(run_cast<double, uint16_t>(lib, "d2h", d) == std::vector<uint16_t>{0x3C01, 0x7C00, 0xAE66, 0x3C00});
  CHECK(run_cast<int8_t, int64_t>(lib, "i2l", {-3, 127}) == std::vector<int64_t>{-3, 127});
  CHECK(run_cast<uint8_t, int64_t>(lib, "u2l", {253, 1}) == std::vector<int64_t>{253, 1});
  CHECK(run_cast<int64_t, int8_t>(lib, "l2i", {257, -129}) == std::vector<int8_t>{1, 127});
  CHECK(run_cast<int64_t, double>(lib, "l2d", {-5, 1LL << 53}) == std::vector<double>{-5, 9007199254740992.0});
}

TEST_CASE("cpu: bf16 rounds to nearest even when narrowing and after arithmetic") {
  Library lib(compile_programs(
      programs_of(cast_prog("f2bf", "f32", "bf16") + cast_prog("bf2f", "bf16", "f32") +
                  cast_prog("bfmul", "bf16", "bf16", "x[i] * x[i]") + cast_prog("bf2i", "bf16", "i32")),
      {}));
  std::vector<float> x{1.0f,
                       3.14159f,
                       -1e-3f,
                       1e38f,
                       3.4e38f,
                       NAN,
                       INFINITY,
                       std::bit_cast<float>(0x3F808000u),
                       std::bit_cast<float>(0x3F818000u),
                       std::bit_cast<float>(0x3F808001u)};
  auto b = run_cast<float, uint16_t>(lib, "f2bf", x);
  for (size_t i = 0; i < x.size(); ++i) {
    CAPTURE(i);
    if (std::isnan(x[i]))
      CHECK((b[i] & 0x7FC0) == 0x7FC0);
    else
      CHECK(b[i] == bf16_rne(x[i]));
  }
  CHECK(b[7] == 0x3F80);  // tie, even stays
  CHECK(b[8] == 0x3F82);  // tie, odd rounds up
  CHECK(b[9] == 0x3F81);
  CHECK(b[4] == 0x7F80);  // 3.4e38 rounds up to inf
  auto f = run_cast<uint16_t, float>(lib, "bf2f", b);
  CHECK(f[0] == 1.0f);
  CHECK(f[1] == std::bit_cast<float>(uint32_t(bf16_rne(3.14159f)) << 16));
  // 1.0078125^2 = 1.01568... rounds to the bf16 grid (step 2^-7 near 1).
  uint16_t v = 0x3F81;
  CHECK(run_cast<uint16_t, uint16_t>(lib, "bfmul", {v}) == std::vector<uint16_t>{bf16_rne(1.0078125f * 1.0078125f)});
  CHECK(run_cast<uint16_t, int32_t>(lib, "bf2i", {0x4049, 0xC049}) == std::vector<int32_t>{3, -3});
}

TEST_CASE("cpu: float8 and f4e2m1 casts follow the ONNX tables") {
  std::string text;
  for (std::string t : {"f8e4m3fn", "f8e4m3fnuz", "f8e5m2", "f8e5m2fnuz", "f8e8m0", "f4e2m1"})
    text += cast_prog("to_" + t, "f32", t) + cast_prog("from_" + t, t, "f32");
  Library lib(compile_programs(programs_of(text), {}));
  std::vector<float> x{0.0f, 1.0f, -2.0f, 448.0f, 464.0f, 500.0f, 0.1f, NAN, INFINITY, -0.0f, 0.001953125f, 240.0f};
  auto e4 = run_cast<float, uint8_t>(lib, "to_f8e4m3fn", x);
  CHECK(e4 == std::vector<uint8_t>{0x00, 0x38, 0xC0, 0x7E, 0x7E, 0x7F, 0x1D, 0x7F, 0x7F, 0x80, 0x01, 0x77});
  auto e4uz = run_cast<float, uint8_t>(lib, "to_f8e4m3fnuz", x);
  CHECK(e4uz == std::vector<uint8_t>{0x00, 0x40, 0xC8, 0x80, 0x80, 0x80, 0x25, 0x80, 0x80, 0x00, 0x02, 0x7F});
  auto e5 = run_cast<float, uint8_t>(lib, "to_f8e5m2", {1.0f, 57344.0f, 61440.0f, INFINITY, -INFINITY, NAN, 0.1f});
  CHECK(e5 == std::vector<uint8_t>{0x3C, 0x7B, 0x7C, 0x7C, 0xFC, 0x7E, 0x2E});  // NaN: the quiet 0x7E
  auto e5uz = run_cast<float, uint8_t>(lib, "to_f8e5m2fnuz", {1.0f, 57344.0f, -0.0f, NAN});
  CHECK(e5uz == std::vector<uint8_t>{0x40, 0x7F, 0x00, 0x80});
  auto e8 = run_cast<float, uint8_t>(lib, "to_f8e8m0", {1.0f, 2.0f, 3.0f, 0.25f, NAN});
  CHECK(e8 == std::vector<uint8_t>{127, 128, 129, 125, 0xFF});
  // Decoding: every code of e4m3fn round-trips through f32.
  std::vector<uint8_t> codes(256);
  for (int i = 0; i < 256; ++i) codes[i] = uint8_t(i);
  auto decoded = run_cast<uint8_t, float>(lib, "from_f8e4m3fn", codes);
  CHECK(decoded[0x38] == 1.0f);
  CHECK(decoded[0x7E] == 448.0f);
  CHECK(decoded[0x01] == 0.001953125f);
  CHECK(std::isnan(decoded[0x7F]));
  CHECK(std::isnan(decoded[0xFF]));
  CHECK(!std::signbit(decoded[0x7F]));
  CHECK(std::signbit(decoded[0xFF]));
  auto again = run_cast<float, uint8_t>(lib, "to_f8e4m3fn", decoded);
  for (int i = 0; i < 256; ++i) CHECK(again[i] == i);  // NaNs keep their sign
  CHECK(run_cast<float, uint8_t>(lib, "to_f8e4m3fn", {-NAN, -INFINITY, -500.0f}) ==
        std::vector<uint8_t>{0xFF, 0xFF, 0xFF});
  CHECK(run_cast<float, uint8_t>(lib, "to_f8e5m2", {-NAN}) == std::vector<uint8_t>{0xFE});
  auto e5d = run_cast<uint8_t, float>(lib, "from_f8e5m2", {0x7C, 0xFC, 0x7D, 0x3C});
  CHECK(e5d[0] == INFINITY);
  CHECK(e5d[1] == -INFINITY);
  CHECK(std::isnan(e5d[2]));
  CHECK(e5d[3] == 1.0f);
  CHECK(run_cast<uint8_t, float>(lib, "from_f8e8m0", {127, 0})[0] == 1.0f);
}

// f4e2m1 and i4/u4 are packed two per byte, the low nibble first.
TEST_CASE("cpu: 4-bit types pack two per byte, low nibble first") {
  Library lib(compile_programs(programs_of(R"(
prog @pack_i4(x: Buffer[(n,), i32]) -> (y: Buffer[(n,), i4]) {
  for i in parallel(n) {
    y[i] = cast(i4, x[i])
  }
}
prog @unpack_i4(x: Buffer[(n,), i4]) -> (y: Buffer[(n,), i32]) {
  for i in range(n) {
    y[i] = cast(i32, x[i])
  }
}
prog @unpack_u4(x: Buffer[(n,), u4]) -> (y: Buffer[(n,), i32]) {
  for i in range(n) {
    y[i] = cast(i32, x[i] + 1u4)
  }
}
prog @to_f4(x: Buffer[(n,), f32]) -> (y: Buffer[(n,), f4e2m1]) {
  for i in range(n) {
    y[i] = cast(f4e2m1, x[i])
  }
}
prog @from_f4(x: Buffer[(n,), f4e2m1]) -> (y: Buffer[(n,), f32]) {
  for i in range(n) {
    y[i] = cast(f32, x[i])
  }
}
)"),
                               {}));
  // Many bytes shared by two threads' halves: the packing must not race.
  const int64_t n = 4001;
  std::vector<int32_t> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = int32_t(i % 16) - 8;
  std::vector<uint8_t> packed((n + 1) / 2, 0xAA);
  REQUIRE(call(lib.kernel("pack_i4"), {x.data(), packed.data()}, {n, n}) == 0);
  CHECK(packed[0] == 0x98);  // -8 low, -7 high
  CHECK(packed[4] == 0x10);  // 0 low, 1 high
  std::vector<int32_t> back(n);
  REQUIRE(call(lib.kernel("unpack_i4"), {packed.data(), back.data()}, {n, n}) == 0);
  CHECK(back == x);
  CHECK((packed.back() & 0xF0) == 0x00);  // the unused high nibble of the last byte is zeroed, as ONNX packs
  std::vector<uint8_t> u{0x2F};
  std::vector<int32_t> uo(2);
  REQUIRE(call(lib.kernel("unpack_u4"), {u.data(), uo.data()}, {2, 2}) == 0);
  CHECK(uo == std::vector<int32_t>{0, 3});  // 15 + 1 wraps in 4 bits

  std::vector<float> f{0.0f, 0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 7.0f, -6.0f, NAN, -0.5f};
  std::vector<uint8_t> f4((f.size() + 1) / 2);
  REQUIRE(call(lib.kernel("to_f4"), {f.data(), f4.data()}, {12, 12}) == 0);
  auto nib = [&](size_t i) { return (f4[i / 2] >> (4 * (i % 2))) & 0xF; };
  // NaN: the code of -0, as the ONNX reference (ml_dtypes) writes it.
  std::vector<int> want{0x0, 0x0, 0x2, 0x2, 0x4, 0x4, 0x6, 0x6, 0x7, 0xF, 0x8, 0x9};
  for (size_t i = 0; i < f.size(); ++i) {
    CAPTURE(i);
    CHECK(nib(i) == want[i]);
  }
  std::vector<float> fb(12);
  REQUIRE(call(lib.kernel("from_f4"), {f4.data(), fb.data()}, {12, 12}) == 0);
  CHECK(fb == std::vector<float>{0, 0, 1, 1, 2, 2, 4, 4, 6, -6, -0.0f, -0.5f});
  CHECK(std::signbit(fb[10]));
}

TEST_CASE("cpu: typed immediates (corpus 38)") {
  Library lib(compile_programs(corpus_programs("38_tir_immediates.relax"), {}));
  std::vector<uint16_t> a(4), b(2);
  std::vector<int8_t> c(2);
  uint8_t d = 0, e[2] = {9, 9};
  std::vector<float> f(4);
  std::vector<int64_t> g(2);
  double h = 0;
  uint64_t u = 0;
  REQUIRE(call(lib.kernel("immediates"), {a.data(), b.data(), c.data(), &d, e, f.data(), g.data(), &h, &u},
               {4, 2, 2, 1, 2, 4, 2, 1, 1}) == 0);
  CHECK(a[0] == 0);
  CHECK(a[1] == 0x7C00);
  CHECK(a[2] == 0xFC00);
  CHECK((a[3] & 0x7C00) == 0x7C00);
  CHECK(b == std::vector<uint16_t>{0x3FC0, 0xFF80});
  CHECK(c == std::vector<int8_t>{-128, 127});
  CHECK(d == 255);
  CHECK(e[0] == 1);
  CHECK(e[1] == 0);
  CHECK(f == std::vector<float>{0.1f, 1e20f, -2.5e-08f, 100.0f});
  CHECK(g == std::vector<int64_t>{7, LLONG_MAX});
  CHECK(h == 3.141592653589793);
  CHECK(u == UINT64_MAX);
}

TEST_CASE("cpu: quantize with select, round and casts (corpus 37)") {
  Library lib(compile_programs(corpus_programs("37_tir_cast_select.relax"), {}));
  std::vector<float> x{0.0f, 1.26f, -300.0f, 300.0f, 2.5f}, scale{0.5f};
  std::vector<int8_t> q(5);
  std::vector<uint16_t> d(5);
  REQUIRE(call(lib.kernel("quantize"), {x.data(), scale.data(), q.data(), d.data()}, {5, 1, 5, 5}) == 0);
  CHECK(q == std::vector<int8_t>{0, 3, -128, 127, 5});  // round(2.52) = 3, round(5.0) = 5
  CHECK(d[1] == 0x3E00);                                // 3 * 0.5 = 1.5 in f16
}

}  // namespace
}  // namespace relax::cpu::test
