// Symbolic integers: hash-consed canonical expressions (see ir/sym.h).
//
// Every constructor below returns a node in canonical form:
//   - a Sum is `constant + sum(coeff_i * term_i)` with its terms sorted by
//     sym_compare, merged, and zero terms dropped;
//   - a Mul is a sorted product of atoms (Var, FloorDiv, FloorMod, Min, Max);
//   - products distribute over sums, so every expression is a polynomial
//     whose "variables" are the atoms;
//   - floordiv, floormod, min and max apply only rewrites that hold for every
//     value of the variables.
#include "ir/sym.h"

#include <algorithm>
#include <mutex>
#include <numeric>
#include <ostream>
#include <unordered_set>

#include "ir/error.h"

namespace relax {

// ---------------------------------------------------------------------------
// Checked int64 arithmetic. Overflow is a relax::Error, never wraps.
namespace {

int64_t add_checked(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) fail("symbolic integer overflow: ", a, " + ", b);
  return r;
}

int64_t mul_checked(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) fail("symbolic integer overflow: ", a, " * ", b);
  return r;
}

int64_t neg_checked(int64_t a) {
  int64_t r;
  if (__builtin_sub_overflow(int64_t(0), a, &r)) fail("symbolic integer overflow: -(", a, ")");
  return r;
}

// Python floor division: rounds toward negative infinity.
int64_t floordiv_int(int64_t a, int64_t b) {
  if (b == 0) fail("division by zero");
  if (b == -1) return neg_checked(a);
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) --q;
  return q;
}

