// The IR parser, tensor programs: buffers, loops, stores and scalar
// expressions (docs/ir_text.md, "Tensor programs").
#include <charconv>
#include <cmath>
#include <limits>

#include "ir/parser_impl.h"

namespace relax::parser_detail {

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
    int p = tir::binop_precedence(*op);
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

}  // namespace relax::parser_detail
