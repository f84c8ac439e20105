// Tests of ir/analyzer.h: bounds, bound-based simplification and proofs.
#include <doctest/doctest.h>

#include <limits>
#include <random>

#include "ir/analyzer.h"
#include "ir/error.h"

using namespace relax;

namespace {

constexpr int64_t kNegInf = Interval::kNegInf;
constexpr int64_t kPosInf = Interval::kPosInf;

Interval iv(int64_t lo, int64_t hi) { return Interval{lo, hi}; }

// A random expression over `vars` built through the canonical constructors;
// divisors are nonzero constants or variables.
SymExpr random_expr(std::mt19937& rng, const std::vector<SymExpr>& vars, int depth) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int op = depth <= 0 ? pick(0, 1) : pick(0, 9);
  if (op == 0) return SymExpr(pick(-5, 9));
  if (op == 1) return vars[size_t(pick(0, int(vars.size()) - 1))];
  SymExpr a = random_expr(rng, vars, depth - 1);
  auto divisor = [&]() -> SymExpr {
    if (pick(0, 3) == 0) return vars[size_t(pick(0, int(vars.size()) - 1))];
    int c = pick(-3, 9);
    return SymExpr(c == 0 ? 8 : c);
  };
  switch (op) {
    case 2:
      return a + random_expr(rng, vars, depth - 1);
    case 3:
      return a - random_expr(rng, vars, depth - 1);
    case 4:
      return a * random_expr(rng, vars, depth - 1);
    case 5:
      return floordiv(a, divisor());
    case 6:
      return floormod(a, divisor());
    case 7:
      return min(a, random_expr(rng, vars, depth - 1));
    case 8:
      return max(a, random_expr(rng, vars, depth - 1));
    default:
      return a * SymExpr(pick(-4, 8)) + SymExpr(pick(-9, 9));
  }
}

bool contains(Interval r, int64_t v) { return r.lo <= v && v <= r.hi; }

}  // namespace

TEST_CASE("analyzer: variable bounds") {
  SymExpr n = SymExpr::var("n"), m = SymExpr::var("m");
  Analyzer an;
  CHECK(an.var_bound(n) == iv(0, kPosInf));  // sizes are non-negative by default
  Analyzer un(Analyzer::Assume::Unbounded);
  CHECK(un.var_bound(n) == iv(kNegInf, kPosInf));
  an.bind(n, 0, 100);
  an.bind(n, 50, 200);
  CHECK(an.var_bound(n) == iv(50, 100));  // intersected
  an.bind(m, iv(-5, 10));
  CHECK(an.var_bound(m) == iv(0, 10));  // still non-negative under the default
  un.bind(m, -5, 10);
  CHECK(un.var_bound(m) == iv(-5, 10));
}

