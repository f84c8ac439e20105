// The IR parser: hand-written recursive descent over ir/lexer.h.
//
// A module is read in two steps. The first builds every item; bindings keep
// their annotation (or none) and are queued. The second, once every global
// is known, deduces struct info in text order: an unannotated binding takes
// the deduced struct info (a deduction error is a parse error at the value);
// an annotated binding keeps its annotation, and its value gets the deduced
// struct info, or the annotation when deduction fails (the verifier reports
// the mismatch). So functions may call functions defined later.
#include "ir/parser.h"

#include <functional>

#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <unordered_map>

#include "ir/lexer.h"
#include "ir/normalize.h"
#include "ir/op.h"

namespace relax {
namespace {

constexpr int kMaxDepth = 200;

struct Loc {
  int line = 0, col = 0;
};

// A name of a tensor program: a buffer or a symbolic (index) variable.
struct ProgName {
  tir::Buffer buf;
  SymExpr var;
};

// A value whose struct info is deduced after the whole module is read.
struct Pending {
  Expr value;
  Var var;           // null for the result of a body
  StructInfo annot;  // the binding's annotation, if any
  Loc loc;
  int item = 0;  // one Analyzer per top-level item
};

const char* article(AttrType t) {
  switch (t) {
    case AttrType::Int:
    case AttrType::Ints:
      return "an ";
    default:
      return "a ";
  }
}

std::string global_text(const std::string& name) {
  return "'@" + (is_identifier(name) ? name : quote_string(name)) + "'";
}

std::optional<tir::BinOp> infix_op(const Token& t) {
  if (t.kind != TokKind::Punct) return std::nullopt;
  using tir::BinOp;
  static const std::pair<std::string_view, BinOp> kOps[] = {
      {"+", BinOp::Add},      {"-", BinOp::Sub},    {"*", BinOp::Mul},  {"/", BinOp::Div}, {"//", BinOp::FloorDiv},
      {"%", BinOp::FloorMod}, {"==", BinOp::EQ},    {"!=", BinOp::NE},  {"<", BinOp::LT},  {"<=", BinOp::LE},
      {">", BinOp::GT},       {">=", BinOp::GE},    {"&&", BinOp::And}, {"||", BinOp::Or}, {"&", BinOp::BitAnd},
      {"|", BinOp::BitOr},    {"^", BinOp::BitXor}, {"<<", BinOp::Shl}, {">>", BinOp::Shr}};
  for (const auto& [s, op] : kOps)
    if (t.text == s) return op;
  return std::nullopt;
}

// Must agree with the printer's table.
int binop_prec(tir::BinOp op) {
  using tir::BinOp;
  switch (op) {
    case BinOp::Or:
      return 1;
    case BinOp::And:
      return 2;
    case BinOp::BitOr:
      return 3;
    case BinOp::BitXor:
      return 4;
    case BinOp::BitAnd:
      return 5;
    case BinOp::EQ:
    case BinOp::NE:
      return 6;
    case BinOp::LT:
    case BinOp::LE:
    case BinOp::GT:
    case BinOp::GE:
      return 7;
    case BinOp::Shl:
    case BinOp::Shr:
      return 8;
    case BinOp::Add:
    case BinOp::Sub:
      return 9;
    default:
      return 10;
  }
}

class Parser {
 public:
  Parser(std::string_view text, const std::string& file) : lex_(text, file) {}
  IRModule module();
  StructInfo sinfo_only();
  // A lone symbolic expression; names resolve through `var`.
  SymExpr sym_only(const std::function<SymExpr(const std::string&)>& var);

 private:
  struct Depth {
    Parser& p;
    explicit Depth(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxDepth) {
        --p.depth_;
        p.error(p.peek(), cat("nesting too deep (more than ", kMaxDepth, " levels)"));
      }
    }
    ~Depth() { --p.depth_; }
  };

  // Tokens.
  const Token& peek(size_t k = 0) { return lex_.peek(k); }
  Token next() {
    last_ = lex_.next();
    return last_;
  }
  bool at(std::string_view p) { return peek().is(p); }
  bool at_ident(std::string_view s) { return peek().is_ident(s); }
  bool accept(std::string_view p) {
    if (!at(p)) return false;
    next();
    return true;
  }
  Token expect(std::string_view p) {
    if (!at(p)) expected(cat("'", p, "'"));
    return next();
  }
  void expect_keyword(std::string_view kw) {
    if (!at_ident(kw)) expected(cat("'", kw, "'"));
    next();
  }
  std::string expect_name(const char* what) {
    if (peek().kind != TokKind::Ident) expected(what);
    return next().text;
  }
  [[noreturn]] void error(const Token& t, const std::string& msg) { lex_.error_at(t.line, t.col, msg); }
  [[noreturn]] void error(Loc l, const std::string& msg) { lex_.error_at(l.line, l.col, msg); }
  [[noreturn]] void expected(const std::string& what) {
    error(peek(), "expected " + what + " but found " + peek().describe());
  }
  static Loc loc(const Token& t) { return {t.line, t.col}; }
  template <typename F>
  auto guarded(const Token& at, F&& f) -> decltype(f());

  // Literals.
  int64_t int_value(const Token& t, bool negative);
  double float_value(const Token& t, bool negative);
  bool at_float_literal();
  double signed_float();
  DataType dtype();

  // Symbolic integers.
  SymExpr sym_expr(int min_prec = 0);
  SymExpr sym_unary();
  SymExpr sym_atom();
  SymExpr resolve_sym(const Token& t);
  std::vector<SymExpr> dim_list();

  StructInfo sinfo();
  int ndim_value();

  // Attributes.
  AttrValue attr_value(AttrType type, const std::string& attr, const std::string& op);
  AttrValue untyped_value(bool in_list);
  Attrs attr_dict();

  // Module items.
  std::string global_name();
  void check_new_global(const Token& t, const std::string& name);
  void extern_decl();
  void top_function();
  void program();

  // Graph functions.
  Function function_rest();
  SeqExpr body(bool is_function);
  bool at_binding();
  void binding(BindingBlock& block);
  Expr expr();
  Expr primary();
  Expr ident_primary();
  Expr dataflow_ref();
  Expr tuple_or_paren();
  Expr prim_value();
  Expr op_call();
  void call_args(std::vector<Expr>& args, Attrs& attrs, std::vector<StructInfo>& sinfo_args, const OpInfo* op);
  Expr global_ref(const std::string& name);
  void push_scope(bool dataflow) {
    scopes_.emplace_back();
    scope_df_.push_back(dataflow);
  }
  void pop_scope() {
    scopes_.pop_back();
    scope_df_.pop_back();
  }
  Var lookup(const std::string& key) const;
  void bind(const std::string& key, const Var& v, const Token& at);

