// Tests of ir/sym.h: canonical form, exact rewrites, printing, evaluation.
#include <doctest/doctest.h>

#include <cctype>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <thread>

#include "ir/error.h"
#include "ir/sym.h"

using namespace relax;

namespace {

// A small precedence parser for the printed form (unary - > * // % > + -,
// left associative), building through the canonical constructors.
class MiniParser {
 public:
  MiniParser(std::string text, std::map<std::string, SymExpr> vars) : s_(std::move(text)), vars_(std::move(vars)) {}

  SymExpr parse() {
    SymExpr e = sum();
    skip();
    if (pos_ != s_.size()) throw Error("trailing text in '" + s_ + "'");
    return e;
  }

 private:
  void skip() {
    while (pos_ < s_.size() && s_[pos_] == ' ') ++pos_;
  }
  bool eat(const std::string& tok) {
    skip();
    if (s_.compare(pos_, tok.size(), tok) != 0) return false;
    pos_ += tok.size();
    return true;
  }
  SymExpr sum() {
    SymExpr e = product();
    for (;;) {
      if (eat("+"))
        e = e + product();
      else if (eat("-"))
        e = e - product();
      else
        return e;
    }
  }
  SymExpr product() {
    SymExpr e = unary();
    for (;;) {
      if (eat("//"))
        e = floordiv(e, unary());
      else if (eat("*"))
        e = e * unary();
      else if (eat("%"))
        e = floormod(e, unary());
      else
        return e;
    }
  }
  SymExpr unary() { return eat("-") ? -unary() : primary(); }
  SymExpr primary() {
    if (eat("(")) {
      SymExpr e = sum();
      if (!eat(")")) throw Error("expected )");
      return e;
    }
    skip();
    size_t start = pos_;
    if (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
      return SymExpr(int64_t(std::stoll(s_.substr(start, pos_ - start))));
    }
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) ++pos_;
    std::string id = s_.substr(start, pos_ - start);
    if ((id == "min" || id == "max") && eat("(")) {
      SymExpr a = sum();
      if (!eat(",")) throw Error("expected ,");
      SymExpr b = sum();
      if (!eat(")")) throw Error("expected )");
      return id == "min" ? min(a, b) : max(a, b);
    }
    auto it = vars_.find(id);
    if (it == vars_.end()) throw Error("unknown name '" + id + "' in '" + s_ + "'");
    return it->second;
  }

  std::string s_;
  std::map<std::string, SymExpr> vars_;
  size_t pos_ = 0;
};

// Rebuilds e through the public constructors from its parts: canonical
// nodes must come back unchanged.
SymExpr rebuild(const SymExpr& e) {
  switch (e.kind()) {
    case SymKind::Const:
    case SymKind::Var:
      return e;
    case SymKind::Sum: {
      SymExpr acc(e->constant);
      for (const SymTerm& t : e->terms) acc = acc + rebuild(t.term) * SymExpr(t.coeff);
      return acc;
    }
    case SymKind::Mul: {
      SymExpr acc(1);
      for (const SymExpr& f : e->operands) acc = rebuild(f) * acc;
      return acc;
    }
    case SymKind::FloorDiv:
      return floordiv(rebuild(e->operands[0]), rebuild(e->operands[1]));
    case SymKind::FloorMod:
      return floormod(rebuild(e->operands[0]), rebuild(e->operands[1]));
    case SymKind::Min:
      return min(rebuild(e->operands[1]), rebuild(e->operands[0]));
    case SymKind::Max:
      return max(rebuild(e->operands[1]), rebuild(e->operands[0]));
  }
  return e;
}

int64_t py_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
int64_t py_mod(int64_t a, int64_t b) { return a - b * py_div(a, b); }

// A random expression tree, evaluated directly (the reference) and built
// through the canonical constructors (under test).
struct Tree {
  enum Op { Const, Var, Add, Sub, Mul, Neg, Div, Mod, Min, Max } op;
  int64_t value = 0;  // Const: the value; Var: the index
  std::unique_ptr<Tree> a, b;