TEST_CASE("analyzer: interval arithmetic") {
  SymExpr n = SymExpr::var("n"), m = SymExpr::var("m"), k = SymExpr::var("k");
  Analyzer an(Analyzer::Assume::Unbounded);
  an.bind(n, 1, 10);
  an.bind(m, 0, 10);
  CHECK(an.bound(n * 2 + 3) == iv(5, 23));
  CHECK(an.bound(n - m) == iv(-9, 10));
  CHECK(an.bound(floordiv(n, 4)) == iv(0, 2));
  CHECK(an.bound(floormod(n, 4)) == iv(0, 3));
  CHECK(an.bound(floormod(n + 4, 8)) == iv(0, 7));
  CHECK(an.bound(floormod(m + 16, 32)) == iv(16, 26));  // one period: exact
  CHECK(an.bound(floordiv(m, n)) == iv(0, 10));
  CHECK(an.bound(floordiv(-m, n)) == iv(-10, 0));
  CHECK(an.bound(floordiv(m, -3)) == iv(-4, 0));
  CHECK(an.bound(floormod(m, -3)) == iv(-2, 0));
  CHECK(an.bound(min(n, 4)) == iv(1, 4));
  CHECK(an.bound(max(n, m + 5)) == iv(5, 15));
  Analyzer mixed(Analyzer::Assume::Unbounded);
  mixed.bind(n, -2, 3);
  mixed.bind(m, -5, 4);
  CHECK(mixed.bound(n * m) == iv(-15, 12));
  CHECK(mixed.bound(n * n) == iv(0, 9));   // even power
  CHECK(mixed.bound(n * n * n).lo <= -8);  // sound, not necessarily tight
  CHECK(mixed.bound(n * n * n).hi == 27);
  CHECK(mixed.bound(floordiv(SymExpr(12), m)) == iv(-12, 12));  // divisor straddles 0
  // Infinities saturate.
  CHECK(an.bound(k) == iv(kNegInf, kPosInf));
  CHECK(an.bound(k * 0 + 4) == iv(4, 4));
  Analyzer nn;
  CHECK(nn.bound(k + 5) == iv(5, kPosInf));
  CHECK(nn.bound(-k) == iv(kNegInf, 0));
  CHECK(nn.bound(k * m) == iv(0, kPosInf));
  CHECK(nn.bound(k - m) == iv(kNegInf, kPosInf));
  CHECK(nn.bound(floordiv(k, 4)) == iv(0, kPosInf));
  CHECK(nn.bound(floormod(k, 4)) == iv(0, 3));
  nn.bind(n, 0, kPosInf - 1);
  CHECK(nn.bound(n * 4).hi == kPosInf);  // overflow saturates to +inf
  CHECK(nn.bound(n * -4).lo == kNegInf);
}

TEST_CASE("analyzer: simplify with bounds") {
  SymExpr n = SymExpr::var("n"), i = SymExpr::var("i"), j = SymExpr::var("j"), m = SymExpr::var("m");
  Analyzer an;
  an.bind(n, 1, 4096);
  an.bind(i, 0, 7);
  an.bind(j, 0, 1);
  CHECK(an.simplify(min(n, 4096)) == n);
  CHECK(an.simplify(max(n, 4096)) == SymExpr(4096));
  CHECK(an.simplify(min(n, 1)) == SymExpr(1));
  CHECK(an.simplify(min(n, 100)) == min(n, 100));  // not decidable
  CHECK(an.simplify(floordiv(i, 8)) == SymExpr(0));
  CHECK(an.simplify(floormod(i, 8)) == i);
  CHECK(an.simplify(floormod(i + 8, 8)) == i);
  CHECK(an.simplify(floormod(i, 4)) == floormod(i, 4));
  CHECK(an.simplify(floordiv(i + 16, 8)) == SymExpr(2));
  CHECK(an.simplify(floordiv(n * 8 + i, 8)) == n);
  CHECK(an.simplify(floordiv(i * 2 + j, 16)) == SymExpr(0));
  CHECK(an.simplify(floormod(n * 16 + i * 2 + j, 16)) == i * 2 + j);
  CHECK(an.simplify(floormod(7 - i, 8)) == 7 - i);  // via the (-c, 0] remainder
  CHECK(an.simplify(floordiv(7 - i, 8)) == SymExpr(0));
  CHECK(an.simplify(min(floordiv(i, 8) + n, n + 1)) == n);  // recursive
  CHECK(an.simplify(floormod(i, n + 8)) == i);              // bounded divisor
  CHECK(an.simplify(floordiv(i, n + 8)) == SymExpr(0));
  CHECK(an.simplify(n - floordiv(n, 4) * 4) == floormod(n, 4));
  // A U-Net's pad: width // 2 - (width // 4) * 2, the divisor split.
  CHECK(an.simplify(floordiv(n, 2) - floordiv(n, 4) * 2) == floormod(floordiv(n, 2), 2));
  CHECK(an.prove_less_equal(0, floordiv(n, 2) - floordiv(n, 4) * 2) == Tri::Yes);
  CHECK(an.simplify(floordiv(m, 4) * 4 + floormod(m, 4)) == m);
  CHECK(an.simplify(m * 2) == m * 2);
}

