// Proofs about symbolic integers under variable bounds (see ir/analyzer.h).
//
// Bounds are computed by interval arithmetic over the canonical form. The
// arithmetic runs on __int128 with the infinities represented by +-2^63:
// every finite int64 endpoint is strictly inside, products of two endpoints
// fit, and results are clamped back so kNegInf/kPosInf mean "unbounded".
//
// simplify() rebuilds an expression bottom-up through the canonical
// constructors and then applies rewrites that need bounds:
//   floordiv(x, c) -> q        when x lies in [q*c, q*c + c)
//   floordiv(x, c) -> Q + q    when x = c*Q + R and R lies in [q*c, q*c + c)
//   floormod(x, c) -> x - q*c  when x lies in [q*c, q*c + c) (0 <= x < c: x)
//   floormod(x, c) -> R - q*c  when x = c*Q + R and R lies in [q*c, q*c + c)
//   floormod(x, y) -> x        when 0 <= x < lower bound of y
//   floordiv(x, g*m) -> floordiv(Q, m), floormod(x, g*m) -> g*floormod(Q, m) + R
//                              when x = g*Q + R, R in [0, g), g a term's
//                              coefficient's common divisor with the
//                              divisor's constant factor (m may be c*Y)
//   min(a, b) -> a             when a - b <= 0 (max, and the other side, alike)
//   e -> c                     when the bounds of e are the single point c
//   x - c*floordiv(x, c) -> floormod(x, c)   inside a sum, when it gets shorter
// until nothing changes.
#include "ir/analyzer.h"

#include <algorithm>
#include <numeric>

#include "ir/error.h"

