// The parser's internals, shared by ir/parser.cc (modules, graph
// functions, struct info, deduction) and ir/parser_tir.cc (tensor
// programs). Not part of the public interface: see ir/parser.h.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/lexer.h"
#include "ir/module.h"
#include "ir/normalize.h"
#include "ir/op.h"

namespace relax::parser_detail {

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

inline const char* article(AttrType t) {
  switch (t) {
    case AttrType::Int:
    case AttrType::Ints:
      return "an ";
    default:
      return "a ";
  }
}

inline std::string global_text(const std::string& name) {
  return "'@" + (is_identifier(name) ? name : quote_string(name)) + "'";
}

inline std::optional<tir::BinOp> infix_op(const Token& t) {
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

}  // namespace relax::parser_detail