  // Tensor programs.
  tir::Buffer buffer_type(const std::string& name);
  const ProgName* prog_lookup(const std::string& name) const;
  void prog_define(const Token& at, const std::string& name, ProgName v, bool scoped);
  tir::Stmt stmt_block();
  tir::Stmt stmt_list();
  tir::Stmt stmt();
  tir::Stmt for_stmt();
  tir::Stmt store_stmt();
  tir::TExpr texpr(int min_prec = 0);
  tir::TExpr tunary();
  tir::TExpr tprimary();
  tir::TExpr tnumber(bool negative);
  tir::TExpr tcall();
  tir::TExpr tload();
  tir::TExpr negate(const tir::TExpr& a, const Token& at);
  tir::TExpr build_binary(tir::BinOp op, const tir::TExpr& a, const tir::TExpr& b, const Token& at);

  // Struct-info deduction, after the module is read.
  void finish();
  void deduce(const Expr& e, const InferContext& ctx);

  Lexer lex_;
  Token last_;
  int depth_ = 0;
  IRModule mod_;
  bool seen_module_attrs_ = false;
  std::map<std::string, Expr> globals_;
  std::vector<Pending> pending_;
  int item_ = 0;

  // Scope of the graph function being read.
  std::vector<std::unordered_map<std::string, Var>> scopes_;
  std::vector<bool> scope_df_;
  std::unordered_map<std::string, SymExpr> fn_syms_;
  std::function<SymExpr(const std::string&)> sym_resolver_;  // set by sym_only

  // Scope of the tensor program being read.
  bool in_prog_ = false;
  std::unordered_map<std::string, ProgName> prog_names_;
  std::vector<std::vector<std::pair<std::string, ProgName>>> prog_scopes_;
};

// Runs a builder; an Error it raises (a type error, an unknown op) is
// reported at `at`.
template <typename F>
auto Parser::guarded(const Token& at, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const ParseError&) {
    throw;
  } catch (const std::exception& e) {
    error(at, e.what());
  }
}

// ---- Literals ------------------------------------------------------------------

int64_t Parser::int_value(const Token& t, bool negative) {
  if (t.kind != TokKind::Int) error(t, "expected an integer but found " + t.describe());
  uint64_t mag = 0;
  auto [p, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), mag);
  uint64_t limit = negative ? uint64_t(1) << 63 : uint64_t(std::numeric_limits<int64_t>::max());
  if (ec != std::errc() || p != t.text.data() + t.text.size() || mag > limit)
    error(t, "integer literal " + t.describe() + " is out of range");
  if (!negative) return int64_t(mag);
  return mag == (uint64_t(1) << 63) ? std::numeric_limits<int64_t>::min() : -int64_t(mag);
}