  std::optional<int64_t> eval(const std::vector<int64_t>& env) const {
    if (op == Const) return value;
    if (op == Var) return env[size_t(value)];
    auto x = a->eval(env);
    if (!x) return std::nullopt;
    if (op == Neg) return -*x;
    auto y = b->eval(env);
    if (!y) return std::nullopt;
    switch (op) {
      case Add:
        return *x + *y;
      case Sub:
        return *x - *y;
      case Mul:
        return *x * *y;
      case Div:
        return *y == 0 ? std::nullopt : std::optional<int64_t>(py_div(*x, *y));
      case Mod:
        return *y == 0 ? std::nullopt : std::optional<int64_t>(py_mod(*x, *y));
      case Min:
        return std::min(*x, *y);
      default:
        return std::max(*x, *y);
    }
  }

  SymExpr build(const std::vector<SymExpr>& vars) const {
    switch (op) {
      case Const:
        return SymExpr(value);
      case Var:
        return vars[size_t(value)];
      case Neg:
        return -a->build(vars);
      default:
        break;
    }
    SymExpr x = a->build(vars), y = b->build(vars);
    switch (op) {
      case Add:
        return x + y;
      case Sub:
        return x - y;
      case Mul:
        return x * y;
      case Div:
        return floordiv(x, y);
      case Mod:
        return floormod(x, y);
      case Min:
        return min(x, y);
      default:
        return max(x, y);
    }
  }
};

std::unique_ptr<Tree> random_tree(std::mt19937& rng, int depth, int nvars) {
  auto t = std::make_unique<Tree>();
  int pick = std::uniform_int_distribution<int>(0, depth <= 0 ? 1 : 11)(rng);
  if (pick == 0) {
    t->op = Tree::Const;
    t->value = std::uniform_int_distribution<int64_t>(-6, 8)(rng);
    return t;
  }
  if (pick == 1) {
    t->op = Tree::Var;
    t->value = std::uniform_int_distribution<int64_t>(0, nvars - 1)(rng);
    return t;
  }
  static const Tree::Op ops[] = {Tree::Add, Tree::Sub, Tree::Mul, Tree::Neg, Tree::Div,
                                 Tree::Mod, Tree::Min, Tree::Max, Tree::Div, Tree::Mod};
  t->op = ops[pick - 2];
  t->a = random_tree(rng, depth - 1, nvars);
  if (t->op != Tree::Neg) {
    // Divisors are mostly constants, as in shapes.
    bool const_divisor = (t->op == Tree::Div || t->op == Tree::Mod) && rng() % 3 != 0;
    if (const_divisor) {
      t->b = std::make_unique<Tree>();
      t->b->op = Tree::Const;
      t->b->value = std::uniform_int_distribution<int64_t>(-3, 9)(rng);
      if (t->b->value == 0) t->b->value = 4;
    } else {
      t->b = random_tree(rng, depth - 1, nvars);
    }
  }
  return t;
}

}  // namespace

TEST_CASE("sym: constants and variables") {
  SymExpr n = SymExpr::var("n");
  CHECK(SymExpr(4) == SymExpr(int64_t(4)));
  CHECK(SymExpr(4).get() == SymExpr(4).get());
  CHECK(SymExpr(7).is_const(7));
  CHECK(SymExpr(7).const_value() == 7);
  CHECK(n.is_var());
  CHECK(n.name() == "n");
  CHECK(SymExpr::var("n") != SymExpr::var("n"));  // variables are never shared
  CHECK(n != SymExpr::var("n"));
  CHECK(!SymExpr().defined());
  CHECK(n + 0 == n);
  CHECK(n * 1 == n);
  CHECK((n * 0).is_const(0));
  CHECK((n - n).is_const(0));
}

