#include "ir/verifier.h"

#include <functional>
#include <unordered_set>

#include "ir/error.h"
#include "ir/normalize.h"
#include "ir/op.h"
#include "ir/printer.h"

namespace relax {
namespace {

// Where the verifier is, for messages: "in @main, binding lv1: ...".
struct Location {
  std::string item;     // "@main"
  std::string binding;  // "lv1", or "" outside a binding
};

// Checks one graph function. Scopes are sets of nodes; nested functions and
// If branches push a scope that is popped when they end.
class GraphVerifier {
 public:
  GraphVerifier(const IRModule& mod, std::vector<std::string>& errors) : mod_(mod), errors_(errors) {}

  void check_function(const std::string& name, const Function& fn) {
    loc_ = {"@" + name, ""};
    check_function_body(*fn);
  }

 private:
  template <typename... Args>
  void report(const Args&... args) {
    std::string where = "in " + loc_.item;
    if (!loc_.binding.empty()) where += ", binding " + loc_.binding;
    errors_.push_back(cat(where, ": ", args...));
  }

  // ---- Scopes ------------------------------------------------------------

  bool var_defined(const VarNode* v) const { return vars_.count(v) != 0; }
  bool sym_defined(const SymExpr& v) const { return syms_.count(v.get()) != 0; }

  void define_var(const Var& v) {
    if (!seen_vars_.insert(v.get()).second) report("variable '", v->name, "' is bound twice");
    vars_.insert(v.get());
  }

  // Symbolic variables used by `si` must already be defined.
  void check_syms(const StructInfo& si, const char* what) {
    if (!si) return;
    std::vector<SymExpr> vs;
    collect_vars(si, vs);
    for (const SymExpr& v : vs) check_sym(v, what);
  }
  void check_syms(const SymExpr& e, const char* what) {
    for (const SymExpr& v : free_vars(e)) check_sym(v, what);
  }
  void check_sym(const SymExpr& v, const char* what) {
    if (sym_defined(v)) return;
    report("symbolic variable '", v.name(), "' is used in ", what, " before a parameter or match_cast defines it");
    syms_.insert(v.get());  // report once
  }
  void define_syms(const StructInfo& si) {
    std::vector<SymExpr> vs;
    collect_definable_vars(si, vs);
    for (const SymExpr& v : vs) syms_.insert(v.get());
  }

  // ---- Functions and sequences --------------------------------------------

  void check_function_body(const FunctionNode& fn) {
    auto saved_vars = vars_;
    auto saved_syms = syms_;
    for (const Var& p : fn.params) {
      if (is_dataflow_var(p)) report("parameter '%", p->name, "' must not be a dataflow variable");
      define_var(p);
      define_syms(p->sinfo);
    }
    for (const Var& p : fn.params) check_syms(p->sinfo, cat("the annotation of parameter '", p->name, "'").c_str());
    check_syms(fn.ret, "the return annotation");
    if (!fn.body) {
      report("function has no body");
    } else {
      StructInfo body_si = check_seq(*fn.body, fn.pure());
      if (body_si && fn.ret && is_base_of(fn.ret, body_si, ana_) == Tri::No)
        report("returns ", print_sinfo(body_si), " but is declared to return ", print_sinfo(fn.ret));
    }
    vars_ = std::move(saved_vars);
    syms_ = std::move(saved_syms);
  }

  // Returns the struct info of the sequence's result.
  StructInfo check_seq(const SeqExprNode& seq, bool pure) {
    auto saved_vars = vars_;
    for (const BindingBlock& block : seq.blocks) check_block(block, pure);
    std::string saved_binding = loc_.binding;
    loc_.binding = "";
    check_expr(seq.body, false);
    StructInfo si = seq.body ? seq.body->sinfo : nullptr;
    loc_.binding = saved_binding;
    vars_ = std::move(saved_vars);
    return si;
  }