double Parser::float_value(const Token& t, bool negative) {
  double v = 0;
  auto [p, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
  if (ec != std::errc() || p != t.text.data() + t.text.size())
    error(t, "float literal " + t.describe() + " is out of range");
  return negative ? -v : v;
}

bool Parser::at_float_literal() {
  size_t k = at("-") ? 1 : 0;
  const Token& t = peek(k);
  return t.kind == TokKind::Float || t.is_ident("inf") || t.is_ident("nan");
}

// [-] (INT | FLOAT | inf | nan), no suffix.
double Parser::signed_float() {
  bool neg = accept("-");
  Token t = peek();
  if (t.is_ident("inf") || t.is_ident("nan")) {
    next();
    double v = t.text == "inf" ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
    return neg ? -v : v;
  }
  if ((t.kind != TokKind::Int && t.kind != TokKind::Float) || !t.suffix.empty()) expected("a number");
  next();
  if (t.kind == TokKind::Int) return double(int_value(t, neg));
  return float_value(t, neg);
}

DataType Parser::dtype() {
  const Token& t = peek();
  if (t.kind != TokKind::Ident) expected("a dtype");
  auto d = DataType::parse(t.text);
  if (!d) error(t, "unknown dtype '" + t.text + "'");
  next();
  return *d;
}

// ---- Symbolic integers -------------------------------------------------------------

SymExpr Parser::resolve_sym(const Token& t) {
  const std::string& n = t.text;
  if (is_reserved_word(n)) error(t, "expected a symbolic expression but found " + t.describe());
  if (in_prog_) {
    if (const ProgName* p = prog_lookup(n)) {
      if (p->buf) error(t, "'" + n + "' is a buffer, not an index");
      return p->var;
    }
    SymExpr v = SymExpr::var(n);
    prog_names_[n] = ProgName{nullptr, v};
    return v;
  }
  auto it = fn_syms_.find(n);
  if (it != fn_syms_.end()) return it->second;
  if (sym_resolver_) return fn_syms_[n] = sym_resolver_(n);
  SymExpr v = SymExpr::var(n);
  fn_syms_.emplace(n, v);
  return v;
}

SymExpr Parser::sym_expr(int min_prec) {
  Depth d(*this);
  SymExpr lhs = sym_unary();
  for (;;) {
    const Token& t = peek();
    int p = (t.is("+") || t.is("-")) ? 1 : (t.is("*") || t.is("//") || t.is("%")) ? 2 : 0;
    if (p == 0 || p < min_prec) break;
    Token op = next();
    SymExpr rhs = sym_expr(p + 1);
    if ((op.text == "//" || op.text == "%") && rhs.is_const(0)) error(op, "division by zero");
    if (op.text == "+")
      lhs = lhs + rhs;
    else if (op.text == "-")
      lhs = lhs - rhs;
    else if (op.text == "*")
      lhs = lhs * rhs;
    else if (op.text == "//")
      lhs = floordiv(lhs, rhs);
    else
      lhs = floormod(lhs, rhs);
  }
  return lhs;
}

SymExpr Parser::sym_unary() {
  Depth d(*this);
  if (!at("-")) return sym_atom();
  next();
  if (peek().kind == TokKind::Int && peek().suffix.empty()) return SymExpr(int_value(next(), true));
  return -sym_unary();
}

SymExpr Parser::sym_atom() {
  Token t = peek();
  if (t.kind == TokKind::Int) {
    if (!t.suffix.empty()) error(t, "unexpected dtype suffix in symbolic integer " + t.describe());
    next();
    return SymExpr(int_value(t, false));
  }
  if (t.is("(")) {
    next();
    SymExpr e = sym_expr();
    expect(")");
    return e;
  }
  if (t.kind != TokKind::Ident) expected("a symbolic expression");
  if ((t.text == "min" || t.text == "max") && peek(1).is("(")) {
    next();
    next();
    SymExpr a = sym_expr();
    expect(",");
    SymExpr b = sym_expr();
    expect(")");
    return t.text == "min" ? min(a, b) : max(a, b);
  }
  next();
  return resolve_sym(t);
}

std::vector<SymExpr> Parser::dim_list() {
  expect("(");
  std::vector<SymExpr> dims;
  while (!at(")")) {
    dims.push_back(sym_expr());
    if (!accept(",")) break;
  }
  expect(")");
  return dims;
}

// ---- Struct info ---------------------------------------------------------------------

int Parser::ndim_value() {
  next();  // ndim
  expect("=");
  Token t = peek();
  if (t.kind != TokKind::Int || !t.suffix.empty()) expected("a rank");
  next();
  int64_t v = int_value(t, false);
  if (v > 1 << 20) error(t, "rank " + t.text + " is too large");
  return int(v);
}

StructInfo Parser::sinfo() {
  Depth d(*this);
  Token t = peek();
  if (t.kind != TokKind::Ident) expected("a struct info");
  const std::string& k = t.text;
  auto at_ndim = [&] { return at_ident("ndim") && peek(1).is("="); };
  if (k == "Object") {
    next();
    return object_si();
  }
  if (k == "Prim") {
    next();
    expect("[");
    DataType dt = dtype();
    SymExpr v;
    if (accept(",")) v = sym_expr();
    expect("]");
    return prim_si(dt, v);
  }
  if (k == "Shape") {
    next();
    if (!accept("[")) return shape_si_ndim(-1);
    if (at_ndim()) {
      int nd = ndim_value();
      expect("]");
      return shape_si_ndim(nd);
    }
    std::vector<SymExpr> dims = dim_list();
    expect("]");
    return shape_si(std::move(dims));
  }
  if (k == "Tensor") {
    next();
    if (!accept("[")) return tensor_si_ndim(DataType::void_(), -1);
    std::optional<std::vector<SymExpr>> dims;
    int nd = -1;
    DataType dt;
    if (at_ndim() || at("(")) {
      if (at("("))
        dims = dim_list();
      else
        nd = ndim_value();
      if (accept(",")) dt = dtype();
    } else {
      dt = dtype();
    }
    expect("]");
    return dims ? tensor_si(dt, std::move(*dims)) : tensor_si_ndim(dt, nd);
  }
  if (k == "Tuple") {
    next();
    expect("[");
    std::vector<StructInfo> fields;
    while (!at("]")) {
      fields.push_back(sinfo());
      if (!accept(",")) break;
    }
    expect("]");
    return tuple_si(std::move(fields));
  }
  if (k == "Func") {
    next();
    expect("[");
    std::optional<std::vector<StructInfo>> params;
    if (!accept("...")) {
      if (!at("(")) expected("'(' or '...'");
      next();
      params.emplace();
      while (!at(")")) {
        params->push_back(sinfo());
        if (!accept(",")) break;
      }
      expect(")");
    }
    expect("->");
    StructInfo ret = sinfo();
    bool pure = true;
    if (accept(",")) {
      expect_keyword("impure");
      pure = false;
    }
    expect("]");
    return params ? func_si(std::move(*params), ret, pure) : opaque_func_si(ret, pure);
  }
  error(t, "expected a struct info (Object, Prim, Shape, Tensor, Tuple or Func) but found " + t.describe());
}

// ---- Attributes ------------------------------------------------------------------------

// A value of a declared type (an op's attribute).
AttrValue Parser::attr_value(AttrType type, const std::string& attr, const std::string& op) {
  auto bad = [&]() {
    error(peek(), cat("attribute '", attr, "' of '", op, "' should be ", article(type), attr_type_name(type),
                      ", found ", peek().describe()));
  };
  auto is_int = [&] {
    size_t k = at("-") ? 1 : 0;
    return peek(k).kind == TokKind::Int && peek(k).suffix.empty();
  };
  auto int_item = [&]() -> int64_t {
    if (!is_int()) bad();
    bool neg = accept("-");
    return int_value(next(), neg);
  };
  auto float_item = [&]() -> double {
    size_t k = at("-") ? 1 : 0;
    const Token& t = peek(k);
    bool ok = (t.kind == TokKind::Int || t.kind == TokKind::Float) ? t.suffix.empty()
                                                                   : t.is_ident("inf") || t.is_ident("nan");
    if (!ok) bad();
    return signed_float();
  };
  auto string_item = [&]() -> std::string {
    if (peek().kind != TokKind::String) bad();
    return next().text;
  };
  auto sym_item = [&]() -> SymExpr {
    if (at_ident("sym") && peek(1).is("(")) {
      next();
      next();
      SymExpr e = sym_expr();
      expect(")");
      return e;
    }
    const Token& t = peek();
    if (!(t.kind == TokKind::Int || t.kind == TokKind::Ident || t.is("(") || t.is("-"))) bad();
    return sym_expr();
  };
  auto list = [&](auto item) {
    if (!at("[")) bad();
    next();
    std::vector<decltype(item())> v;
    while (!at("]")) {
      v.push_back(item());
      if (!accept(",")) break;
    }
    expect("]");
    return v;
  };
  switch (type) {
    case AttrType::Bool:
      if (!at_ident("true") && !at_ident("false")) bad();
      return next().text == "true";
    case AttrType::Int:
      return int_item();
    case AttrType::Float:
      return float_item();
    case AttrType::String:
      return string_item();
    case AttrType::Ints:
      return list(int_item);
    case AttrType::Floats:
      return list(float_item);
    case AttrType::Strings:
      return list(string_item);
    case AttrType::DType:
      if (peek().kind != TokKind::Ident) bad();
      return dtype();
    case AttrType::Sym:
      return sym_item();
    case AttrType::Syms:
      return list(sym_item);
  }
  error(peek(), "attribute '" + attr + "' has an unknown type");
}

// A value whose type the text decides (function, program and module
// attributes): true/false, ints, floats, strings, dtypes, sym(EXPR), and
// lists of one kind ([] is an empty int list).
AttrValue Parser::untyped_value(bool in_list) {
  Token t = peek();
  if (t.is_ident("true") || t.is_ident("false")) {
    next();
    return t.text == "true";
  }
  if (t.is_ident("sym") && peek(1).is("(")) {
    next();
    next();
    SymExpr e = sym_expr();
    expect(")");
    return e;
  }
  if (t.kind == TokKind::String) {
    next();
    return t.text;
  }
  if (at_float_literal()) return signed_float();
  if (t.kind == TokKind::Int || (t.is("-") && peek(1).kind == TokKind::Int)) {
    bool neg = accept("-");
    Token n = next();
    if (!n.suffix.empty()) error(n, "unexpected dtype suffix in attribute value " + n.describe());
    return int_value(n, neg);
  }
  if (t.is("[") && !in_list) {
    next();
    std::vector<AttrValue> items;
    std::vector<Token> toks;
    while (!at("]")) {
      toks.push_back(peek());
      items.push_back(untyped_value(true));
      if (!accept(",")) break;
    }
    expect("]");
    AttrType kind = AttrType::Int;
    for (size_t i = 0; i < items.size(); ++i) {
      AttrType k = attr_type_of(items[i]);
      if (i == 0)
        kind = k;
      else if ((kind == AttrType::Int && k == AttrType::Float) || (kind == AttrType::Float && k == AttrType::Int))
        kind = AttrType::Float;
      else if (k != kind)
        error(toks[i], "list elements must all be of one type");
      if (k != AttrType::Int && k != AttrType::Float && k != AttrType::String && k != AttrType::Sym)
        error(toks[i], "a list may hold ints, floats, strings or sym(...) values, not " + toks[i].describe());
    }
    switch (kind) {
      case AttrType::Float: {
        std::vector<double> v;
        for (const auto& x : items)
          v.push_back(std::holds_alternative<double>(x) ? std::get<double>(x) : double(std::get<int64_t>(x)));
        return v;
      }
      case AttrType::String: {
        std::vector<std::string> v;
        for (const auto& x : items) v.push_back(std::get<std::string>(x));
        return v;
      }
      case AttrType::Sym: {
        std::vector<SymExpr> v;
        for (const auto& x : items) v.push_back(std::get<SymExpr>(x));
        return v;
      }
      default: {
        std::vector<int64_t> v;
        for (const auto& x : items) v.push_back(std::get<int64_t>(x));
        return v;
      }
    }
  }
  if (t.kind == TokKind::Ident && DataType::parse(t.text)) return dtype();
  expected("an attribute value");
}

Attrs Parser::attr_dict() {
  expect("{");
  Attrs a;
  while (!at("}")) {
    Token k = peek();
    if (k.kind != TokKind::Ident && k.kind != TokKind::String) expected("an attribute name");
    next();
    expect("=");
    if (a.has(k.text)) error(k, "attribute '" + k.text + "' given twice");
    a.set(k.text, untyped_value(false));
    if (!accept(",")) break;
  }
  expect("}");
  return a;
}

// ---- Module -------------------------------------------------------------------------------

IRModule Parser::module() {
  try {
    while (peek().kind != TokKind::End) {
      Token t = peek();
      if (t.is_ident("module_attrs")) {
        if (seen_module_attrs_) error(t, "module_attrs given twice");
        seen_module_attrs_ = true;
        next();
        fn_syms_.clear();
        mod_.attrs = attr_dict();
      } else if (t.is_ident("extern")) {
        extern_decl();
      } else if (t.is_ident("fn")) {
        top_function();
      } else if (t.is_ident("prog")) {
        program();
      } else {
        expected("'fn', 'prog', 'extern' or 'module_attrs'");
      }
    }
    finish();
  } catch (const ParseError&) {
    throw;
  } catch (const std::exception& e) {
    error(last_, e.what());
  }
  return std::move(mod_);
}

SymExpr Parser::sym_only(const std::function<SymExpr(const std::string&)>& var) {
  sym_resolver_ = var;
  SymExpr e = sym_expr();
  if (peek().kind != TokKind::End) expected("end of input");
  return e;
}

StructInfo Parser::sinfo_only() {
  try {
    StructInfo si = sinfo();
    if (peek().kind != TokKind::End) expected("end of input");
    return si;
  } catch (const ParseError&) {
    throw;
  } catch (const std::exception& e) {
    error(last_, e.what());
  }
}

std::string Parser::global_name() {
  if (peek().kind != TokKind::Global) expected("a global name such as '@main'");
  return next().text;
}

void Parser::check_new_global(const Token& t, const std::string& name) {
  if (mod_.contains(name)) error(t, "global " + t.describe() + " is defined twice");
}

void Parser::extern_decl() {
  next();  // extern
  Token nt = peek();
  std::string name = global_name();
  check_new_global(nt, name);
  StructInfo si;
  fn_syms_.clear();
  if (accept(":")) si = sinfo();
  mod_.add_extern(name, si);
}

void Parser::top_function() {
  next();  // fn
  Token nt = peek();
  std::string name = global_name();
  check_new_global(nt, name);
  ++item_;
  fn_syms_.clear();
  scopes_.clear();
  scope_df_.clear();
  Function f = function_rest();
  mod_.add_function(name, f);
}

Expr Parser::global_ref(const std::string& name) {
  auto it = globals_.find(name);
  if (it != globals_.end()) return it->second;
  Expr g = make_global_var(name);
  globals_.emplace(name, g);
  return g;
}

// ---- Graph functions -------------------------------------------------------------------------

Var Parser::lookup(const std::string& key) const {
  for (size_t i = scopes_.size(); i-- > 0;) {
    auto it = scopes_[i].find(key);
    if (it != scopes_[i].end()) return it->second;
  }
  return nullptr;
}

// A dataflow variable lives in the innermost scope (its block); a plain one
// in the innermost scope that is not a dataflow block, so it outlives it.
void Parser::bind(const std::string& key, const Var& v, const Token& at) {
  if (lookup(key)) error(at, "variable '" + key + "' is bound twice");
  bool df = key[0] == '%';
  for (size_t i = scopes_.size(); i-- > 0;) {
    if (df || !scope_df_[i] || i == 0) {
      scopes_[i].emplace(key, v);
      return;
    }
  }
}

// After `fn` (and the global name): (params) -> RET [attrs {..}] { body }.
Function Parser::function_rest() {
  Depth d(*this);
  push_scope(false);
  expect("(");
  std::vector<Var> params;
  while (!at(")")) {
    Token pt = peek();
    if (pt.is("%")) error(pt, "a parameter cannot be a dataflow variable");
    std::string name = expect_name("a parameter name");
    if (is_reserved_word(name)) error(pt, "'" + name + "' is a reserved word");
    expect(":");
    StructInfo si = sinfo();
    Var v = std::make_shared<const VarNode>(ExprKind::Var, name, si);
    bind(name, v, pt);
    params.push_back(v);
    if (!accept(",")) break;
  }
  expect(")");
  expect("->");
  StructInfo ret = sinfo();
  Attrs attrs;
  if (at_ident("attrs")) {
    next();
    attrs = attr_dict();
  }
  SeqExpr b = body(true);
  pop_scope();
  return make_function(std::move(params), b, ret, std::move(attrs));
}

bool Parser::at_binding() {
  const Token& t = peek();
  if (t.kind == TokKind::Ident) return peek(1).is(":") || peek(1).is("=");
  if (!t.is("%")) return false;
  size_t off = t.offset;
  const Token& n = peek(1);
  if ((n.kind != TokKind::Ident && n.kind != TokKind::String) || n.offset != off + 1) return false;
  return peek(2).is(":") || peek(2).is("=");
}

// { [dataflow { bindings }] bindings ... return EXPR }, or for a branch or a
// nested block { ... EXPR }.
SeqExpr Parser::body(bool is_function) {
  expect("{");
  std::vector<BindingBlock> blocks;
  BindingBlock cur;
  auto flush = [&] {
    if (!cur.bindings.empty()) blocks.push_back(std::move(cur));
    cur = BindingBlock{};
  };
  Expr result;
  for (;;) {
    if (at_ident("dataflow") && peek(1).is("{")) {
      flush();
      next();
      next();
      BindingBlock df;
      df.dataflow = true;
      push_scope(true);
      while (!at("}")) {
        if (!at_binding()) expected("a binding or '}'");
        binding(df);
      }
      next();
      pop_scope();
      blocks.push_back(std::move(df));
      continue;
    }
    if (is_function && at_ident("return")) {
      next();
      Token t = peek();
      result = expr();
      pending_.push_back({result, nullptr, nullptr, loc(t), item_});
      break;
    }
    if (at_binding()) {
      binding(cur);
      continue;
    }
    if (is_function) expected("a binding, 'dataflow' or 'return'");
    Token t = peek();
    result = expr();
    pending_.push_back({result, nullptr, nullptr, loc(t), item_});
    break;
  }
  flush();
  expect("}");
  return make_seq(std::move(blocks), result);
}

void Parser::binding(BindingBlock& block) {
  Token nt = peek();
  bool df = accept("%");
  Token name_tok = next();
  std::string name = name_tok.text;
  if (!df && is_reserved_word(name)) error(name_tok, "'" + name + "' is a reserved word");
  StructInfo annot;
  if (accept(":")) annot = sinfo();
  expect("=");
  Token vt = peek();
  Expr value;
  StructInfo cast;
  if (at_ident("match_cast") && peek(1).is("(")) {
    next();
    next();
    value = expr();
    expect(",");
    cast = sinfo();
    expect(")");
  } else {
    value = expr();
  }
  std::string key = df ? "%" + (is_identifier(name) ? name : quote_string(name)) : name;
  StructInfo vsi = annot ? annot : cast;
  Var v = df ? Var(std::make_shared<const DataflowVarNode>(name, vsi))
             : Var(std::make_shared<const VarNode>(ExprKind::Var, name, vsi));
  bind(key, v, nt);
  pending_.push_back({value, v, annot, loc(vt), item_});
  block.bindings.push_back(Binding{v, value, cast});
}

Expr Parser::expr() {
  Depth d(*this);
  Expr e = primary();
  for (;;) {
    Token t = peek();
    if (t.newline_before) break;  // a postfix must be on the same line
    if (t.is("[")) {
      next();
      bool neg = accept("-");
      Token it = peek();
      if (it.kind != TokKind::Int || !it.suffix.empty()) expected("a tuple index");
      next();
      int64_t i = int_value(it, neg);
      if (i > std::numeric_limits<int>::max() || i < std::numeric_limits<int>::min())
        error(it, "tuple index out of range");
      expect("]");
      e = make_tuple_get_item(e, int(i));
      continue;
    }
    if (t.is("(")) {
      next();
      std::vector<Expr> args;
      Attrs attrs;
      std::vector<StructInfo> sargs;
      call_args(args, attrs, sargs, nullptr);
      e = make_call(e, std::move(args), std::move(attrs), std::move(sargs));
      continue;
    }
    break;
  }
  return e;
}

Expr Parser::primary() {
  Token t = peek();
  switch (t.kind) {
    case TokKind::Ident:
      return ident_primary();
    case TokKind::Global:
      next();
      return global_ref(t.text);
    case TokKind::String:
      next();
      return make_string(t.text);
    case TokKind::Int:
    case TokKind::Float:
      error(t, "expected an expression but found " + t.describe() + " (a scalar is written prim(" + t.text + "))");
    case TokKind::Punct:
      if (t.is("%")) return dataflow_ref();
      if (t.is("(")) return tuple_or_paren();
      if (t.is("{")) {
        push_scope(false);
        SeqExpr s = body(false);
        pop_scope();
        return s;
      }
      break;
    case TokKind::End:
      break;
  }
  expected("an expression");
}

Expr Parser::dataflow_ref() {
  Token pt = next();  // %
  const Token& n = peek();
  if ((n.kind != TokKind::Ident && n.kind != TokKind::String) || n.offset != pt.offset + 1)
    error(pt, "expected a dataflow variable name right after '%'");
  Token nt = next();
  std::string key = "%" + (is_identifier(nt.text) ? nt.text : quote_string(nt.text));
  if (Var v = lookup(key)) return v;
  error(pt, "undefined variable '" + key + "'");
}

Expr Parser::tuple_or_paren() {
  next();  // (
  if (accept(")")) return make_tuple({});
  Expr first = expr();
  if (accept(")")) return first;
  if (!at(",")) expected("',' or ')'");
  next();
  std::vector<Expr> fields{first};
  while (!at(")")) {
    fields.push_back(expr());
    if (!accept(",")) break;
  }
  if (!at(")")) expected("',' or ')'");
  next();
  return make_tuple(std::move(fields));
}

Expr Parser::ident_primary() {
  Token t = peek();
  const std::string& n = t.text;
  bool call = peek(1).is("(");
  if (n == "if" && call) {
    next();
    next();
    Expr cond = expr();
    expect(")");
    push_scope(false);
    SeqExpr then_b = body(false);
    pop_scope();
    expect_keyword("else");
    push_scope(false);
    SeqExpr else_b = body(false);
    pop_scope();
    return make_if(cond, then_b, else_b);
  }
  if (n == "fn" && call) {
    next();
    return function_rest();
  }
  if (call && (n == "const" || n == "shape" || n == "op" || n == "extern")) {
    next();
    next();
    Expr e;
    if (n == "shape") {
      std::vector<SymExpr> values;
      while (!at(")")) {
        values.push_back(sym_expr());
        if (!accept(",")) break;
      }
      e = make_shape(std::move(values));
    } else {
      Token st = peek();
      if (st.kind != TokKind::String) expected("a string");
      next();
      if (n == "const") {
        expect(",");
        StructInfo si = sinfo();
        e = make_constant(st.text, si);
      } else if (n == "op") {
        if (!find_op(st.text)) error(st, "unknown op '" + st.text + "'");
        e = guarded(st, [&] { return make_op_ref(st.text); });
      } else {
        e = make_extern(st.text);
      }
    }
    if (!at(")")) expected("')'");
    next();
    return e;
  }
  if (n == "prim" && call) return prim_value();
  if (n == "match_cast") error(t, "match_cast(...) may only be the value of a binding");
  if (Var v = lookup(n)) {
    next();
    return v;
  }
  if (call) return op_call();
  if (is_reserved_word(n)) expected("an expression");
  error(t, "undefined variable '" + n + "'");
}

// prim(3) prim(n + 1) prim(3, i32) prim(0.5, f32) prim(-inf, f32) prim(true)
Expr Parser::prim_value() {
  next();
  next();
  Token vt = peek();
  Expr r;
  if (at_ident("true") || at_ident("false")) {
    bool b = next().text == "true";
    if (accept(",")) {
      Token dt = peek();
      if (!dtype().is_bool()) error(dt, "a bool prim value needs the dtype bool");
    }
    r = make_prim_bool(b);
  } else if (at_float_literal()) {
    double v = signed_float();
    DataType dt = DataType::f32();
    if (accept(",")) {
      Token dtt = peek();
      dt = dtype();
      if (!dt.is_float()) error(dtt, "a float prim value needs a float dtype, not " + dt.str());
    }
    r = make_prim_float(v, dt);
  } else {
    SymExpr v = sym_expr();
    DataType dt = DataType::i64();
    if (accept(",")) dt = dtype();
    if (dt.is_float()) {
      if (!v.is_const()) error(vt, "a prim value of dtype " + dt.str() + " must be a number");
      r = make_prim_float(double(v.const_value()), dt);
    } else if (dt.is_bool() && v.is_const()) {
      r = make_prim_bool(v.const_value() != 0);
    } else {
      r = make_prim_int(v, dt);
    }
  }
  expect(")");
  return r;
}

Expr Parser::op_call() {
  Token nt = next();
  const OpInfo* op = find_op(nt.text);
  if (!op) error(nt, "unknown op '" + nt.text + "'");
  next();  // (
  std::vector<Expr> args;
  Attrs given;
  std::vector<StructInfo> sargs;
  call_args(args, given, sargs, op);
  Attrs full = guarded(nt, [&] { return check_op_attrs(*op, given, args.size()); });
  Expr callee = guarded(nt, [&] { return make_op_ref(nt.text); });
  return make_call(callee, std::move(args), std::move(full), std::move(sargs));
}

// After '(': positional arguments, then name=value attributes and out=SINFO,
// then ')'. With `op`, attribute values are read by their declared type.
void Parser::call_args(std::vector<Expr>& args, Attrs& attrs, std::vector<StructInfo>& sinfo_args, const OpInfo* op) {
  bool seen_attr = false;
  while (!at(")")) {
    const Token& k = peek();
    if ((k.kind == TokKind::Ident || k.kind == TokKind::String) && peek(1).is("=")) {
      Token kt = next();
      next();
      const std::string& key = kt.text;
      const AttrSpec* spec = op ? op->find_attr(key) : nullptr;
      if (key == "out" && !spec) {
        sinfo_args.push_back(sinfo());
      } else {
        if (op && !spec) error(kt, "op '" + op->name + "' has no attribute '" + key + "'");
        if (attrs.has(key)) error(kt, "attribute '" + key + "' given twice");
        attrs.set(key, spec ? attr_value(spec->type, key, op->name) : untyped_value(false));
      }
      seen_attr = true;
    } else {
      if (seen_attr) error(k, "positional argument after attributes");
      args.push_back(expr());
    }
    if (!accept(",")) break;
  }
  if (!at(")")) expected("',' or ')'");
  next();
}

// ---- Tensor programs ------------------------------------------------------------------------

const ProgName* Parser::prog_lookup(const std::string& name) const {
  for (size_t i = prog_scopes_.size(); i-- > 0;)
    for (const auto& [n, v] : prog_scopes_[i])
      if (n == name) return &v;
  auto it = prog_names_.find(name);
  return it == prog_names_.end() ? nullptr : &it->second;
}

void Parser::prog_define(const Token& at, const std::string& name, ProgName v, bool scoped) {
  if (is_reserved_word(name)) error(at, "'" + name + "' is a reserved word");
  if (prog_lookup(name)) error(at, "'" + name + "' is already defined");
  if (scoped)
    prog_scopes_.back().emplace_back(name, std::move(v));
  else
    prog_names_.emplace(name, std::move(v));
}

tir::Buffer Parser::buffer_type(const std::string& name) {
  expect_keyword("Buffer");
  expect("[");
  std::vector<SymExpr> dims = dim_list();
  expect(",");
  DataType dt = dtype();
  tir::Scope scope = tir::Scope::Global;
  if (accept(",")) {
    Token st = peek();
    std::string s = expect_name("a buffer scope");
    if (s == "local")
      scope = tir::Scope::Local;
    else if (s == "shared")
      scope = tir::Scope::Shared;
    else if (s != "global")
      error(st, "unknown buffer scope '" + s + "' (global, shared or local)");
  }
  expect("]");
  return tir::make_buffer(name, dt, std::move(dims), scope);
}

void Parser::program() {
  next();  // prog
  Token nt = peek();
  std::string name = global_name();
  check_new_global(nt, name);
  ++item_;
  in_prog_ = true;
  prog_names_.clear();
  prog_scopes_.clear();
  std::vector<tir::Buffer> inputs, outputs;
  std::vector<SymExpr> sym_params;
  expect("(");
  while (!at(")")) {
    Token pt = peek();
    std::string pn = expect_name("a parameter name");
    expect(":");
    if (at_ident("Buffer")) {
      tir::Buffer b = buffer_type(pn);
      prog_define(pt, pn, ProgName{b, {}}, false);
      inputs.push_back(b);
    } else {
      Token dt_tok = peek();
      if (dtype() != DataType::i64()) error(dt_tok, "a symbolic parameter must be i64");
      const ProgName* existing = prog_lookup(pn);
      if (existing && existing->buf) error(pt, "'" + pn + "' is already defined");
      SymExpr v = existing ? existing->var : resolve_sym(pt);
      for (const SymExpr& s : sym_params)
        if (s == v) error(pt, "'" + pn + "' is already a parameter");
      sym_params.push_back(v);
    }
    if (!accept(",")) break;
  }
  expect(")");
  expect("->");
  expect("(");
  while (!at(")")) {
    Token pt = peek();
    std::string pn = expect_name("an output buffer name");
    expect(":");
    tir::Buffer b = buffer_type(pn);
    prog_define(pt, pn, ProgName{b, {}}, false);
    outputs.push_back(b);
    if (!accept(",")) break;
  }
  expect(")");
  Attrs attrs;
  if (at_ident("attrs")) {
    next();
    attrs = attr_dict();
  }
  tir::Stmt body = stmt_block();
  in_prog_ = false;
  mod_.add_program(name, tir::make_program(name, std::move(inputs), std::move(outputs), std::move(sym_params), body,
                                           std::move(attrs)));
}

tir::Stmt Parser::stmt_block() {
  Depth d(*this);
  expect("{");
  prog_scopes_.emplace_back();
  tir::Stmt s = stmt_list();
  prog_scopes_.pop_back();
  expect("}");
  return s;
}

// Statements up to '}'. `alloc` opens an allocation whose body is the rest
// of the list.
tir::Stmt Parser::stmt_list() {
  struct Frame {
    tir::Buffer buf;
    std::vector<tir::Stmt> stmts;
  };
  std::vector<Frame> frames(1);
  while (!at("}")) {
    if (at_ident("alloc")) {
      next();
      Token nt = peek();
      std::string name = expect_name("a buffer name");
      expect(":");
      tir::Buffer b = buffer_type(name);
      prog_define(nt, name, ProgName{b, {}}, true);
      frames.push_back({b, {}});
      continue;
    }
    frames.back().stmts.push_back(stmt());
  }
  tir::Stmt s = tir::make_seq(std::move(frames.back().stmts));
  for (size_t i = frames.size() - 1; i > 0; --i) {
    frames[i - 1].stmts.push_back(tir::make_allocate(frames[i].buf, s));
    s = tir::make_seq(std::move(frames[i - 1].stmts));
  }
  return s;
}

tir::Stmt Parser::stmt() {
  Depth d(*this);
  Token t = peek();
  if (t.is_ident("for")) return for_stmt();
  if (t.is_ident("if") && peek(1).is("(")) {
    next();
    next();
    Token ct = peek();
    tir::TExpr cond = texpr();
    expect(")");
    tir::Stmt then_s = stmt_block();
    tir::Stmt else_s;
    if (at_ident("else")) {
      next();
      else_s = at_ident("if") ? stmt() : stmt_block();
    }
    return guarded(ct, [&] { return tir::make_if(cond, then_s, else_s); });
  }
  if (t.is_ident("barrier") && peek(1).is("(")) {
    next();
    next();
    expect(")");
    return tir::make_barrier();
  }
  if (t.is("{")) return stmt_block();
  if (t.kind == TokKind::Ident && peek(1).is("[")) return store_stmt();
  expected("a statement");
}

tir::Stmt Parser::for_stmt() {
  next();  // for
  Token vt = peek();
  std::string vn = expect_name("a loop variable");
  expect_keyword("in");
  Token kt = peek();
  std::string kn = expect_name("a loop kind");
  auto kind = tir::find_loop_kind(kn);
  if (!kind) error(kt, "unknown loop kind '" + kn + "'");
  expect("(");
  Token et = peek();
  tir::TExpr ext = texpr();
  expect(")");
  auto* s = tir::as<tir::SymNodeT>(ext);
  if (!s) error(et, "a loop extent must be an integer index expression");
  SymExpr extent = s->value;
  if (is_reserved_word(vn)) error(vt, "'" + vn + "' is a reserved word");
  if (prog_lookup(vn)) error(vt, "'" + vn + "' is already defined");
  SymExpr var = SymExpr::var(vn);
  prog_scopes_.push_back({{vn, ProgName{nullptr, var}}});
  tir::Stmt body = stmt_block();
  prog_scopes_.pop_back();
  return tir::make_for(var, extent, *kind, body);
}

tir::Stmt Parser::store_stmt() {
  Token bt = peek();
  const ProgName* p = prog_lookup(bt.text);
  if (!p) error(bt, "undefined buffer '" + bt.text + "'");
  if (!p->buf) error(bt, "'" + bt.text + "' is not a buffer");
  tir::Buffer b = p->buf;
  next();
  next();  // [
  std::vector<tir::TExpr> idx;
  while (!at("]")) {
    idx.push_back(texpr());
    if (!accept(",")) break;
  }
  expect("]");
  Token eq = expect("=");
  tir::TExpr value = texpr();
  return guarded(eq, [&] { return tir::make_store(b, std::move(idx), value); });
}

tir::TExpr Parser::texpr(int min_prec) {
  Depth d(*this);
  tir::TExpr lhs = tunary();
  for (;;) {
    auto op = infix_op(peek());
    if (!op) break;
    int p = binop_prec(*op);
    if (p < min_prec) break;
    Token ot = next();
    tir::TExpr rhs = texpr(p + 1);
    lhs = build_binary(*op, lhs, rhs, ot);
  }
  return lhs;
}

tir::TExpr Parser::tunary() {
  Depth d(*this);
  Token t = peek();
  if (t.is("-")) {
    next();
    if (peek().kind == TokKind::Int || peek().kind == TokKind::Float) return tnumber(true);
    return negate(tunary(), t);
  }
  if (t.is("!") || t.is("~")) {
    next();
    tir::TExpr a = tunary();
    return guarded(t, [&] { return tir::unary(t.is("!") ? tir::UnOp::Not : tir::UnOp::BitNot, a); });
  }
  return tprimary();
}

tir::TExpr Parser::negate(const tir::TExpr& a, const Token& at) {
  if (auto* s = tir::as<tir::SymNodeT>(a)) return tir::sym(-s->value);
  if (auto* i = tir::as<tir::ImmNode>(a)) {
    if (a->dtype.is_float()) return guarded(at, [&] { return tir::imm(a->dtype, -i->float_value); });
    if (a->dtype.is_int())
      return guarded(at, [&] { return tir::imm_int(a->dtype, int64_t(0 - uint64_t(i->int_value))); });
  }
  return guarded(at, [&] { return tir::unary(tir::UnOp::Neg, a); });
}

// A number in a tensor program: unsuffixed integers are index values (Sym),
// suffixed ones typed immediates.
tir::TExpr Parser::tnumber(bool negative) {
  Token t = next();
  if (t.suffix.empty()) {
    if (t.kind == TokKind::Float)
      error(t, "a float literal in a tensor program needs a dtype suffix, as in " + t.text + "f32");
    return tir::sym(SymExpr(int_value(t, negative)));
  }
  auto dt = DataType::parse(t.suffix);
  if (!dt || dt->is_void()) error(t, "unknown dtype suffix '" + t.suffix + "'");
  if (dt->is_float()) {
    double v = float_value(t, negative);
    return guarded(t, [&] { return tir::imm(*dt, v); });
  }
  if (t.kind == TokKind::Float) error(t, "a float literal cannot have the dtype " + dt->str());
  if (dt->is_bool()) error(t, "bool immediates are written true and false");
  uint64_t mag = 0;
  auto [p, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), mag);
  bool ok = ec == std::errc() && p == t.text.data() + t.text.size();
  int bits = dt->bits;
  int64_t value = 0;
  if (ok && dt->is_uint()) {
    ok = !negative && (bits >= 64 || mag <= (uint64_t(1) << bits) - 1);
    value = int64_t(mag);
  } else if (ok) {
    uint64_t limit = bits >= 64 ? (uint64_t(1) << 63) : (uint64_t(1) << (bits - 1));
    ok = negative ? mag <= limit : mag < limit;
    value = negative ? int64_t(0 - mag) : int64_t(mag);
  }
  if (!ok) error(t, "literal " + std::string(negative ? "-" : "") + t.text + " is out of range for " + dt->str());
  return guarded(t, [&] { return tir::imm_int(*dt, value); });
}