TEST_CASE("sym: canonical sums and products") {
  SymExpr n = SymExpr::var("n"), m = SymExpr::var("m"), a = SymExpr::var("a"), b = SymExpr::var("b");
  CHECK(4 * n == n * 4);
  CHECK((4 * n).get() == (n * 4).get());
  CHECK((4 * n).hash() == (n * 4).hash());
  CHECK(n + m == m + n);
  CHECK(n * m == m * n);
  CHECK((a + b) * 2 - 2 * a == 2 * b);
  CHECK((n + 1) * (n - 1) == n * n - 1);
  CHECK(n * (m + a) == n * m + n * a);  // distributivity
  CHECK((n + m) * (n + m) == n * n + 2 * n * m + m * m);
  CHECK((n + m) * (n - m) == n * n - m * m);
  CHECK(n + m - m == n);
  CHECK((n + m - m).kind() == SymKind::Var);  // lone term collapses
  CHECK(n * 3 - n * 3 + 5 == SymExpr(5));
  CHECK(-(-n) == n);
  CHECK((n * m).kind() == SymKind::Mul);
  CHECK((n * m)->operands[0] == m);  // factors sorted by name
  CHECK((n * 2 + 3).kind() == SymKind::Sum);
  CHECK((n * 2 + 3)->constant == 3);
  CHECK((n * 2 + 3)->terms.size() == 1);
  CHECK((n * 2 + 3)->terms[0].coeff == 2);
  CHECK(n * n != n * 2);
  CHECK(n + 1 != n);
}

TEST_CASE("sym: floor division and modulo") {
  SymExpr n = SymExpr::var("n"), m = SymExpr::var("m");
  // Python semantics on constants.
  CHECK(floordiv(SymExpr(-7), SymExpr(2)) == SymExpr(-4));
  CHECK(floormod(SymExpr(-7), SymExpr(2)) == SymExpr(1));
  CHECK(floordiv(SymExpr(7), SymExpr(-2)) == SymExpr(-4));
  CHECK(floormod(SymExpr(7), SymExpr(-2)) == SymExpr(-1));
  CHECK(floordiv(SymExpr(-8), SymExpr(2)) == SymExpr(-4));
  CHECK(floormod(SymExpr(-8), SymExpr(-3)) == SymExpr(-2));
  // Exact rewrites.
  CHECK(floordiv(n * 768, 12) == n * 64);
  CHECK(floormod(n * 768, 12) == SymExpr(0));
  CHECK(floormod(n * 4 + 3, 4) == SymExpr(3));
  CHECK(floordiv(n * 4 + 3, 4) == n);
  CHECK(floordiv(n * 4 + 9, 4) == n + 2);
  CHECK(floordiv(floordiv(n, 2), 3) == floordiv(n, 6));
  CHECK(floordiv(n, 1) == n);
  CHECK(floormod(n, 1) == SymExpr(0));
  CHECK(floordiv(n, -1) == -n);
  CHECK(floordiv(n * m * 4, m) == n * 4);
  CHECK(floormod(n * m * 4, m) == SymExpr(0));
  CHECK(floordiv(n * m + n * n * 2, n) == m + n * 2);
  CHECK(floordiv(n, n) == SymExpr(1));
  CHECK(floordiv(n * 2, 4) == floordiv(n, 2));  // gcd
  CHECK(floormod(n * 2, 4) == floormod(n, 2) * 2);
  CHECK(floormod(-n, 2) == floormod(n, 2));  // coefficients reduce mod c
  CHECK(floormod(floormod(n, 8), 4) == floormod(n, 4));
  CHECK(floormod(floormod(n, 4), 8) == floormod(n, 4));
  CHECK(floordiv(n * 2 + 7, 4) == floordiv(n * 2 + 3, 4) + 1);
  // Not rewritten: no exact rule applies.
  SymExpr d = floordiv(n * 2, 3);
  CHECK(d.kind() == SymKind::FloorDiv);
  CHECK(d->operands[0] == n * 2);
  CHECK(d->operands[1] == SymExpr(3));
  CHECK(floordiv(n + 1, n).kind() == SymKind::FloorDiv);
  CHECK(floordiv(n * m + 1, m).kind() == SymKind::FloorDiv);
  CHECK(floormod(n, m).kind() == SymKind::FloorMod);
  CHECK(floordiv(n, -2).kind() == SymKind::FloorDiv);
  // Evaluation follows Python on negative values too.
  CHECK(evaluate(d, {{n, 5}}) == 3);
  CHECK(evaluate(d, {{n, -1}}) == -1);
  CHECK(evaluate(floormod(n, 3), {{n, -7}}) == 2);
  CHECK(evaluate(floordiv(n, -2), {{n, 7}}) == -4);
  CHECK_THROWS_AS(floordiv(n, 0), Error);
  CHECK_THROWS_AS(floormod(SymExpr(3), SymExpr(0)), Error);
}