  void check_block(const BindingBlock& block, bool pure) {
    std::vector<const VarNode*> dataflow_vars;
    for (const Binding& b : block.bindings) {
      loc_.binding = b.var ? (is_dataflow_var(b.var) ? "%" : "") + b.var->name : "?";
      if (!b.var || !b.value) {
        report("binding has no variable or no value");
        continue;
      }
      check_expr(b.value, block.dataflow);
      check_binding_sinfo(b);
      if (b.is_match_cast()) define_syms(b.cast);
      check_syms(b.var->sinfo, "the annotation");
      if (is_dataflow_var(b.var)) {
        if (!block.dataflow) report("dataflow variable bound outside a dataflow block");
        dataflow_vars.push_back(b.var.get());
      }
      define_var(b.var);
    }
    loc_.binding = "";
    for (const VarNode* v : dataflow_vars) vars_.erase(v);  // not visible after the block
  }

  // The annotation of a binding must not be provably incompatible with what
  // its value is deduced to be.
  void check_binding_sinfo(const Binding& b) {
    StructInfo deduced;
    try {
      deduced = infer_struct_info(b.value, InferContext{ana_, &mod_});
    } catch (const Error& e) {
      report(e.what());
      return;
    }
    const StructInfo& annot = b.var->sinfo;
    if (!annot) {
      report("variable has no struct info");
      return;
    }
    if (b.is_match_cast()) {
      if (!struct_info_same(annot, b.cast)) report("match_cast variable must carry the cast struct info");
      if (is_base_of(b.cast, deduced, ana_) == Tri::No && is_base_of(deduced, b.cast, ana_) == Tri::No)
        report("match_cast to ", print_sinfo(b.cast), " can never match a value of ", print_sinfo(deduced));
      return;
    }
    if (is_base_of(annot, deduced, ana_) == Tri::No && is_base_of(deduced, annot, ana_) == Tri::No)
      report("annotation ", print_sinfo(annot), " is incompatible with the deduced ", print_sinfo(deduced));
  }

  // ---- Expressions ---------------------------------------------------------

  void check_expr(const Expr& e, bool in_dataflow) {
    if (!e) {
      report("missing expression");
      return;
    }
    switch (e->kind) {
      case ExprKind::Var:
      case ExprKind::DataflowVar: {
        auto* v = as<VarNode>(e);
        if (!var_defined(v)) {
          const char* why =
              is_dataflow_var(e) && seen_vars_.count(v) ? " outside its dataflow block" : " before its definition";
          report("variable '", is_dataflow_var(e) ? "%" : "", v->name, "' is used", why);
        }
        return;
      }
      case ExprKind::GlobalVar: {
        auto* g = as<GlobalVarNode>(e);
        if (!mod_.contains(g->name)) report("reference to undefined global '@", g->name, "'");
        return;
      }
      case ExprKind::Constant:
        check_syms(e->sinfo, "a constant's struct info");
        return;
      case ExprKind::PrimValue:
        if (auto* p = as<PrimValueNode>(e); p->int_value.defined()) check_syms(p->int_value, "a prim value");
        return;
      case ExprKind::ShapeExpr:
        for (const SymExpr& v : as<ShapeExprNode>(e)->values) check_syms(v, "a shape");
        return;
      case ExprKind::StringImm:
      case ExprKind::OpRef:
      case ExprKind::ExternFunc:
        return;
      case ExprKind::Tuple:
        for (const Expr& f : as<TupleNode>(e)->fields) check_expr(f, in_dataflow);
        return;
      case ExprKind::TupleGetItem:
        check_expr(as<TupleGetItemNode>(e)->tuple, in_dataflow);
        return;
      case ExprKind::Call:
        check_call(*as<CallNode>(e), in_dataflow);
        return;
      case ExprKind::If: {
        auto* n = as<IfNode>(e);
        check_expr(n->cond, in_dataflow);
        if (in_dataflow) report("'if' is not allowed inside a dataflow block");
        check_seq(*n->then_branch, true);
        check_seq(*n->else_branch, true);
        return;
      }
      case ExprKind::SeqExpr:
        check_seq(*as<SeqExprNode>(e), true);
        return;
      case ExprKind::Function: {
        Location saved = loc_;
        loc_.item = saved.item + (saved.binding.empty() ? "" : "/" + saved.binding);
        loc_.binding = "";
        check_function_body(*as<FunctionNode>(e));
        loc_ = saved;
        return;
      }
    }
  }