tir::TExpr Parser::tprimary() {
  Token t = peek();
  if (t.kind == TokKind::Int || t.kind == TokKind::Float) return tnumber(false);
  if (t.is("(")) {
    next();
    tir::TExpr e = texpr();
    expect(")");
    return e;
  }
  if (t.kind != TokKind::Ident) expected("an expression");
  const std::string& n = t.text;
  if (peek(1).is("(")) return tcall();
  if (peek(1).is("[")) return tload();
  if (n == "true" || n == "false") {
    next();
    return tir::imm_int(DataType::boolean(), n == "true");
  }
  auto dot = n.rfind('.');
  if (dot != std::string::npos && (n.substr(dot + 1) == "inf" || n.substr(dot + 1) == "nan")) {
    auto dt = DataType::parse(n.substr(0, dot));
    if (!dt || !dt->is_float()) error(t, "unknown float dtype '" + n.substr(0, dot) + "' in " + t.describe());
    next();
    double v =
        n.substr(dot + 1) == "inf" ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
    return guarded(t, [&] { return tir::imm(*dt, v); });
  }
  if (is_reserved_word(n)) expected("an expression");
  next();
  return tir::sym(resolve_sym(t));
}

tir::TExpr Parser::tload() {
  Token bt = next();
  const ProgName* p = prog_lookup(bt.text);
  if (!p) error(bt, "undefined buffer '" + bt.text + "'");
  if (!p->buf) error(bt, "'" + bt.text + "' is not a buffer");
  tir::Buffer b = p->buf;
  next();  // [
  std::vector<tir::TExpr> idx;
  while (!at("]")) {
    idx.push_back(texpr());
    if (!accept(",")) break;
  }
  expect("]");
  return guarded(bt, [&] { return tir::load(b, std::move(idx)); });
}

