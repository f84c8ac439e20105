// Symbolic integers: the expressions that shapes, sizes and loop bounds are
// made of.
//
// A SymExpr is an integer expression over named variables built from
// constants, +, -, *, floordiv, floormod, min and max. Every expression is
// hash-consed and kept in a canonical form, so structurally equal
// expressions are the same node and `a == b` is a pointer comparison:
//
//   Const      an int64 constant.
//   Var        a variable. Identity is the node: two variables called "n"
//              made by two calls to SymExpr::var are different variables.
//   Sum        constant + sum(coeff_i * term_i): terms are non-constant,
//              non-Sum nodes in canonical order, coefficients non-zero, and
//              it is never a lone term with coefficient 1 and constant 0.
//   Mul        a product of two or more factors (Var, FloorDiv, FloorMod,
//              Min, Max, never Const, Sum or Mul), sorted, repeats allowed
//              (n*n). Constants live in the enclosing Sum's coefficient.
//   FloorDiv   floor(a / b), b != 0, kept only when no exact rewrite exists.
//   FloorMod   a - b*floor(a/b), ditto.
//   Min, Max   kept only when neither side is provably smaller without
//              variable bounds (min(n, n+1) is rewritten to n).
//
// The constructors only apply rewrites that hold for every value of the
// variables. Rewrites that need bounds (n >= 1, n < 4096) live in the
// Analyzer (ir/analyzer.h). Floor division and modulo follow Python:
// floordiv(-7, 2) == -4 and floormod(-7, 2) == 1.
//
// Nodes are immortal and interned in a process-wide, thread-safe table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace relax {

enum class SymKind : uint8_t { Const, Var, Sum, Mul, FloorDiv, FloorMod, Min, Max };

class SymNode;

class SymExpr {
 public:
  SymExpr() = default;                     // the null expression; most functions reject it
  SymExpr(int64_t c);                      // NOLINT: implicit from an integer constant
  SymExpr(int c) : SymExpr(int64_t(c)) {}  // NOLINT

  // A fresh variable. Each call returns a new, distinct variable.
  static SymExpr var(const std::string& name);

  bool defined() const { return n_ != nullptr; }
  const SymNode* get() const { return n_; }
  const SymNode* operator->() const { return n_; }
  SymKind kind() const;
  bool is_const() const { return defined() && kind() == SymKind::Const; }
  bool is_const(int64_t v) const;
  bool is_var() const { return defined() && kind() == SymKind::Var; }
  int64_t const_value() const;      // requires is_const()
  const std::string& name() const;  // requires is_var()

  // Structural equality == node identity (hash-consing).
  bool operator==(const SymExpr& o) const { return n_ == o.n_; }
  bool operator!=(const SymExpr& o) const { return n_ != o.n_; }
  size_t hash() const;

 private:
  explicit SymExpr(const SymNode* n) : n_(n) {}
  friend class SymNode;
  friend struct SymInterner;
  const SymNode* n_ = nullptr;
};

struct SymTerm {
  int64_t coeff;
  SymExpr term;
};

// Read-only view of a node; build nodes only through the functions below.
class SymNode {
 public:
  SymKind kind;
  int64_t value = 0;              // Const: the value; Var: a unique id
  std::string name;               // Var: its name
  int64_t constant = 0;           // Sum: the constant part
  std::vector<SymTerm> terms;     // Sum: the terms
  std::vector<SymExpr> operands;  // Mul: factors; binary kinds: {a, b}
  size_t hash = 0;

  SymExpr ref() const { return SymExpr(this); }
};

SymExpr operator+(const SymExpr& a, const SymExpr& b);
SymExpr operator-(const SymExpr& a, const SymExpr& b);
SymExpr operator*(const SymExpr& a, const SymExpr& b);
SymExpr operator-(const SymExpr& a);
SymExpr floordiv(const SymExpr& a, const SymExpr& b);  // b must not be the constant 0
SymExpr floormod(const SymExpr& a, const SymExpr& b);  // b must not be the constant 0
SymExpr min(const SymExpr& a, const SymExpr& b);
SymExpr max(const SymExpr& a, const SymExpr& b);

// A total order on nodes used by canonicalization and printing: constants
// first, then variables by name (then by id), then compound nodes. Returns
// <0, 0 or >0.
int sym_compare(const SymExpr& a, const SymExpr& b);

struct SymExprHash {
  size_t operator()(const SymExpr& e) const { return e.hash(); }
};
template <typename V>
using SymMap = std::unordered_map<SymExpr, V, SymExprHash>;

// Replaces variables. `f` returns the replacement of a variable or nullopt
// to keep it; the result is rebuilt through the canonical constructors.
SymExpr substitute(const SymExpr& e, const std::function<std::optional<SymExpr>(const SymExpr&)>& f);
SymExpr substitute(const SymExpr& e, const SymMap<SymExpr>& map);
// Replaces every occurrence of the subexpression `from` (a clamp
// max(min(e, n - 1), 0), say) by `to`, rebuilt the same way.
SymExpr replace_subexpr(const SymExpr& e, const SymExpr& from, const SymExpr& to);

// Evaluates with every variable bound in `env`; nullopt when a variable is
// unbound or a division by zero happens.
std::optional<int64_t> evaluate(const SymExpr& e, const SymMap<int64_t>& env);

// The variables of `e`, each once, in order of first appearance.
std::vector<SymExpr> free_vars(const SymExpr& e);
// Whether variable `var` occurs in `e`.
bool mentions(const SymExpr& e, const SymExpr& var);
void collect_vars(const SymExpr& e, std::vector<SymExpr>& out);  // appends new ones

// Text form, as the IR printer writes it: "n * 64 + 3", "(n + 1) // 2",
// "min(a, b)". `name` may rename variables (the printer disambiguates
// variables that share a name); by default a variable prints its name.
std::string to_string(const SymExpr& e, const std::function<std::string(const SymExpr&)>& name = {});
std::ostream& operator<<(std::ostream& os, const SymExpr& e);

}  // namespace relax

template <>
struct std::hash<relax::SymExpr> {
  size_t operator()(const relax::SymExpr& e) const { return e.hash(); }
};
