// Proofs about symbolic integers under variable bounds.
//
// The Analyzer answers questions with three values: Yes (proven), No
// (proven false) and Unknown. It never answers No for what merely cannot be
// proven: `n == m` for free variables n and m is Unknown.
//
// Bounds: every variable has an inclusive interval. Unless told otherwise a
// variable is assumed to lie in [0, +inf), because in this IR symbolic
// integers denote sizes, counts and indices; construct with
// Assume::Unbounded to drop that.
#pragma once

#include <cstdint>
#include <limits>

#include "ir/sym.h"

namespace relax {

enum class Tri : uint8_t { No, Yes, Unknown };

struct Interval {
  static constexpr int64_t kNegInf = std::numeric_limits<int64_t>::min();
  static constexpr int64_t kPosInf = std::numeric_limits<int64_t>::max();
  int64_t lo = kNegInf;  // kNegInf: unbounded below
  int64_t hi = kPosInf;  // kPosInf: unbounded above
  bool is_const() const { return lo == hi && lo != kNegInf && hi != kPosInf; }
  bool operator==(const Interval&) const = default;
};

class Analyzer {
 public:
  enum class Assume { NonNegative, Unbounded };
  explicit Analyzer(Assume default_bound = Assume::NonNegative);

  // Records lo <= var <= hi (intersected with what is already known).
  void bind(const SymExpr& var, int64_t lo, int64_t hi);
  void bind(const SymExpr& var, Interval range);
  Interval var_bound(const SymExpr& var) const;
  // Records 0 <= var < `extent`, a symbolic bound (a loop variable over a
  // symbolic extent); floordiv(q*extent + var, extent) -> q and floormod
  // likewise -> var use it.
  void bind_below(const SymExpr& var, const SymExpr& extent);
  // The symbolic exclusive upper bound of `var`, or null.
  SymExpr var_below(const SymExpr& var) const;

  // An interval holding every value `e` can take under the bounds.
  Interval bound(const SymExpr& e) const;

  // Canonical form plus rewrites that need bounds: floordiv(i, 8) -> 0 for
  // i in [0, 8); floormod(i, 8) -> i; min(n, 4096) -> n for n <= 4096; ...
  SymExpr simplify(const SymExpr& e) const;

  Tri prove_equal(const SymExpr& a, const SymExpr& b) const;
  Tri prove_not_equal(const SymExpr& a, const SymExpr& b) const;
  Tri prove_less_equal(const SymExpr& a, const SymExpr& b) const;  // a <= b
  Tri prove_less(const SymExpr& a, const SymExpr& b) const;        // a < b
  Tri prove_divisible(const SymExpr& a, int64_t divisor) const;    // a % divisor == 0
  Tri prove_divisible(const SymExpr& a, const SymExpr& divisor) const;

  bool can_prove_equal(const SymExpr& a, const SymExpr& b) const { return prove_equal(a, b) == Tri::Yes; }
  bool can_prove_not_equal(const SymExpr& a, const SymExpr& b) const { return prove_not_equal(a, b) == Tri::Yes; }
  bool can_prove_less_equal(const SymExpr& a, const SymExpr& b) const { return prove_less_equal(a, b) == Tri::Yes; }

 private:
  Assume default_;
  SymMap<Interval> bounds_;
  SymMap<SymExpr> below_;
};

}  // namespace relax
