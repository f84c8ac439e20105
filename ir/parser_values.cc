// The IR parser, the pieces every construct uses: literals, symbolic
// integers, struct info and attribute values (docs/ir_text.md).
#include <charconv>
#include <cmath>
#include <limits>

#include "ir/parser_impl.h"

namespace relax::parser_detail {

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
  if (k == "List") {
    next();
    if (!accept("[")) return list_si(nullptr);
    StructInfo elem = sinfo();
    expect("]");
    return list_si(std::move(elem));
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
  error(t, "expected a struct info (Object, Prim, Shape, Tensor, Tuple, List or Func) but found " + t.describe());
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

}  // namespace relax::parser_detail