  void check_call(const CallNode& call, bool in_dataflow) {
    for (const Expr& a : call.args) check_expr(a, in_dataflow);
    for (const StructInfo& si : call.sinfo_args) check_syms(si, "a call's output struct info");
    for (const auto& [name, value] : call.attrs) {
      if (auto* s = std::get_if<SymExpr>(&value)) check_syms(*s, "an attribute");
      if (auto* ss = std::get_if<std::vector<SymExpr>>(&value))
        for (const SymExpr& s : *ss) check_syms(s, "an attribute");
    }
    if (const OpInfo* op = call.op()) {
      if (in_dataflow && !op->pure) report("impure op '", op->name, "' inside a dataflow block");
      if (op->name == "call_library" || op->name == "call_library_dps") check_call_library(call);
      return;
    }
    if (auto* g = as<GlobalVarNode>(call.callee)) {
      if (mod_.program(g->name)) {
        report("tensor program '@", g->name, "' is called directly; use call_tir");
      } else if (Function f = mod_.function(g->name)) {
        if (in_dataflow && !f->pure()) report("impure function '@", g->name, "' called inside a dataflow block");
      } else if (!mod_.contains(g->name)) {
        report("call to undefined global '@", g->name, "'");
      }
      return;
    }
    check_expr(call.callee, in_dataflow);
    if (in_dataflow) {
      auto* f = as<FuncSI>(call.callee->sinfo);
      if (!f || !f->pure) report("call of a possibly impure function inside a dataflow block");
    }
  }

  void check_call_library(const CallNode& call) {
    if (call.args.empty()) return;
    if (auto* s = as<StringImmNode>(call.args[0]); s && !mod_.extern_decl(s->value))
      report(call.op()->name, ": '", s->value, "' is not declared with 'extern @", s->value, "' in the module");
  }

  const IRModule& mod_;
  std::vector<std::string>& errors_;
  Analyzer ana_;
  Location loc_;
  std::unordered_set<const VarNode*> vars_;       // in scope now
  std::unordered_set<const VarNode*> seen_vars_;  // ever bound (catches double binding)
  std::unordered_set<const SymNode*> syms_;       // symbolic variables in scope
};

// Checks one tensor program.
class ProgramVerifier {
 public:
  ProgramVerifier(const std::string& name, std::vector<std::string>& errors) : name_(name), errors_(errors) {}

  void check(const tir::ProgramNode& p) {
    std::vector<SymExpr> definable;
    for (const SymExpr& s : p.sym_params) syms_.insert(s.get());
    for (const auto* list : {&p.inputs, &p.outputs}) {
      for (const tir::Buffer& b : *list) {
        if (!buffers_.insert(b.get()).second) report("buffer '", b->name, "' is a parameter twice");
        if (b->scope != tir::Scope::Global) report("parameter buffer '", b->name, "' must be global");
        for (const SymExpr& d : b->shape)
          if (d.is_var()) syms_.insert(d.get());
      }
    }
    for (const auto* list : {&p.inputs, &p.outputs})
      for (const tir::Buffer& b : *list)
        for (const SymExpr& d : b->shape) check_syms(d, cat("the shape of '", b->name, "'"));
    if (p.outputs.empty()) report("has no output buffer");
    // Workspaces: global allocations at the root of the body.
    tir::Stmt body = p.body;
    std::vector<const tir::BufferNode*> workspaces;
    while (const auto* a = tir::as<tir::AllocateNode>(body)) {
      if (a->buffer->scope != tir::Scope::Global) break;
      for (const SymExpr& d : a->buffer->shape) check_syms(d, cat("the shape of workspace '", a->buffer->name, "'"));
      if (!buffers_.insert(a->buffer.get()).second) report("buffer '", a->buffer->name, "' is allocated twice");
      workspaces.push_back(a->buffer.get());
      body = a->body;
    }
    check_stmt(body);
    for (const tir::BufferNode* w : workspaces) buffers_.erase(w);
  }

 private:
  template <typename... Args>
  void report(const Args&... args) {
    errors_.push_back(cat("in program @", name_, ": ", args...));
  }

  void check_syms(const SymExpr& e, const std::string& what) {
    for (const SymExpr& v : free_vars(e)) {
      if (syms_.count(v.get())) continue;
      report("symbolic variable '", v.name(), "' in ", what, " is not bound");
      syms_.insert(v.get());
    }
  }