TEST_CASE("analyzer: proofs") {
  SymExpr n = SymExpr::var("n"), m = SymExpr::var("m");
  Analyzer an;
  CHECK(an.prove_equal(n, m) == Tri::Unknown);  // never No for free variables
  CHECK(an.prove_not_equal(n, m) == Tri::Unknown);
  CHECK(an.prove_equal(n + 1, n) == Tri::No);
  CHECK(an.prove_not_equal(n + 1, n) == Tri::Yes);
  CHECK(an.prove_equal(n * 4, 4 * n) == Tri::Yes);
  CHECK(an.prove_equal((n + 1) * (n - 1), n * n - 1) == Tri::Yes);
  CHECK(an.prove_equal(floordiv(n * 4 + 3, 4), n) == Tri::Yes);
  CHECK(an.can_prove_equal(floordiv(n * 768, 12), n * 64));
  CHECK(an.prove_less_equal(n, n * 2) == Tri::Yes);  // n >= 0
  CHECK(an.can_prove_less_equal(floordiv(n, 4) * 4, n));
  CHECK(an.can_prove_less_equal(n, floordiv(n + 3, 4) * 4));
  CHECK(an.prove_less_equal(n, m) == Tri::Unknown);
  CHECK(an.prove_less(n, n + 1) == Tri::Yes);
  CHECK(an.prove_less(n + 1, n) == Tri::No);
  CHECK(an.prove_less(n, n) == Tri::No);
  CHECK(an.prove_less_equal(n + 1, n) == Tri::No);
  // min and max taken apart where ranges lose them (s - min(s, 512) has no
  // lower bound as a range).
  CHECK(an.prove_less_equal(min(n, 512), n) == Tri::Yes);
  CHECK(an.prove_less_equal(min(n, m), m + 1) == Tri::Yes);
  CHECK(an.prove_less_equal(n, max(n, m)) == Tri::Yes);
  CHECK(an.prove_less_equal(min(n, 4), min(n, 8)) == Tri::Yes);
  CHECK(an.prove_less_equal(max(n, 4), n) == Tri::Unknown);
  CHECK(an.prove_less_equal(n, min(n, 512)) == Tri::Unknown);
  CHECK(an.prove_equal(n, SymExpr(-1)) == Tri::No);  // n >= 0
  Analyzer un(Analyzer::Assume::Unbounded);
  CHECK(un.prove_less_equal(n, n * 2) == Tri::Unknown);
  CHECK(un.prove_equal(n, SymExpr(-1)) == Tri::Unknown);
  CHECK(un.prove_equal(n + 1, n) == Tri::No);
  Analyzer fixed;
  fixed.bind(n, 3, 3);
  CHECK(fixed.prove_equal(n, 3) == Tri::Yes);
  CHECK(fixed.simplify(n * 2 + 1) == SymExpr(7));
  fixed.bind(m, 1, 10);
  CHECK(fixed.prove_equal(m, 0) == Tri::No);
  CHECK(fixed.prove_less(m, 11) == Tri::Yes);
  CHECK(fixed.prove_less_equal(m, 5) == Tri::Unknown);
}