// min, max, cast, select and the intrinsics.
tir::TExpr Parser::tcall() {
  Token nt = next();
  next();  // (
  const std::string& n = nt.text;
  if (n == "cast") {
    DataType dt = dtype();
    expect(",");
    tir::TExpr a = texpr();
    expect(")");
    return guarded(nt, [&] { return tir::cast(dt, a); });
  }
  std::vector<tir::TExpr> args;
  while (!at(")")) {
    args.push_back(texpr());
    if (!accept(",")) break;
  }
  expect(")");
  auto arity = [&](size_t want) {
    if (args.size() != want)
      error(nt, cat("'", n, "' takes ", want, want == 1 ? " argument" : " arguments", ", got ", args.size()));
  };
  if (n == "min" || n == "max") {
    arity(2);
    return build_binary(n == "min" ? tir::BinOp::Min : tir::BinOp::Max, args[0], args[1], nt);
  }
  if (n == "select") {
    arity(3);
    return guarded(nt, [&] { return tir::select(args[0], args[1], args[2]); });
  }
  std::optional<tir::Intrinsic> fn = tir::find_intrinsic(n);
  if (!fn) error(nt, "unknown function '" + n + "'");
  arity(size_t(tir::intrinsic_arity(*fn)));
  return guarded(nt, [&] { return tir::call(*fn, args); });
}