  void check_access(const tir::Buffer& b, const std::vector<tir::TExpr>& indices) {
    if (!buffers_.count(b.get())) report("buffer '", b->name, "' is not declared");
    if (indices.size() != b->shape.size())
      report("buffer '", b->name, "' has rank ", b->shape.size(), " but is indexed with ", indices.size(), " indices");
    for (const tir::TExpr& i : indices) {
      if (!i->dtype.is_integer()) report("index into '", b->name, "' is ", i->dtype.str(), ", not an integer");
      check_texpr(i);
    }
  }

  void check_texpr(const tir::TExpr& e) {
    using namespace tir;
    if (!e) return report("missing expression");
    switch (e->kind) {
      case TKind::Sym:
        return check_syms(as<SymNodeT>(e)->value, "an expression");
      case TKind::Imm:
        return;
      case TKind::Load: {
        auto* l = as<LoadNode>(e);
        return check_access(l->buffer, l->indices);
      }
      case TKind::Binary:
        check_texpr(as<BinaryNode>(e)->a);
        return check_texpr(as<BinaryNode>(e)->b);
      case TKind::Unary:
        return check_texpr(as<UnaryNode>(e)->a);
      case TKind::Call:
        for (const TExpr& a : as<CallNodeT>(e)->args) check_texpr(a);
        return;
      case TKind::Cast:
        return check_texpr(as<CastNode>(e)->a);
      case TKind::Select: {
        auto* s = as<SelectNode>(e);
        check_texpr(s->cond);
        check_texpr(s->a);
        return check_texpr(s->b);
      }
    }
  }

  void check_stmt(const tir::Stmt& s) {
    using namespace tir;
    if (!s) return report("missing statement");
    switch (s->kind) {
      case SKind::For: {
        auto* f = as<ForNode>(s);
        check_syms(f->extent, cat("the extent of loop '", f->var.name(), "'"));
        if (syms_.count(f->var.get())) report("loop variable '", f->var.name(), "' is already bound");
        syms_.insert(f->var.get());
        check_stmt(f->body);
        syms_.erase(f->var.get());
        return;
      }
      case SKind::Store: {
        auto* st = as<StoreNode>(s);
        check_access(st->buffer, st->indices);
        check_texpr(st->value);
        if (st->value && st->value->dtype != st->buffer->dtype)
          report("store of a ", st->value->dtype.str(), " value into ", st->buffer->dtype.str(), " buffer '",
                 st->buffer->name, "'");
        return;
      }
      case SKind::Seq:
        for (const Stmt& c : as<SeqNode>(s)->stmts) check_stmt(c);
        return;
      case SKind::IfThenElse: {
        auto* i = as<IfThenElseNode>(s);
        check_texpr(i->cond);
        if (i->cond && !i->cond->dtype.is_bool()) report("if condition is ", i->cond->dtype.str(), ", not bool");
        check_stmt(i->then_case);
        if (i->else_case) check_stmt(i->else_case);
        return;
      }
      case SKind::Allocate: {
        auto* a = as<AllocateNode>(s);
        if (a->buffer->scope == Scope::Global)
          report("allocated buffer '", a->buffer->name,
                 "' is global: a workspace must be allocated at the root of the program body");
        for (const SymExpr& d : a->buffer->shape) check_syms(d, cat("the shape of '", a->buffer->name, "'"));
        if (!buffers_.insert(a->buffer.get()).second) report("buffer '", a->buffer->name, "' is allocated twice");
        check_stmt(a->body);
        buffers_.erase(a->buffer.get());
        return;
      }
      case SKind::Barrier:
        return;
    }
  }

  std::string name_;
  std::vector<std::string>& errors_;
  std::unordered_set<const tir::BufferNode*> buffers_;
  std::unordered_set<const SymNode*> syms_;
};

}  // namespace

std::vector<std::string> verify(const IRModule& mod) {
  std::vector<std::string> errors;
  for (const auto& [name, item] : mod.items()) {
    if (auto* f = std::get_if<Function>(&item)) {
      GraphVerifier(mod, errors).check_function(name, *f);
    } else if (auto* p = std::get_if<tir::Program>(&item)) {
      ProgramVerifier(name, errors).check(**p);
    }
  }
  return errors;
}

void verify_or_throw(const IRModule& mod) {
  std::vector<std::string> errors = verify(mod);
  if (errors.empty()) return;
  std::string msg = "the IR is not well formed:";
  for (const std::string& e : errors) msg += "\n  " + e;
  throw Error(msg);
}

}  // namespace relax