TEST_CASE("analyzer: divisibility") {
  SymExpr n = SymExpr::var("n"), m = SymExpr::var("m");
  Analyzer an;
  CHECK(an.prove_divisible(n * 4, 2) == Tri::Yes);
  CHECK(an.prove_divisible(n * 4 + 8, -4) == Tri::Yes);
  CHECK(an.prove_divisible(n * 2 + 1, 2) == Tri::No);
  CHECK(an.prove_divisible(n, 2) == Tri::Unknown);
  CHECK(an.prove_divisible(n * 6, 4) == Tri::Unknown);
  CHECK(an.prove_divisible(SymExpr(12), 4) == Tri::Yes);
  CHECK(an.prove_divisible(SymExpr(13), 4) == Tri::No);
  CHECK(an.prove_divisible(n * m * 4, m) == Tri::Yes);
  CHECK(an.prove_divisible(n * m * 4, m * 2) == Tri::Yes);
  CHECK(an.prove_divisible(n * m + 1, m) == Tri::Unknown);
  CHECK(an.prove_divisible(n, SymExpr(1)) == Tri::Yes);
  CHECK(an.prove_divisible(n, 0) == Tri::Unknown);
  Analyzer small;
  small.bind(n, 1, 3);
  small.bind(m, 4, 10);
  CHECK(small.prove_divisible(n, m) == Tri::No);  // 0 < n < m
}

TEST_CASE("analyzer: random expressions: bounds and simplify are sound") {
  std::mt19937 rng(99);
  std::vector<SymExpr> vars = {SymExpr::var("a"), SymExpr::var("b"), SymExpr::var("c")};
  int out_of_bound = 0, changed_value = 0, wrong_proof = 0, checked = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    Analyzer an(iter % 2 ? Analyzer::Assume::Unbounded : Analyzer::Assume::NonNegative);
    std::vector<std::pair<int64_t, int64_t>> ranges;
    for (const SymExpr& v : vars) {
      int64_t lo = std::uniform_int_distribution<int64_t>(iter % 2 ? -6 : 0, 4)(rng);
      int64_t hi = lo + std::uniform_int_distribution<int64_t>(0, 9)(rng);
      an.bind(v, lo, hi);
      ranges.push_back({lo, hi});
    }
    SymExpr e = random_expr(rng, vars, 3), f = random_expr(rng, vars, 2);
    SymExpr s = an.simplify(e);
    Interval be = an.bound(e);
    Tri le = an.prove_less_equal(e, f), eq = an.prove_equal(e, f);
    for (int k = 0; k < 8; ++k) {
      SymMap<int64_t> env;
      for (size_t i = 0; i < vars.size(); ++i)
        env[vars[i]] = std::uniform_int_distribution<int64_t>(ranges[i].first, ranges[i].second)(rng);
      auto ve = evaluate(e, env), vf = evaluate(f, env);
      if (!ve) continue;
      ++checked;
      if (!contains(be, *ve)) {
        ++out_of_bound;
        MESSAGE("bound of ", e, " misses ", *ve);
      }
      auto vs = evaluate(s, env);
      if (!vs || *vs != *ve) {
        ++changed_value;
        MESSAGE("simplify(", e, ") = ", s, " changes the value");
      }
      if (!vf) continue;
      if ((le == Tri::Yes && !(*ve <= *vf)) || (le == Tri::No && *ve <= *vf)) ++wrong_proof;
      if ((eq == Tri::Yes && *ve != *vf) || (eq == Tri::No && *ve == *vf)) ++wrong_proof;
    }
  }
  CHECK(checked > 5000);
  CHECK(out_of_bound == 0);
  CHECK(changed_value == 0);
  CHECK(wrong_proof == 0);
}