// tir::binary folds index arithmetic into one canonical Sym; its errors
// (division by zero, dtype mismatches) get the operator's location.
tir::TExpr Parser::build_binary(tir::BinOp op, const tir::TExpr& a, const tir::TExpr& b, const Token& at) {
  return guarded(at, [&] { return tir::binary(op, a, b); });
}

// ---- Struct-info deduction ------------------------------------------------------------------

void Parser::deduce(const Expr& e, const InferContext& ctx) {
  if (!e || e->sinfo) return;
  switch (e->kind) {
    case ExprKind::Var:
    case ExprKind::DataflowVar:
      return;
    case ExprKind::GlobalVar:  // finish() has set those of the module's items
      fail("no global named ", global_text(as<GlobalVarNode>(e)->name), " in the module");
    case ExprKind::OpRef:
    case ExprKind::ExternFunc:
      try {
        e->sinfo = infer_struct_info(e, ctx);
      } catch (const std::exception&) {
      }
      return;
    case ExprKind::Call: {
      auto* c = as<CallNode>(e);
      try {
        deduce(c->callee, ctx);  // infer_call reports a bad callee itself
      } catch (const std::exception&) {
      }
      for (const Expr& a : c->args) deduce(a, ctx);
      break;
    }
    case ExprKind::Tuple:
      for (const Expr& f : as<TupleNode>(e)->fields) deduce(f, ctx);
      break;
    case ExprKind::TupleGetItem:
      deduce(as<TupleGetItemNode>(e)->tuple, ctx);
      break;
    case ExprKind::If: {
      auto* i = as<IfNode>(e);
      deduce(i->cond, ctx);
      deduce(i->then_branch, ctx);
      deduce(i->else_branch, ctx);
      break;
    }
    case ExprKind::SeqExpr:
      deduce(as<SeqExprNode>(e)->body, ctx);
      break;
    case ExprKind::Function: {
      auto* f = as<FunctionNode>(e);
      deduce(f->body, ctx);
      std::vector<StructInfo> ps;
      for (const Var& p : f->params) ps.push_back(p->sinfo);
      e->sinfo = func_si(std::move(ps), f->ret, f->pure());
      return;
    }
    default:
      break;
  }
  e->sinfo = infer_struct_info(e, ctx);
}