namespace relax {
namespace {

// ---------------------------------------------------------------------------
// Extended integers: int64 values plus -inf and +inf.

using Wide = __int128;
constexpr Wide kInf = Wide(1) << 63;

bool is_inf(Wide v) { return v >= kInf || v <= -kInf; }

// Values at or beyond the int64 range become infinite.
Wide clamp(Wide v) {
  if (v >= Wide(Interval::kPosInf)) return kInf;
  if (v <= Wide(Interval::kNegInf)) return -kInf;
  return v;
}

// Lower endpoints: -inf wins. Upper endpoints: +inf wins.
Wide add_lo(Wide a, Wide b) {
  if (a == -kInf || b == -kInf) return -kInf;
  if (a == kInf || b == kInf) return kInf;
  return clamp(a + b);
}

Wide add_hi(Wide a, Wide b) {
  if (a == kInf || b == kInf) return kInf;
  if (a == -kInf || b == -kInf) return -kInf;
  return clamp(a + b);
}

// inf * 0 is 0 (an endpoint times an exact zero); |inf * x| >= 2^63 clamps.
Wide mul_ext(Wide a, Wide b) {
  if (a == 0 || b == 0) return 0;
  return clamp(a * b);
}

Wide floor_div(Wide a, Wide b) {
  Wide q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) --q;
  return q;
}

// floor(a / b) for b != 0; a finite value over an infinite one is its limit
// (0 or -1), which plain floor division of +-2^63 already gives.
Wide div_ext(Wide a, Wide b) {
  if (is_inf(a)) return (a > 0) == (b > 0) ? kInf : -kInf;
  return clamp(floor_div(a, b));
}

// ---------------------------------------------------------------------------
// Ranges: inclusive intervals of extended integers.

struct Range {
  Wide lo, hi;
  bool finite() const { return !is_inf(lo) && !is_inf(hi); }
};

const Range kAll{-kInf, kInf};

Range to_range(Interval i) {
  return {i.lo == Interval::kNegInf ? -kInf : Wide(i.lo), i.hi == Interval::kPosInf ? kInf : Wide(i.hi)};
}

int64_t to_int64(Wide v) {
  v = clamp(v);
  if (v == kInf) return Interval::kPosInf;
  if (v == -kInf) return Interval::kNegInf;
  return int64_t(v);
}

Interval to_interval(Range r) { return {to_int64(r.lo), to_int64(r.hi)}; }

Range neg(Range a) { return {-a.hi, -a.lo}; }
Range join(Range a, Range b) { return {std::min(a.lo, b.lo), std::max(a.hi, b.hi)}; }
Range add(Range a, Range b) { return {add_lo(a.lo, b.lo), add_hi(a.hi, b.hi)}; }

Range mul(Range a, Range b) {
  Wide c[4] = {mul_ext(a.lo, b.lo), mul_ext(a.lo, b.hi), mul_ext(a.hi, b.lo), mul_ext(a.hi, b.hi)};
  return {*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
}

// x^k; even powers are non-negative.
Range power(Range x, size_t k) {
  Range r = x;
  for (size_t i = 1; i < k; ++i) r = mul(r, x);
  if (k % 2 == 0) r.lo = std::max(r.lo, Wide(0));
  return r;
}

// floor(a / b) for b >= 1. It grows with a; in b it falls when a >= 0 and
// rises when a < 0, so each extreme sits at a known corner.
Range div_pos(Range a, Range b) {
  return {div_ext(a.lo, a.lo >= 0 ? b.hi : b.lo), div_ext(a.hi, a.hi >= 0 ? b.lo : b.hi)};
}

Range div_range(Range a, Range b) {
  if (b.lo >= 1) return div_pos(a, b);
  if (b.hi <= -1) return div_pos(neg(a), neg(b));  // a // b == (-a) // (-b)
  // b straddles zero: the negative and the positive parts (0 is excluded).
  std::optional<Range> r;
  if (b.lo <= -1) r = div_pos(neg(a), {1, -b.lo});
  if (b.hi >= 1) r = r ? join(*r, div_pos(a, {1, b.hi})) : div_pos(a, {1, b.hi});
  return r ? *r : kAll;
}

// floormod(a, b) for b >= 1: in [0, b - 1], and a itself when 0 <= a < b.
Range mod_pos(Range a, Range b) {
  if (a.finite() && a.lo >= 0 && a.hi < b.lo) return a;
  if (a.finite() && b.lo == b.hi && !is_inf(b.lo)) {
    Wide c = b.lo, q = floor_div(a.lo, c);
    if (floor_div(a.hi, c) == q) return {a.lo - q * c, a.hi - q * c};
  }
  Wide hi = is_inf(b.hi) ? kInf : b.hi - 1;
  if (a.lo >= 0) hi = std::min(hi, a.hi);
  return {0, hi};
}

Range mod_range(Range a, Range b) {
  if (b.lo >= 1) return mod_pos(a, b);
  if (b.hi <= -1) return neg(mod_pos(neg(a), neg(b)));  // a % b == -((-a) % (-b))
  std::optional<Range> r;
  if (b.lo <= -1) r = neg(mod_pos(neg(a), {1, -b.lo}));
  if (b.hi >= 1) r = r ? join(*r, mod_pos(a, {1, b.hi})) : mod_pos(a, {1, b.hi});
  return r ? *r : kAll;
}

Range range_of(const Analyzer& an, const SymExpr& e);

// A product of sorted factors; equal factors are adjacent and become powers.
Range product_range(const Analyzer& an, const std::vector<SymExpr>& factors) {
  Range r{1, 1};
  for (size_t i = 0; i < factors.size();) {
    size_t j = i;
    while (j < factors.size() && factors[j] == factors[i]) ++j;
    r = mul(r, power(range_of(an, factors[i]), j - i));
    i = j;
  }
  return r;
}

Range range_of(const Analyzer& an, const SymExpr& e) {
  const SymNode& n = *e.get();
  switch (n.kind) {
    case SymKind::Const:
      return {n.value, n.value};
    case SymKind::Var:
      return to_range(an.var_bound(e));
    case SymKind::Sum: {
      Range r{n.constant, n.constant};
      for (const SymTerm& t : n.terms) r = add(r, mul(range_of(an, t.term), {t.coeff, t.coeff}));
      return r;
    }
    case SymKind::Mul:
      return product_range(an, n.operands);
    case SymKind::FloorDiv:
      return div_range(range_of(an, n.operands[0]), range_of(an, n.operands[1]));
    case SymKind::FloorMod:
      return mod_range(range_of(an, n.operands[0]), range_of(an, n.operands[1]));
    case SymKind::Min: {
      Range a = range_of(an, n.operands[0]), b = range_of(an, n.operands[1]);
      return {std::min(a.lo, b.lo), std::min(a.hi, b.hi)};
    }
    case SymKind::Max: {
      Range a = range_of(an, n.operands[0]), b = range_of(an, n.operands[1]);
      return {std::max(a.lo, b.lo), std::max(a.hi, b.hi)};
    }
  }
  return kAll;
}

// ---------------------------------------------------------------------------
// Bound-based rewrites.

// x == c*quot + rem. With `upper` false the coefficients of rem lie in
// [0, c) (floor division of each); with `upper` true the term coefficients
// lie in (-c, 0] and the constant in [0, c).
struct Split {
  SymExpr quot, rem;
};

Split split_by(const SymExpr& x, int64_t c, bool upper) {
  int64_t k0 = x.is_const() ? x.const_value() : (x.kind() == SymKind::Sum ? x->constant : 0);
  SymExpr quot = floordiv(SymExpr(k0), SymExpr(c)), rem = floormod(SymExpr(k0), SymExpr(c));
  std::vector<SymTerm> terms;
  if (x.kind() == SymKind::Sum)
    terms = x->terms;
  else if (!x.is_const())
    terms = {{1, x}};
  for (const SymTerm& t : terms) {
    int64_t r = floormod(SymExpr(t.coeff), SymExpr(c)).const_value();
    if (upper && r != 0) r -= c;
    int64_t diff;
    if (__builtin_sub_overflow(t.coeff, r, &diff)) fail("symbolic integer overflow");
    int64_t q = diff / c;  // exact: t.coeff == q*c + r
    quot = quot + SymExpr(q) * t.term;
    rem = rem + SymExpr(r) * t.term;
  }
  return {quot, rem};
}

// The q with r inside [q*c, q*c + c), if there is one.
std::optional<int64_t> period_of(Range r, int64_t c) {
  if (!r.finite()) return std::nullopt;
  Wide q = floor_div(r.lo, c);
  if (floor_div(r.hi, c) != q) return std::nullopt;
  return int64_t(q);
}

// x == g*quot + rem with rem inside [0, g), for a g > 1 that divides c and
// a term's coefficient (the largest such g that works): then
// floordiv(x, c*Y) == floordiv(quot, (c/g)*Y) and floormod(x, c*Y) ==
// g*floormod(quot, (c/g)*Y) + rem for Y >= 0. A reshape's flat index
// (i*4 + k) over (.., 12) with k < 4 divides into i // 3 and k.
struct GcdSplit {
  int64_t g;
  SymExpr quot, rem;
};

// term / y when y is one of term's factors (or term itself): the
// product of the other factors; null otherwise.
SymExpr cofactor(const SymExpr& term, const SymExpr& y) {
  if (term == y) return SymExpr(1);
  if (term.kind() != SymKind::Mul) return SymExpr();
  const auto& fs = term->operands;
  auto it = std::find(fs.begin(), fs.end(), y);
  if (it == fs.end()) return SymExpr();
  SymExpr q(1);
  for (auto f = fs.begin(); f != fs.end(); ++f)
    if (f != it) q = q * *f;
  return q;
}

class Simplifier {
 public:
  explicit Simplifier(const Analyzer& an) : an_(an) {}

  // One bottom-up pass.
  SymExpr pass(const SymExpr& e) const {
    const SymNode& n = *e.get();
    switch (n.kind) {
      case SymKind::Const:
      case SymKind::Var:
        return e;
      case SymKind::Sum: {
        SymExpr acc(n.constant);
        for (const SymTerm& t : n.terms) acc = acc + SymExpr(t.coeff) * pass(t.term);
        return fold(recombine(acc));
      }
      case SymKind::Mul: {
        SymExpr acc(1);
        for (const SymExpr& f : n.operands) acc = acc * pass(f);
        return fold(acc);
      }
      default:
        break;
    }
    SymExpr a = pass(n.operands[0]), b = pass(n.operands[1]);
    switch (n.kind) {
      case SymKind::FloorDiv:
        return rewrite(floordiv(a, b));
      case SymKind::FloorMod:
        return rewrite(floormod(a, b));
      case SymKind::Min:
        return rewrite(min(a, b));
      default:
        return rewrite(max(a, b));
    }
  }

 private:
  Range range(const SymExpr& e) const { return range_of(an_, e); }

  // e -> c when its bounds are the single point c.
  SymExpr fold(const SymExpr& e) const {
    if (e.is_const()) return e;
    Range r = range(e);
    return r.finite() && r.lo == r.hi ? SymExpr(int64_t(r.lo)) : e;
  }

  // x - c*floordiv(x, c) == floormod(x, c) holds for every x; applied to a
  // Sum when it leaves fewer terms. This also turns
  // c*floordiv(x, c) + floormod(x, c) back into x.
  SymExpr recombine(const SymExpr& s) const {
    if (s.kind() != SymKind::Sum) return s;
    try {
      for (const SymTerm& t : s->terms) {
        if (t.term.kind() != SymKind::FloorDiv || !t.term->operands[1].is_const()) continue;
        const SymExpr& x0 = t.term->operands[0];
        int64_t c0 = t.term->operands[1].const_value();
        // floordiv(x, m*c) is floordiv(floordiv(x, m), c): every split of
        // the divisor (x//2 - 2*(x//4) is floormod(x//2, 2), a U-Net's pad).
        for (int64_t c = c0; c > 1; --c) {
          if (c0 % c != 0 || t.coeff % c != 0) continue;
          SymExpr x = c == c0 ? x0 : floordiv(x0, SymExpr(c0 / c));
          SymExpr k(-(t.coeff / c));  // the term is -c*k*floordiv(x, c)
          SymExpr cand = s - SymExpr(t.coeff) * t.term + k * floormod(x, SymExpr(c)) - k * x;
          if (term_count(cand) < term_count(s)) return recombine(cand);
        }
      }
    } catch (const Error&) {
    }
    return s;
  }

  static size_t term_count(const SymExpr& e) {
    if (e.is_const()) return 0;
    return e.kind() == SymKind::Sum ? e->terms.size() : 1;
  }

  // Applies the rule of e's kind. The rules are optional, so one whose
  // arithmetic would overflow just leaves e alone.
  SymExpr rewrite(const SymExpr& e) const {
    try {
      switch (e.kind()) {
        case SymKind::FloorDiv:
          return fold(rewrite_floordiv(e->operands[0], e->operands[1]).value_or(e));
        case SymKind::FloorMod:
          return fold(rewrite_floormod(e->operands[0], e->operands[1]).value_or(e));
        case SymKind::Min:
        case SymKind::Max:
          return fold(rewrite_minmax(e));
        default:
          return fold(e);
      }
    } catch (const Error&) {
      return e;
    }
  }

  // x == y*quot + rem where quot collects the terms of x that have y as a
  // factor (rem: any expression); for y != 0, floordiv(x, y) == quot +
  // floordiv(rem, y) and floormod(x, y) == floormod(rem, y) for every
  // value. Null when no term has the factor. y may have a constant part,
  // y == cy*Y + c0: then the terms with Y as a factor, cy*Y*quot, are
  // y*quot - c0*quot, and rem takes the -c0*quot (a reshape's index
  // n*S + i - n over a dim of S - 1 divides into n and i).
  std::optional<Split> split_multiples(const SymExpr& x, const SymExpr& y) const {
    if (x.is_const()) return std::nullopt;
    // y == cy * Y + c0 for constants cy >= 1, c0 and Y a variable or a product.
    int64_t cy = 1, c0 = 0;
    SymExpr Y = y;
    if (y.kind() == SymKind::Sum) {
      if (y->terms.size() != 1 || y->terms[0].coeff < 1) return std::nullopt;
      cy = y->terms[0].coeff, Y = y->terms[0].term, c0 = y->constant;
    }
    std::vector<SymTerm> terms{{1, x}};
    int64_t k0 = 0;
    if (x.kind() == SymKind::Sum) terms = x->terms, k0 = x->constant;
    SymExpr quot(0), rem(k0);
    bool any = false;
    for (const SymTerm& t : terms) {
      SymExpr q;
      if (t.coeff % cy != 0) {
      } else if (t.term == Y || Y.kind() != SymKind::Mul) {
        q = cofactor(t.term, Y);
      } else if (t.term.kind() == SymKind::Mul) {
        // Y a product: its factors all among the term's (a sub-multiset).
        std::vector<SymExpr> rest = t.term->operands;
        bool all = true;
        for (const SymExpr& f : Y->operands) {
          auto it = std::find(rest.begin(), rest.end(), f);
          if (it == rest.end()) {
            all = false;
            break;
          }
          rest.erase(it);
        }
        if (all) {
          q = SymExpr(1);
          for (const SymExpr& f : rest) q = q * f;
        }
      }
      if (q.defined()) {
        quot = quot + SymExpr(t.coeff / cy) * q;
        any = true;
      } else {
        rem = rem + SymExpr(t.coeff) * t.term;
      }
    }
    if (!any) return std::nullopt;
    if (c0 != 0) quot = recombine(quot), rem = recombine(rem - SymExpr(c0) * quot);
    return Split{quot, rem};
  }

  // A symbolic inclusive upper bound of e, for an e whose parts are all
  // non-negative (loop variables bounded by a symbolic extent, other
  // variables standing for themselves, constants, products, positive
  // multiples, divisions): null when unknown.
  SymExpr upper(const SymExpr& e) const {
    if (range(e).lo < 0) return SymExpr();
    switch (e.kind()) {
      case SymKind::Const:
        return e;
      case SymKind::Var: {  // a loop variable: its extent - 1; any other: itself
        if (SymExpr b = an_.var_below(e); b.defined()) return b - SymExpr(1);
        return e;
      }
      case SymKind::Sum: {
        SymExpr acc(e->constant);
        for (const SymTerm& t : e->terms) {
          if (t.coeff < 0) return SymExpr();
          SymExpr u = upper(t.term);
          if (!u.defined()) return SymExpr();
          acc = acc + SymExpr(t.coeff) * u;
        }
        return acc;
      }
      case SymKind::Mul: {
        SymExpr acc(1);
        for (const SymExpr& f : e->operands) {
          SymExpr u = upper(f);
          if (!u.defined()) return SymExpr();
          acc = acc * u;
        }
        return acc;
      }
      // (A divisor of 0 leaves e undefined, and then so is what uses it.)
      case SymKind::FloorDiv: {
        const SymExpr& d = e->operands[1];
        if (range(d).lo < 0) return SymExpr();
        SymExpr u = upper(e->operands[0]);
        return u.defined() ? rewrite(floordiv(u, d)) : SymExpr();
      }
      case SymKind::FloorMod: {
        const SymExpr& d = e->operands[1];
        return range(d).lo >= 0 ? d - SymExpr(1) : SymExpr();
      }
      default:
        return SymExpr();
    }
  }

  // 0 <= x < y, y symbolic, proven from symbolic bounds (which then prove y >= 1).
  bool below(const SymExpr& x, const SymExpr& y) const {
    if (range(x).lo < 0) return false;
    SymExpr u = upper(x);
    return u.defined() && range(y - u).lo >= 1;
  }

  std::optional<GcdSplit> split_gcd(const SymExpr& x, int64_t c) const {
    if (x.kind() != SymKind::Sum) return std::nullopt;
    std::vector<int64_t> gs;
    for (const SymTerm& t : x->terms) gs.push_back(std::gcd(t.coeff < 0 ? -t.coeff : t.coeff, c));
    std::sort(gs.rbegin(), gs.rend());
    for (int64_t g : gs) {
      if (g <= 1 || g >= c) continue;
      Split s = split_by(x, g, false);
      if (auto q = period_of(range(s.rem), g))
        return GcdSplit{g, s.quot + SymExpr(*q), s.rem - SymExpr(*q) * SymExpr(g)};
    }
    return std::nullopt;
  }

  // y == c*Y with a constant c > 1 and Y >= 0: c and Y; nullopt otherwise.
  std::optional<std::pair<int64_t, SymExpr>> scaled(const SymExpr& y) const {
    if (y.is_const() || y.kind() != SymKind::Sum || y->constant != 0 || y->terms.size() != 1 || y->terms[0].coeff < 2)
      return std::nullopt;
    if (range(y->terms[0].term).lo < 0) return std::nullopt;
    return std::make_pair(y->terms[0].coeff, y->terms[0].term);
  }

  std::optional<SymExpr> rewrite_floordiv(const SymExpr& x, const SymExpr& y) const {
    if (!y.is_const()) {
      if (auto s = split_multiples(x, y)) return s->quot + rewrite(floordiv(s->rem, y));
      Range ry = range(y);
      if (x.is_const() && ry.lo >= 1) {  // a constant against a divisor of at least ry.lo
        int64_t c = x.const_value();
        if (c >= 0 && c < ry.lo) return SymExpr(0);
        if (c < 0 && -c <= ry.lo) return SymExpr(-1);
        return std::nullopt;
      }
      // floordiv(floordiv(a, b), y) == floordiv(a, b*y) for b, y >= 1 (and
      // for b, y >= 0: when either is 0 both sides divide by zero).
      if (x.kind() == SymKind::FloorDiv && range(x->operands[1]).lo >= 0 && ry.lo >= 0)
        return rewrite(floordiv(x->operands[0], x->operands[1] * y));
      if (below(x, y)) return SymExpr(0);
      if (auto cY = scaled(y))
        if (auto s = split_gcd(x, cY->first))
          return rewrite(floordiv(s->quot, SymExpr(cY->first / s->g) * cY->second));
      return std::nullopt;
    }
    if (y.const_value() <= 0) return std::nullopt;
    int64_t c = y.const_value();
    if (auto q = period_of(range(x), c)) return SymExpr(*q);
    for (bool upper : {false, true}) {
      Split s = split_by(x, c, upper);
      if (auto q = period_of(range(s.rem), c)) return s.quot + SymExpr(*q);
    }
    if (auto s = split_gcd(x, c)) return rewrite(floordiv(s->quot, SymExpr(c / s->g)));
    return std::nullopt;
  }

  std::optional<SymExpr> rewrite_floormod(const SymExpr& x, const SymExpr& y) const {
    if (!y.is_const()) {
      if (auto s = split_multiples(x, y)) return rewrite(floormod(s->rem, y));
      Range rx = range(x), ry = range(y);
      if (ry.lo >= 1 && rx.lo >= 0 && rx.hi < ry.lo) return x;
      if (below(x, y)) return x;
      if (auto cY = scaled(y))
        if (auto s = split_gcd(x, cY->first))
          return SymExpr(s->g) * rewrite(floormod(s->quot, SymExpr(cY->first / s->g) * cY->second)) + s->rem;
      return std::nullopt;
    }
    int64_t c = y.const_value();
    if (c <= 0) return std::nullopt;
    if (auto q = period_of(range(x), c)) return x - SymExpr(*q) * SymExpr(c);
    for (bool upper : {false, true}) {
      Split s = split_by(x, c, upper);
      if (auto q = period_of(range(s.rem), c)) return s.rem - SymExpr(*q) * SymExpr(c);
    }
    if (auto s = split_gcd(x, c)) return SymExpr(s->g) * rewrite(floormod(s->quot, SymExpr(c / s->g))) + s->rem;
    return std::nullopt;
  }

  // min(a, b) is a when a <= b everywhere and b when a >= b; max alike.
  SymExpr rewrite_minmax(const SymExpr& e) const {
    const SymExpr& a = e->operands[0];
    const SymExpr& b = e->operands[1];
    Range d = range(a - b);
    bool is_min = e.kind() == SymKind::Min;
    if (d.hi <= 0) return is_min ? a : b;
    if (d.lo >= 0) return is_min ? b : a;
    return e;
  }

  const Analyzer& an_;
};

// Yes when the range is inside [lo, +inf), No when inside (-inf, lo).
Tri at_least(Range r, Wide lo) {
  if (r.lo >= lo) return Tri::Yes;
  if (r.hi < lo) return Tri::No;
  return Tri::Unknown;
}

Tri negate(Tri t) { return t == Tri::Yes ? Tri::No : (t == Tri::No ? Tri::Yes : Tri::Unknown); }

}  // namespace

// ---------------------------------------------------------------------------
// Analyzer.

Analyzer::Analyzer(Assume default_bound) : default_(default_bound) {}

void Analyzer::bind(const SymExpr& var, int64_t lo, int64_t hi) { bind(var, Interval{lo, hi}); }

// Intersects with what is known, including the default assumption: under
// Assume::NonNegative a bound below 0 does not widen a variable.
void Analyzer::bind(const SymExpr& var, Interval range) {
  RELAX_CHECK(var.is_var(), "Analyzer::bind needs a variable, got ", var);
  Interval cur = var_bound(var);
  bounds_[var] = Interval{std::max(cur.lo, range.lo), std::min(cur.hi, range.hi)};
}

void Analyzer::bind_below(const SymExpr& var, const SymExpr& extent) {
  RELAX_CHECK(var.is_var(), "Analyzer::bind_below needs a variable, got ", var);
  bind(var, Interval{0, Interval::kPosInf});
  below_[var] = extent;
}

SymExpr Analyzer::var_below(const SymExpr& var) const {
  auto it = below_.find(var);
  return it == below_.end() ? SymExpr() : it->second;
}

Interval Analyzer::var_bound(const SymExpr& var) const {
  auto it = bounds_.find(var);
  if (it != bounds_.end()) return it->second;
  if (default_ == Assume::NonNegative) return Interval{0, Interval::kPosInf};
  return Interval{};
}

Interval Analyzer::bound(const SymExpr& e) const {
  RELAX_CHECK(e.defined(), "Analyzer::bound of a null SymExpr");
  return to_interval(range_of(*this, e));
}

SymExpr Analyzer::simplify(const SymExpr& e) const {
  RELAX_CHECK(e.defined(), "Analyzer::simplify of a null SymExpr");
  Simplifier s(*this);
  SymExpr cur = e;
  for (int i = 0; i < 8; ++i) {  // a rewrite can expose another one; stop at a fixpoint
    SymExpr next = s.pass(cur);
    if (next == cur) break;
    cur = next;
  }
  return cur;
}

Tri Analyzer::prove_equal(const SymExpr& a, const SymExpr& b) const {
  if (a == b) return Tri::Yes;
  SymExpr d = simplify(a - b);
  if (d.is_const()) return d.const_value() == 0 ? Tri::Yes : Tri::No;
  Range r = range_of(*this, d);
  if (r.lo == 0 && r.hi == 0) return Tri::Yes;
  if (r.lo > 0 || r.hi < 0) return Tri::No;
  return Tri::Unknown;
}

Tri Analyzer::prove_not_equal(const SymExpr& a, const SymExpr& b) const { return negate(prove_equal(a, b)); }

Tri Analyzer::prove_less_equal(const SymExpr& a, const SymExpr& b) const {
  Tri by_range = at_least(range_of(*this, simplify(b - a)), 0);
  if (by_range != Tri::Unknown) return by_range;
  // Ranges lose what min and max share with the other side (`min(s, 512)
  // <= s` has the range of s - min(s, 512) unbounded below): take them apart.
  // A min on the left (a max on the right) needs one operand to hold; a
  // max on the left (a min on the right) needs both.
  auto operands = [](const SymExpr& e) { return e->operands; };
  if (a.kind() == SymKind::Min) {
    for (const SymExpr& x : operands(a))
      if (prove_less_equal(x, b) == Tri::Yes) return Tri::Yes;
  } else if (a.kind() == SymKind::Max) {
    std::vector<SymExpr> xs = operands(a);
    if (prove_less_equal(xs[0], b) == Tri::Yes && prove_less_equal(xs[1], b) == Tri::Yes) return Tri::Yes;
  }
  if (b.kind() == SymKind::Max) {
    for (const SymExpr& y : operands(b))
      if (prove_less_equal(a, y) == Tri::Yes) return Tri::Yes;
  } else if (b.kind() == SymKind::Min) {
    std::vector<SymExpr> ys = operands(b);
    if (prove_less_equal(a, ys[0]) == Tri::Yes && prove_less_equal(a, ys[1]) == Tri::Yes) return Tri::Yes;
  }
  return Tri::Unknown;
}

Tri Analyzer::prove_less(const SymExpr& a, const SymExpr& b) const {
  return at_least(range_of(*this, simplify(b - a)), 1);
}

Tri Analyzer::prove_divisible(const SymExpr& a, int64_t divisor) const {
  if (divisor == 0) return prove_equal(a, SymExpr(0));
  if (divisor == Interval::kNegInf) return Tri::Unknown;
  return prove_divisible(a, SymExpr(divisor < 0 ? -divisor : divisor));
}

// a is a multiple of d exactly when floormod(a, d) == 0.
Tri Analyzer::prove_divisible(const SymExpr& a, const SymExpr& divisor) const {
  if (divisor.is_const(0)) return prove_equal(a, SymExpr(0));
  SymExpr r = simplify(floormod(a, divisor));
  if (r.is_const()) return r.const_value() == 0 ? Tri::Yes : Tri::No;
  Range rr = range_of(*this, r);
  if (rr.lo > 0 || rr.hi < 0) return Tri::No;
  return Tri::Unknown;
}

}  // namespace relax