TEST_CASE("analyzer: random expressions under symbolic loop bounds: simplify is sound") {
  // Sizes a, b and loop variables c < a * b, d < a: the divisions by
  // symbolic dims that flattened indices produce.
  std::mt19937 rng(7);
  SymExpr a = SymExpr::var("a"), b = SymExpr::var("b"), c = SymExpr::var("c"), d = SymExpr::var("d");
  std::vector<SymExpr> vars = {a, b, c, d, a * b, c * SymExpr(3) + d};
  int changed_value = 0, checked = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    Analyzer an;
    an.bind(a, 1, 7);
    an.bind(b, 1, 5);
    an.bind_below(c, a * b);
    an.bind_below(d, a);
    SymExpr e = random_expr(rng, vars, 3);
    SymExpr s = an.simplify(e);
    for (int k = 0; k < 8; ++k) {
      SymMap<int64_t> env;
      int64_t va = std::uniform_int_distribution<int64_t>(1, 7)(rng), vb = std::uniform_int_distribution<int64_t>(1, 5)(rng);
      env[a] = va, env[b] = vb;
      env[c] = std::uniform_int_distribution<int64_t>(0, va * vb - 1)(rng);
      env[d] = std::uniform_int_distribution<int64_t>(0, va - 1)(rng);
      auto ve = evaluate(e, env);
      if (!ve) continue;
      ++checked;
      auto vs = evaluate(s, env);
      if (!vs || *vs != *ve) {
        ++changed_value;
        MESSAGE("simplify(", e, ") = ", s, " changes the value");
      }
    }
  }
  CHECK(checked > 10000);
  CHECK(changed_value == 0);
}

TEST_CASE("analyzer: symbolic loop bounds") {
  SymExpr b = SymExpr::var("b"), s = SymExpr::var("s"), i = SymExpr::var("i"), j = SymExpr::var("j");
  Analyzer an;
  an.bind_below(i, s);
  CHECK(an.var_below(i) == s);
  CHECK_FALSE(an.var_below(j).defined());
  CHECK(an.simplify(floordiv(b * s + i, s)) == b);
  CHECK(an.simplify(floormod(b * s + i, s)) == i);
  CHECK(an.simplify(floordiv(i, s)) == SymExpr(0));
  CHECK(an.simplify(floormod(i, s)) == i);
  CHECK(an.simplify(floordiv(b * s * 3 + i, s)) == b * 3);
  // The multiples of s leave the division whatever the rest is; the rest
  // stays divided when it may reach s (j has no bound below s; i + 1 may
  // be s).
  CHECK(an.simplify(floordiv(b * s + j, s)) == b + floordiv(j, s));
  CHECK(an.simplify(floordiv(b * s + i + 1, s)) == b + floordiv(i + SymExpr(1), s));
  CHECK(an.simplify(floormod(b * s + j, s)) == floormod(j, s));
}

TEST_CASE("analyzer: divisors with a constant part") {
  // A flattened index over a dim of s - 1, written by the polynomial
  // product as n*s + i - n (a reshape of a conv's output over samples // 5
  // - 1 positions), with n a fused (batch, channel) index: it divides back
  // into n and i.
  SymExpr s = SymExpr::var("s"), i = SymExpr::var("i"), k = SymExpr::var("k"), j = SymExpr::var("j");
  Analyzer an;
  an.bind(s, 2, 1 << 20);
  an.bind_below(i, s - SymExpr(1));
  an.bind(k, 0, 1000);
  SymExpr n = floordiv(k, SymExpr(32)) * SymExpr(32) + floormod(k, SymExpr(32));  // k, as the fused loop writes it
  SymExpr flat = n * s + i - n;
  CHECK(an.simplify(floordiv(flat, s - SymExpr(1))) == k);
  CHECK(an.simplify(floormod(flat, s - SymExpr(1))) == i);
  // Over a dim of 2*s + 3: x = q*(2s + 3) + r for the terms of 2s.
  CHECK(an.simplify(floordiv(k * s * SymExpr(2) + k * SymExpr(3) + i, s * SymExpr(2) + SymExpr(3))) == k);
  // Not below: j has no bound, so its part stays divided.
  CHECK(an.simplify(floordiv(k * s - k + j, s - SymExpr(1))) == k + floordiv(j, s - SymExpr(1)));
}