TEST_CASE("sym: min and max") {
  SymExpr n = SymExpr::var("n"), a = SymExpr::var("a"), b = SymExpr::var("b");
  CHECK(min(n, n + 1) == n);
  CHECK(max(n, n + 1) == n + 1);
  CHECK(min(n + 3, n - 2) == n - 2);
  CHECK(min(n, n) == n);
  CHECK(min(3, 5) == SymExpr(3));
  CHECK(max(3, 5) == SymExpr(5));
  CHECK(min(a, b) == min(b, a));
  CHECK(max(a, b) == max(b, a));
  CHECK(min(a, b) != max(a, b));
  CHECK(min(n, 4096).kind() == SymKind::Min);
  // Absorption: a detector's count came out min(n, min(n, 20)).
  CHECK(min(n, min(n, 20)) == min(n, 20));
  CHECK(min(min(20, n), n) == min(n, 20));
  CHECK(max(n, max(a, n)) == max(a, n));
  CHECK(min(n, max(n, a)) == n);
  CHECK(max(min(a, n), n) == n);
}

TEST_CASE("sym: overflow is an error") {
  SymExpr n = SymExpr::var("n");
  const int64_t big = std::numeric_limits<int64_t>::max();
  CHECK_THROWS_AS(SymExpr(big) + 1, Error);
  CHECK_THROWS_AS(n * big * 2, Error);
  CHECK_THROWS_AS(-SymExpr(std::numeric_limits<int64_t>::min()), Error);
  CHECK_NOTHROW(n * big);
}

TEST_CASE("sym: sym_compare is a deterministic total order") {
  SymExpr n = SymExpr::var("n"), m = SymExpr::var("m"), n2 = SymExpr::var("n");
  CHECK(sym_compare(SymExpr(3), n) < 0);  // Const < Var
  CHECK(sym_compare(SymExpr(-1), SymExpr(3)) < 0);
  CHECK(sym_compare(m, n) < 0);   // by name
  CHECK(sym_compare(n, n2) < 0);  // then by creation
  CHECK(sym_compare(n2, n) > 0);
  CHECK(sym_compare(n, n + 1) < 0);               // Var < Sum
  CHECK(sym_compare(n + 1, n * m) < 0);           // Sum < Mul
  CHECK(sym_compare(n * m, floordiv(n, 2)) < 0);  // Mul < FloorDiv
  CHECK(sym_compare(floordiv(n, 2), floormod(n, 2)) < 0);
  CHECK(sym_compare(floormod(n, 2), min(n, m)) < 0);
  CHECK(sym_compare(min(n, m), max(n, m)) < 0);
  CHECK(sym_compare(n * 2 + 1, n * 2 + 1) == 0);
  // The order is by content: the same names give the same order in a new
  // set of variables, whatever the node addresses.
  SymExpr x1 = SymExpr::var("x"), y1 = SymExpr::var("y");
  SymExpr y2 = SymExpr::var("y"), x2 = SymExpr::var("x");
  CHECK(sym_compare(x1 * 3 + y1, y1 * 5) == sym_compare(x2 * 3 + y2, y2 * 5));
  CHECK(to_string(y1 + x1) == to_string(y2 + x2));
}

