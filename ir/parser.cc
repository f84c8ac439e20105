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

#include <charconv>
#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <unordered_map>

#include "ir/lexer.h"
#include "ir/normalize.h"
#include "ir/op.h"
#include "ir/parser_impl.h"

namespace relax {
namespace parser_detail {

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

}  // namespace parser_detail

using parser_detail::Parser;

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

std::optional<SymExpr> parse_sym_expr(std::string_view text, const std::function<SymExpr(const std::string&)>& var) {
  try {
    return Parser(text, "<input>").sym_only(var);
  } catch (const Error&) {
    return std::nullopt;
  }
}

}  // namespace relax