void Parser::finish() {
  for (const auto& [name, gv] : globals_) {
    if (gv->sinfo) continue;
    if (Function f = mod_.function(name)) {
      std::vector<StructInfo> ps;
      for (const Var& p : f->params) ps.push_back(p->sinfo);
      gv->sinfo = func_si(std::move(ps), f->ret, f->pure());
    } else if (const ExternDecl* d = mod_.extern_decl(name)) {
      gv->sinfo = as<FuncSI>(d->sinfo) ? d->sinfo : opaque_func_si(object_si());
    } else if (mod_.program(name)) {
      gv->sinfo = opaque_func_si(object_si());
    }
  }
  std::unique_ptr<Analyzer> ana;
  int cur = -1;
  for (Pending& p : pending_) {
    if (p.item != cur) {
      ana = std::make_unique<Analyzer>();
      cur = p.item;
    }
    InferContext ctx{*ana, &mod_};
    try {
      deduce(p.value, ctx);
    } catch (const std::exception& e) {
      if (!p.annot) error(p.loc, e.what());
    }
    if (!p.value->sinfo && p.annot) p.value->sinfo = p.annot;
    if (p.var && !p.var->sinfo) p.var->sinfo = p.value->sinfo;
  }
}

}  // namespace

IRModule parse_module(std::string_view text, const std::string& filename) { return Parser(text, filename).module(); }

IRModule parse_module_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read file '", path, "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail("cannot read file '", path, "'");
  return parse_module(ss.str(), path);
}

StructInfo parse_sinfo(std::string_view text) { return Parser(text, "<input>").sinfo_only(); }

std::optional<SymExpr> parse_sym_expr(std::string_view text,
                                      const std::function<SymExpr(const std::string&)>& var) {
  try {
    return Parser(text, "<input>").sym_only(var);
  } catch (const Error&) {
    return std::nullopt;
  }
}

}  // namespace relax