TEST_CASE("sym: printing") {
  SymExpr n = SymExpr::var("n"), m = SymExpr::var("m"), a = SymExpr::var("a"), b = SymExpr::var("b");
  CHECK(to_string(n) == "n");
  CHECK(to_string(SymExpr(-5)) == "-5");
  CHECK(to_string(n * 64) == "n * 64");
  CHECK(to_string(64 * n) == "n * 64");
  CHECK(to_string(n * m + 2 * n + 3) == "m * n + n * 2 + 3");  // factors by name
  CHECK(to_string(a * b + 2 * a + 3) == "a * b + a * 2 + 3");
  CHECK(to_string(-m * m + n) == "n - m * m");  // positive terms first
  CHECK(to_string(n - m) == "n - m");
  CHECK(to_string(m - n) == "m - n");
  CHECK(to_string(-n - m) == "-m - n");
  CHECK(to_string(n - 3) == "n - 3");
  CHECK(to_string(floordiv(n + 1, 2)) == "(n + 1) // 2");
  CHECK(to_string(floormod(n, 8)) == "n % 8");
  CHECK(to_string(min(n, 4096)) == "min(n, 4096)");
  CHECK(to_string(max(b, a)) == "max(a, b)");
  CHECK(to_string(4 - n) == "-n + 4");
  CHECK(to_string(floordiv(n, 2) * 3) == "(n // 2) * 3");
  CHECK(to_string(floordiv(n, 2) + 1) == "n // 2 + 1");
  CHECK(to_string(-floordiv(n, 2)) == "-(n // 2)");
  CHECK(to_string(floordiv(n * 2, 3)) == "(n * 2) // 3");
  CHECK(to_string(floordiv(n, m * 2)) == "n // (m * 2)");
  CHECK(to_string(floordiv(n, m)) == "n // m");
  CHECK(to_string(n * n - 1) == "n * n - 1");
  CHECK(to_string(-n * m * 2) == "-m * n * 2");
  CHECK(to_string(m * floordiv(n, 4)) == "m * (n // 4)");
  CHECK(to_string(min(n + 1, m * 2)) == "min(m * 2, n + 1)");
  CHECK(to_string(max(SymExpr(-3), n)) == "max(n, -3)");  // constants last
  CHECK(to_string(n * 2, [](const SymExpr&) { return std::string("N"); }) == "N * 2");
  std::ostringstream os;
  os << n * 4 + 1;
  CHECK(os.str() == "n * 4 + 1");
}

TEST_CASE("sym: printed text parses back to the same node") {
  SymExpr n = SymExpr::var("n"), m = SymExpr::var("m"), k = SymExpr::var("k");
  std::map<std::string, SymExpr> vars = {{"n", n}, {"m", m}, {"k", k}};
  std::vector<SymExpr> cases = {
      n * 64,
      n * m + n * 2 + 3,
      n - m,
      floordiv(n + 1, 2),
      floormod(n, 8),
      min(n, 4096),
      4 - n,
      floordiv(n, 2) * 3,
      -floordiv(n, 2),
      -floordiv(n, 2) * 3,
      -n * m,
      -floormod(n, m) * k,
      floordiv(-n, m),
      floordiv(SymExpr(-3), n),
      floordiv(n, -2),
      floordiv(floordiv(n, m), k),
      max(min(n, m) - 1, k * 2),
      floordiv(n * m, 4) - floormod(k, 3) * 5 + 7,
      n * n * n - 1,
  };
  for (const SymExpr& e : cases) {
    INFO(to_string(e));
    CHECK(MiniParser(to_string(e), vars).parse() == e);
  }
}