// Python floor modulo: the result has the sign of the divisor.
int64_t floormod_int(int64_t a, int64_t b) {
  if (b == 0) fail("division by zero");
  if (b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

// True when k divides v (k != 0); safe for k == -1 and v == INT64_MIN.
bool divides(int64_t k, int64_t v) { return k == 1 || k == -1 || v % k == 0; }

int64_t exact_div(int64_t v, int64_t k) { return k == -1 ? neg_checked(v) : v / k; }

// ---------------------------------------------------------------------------
// Hashing and shallow structural equality. Children are canonical and
// interned, so comparing them by pointer is comparing them structurally.

size_t hash_mix(size_t h, uint64_t v) {
  v *= 0x9E3779B97F4A7C15ull;
  v ^= v >> 29;
  return h ^ (v + 0x9E3779B9u + (h << 6) + (h >> 2));
}

size_t node_hash(const SymNode& n) {
  size_t h = hash_mix(0, uint64_t(n.kind));
  h = hash_mix(h, uint64_t(n.value));
  h = hash_mix(h, uint64_t(n.constant));
  for (const SymTerm& t : n.terms) h = hash_mix(hash_mix(h, uint64_t(t.coeff)), t.term.hash());
  for (const SymExpr& o : n.operands) h = hash_mix(h, o.hash());
  return h;
}

bool same_node(const SymNode& a, const SymNode& b) {
  if (a.kind != b.kind || a.value != b.value || a.constant != b.constant) return false;
  if (a.operands != b.operands || a.terms.size() != b.terms.size()) return false;
  for (size_t i = 0; i < a.terms.size(); ++i)
    if (a.terms[i].coeff != b.terms[i].coeff || a.terms[i].term != b.terms[i].term) return false;
  return true;
}

struct NodePtrHash {
  size_t operator()(const SymNode* n) const { return n->hash; }
};
struct NodePtrEq {
  bool operator()(const SymNode* a, const SymNode* b) const { return same_node(*a, *b); }
};

}  // namespace

// The process-wide table of nodes. Nodes are never freed, so a SymExpr is a
// plain pointer that stays valid for the life of the process.
struct SymInterner {
  std::mutex mu;
  std::unordered_set<const SymNode*, NodePtrHash, NodePtrEq> table;
  std::vector<const SymNode*> vars;  // keeps variables reachable (leak checkers)
  int64_t next_var_id = 1;

  static SymInterner& global() {
    static SymInterner* table = new SymInterner();  // immortal, like its nodes
    return *table;
  }

  SymExpr intern(SymNode proto) {
    proto.hash = node_hash(proto);
    std::lock_guard<std::mutex> lock(mu);
    auto it = table.find(&proto);
    if (it != table.end()) return SymExpr(*it);
    const SymNode* n = new SymNode(std::move(proto));
    table.insert(n);
    return SymExpr(n);
  }

  SymExpr fresh_var(const std::string& name) {
    auto* n = new SymNode();
    n->kind = SymKind::Var;
    n->name = name;
    std::lock_guard<std::mutex> lock(mu);
    n->value = next_var_id++;
    n->hash = node_hash(*n);
    vars.push_back(n);
    return SymExpr(n);
  }
};

// ---------------------------------------------------------------------------
// SymExpr basics.

SymExpr::SymExpr(int64_t c) {
  SymNode proto;
  proto.kind = SymKind::Const;
  proto.value = c;
  n_ = SymInterner::global().intern(std::move(proto)).n_;
}

SymExpr SymExpr::var(const std::string& name) { return SymInterner::global().fresh_var(name); }

SymKind SymExpr::kind() const {
  RELAX_CHECK(defined(), "kind() of a null SymExpr");
  return n_->kind;
}

bool SymExpr::is_const(int64_t v) const { return is_const() && n_->value == v; }

int64_t SymExpr::const_value() const {
  RELAX_CHECK(is_const(), "const_value() of a non-constant SymExpr");
  return n_->value;
}

const std::string& SymExpr::name() const {
  RELAX_CHECK(is_var(), "name() of a SymExpr that is not a variable");
  return n_->name;
}

size_t SymExpr::hash() const { return n_ ? n_->hash : 0; }

// ---------------------------------------------------------------------------
// The total order. Kinds first (Const < Var < Sum < Mul < FloorDiv <
// FloorMod < Min < Max), then the contents; never pointers, so the order is
// the same in every run.

namespace {

template <typename T>
int cmp3(const T& a, const T& b) {
  return a < b ? -1 : (b < a ? 1 : 0);
}

int compare_operands(const std::vector<SymExpr>& a, const std::vector<SymExpr>& b) {
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    if (int c = sym_compare(a[i], b[i])) return c;
  return cmp3(a.size(), b.size());
}

int compare_sums(const SymNode& a, const SymNode& b) {
  for (size_t i = 0; i < a.terms.size() && i < b.terms.size(); ++i) {
    if (int c = sym_compare(a.terms[i].term, b.terms[i].term)) return c;
    if (int c = cmp3(a.terms[i].coeff, b.terms[i].coeff)) return c;
  }
  if (int c = cmp3(a.terms.size(), b.terms.size())) return c;
  return cmp3(a.constant, b.constant);
}

}  // namespace

int sym_compare(const SymExpr& a, const SymExpr& b) {
  if (a == b) return 0;
  if (!a.defined() || !b.defined()) return a.defined() ? 1 : -1;
  const SymNode& x = *a.get();
  const SymNode& y = *b.get();
  if (x.kind != y.kind) return cmp3(int(x.kind), int(y.kind));
  switch (x.kind) {
    case SymKind::Const:
      return cmp3(x.value, y.value);
    case SymKind::Var:
      if (int c = x.name.compare(y.name)) return c < 0 ? -1 : 1;
      return cmp3(x.value, y.value);
    case SymKind::Sum:
      return compare_sums(x, y);
    default:
      return compare_operands(x.operands, y.operands);
  }
}

// ---------------------------------------------------------------------------
// Building canonical nodes.

namespace {

void check_defined(const SymExpr& a, const char* what) { RELAX_CHECK(a.defined(), "null SymExpr passed to ", what); }

bool expr_less(const SymExpr& a, const SymExpr& b) { return sym_compare(a, b) < 0; }

// The linear view of any expression: constant + sum(coeff * term), where
// each term is an atom or a Mul. Terms are kept sorted and merged.
struct Linear {
  int64_t constant = 0;
  std::vector<SymTerm> terms;
};

Linear linear_of(const SymExpr& e) {
  if (e.is_const()) return {e.const_value(), {}};
  if (e.kind() == SymKind::Sum) return {e->constant, e->terms};
  return {0, {{1, e}}};
}

// Sorts terms by sym_compare, adds up the coefficients of equal terms and
// drops the terms whose coefficient became zero.
void normalize_terms(std::vector<SymTerm>& terms) {
  std::sort(terms.begin(), terms.end(), [](const SymTerm& a, const SymTerm& b) { return expr_less(a.term, b.term); });
  std::vector<SymTerm> out;
  for (const SymTerm& t : terms) {
    if (!out.empty() && out.back().term == t.term)
      out.back().coeff = add_checked(out.back().coeff, t.coeff);
    else
      out.push_back(t);
  }
  std::erase_if(out, [](const SymTerm& t) { return t.coeff == 0; });
  terms = std::move(out);
}

// The expression of a normalized linear form, collapsing trivial sums.
SymExpr from_linear(Linear l) {
  if (l.terms.empty()) return SymExpr(l.constant);
  if (l.terms.size() == 1 && l.terms[0].coeff == 1 && l.constant == 0) return l.terms[0].term;
  SymNode proto;
  proto.kind = SymKind::Sum;
  proto.constant = l.constant;
  proto.terms = std::move(l.terms);
  return SymInterner::global().intern(std::move(proto));
}

Linear scaled(Linear l, int64_t k) {
  if (k == 0) return {};
  l.constant = mul_checked(l.constant, k);
  for (SymTerm& t : l.terms) t.coeff = mul_checked(t.coeff, k);
  return l;
}

// A product of sorted atoms; a single atom is itself.
SymExpr make_mul(std::vector<SymExpr> factors) {
  if (factors.size() == 1) return factors[0];
  SymNode proto;
  proto.kind = SymKind::Mul;
  proto.operands = std::move(factors);
  return SymInterner::global().intern(std::move(proto));
}

SymExpr make_binary(SymKind kind, const SymExpr& a, const SymExpr& b) {
  SymNode proto;
  proto.kind = kind;
  proto.operands = {a, b};
  return SymInterner::global().intern(std::move(proto));
}

// The atoms of a monomial (an atom or a Mul), sorted.
std::vector<SymExpr> factors_of(const SymExpr& mono) {
  if (mono.kind() == SymKind::Mul) return mono->operands;
  return {mono};
}

SymExpr mul_monomials(const SymExpr& a, const SymExpr& b) {
  std::vector<SymExpr> fa = factors_of(a), fb = factors_of(b), out;
  std::merge(fa.begin(), fa.end(), fb.begin(), fb.end(), std::back_inserter(out), expr_less);
  return make_mul(std::move(out));
}

// Removes the multiset `den` from the sorted multiset `num`; nullopt when
// `den` is not contained in `num`. An empty result means the constant 1.
std::optional<std::vector<SymExpr>> remove_factors(const std::vector<SymExpr>& num, const std::vector<SymExpr>& den) {
  std::vector<SymExpr> out;
  size_t j = 0;
  for (const SymExpr& f : num) {
    if (j < den.size() && f == den[j])
      ++j;
    else
      out.push_back(f);
  }
  if (j != den.size()) return std::nullopt;
  return out;
}

// a / d when d is k * monomial and every term of `a` is a multiple of it
// (no constant part): then floordiv(a, d) is exact for every d != 0.
std::optional<SymExpr> exact_quotient(const SymExpr& a, const SymExpr& d) {
  if (a == d) return SymExpr(1);
  Linear den = linear_of(d), num = linear_of(a);
  if (den.constant != 0 || den.terms.size() != 1 || num.constant != 0) return std::nullopt;
  int64_t k = den.terms[0].coeff;
  std::vector<SymExpr> dfac = factors_of(den.terms[0].term);
  SymExpr q(0);
  for (const SymTerm& t : num.terms) {
    if (!divides(k, t.coeff)) return std::nullopt;
    auto rest = remove_factors(factors_of(t.term), dfac);
    if (!rest) return std::nullopt;
    SymExpr mono = rest->empty() ? SymExpr(1) : make_mul(std::move(*rest));
    q = q + SymExpr(exact_div(t.coeff, k)) * mono;
  }
  return q;
}

// The gcd of a positive divisor c with the coefficients and constant of
// `l`. Values are reduced modulo c first (gcd(g, v) == gcd(g, v mod c) when
// g divides c), which keeps std::gcd away from INT64_MIN.
int64_t common_divisor(const Linear& l, int64_t c) {
  int64_t g = std::gcd(c, floormod_int(l.constant, c));
  for (const SymTerm& t : l.terms) g = std::gcd(g, floormod_int(t.coeff, c));
  return g;
}

Linear divided(Linear l, int64_t g) {
  l.constant /= g;
  for (SymTerm& t : l.terms) t.coeff /= g;
  return l;
}

bool is_positive_const(const SymExpr& e) { return e.is_const() && e.const_value() > 0; }

// floordiv(r, c) for c > 1, where no term of r is a multiple of c. Nested
// divisions merge: floordiv(floordiv(x, a), c) == floordiv(x, a * c).
SymExpr floordiv_node(const SymExpr& r, int64_t c) {
  if (r.kind() == SymKind::FloorDiv && is_positive_const(r->operands[1])) {
    int64_t prod;
    if (!__builtin_mul_overflow(r->operands[1].const_value(), c, &prod)) return floordiv(r->operands[0], SymExpr(prod));
  }
  return make_binary(SymKind::FloorDiv, r, SymExpr(c));
}

// floordiv(a, c) for a constant c. For c > 0, a = c*Q + R where Q collects
// the terms whose coefficient is a multiple of c and the quotient of the
// constant; then floordiv(a, c) == Q + floordiv(R, c) for every value.
SymExpr floordiv_by_const(const SymExpr& a, int64_t c) {
  if (c == 0) fail("division by zero");
  if (a.is_const()) return SymExpr(floordiv_int(a.const_value(), c));
  if (c == 1) return a;
  if (c == -1) return -a;
  if (c < 0) return make_binary(SymKind::FloorDiv, a, SymExpr(c));
  Linear x = linear_of(a), quot, rem;
  quot.constant = floordiv_int(x.constant, c);
  rem.constant = floormod_int(x.constant, c);
  for (const SymTerm& t : x.terms) {
    if (t.coeff % c == 0)
      quot.terms.push_back({t.coeff / c, t.term});
    else
      rem.terms.push_back(t);
  }
  SymExpr q = from_linear(std::move(quot));
  if (rem.terms.empty()) return q;  // 0 <= rem.constant < c
  // floordiv(g*R, g*c) == floordiv(R, c).
  int64_t g = common_divisor(rem, c);
  return q + floordiv_node(from_linear(divided(std::move(rem), g)), c / g);
}

// floormod(r, c) for c > 1 with r's coefficients in [1, c) and gcd 1.
SymExpr floormod_node(const SymExpr& r, int64_t c) {
  if (r.kind() == SymKind::FloorMod && is_positive_const(r->operands[1])) {
    int64_t d = r->operands[1].const_value();
    if (d % c == 0) return floormod(r->operands[0], SymExpr(c));  // (x % kc) % c == x % c
    if (c % d == 0) return r;                                     // x % d already lies in [0, c)
  }
  return make_binary(SymKind::FloorMod, r, SymExpr(c));
}

// floormod(a, c) for a constant c. For c > 0 every coefficient and the
// constant reduce modulo c (adding multiples of c does not change the
// result), and floormod(g*R, g*c) == g * floormod(R, c).
SymExpr floormod_by_const(const SymExpr& a, int64_t c) {
  if (c == 0) fail("division by zero");
  if (a.is_const()) return SymExpr(floormod_int(a.const_value(), c));
  if (c == 1 || c == -1) return SymExpr(0);
  if (c < 0) return make_binary(SymKind::FloorMod, a, SymExpr(c));
  Linear x = linear_of(a), rem;
  rem.constant = floormod_int(x.constant, c);
  for (const SymTerm& t : x.terms)
    if (int64_t k = floormod_int(t.coeff, c)) rem.terms.push_back({k, t.term});
  if (rem.terms.empty()) return SymExpr(rem.constant);
  int64_t g = common_divisor(rem, c);
  if (g > 1) return SymExpr(g) * floormod_by_const(from_linear(divided(std::move(rem), g)), c / g);
  return floormod_node(from_linear(std::move(rem)), c);
}

// min/max with the operands in canonical order (they commute).
SymExpr make_commutative(SymKind kind, const SymExpr& a, const SymExpr& b) {
  return expr_less(b, a) ? make_binary(kind, b, a) : make_binary(kind, a, b);
}

}  // namespace

SymExpr operator+(const SymExpr& a, const SymExpr& b) {
  check_defined(a, "+");
  check_defined(b, "+");
  if (a.is_const() && b.is_const()) return SymExpr(add_checked(a.const_value(), b.const_value()));
  Linear x = linear_of(a), y = linear_of(b);
  x.constant = add_checked(x.constant, y.constant);
  x.terms.insert(x.terms.end(), y.terms.begin(), y.terms.end());
  normalize_terms(x.terms);
  return from_linear(std::move(x));
}

SymExpr operator-(const SymExpr& a) {
  check_defined(a, "unary -");
  return from_linear(scaled(linear_of(a), -1));
}

SymExpr operator-(const SymExpr& a, const SymExpr& b) {
  check_defined(b, "-");
  return a + (-b);
}

// Polynomial product: (c + sum a_i t_i) * (d + sum b_j u_j).
SymExpr operator*(const SymExpr& a, const SymExpr& b) {
  check_defined(a, "*");
  check_defined(b, "*");
  if (a.is_const()) return from_linear(scaled(linear_of(b), a.const_value()));
  if (b.is_const()) return from_linear(scaled(linear_of(a), b.const_value()));
  Linear x = linear_of(a), y = linear_of(b), r;
  r.constant = mul_checked(x.constant, y.constant);
  for (const SymTerm& t : x.terms) r.terms.push_back({mul_checked(t.coeff, y.constant), t.term});
  for (const SymTerm& u : y.terms) r.terms.push_back({mul_checked(x.constant, u.coeff), u.term});
  for (const SymTerm& t : x.terms)
    for (const SymTerm& u : y.terms) r.terms.push_back({mul_checked(t.coeff, u.coeff), mul_monomials(t.term, u.term)});
  normalize_terms(r.terms);
  return from_linear(std::move(r));
}

SymExpr floordiv(const SymExpr& a, const SymExpr& b) {
  check_defined(a, "floordiv");
  check_defined(b, "floordiv");
  if (b.is_const()) return floordiv_by_const(a, b.const_value());
  if (auto q = exact_quotient(a, b)) return *q;
  return make_binary(SymKind::FloorDiv, a, b);
}

SymExpr floormod(const SymExpr& a, const SymExpr& b) {
  check_defined(a, "floormod");
  check_defined(b, "floormod");
  if (b.is_const()) return floormod_by_const(a, b.const_value());
  if (exact_quotient(a, b)) return SymExpr(0);
  return make_binary(SymKind::FloorMod, a, b);
}

namespace {

// Whether `e` is min (or max, by `kind`) of operands one of which is `x`.
bool has_operand(const SymExpr& e, SymKind kind, const SymExpr& x) {
  return e.kind() == kind && (e->operands[0] == x || e->operands[1] == x);
}

}  // namespace

SymExpr min(const SymExpr& a, const SymExpr& b) {
  check_defined(a, "min");
  check_defined(b, "min");
  if (a == b) return a;
  // min(a, min(a, c)) = min(a, c); min(a, max(a, c)) = a.
  if (has_operand(b, SymKind::Min, a)) return b;
  if (has_operand(a, SymKind::Min, b)) return a;
  if (has_operand(b, SymKind::Max, a)) return a;
  if (has_operand(a, SymKind::Max, b)) return b;
  if (a.is_const() && b.is_const()) return a.const_value() <= b.const_value() ? a : b;
  SymExpr d = a - b;
  if (d.is_const()) return d.const_value() <= 0 ? a : b;
  return make_commutative(SymKind::Min, a, b);
}

SymExpr max(const SymExpr& a, const SymExpr& b) {
  check_defined(a, "max");
  check_defined(b, "max");
  if (a == b) return a;
  // max(a, max(a, c)) = max(a, c); max(a, min(a, c)) = a.
  if (has_operand(b, SymKind::Max, a)) return b;
  if (has_operand(a, SymKind::Max, b)) return a;
  if (has_operand(b, SymKind::Min, a)) return a;
  if (has_operand(a, SymKind::Min, b)) return b;
  if (a.is_const() && b.is_const()) return a.const_value() >= b.const_value() ? a : b;
  SymExpr d = a - b;
  if (d.is_const()) return d.const_value() >= 0 ? a : b;
  return make_commutative(SymKind::Max, a, b);
}

// ---------------------------------------------------------------------------
// Substitution, evaluation, variables.

SymExpr substitute(const SymExpr& e, const std::function<std::optional<SymExpr>(const SymExpr&)>& f) {
  check_defined(e, "substitute");
  const SymNode& n = *e.get();
  switch (n.kind) {
    case SymKind::Const:
      return e;
    case SymKind::Var: {
      std::optional<SymExpr> r = f(e);
      return r ? *r : e;
    }
    case SymKind::Sum: {
      SymExpr acc(n.constant);
      bool changed = false;
      for (const SymTerm& t : n.terms) {
        SymExpr s = substitute(t.term, f);
        changed |= s != t.term;
        acc = acc + SymExpr(t.coeff) * s;
      }
      return changed ? acc : e;
    }
    default:
      break;
  }
  std::vector<SymExpr> ops;
  bool changed = false;
  for (const SymExpr& o : n.operands) {
    ops.push_back(substitute(o, f));
    changed |= ops.back() != o;
  }
  if (!changed) return e;  // the same node when nothing changed
  switch (n.kind) {
    case SymKind::Mul: {
      SymExpr acc(1);
      for (const SymExpr& o : ops) acc = acc * o;
      return acc;
    }
    case SymKind::FloorDiv:
      return floordiv(ops[0], ops[1]);
    case SymKind::FloorMod:
      return floormod(ops[0], ops[1]);
    case SymKind::Min:
      return min(ops[0], ops[1]);
    default:
      return max(ops[0], ops[1]);
  }
}

SymExpr substitute(const SymExpr& e, const SymMap<SymExpr>& map) {
  return substitute(e, [&](const SymExpr& v) -> std::optional<SymExpr> {
    auto it = map.find(v);
    if (it == map.end()) return std::nullopt;
    return it->second;
  });
}

bool mentions(const SymExpr& e, const SymExpr& var) {
  for (const SymExpr& v : free_vars(e))
    if (v == var) return true;
  return false;
}

SymExpr replace_subexpr(const SymExpr& e, const SymExpr& from, const SymExpr& to) {
  if (e == from) return to;
  if (e.is_const() || e.is_var()) return e;
  switch (e.kind()) {
    case SymKind::Sum: {
      SymExpr acc(e->constant);
      for (const SymTerm& t : e->terms) acc = acc + SymExpr(t.coeff) * replace_subexpr(t.term, from, to);
      return acc;
    }
    case SymKind::Mul: {
      SymExpr acc(1);
      for (const SymExpr& f : e->operands) acc = acc * replace_subexpr(f, from, to);
      return acc;
    }
    default: {
      SymExpr a = replace_subexpr(e->operands[0], from, to), b = replace_subexpr(e->operands[1], from, to);
      switch (e.kind()) {
        case SymKind::FloorDiv:
          return floordiv(a, b);
        case SymKind::FloorMod:
          return floormod(a, b);
        case SymKind::Min:
          return min(a, b);
        default:
          return max(a, b);
      }
    }
  }
}

std::optional<int64_t> evaluate(const SymExpr& e, const SymMap<int64_t>& env) {
  check_defined(e, "evaluate");
  const SymNode& n = *e.get();
  switch (n.kind) {
    case SymKind::Const:
      return n.value;
    case SymKind::Var: {
      auto it = env.find(e);
      if (it == env.end()) return std::nullopt;
      return it->second;
    }
    case SymKind::Sum: {
      int64_t acc = n.constant;
      for (const SymTerm& t : n.terms) {
        auto v = evaluate(t.term, env);
        if (!v) return std::nullopt;
        acc = add_checked(acc, mul_checked(t.coeff, *v));
      }
      return acc;
    }
    default:
      break;
  }
  std::vector<int64_t> vals;
  for (const SymExpr& o : n.operands) {
    auto v = evaluate(o, env);
    if (!v) return std::nullopt;
    vals.push_back(*v);
  }
  switch (n.kind) {
    case SymKind::Mul: {
      int64_t acc = 1;
      for (int64_t v : vals) acc = mul_checked(acc, v);
      return acc;
    }
    case SymKind::FloorDiv:
      if (vals[1] == 0) return std::nullopt;
      return floordiv_int(vals[0], vals[1]);
    case SymKind::FloorMod:
      if (vals[1] == 0) return std::nullopt;
      return floormod_int(vals[0], vals[1]);
    case SymKind::Min:
      return std::min(vals[0], vals[1]);
    default:
      return std::max(vals[0], vals[1]);
  }
}

void collect_vars(const SymExpr& e, std::vector<SymExpr>& out) {
  check_defined(e, "collect_vars");
  const SymNode& n = *e.get();
  if (n.kind == SymKind::Var) {
    if (std::find(out.begin(), out.end(), e) == out.end()) out.push_back(e);
    return;
  }
  for (const SymTerm& t : n.terms) collect_vars(t.term, out);
  for (const SymExpr& o : n.operands) collect_vars(o, out);
}

std::vector<SymExpr> free_vars(const SymExpr& e) {
  std::vector<SymExpr> out;
  collect_vars(e, out);
  return out;
}

// ---------------------------------------------------------------------------
// Printing. Precedence: unary - > * // % > + -, all left associative.
// A Sum prints its terms positive coefficients first, then higher-degree
// monomials first, then in canonical order, and the constant last:
// "m * n + n * 2 + 3", "n - m", "-n + 4". A coefficient follows its
// monomial ("n * 2"); negative ones print as subtraction. Factors of a
// product print in canonical order (by name: "m * n"). Floor division and modulo are parenthesized inside products
// ("(n // 2) * 3"), any non-atom is parenthesized as their operand
// ("(n + 1) // 2", "(n * 2) // 3").

namespace {

enum Prec { kSumPrec = 1, kProductPrec = 2, kUnaryPrec = 3, kAtomPrec = 4 };

struct Printed {
  std::string text;
  int prec;
};

std::string magnitude(int64_t v) {
  uint64_t m = v < 0 ? uint64_t(0) - uint64_t(v) : uint64_t(v);
  return std::to_string(m);
}

size_t degree(const SymExpr& mono) { return mono.kind() == SymKind::Mul ? mono->operands.size() : 1; }

class SymPrinter {
 public:
  explicit SymPrinter(const std::function<std::string(const SymExpr&)>& name) : name_(name) {}

  Printed print(const SymExpr& e) const {
    if (!e.defined()) return {"<null>", kAtomPrec};
    const SymNode& n = *e.get();
    switch (n.kind) {
      case SymKind::Const:
        return {std::to_string(n.value), n.value < 0 ? kUnaryPrec : kAtomPrec};
      case SymKind::Var:
        return {name_ ? name_(e) : n.name, kAtomPrec};
      case SymKind::Sum:
        return {sum(n), kSumPrec};
      case SymKind::Mul:
        return {product(n.operands), kProductPrec};
      case SymKind::FloorDiv:
        return {wrap(n.operands[0], kUnaryPrec) + " // " + wrap(n.operands[1], kUnaryPrec), kProductPrec};
      case SymKind::FloorMod:
        return {wrap(n.operands[0], kUnaryPrec) + " % " + wrap(n.operands[1], kUnaryPrec), kProductPrec};
      case SymKind::Min:
        return {call("min", n.operands), kAtomPrec};
      case SymKind::Max:
        return {call("max", n.operands), kAtomPrec};
    }
    return {"<bad>", kAtomPrec};
  }

 private:
  std::string wrap(const SymExpr& e, int prec) const {
    Printed p = print(e);
    return p.prec < prec ? "(" + p.text + ")" : p.text;
  }

  // min/max print a constant operand last: "min(n, 4096)".
  std::string call(const char* fn, const std::vector<SymExpr>& ops) const {
    bool swap = ops[0].is_const();
    const SymExpr& a = swap ? ops[1] : ops[0];
    const SymExpr& b = swap ? ops[0] : ops[1];
    return std::string(fn) + "(" + print(a).text + ", " + print(b).text + ")";
  }

  std::string product(const std::vector<SymExpr>& factors) const {
    std::string out;
    for (const SymExpr& f : factors) out += (out.empty() ? "" : " * ") + wrap(f, kUnaryPrec);
    return out;
  }

  // |coeff| * mono. `bare` means the monomial may stand at product level
  // (a unit coefficient that is not under a unary minus).
  std::string term(const SymTerm& t, bool bare) const {
    bool unit = t.coeff == 1 || t.coeff == -1;
    std::string body;
    if (t.term.kind() == SymKind::Mul)
      body = product(t.term->operands);
    else
      body = wrap(t.term, unit && bare ? kProductPrec : kUnaryPrec);
    return unit ? body : body + " * " + magnitude(t.coeff);
  }

  std::string sum(const SymNode& n) const {
    std::vector<SymTerm> terms = n.terms;
    std::stable_sort(terms.begin(), terms.end(), [](const SymTerm& a, const SymTerm& b) {
      if ((a.coeff < 0) != (b.coeff < 0)) return a.coeff > 0;
      return degree(a.term) > degree(b.term);
    });
    std::string out;
    for (const SymTerm& t : terms) {
      if (out.empty())
        out = t.coeff < 0 ? "-" + term(t, false) : term(t, true);
      else
        out += (t.coeff < 0 ? " - " : " + ") + term(t, true);
    }
    if (n.constant != 0) out += (n.constant < 0 ? " - " : " + ") + magnitude(n.constant);
    return out;
  }

  const std::function<std::string(const SymExpr&)>& name_;
};

}  // namespace

std::string to_string(const SymExpr& e, const std::function<std::string(const SymExpr&)>& name) {
  return SymPrinter(name).print(e).text;
}

std::ostream& operator<<(std::ostream& os, const SymExpr& e) { return os << to_string(e); }

}  // namespace relax