TEST_CASE("analyzer: divisions by symbolic dims from symbolic bounds") {
  // A flattened (h, w) position t over a loop of 2*h*w*10 elements read as
  // (t // w) // h, (t // w) % h and t % w: what a reshape of a transpose
  // with dynamic dims composes into.
  SymExpr h = SymExpr::var("h"), w = SymExpr::var("w"), n = SymExpr::var("n"), i1 = SymExpr::var("i1"),
          i2 = SymExpr::var("i2");
  Analyzer an;
  an.bind(h, 1, 1 << 20);
  an.bind(w, 1, 1 << 20);
  an.bind_below(i1, h * w * SymExpr(2));
  an.bind(i2, 0, 9);
  SymExpr t = floordiv(i1 * SymExpr(10) + i2, SymExpr(20));  // < h * w
  CHECK(an.simplify(floordiv(floordiv(n * h * w + t, w), h)) == n);
  CHECK(an.simplify(floormod(floordiv(n * h * w + t, w), h)) == an.simplify(floordiv(t, w)));
  CHECK(an.simplify(floormod(n * h * w + t, w)) == floormod(an.simplify(t), w));
  CHECK(an.simplify(floordiv(t, h * w)) == SymExpr(0));
  CHECK(an.simplify(floormod(t, h * w)) == an.simplify(t));
  CHECK(an.simplify(t) == floordiv(i1, SymExpr(2)));  // i1*10 + i2 with i2 < 10 over 20
  // Constants against a divisor of at least 1.
  CHECK(an.simplify(floordiv(SymExpr(-1), w)) == SymExpr(-1));
  CHECK(an.simplify(floordiv(SymExpr(0), w)) == SymExpr(0));
  // Not below: i1 may reach h * w.
  CHECK(an.simplify(floordiv(i1, h * w)) == floordiv(i1, h * w));
}

TEST_CASE("analyzer: divisions of a scaled index by a common factor") {
  // A (h, w, 12) flat index read 4 at a time, f = i*4 + k with k < 4: its
  // channel f % 12 is 4*(i % 3) + k, its position f // 12 is i // 3, and
  // over a symbolic row of w*12 the same: no division per element.
  SymExpr w = SymExpr::var("w"), i = SymExpr::var("i"), k = SymExpr::var("k");
  Analyzer an;
  an.bind(w, 1, 1 << 20);
  an.bind(i, 0, 1 << 30);
  an.bind(k, 0, 3);
  SymExpr f = i * SymExpr(4) + k;
  CHECK(an.simplify(floormod(f, SymExpr(12))) == floormod(i, SymExpr(3)) * SymExpr(4) + k);
  CHECK(an.simplify(floordiv(f, SymExpr(12))) == floordiv(i, SymExpr(3)));
  CHECK(an.simplify(floordiv(f, w * SymExpr(12))) == floordiv(i, w * SymExpr(3)));
  CHECK(an.simplify(floormod(f, w * SymExpr(12))) == floormod(i, w * SymExpr(3)) * SymExpr(4) + k);
  // With a constant part inside one group: 4*i + 2 + k for k < 2.
  Analyzer an2 = an;
  an2.bind(k, 0, 1);
  CHECK(an2.simplify(floordiv(f + SymExpr(2), SymExpr(12))) == floordiv(i, SymExpr(3)));
  // k may reach 4: no common factor splits it.
  Analyzer an3;
  an3.bind(i, 0, 1 << 30);
  an3.bind(k, 0, 4);
  CHECK(an3.simplify(floordiv(f, SymExpr(12))) == floordiv(f, SymExpr(12)));
  // Checked by value over a range, the symbolic divisor included.
  for (int64_t wv : {1, 2, 5})
    for (int64_t iv = 0; iv < 40; ++iv)
      for (int64_t kv = 0; kv < 4; ++kv) {
        SymMap<int64_t> env{{w, wv}, {i, iv}, {k, kv}};
        for (SymExpr d : {SymExpr(12), w * SymExpr(12), SymExpr(8), w * SymExpr(6)}) {
          CHECK(evaluate(an.simplify(floordiv(f, d)), env) == evaluate(floordiv(f, d), env));
          CHECK(evaluate(an.simplify(floormod(f, d)), env) == evaluate(floormod(f, d), env));
        }
      }
}