TEST_CASE("sym: substitution, evaluation and variables") {
  SymExpr n = SymExpr::var("n"), m = SymExpr::var("m");
  SymExpr e = n * 2 + floordiv(m, 4);
  CHECK(substitute(e, SymMap<SymExpr>{{n, m + 1}}) == m * 2 + floordiv(m, 4) + 2);
  CHECK(substitute(e, SymMap<SymExpr>{{m, n * 4}}) == n * 3);
  CHECK(substitute(e, SymMap<SymExpr>{{n, 3}, {m, 10}}) == SymExpr(8));
  CHECK(substitute(e, SymMap<SymExpr>{}).get() == e.get());  // unchanged: same node
  CHECK(substitute(min(n, m), [&](const SymExpr& v) -> std::optional<SymExpr> {
          return v == m ? std::optional<SymExpr>(n + 1) : std::nullopt;
        }) == n);
  CHECK_THROWS_AS(substitute(floordiv(n, m), SymMap<SymExpr>{{m, 0}}), Error);
  CHECK(evaluate(e, {{n, 3}, {m, 10}}) == 8);
  CHECK(evaluate(e, {{n, 3}}) == std::nullopt);  // m unbound
  CHECK(evaluate(floordiv(n, m), {{n, 3}, {m, 0}}) == std::nullopt);
  CHECK(evaluate(floormod(n, m), {{n, -3}, {m, 2}}) == 1);
  CHECK(evaluate(max(n, m) * min(n, m), {{n, -3}, {m, 2}}) == -6);
  CHECK(evaluate(SymExpr(9), {}) == 9);
  std::vector<SymExpr> fv = free_vars(min(m * n, n + 1));
  REQUIRE(fv.size() == 2);
  CHECK(fv[0] == n);  // first appearance in canonical form: min(n + 1, m * n)
  CHECK(fv[1] == m);
  std::vector<SymExpr> acc = {n};
  collect_vars(floordiv(m, n), acc);
  CHECK(acc == std::vector<SymExpr>{n, m});
}

TEST_CASE("sym: hash-consing is thread-safe") {
  std::vector<const SymNode*> seen(8);
  SymExpr n = SymExpr::var("n"), m = SymExpr::var("m");
  std::vector<std::thread> threads;
  for (size_t i = 0; i < seen.size(); ++i) {
    threads.emplace_back([&, i] {
      SymExpr e;
      for (int r = 0; r < 200; ++r) e = floordiv(n * m * int64_t(r % 7 + 1) + n * 3 + 1, 5) + min(n, m);
      e = floordiv(n * m * 7 + n * 3 + 1, 5) + min(m, n);
      seen[i] = e.get();
    });
  }
  for (std::thread& t : threads) t.join();
  for (const SymNode* p : seen) CHECK(p == seen[0]);
  CHECK(seen[0] == (min(n, m) + floordiv(n * 3 + m * n * 7 + 1, 5)).get());
}

TEST_CASE("sym: random expressions keep their value, print and rebuild") {
  std::mt19937 rng(1234);
  std::vector<SymExpr> vars = {SymExpr::var("a"), SymExpr::var("b"), SymExpr::var("n")};
  std::map<std::string, SymExpr> names = {{"a", vars[0]}, {"b", vars[1]}, {"n", vars[2]}};
  int value_mismatch = 0, undefined_mismatch = 0, parse_mismatch = 0, rebuild_mismatch = 0;
  int compared = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    auto tree = random_tree(rng, 4, 3);
    SymExpr e;
    try {
      e = tree->build(vars);
    } catch (const Error&) {
      continue;  // a divisor that is identically 0
    }
    if (rebuild(e) != e) ++rebuild_mismatch;
    if (MiniParser(to_string(e), names).parse() != e) {
      ++parse_mismatch;
      MESSAGE("reparse differs: ", to_string(e));
    }
    for (int k = 0; k < 6; ++k) {
      std::vector<int64_t> env;
      SymMap<int64_t> senv;
      for (const SymExpr& v : vars) {
        env.push_back(std::uniform_int_distribution<int64_t>(-7, 7)(rng));
        senv[v] = env.back();
      }
      auto want = tree->eval(env);
      if (!want) continue;
      auto got = evaluate(e, senv);
      ++compared;
      if (!got)
        ++undefined_mismatch;
      else if (*got != *want) {
        ++value_mismatch;
        MESSAGE("value differs: ", to_string(e), " got ", *got, " want ", *want);
      }
    }
  }
  CHECK(compared > 5000);
  CHECK(value_mismatch == 0);
  CHECK(undefined_mismatch == 0);
  CHECK(parse_mismatch == 0);
  CHECK(rebuild_mismatch == 0);
}
