// Struct-info deduction for graph expressions.
//
//   Var, DataflowVar, Constant    their own struct info
//   PrimValue, StringImm, Shape   Prim(dtype, value), Object, Shape(values)
//   Tuple / TupleGetItem          the fields' / the field's
//   Call                          op: the op's rule; a module function or a
//                                 variable holding one: the declared return,
//                                 with the callee's symbolic parameters bound
//                                 to the arguments' dims; an extern: its
//                                 declared return, else Object
//   If                            the unification of the branches
//   SeqExpr                       the body's, minus the symbolic variables
//                                 its own match_casts define
//   Function                      Func(params -> ret)
//   GlobalVar                     the module item's signature
//   OpRef, ExternFunc             an opaque function
#include "ir/normalize.h"

#include <algorithm>
#include <unordered_set>

#include "ir/error.h"

namespace relax {

namespace {

const char* si_kind_text(const StructInfo& si) {
  switch (si->kind) {
    case SIKind::Object: return "Object";
    case SIKind::Prim: return "Prim";
    case SIKind::Shape: return "Shape";
    case SIKind::Tensor: return "Tensor";
    case SIKind::Tuple: return "Tuple";
    case SIKind::Func: return "Func";
    case SIKind::List: return "List";
  }
  return "?";
}

bool contains(const std::vector<SymExpr>& vs, const SymExpr& v) {
  return std::find(vs.begin(), vs.end(), v) != vs.end();
}

// ---- Binding a callee's signature to the arguments of a call -------------------

// Binds the symbolic variables of a callee's parameter annotations to the
// arguments' struct info, checks what can be proven to mismatch, and
// instantiates the declared return. Variables appearing alone as a dim or a
// prim value are bound (first occurrence wins); every other dim is checked
// once bound: a provable difference is an Error, an unprovable one passes.
class SignatureBinder {
 public:
  // `local`: the callee is a function value of the enclosing scope, which
  // may capture symbolic variables of that scope in its return.
  SignatureBinder(std::string callee, const Analyzer& ana, bool local = false)
      : callee_(std::move(callee)), ana_(ana), local_(local) {}

  StructInfo apply(const FuncSI& sig, const std::vector<Expr>& args) {
    if (!sig.params) return sig.ret;
    const auto& params = *sig.params;
    if (params.size() != args.size())
      fail("call to ", callee_, ": expects ", params.size(), " arguments, got ", args.size());
    for (size_t i = 0; i < args.size(); ++i) bind(params[i], sinfo_of(args[i]));
    for (size_t i = 0; i < args.size(); ++i) check(params[i], sinfo_of(args[i]), cat("argument ", i));
    return instantiate(sig);
  }

 private:
  void bind_dims(const std::optional<std::vector<SymExpr>>& p, const std::optional<std::vector<SymExpr>>& a) {
    if (!p || !a || p->size() != a->size()) return;
    for (size_t i = 0; i < p->size(); ++i)
      if ((*p)[i].is_var() && !map_.count((*p)[i])) map_.emplace((*p)[i], (*a)[i]);
  }

  void bind(const StructInfo& p, const StructInfo& a) {
    if (!p || !a || p->kind != a->kind) return;
    switch (p->kind) {
      case SIKind::Prim: {
        const SymExpr& pv = as<PrimSI>(p)->value;
        const SymExpr& av = as<PrimSI>(a)->value;
        if (pv.is_var() && av.defined() && !map_.count(pv)) map_.emplace(pv, av);
        return;
      }
      case SIKind::Shape: return bind_dims(as<ShapeSI>(p)->values, as<ShapeSI>(a)->values);
      case SIKind::Tensor: return bind_dims(as<TensorSI>(p)->shape, as<TensorSI>(a)->shape);
      case SIKind::Tuple: {
        auto& pf = as<TupleSI>(p)->fields;
        auto& af = as<TupleSI>(a)->fields;
        if (pf.size() == af.size())
          for (size_t i = 0; i < pf.size(); ++i) bind(pf[i], af[i]);
        return;
      }
      default: return;
    }
  }

  // The parameter's dim with the bindings applied, or null while it still
  // mentions an unbound variable of the callee.
  SymExpr expected(const SymExpr& d) const {
    SymExpr e = substitute(d, map_);
    for (const SymExpr& v : free_vars(d))
      if (!map_.count(v)) return {};
    return e;
  }

  void check_value(const SymExpr& p, const SymExpr& a, const std::string& where) {
    if (!p.defined() || !a.defined()) return;
    SymExpr want = expected(p);
    if (want.defined() && ana_.prove_not_equal(a, want) == Tri::Yes)
      fail("call to ", callee_, ": ", where, " is ", a, " but the parameter expects ", want);
  }

  void check_dims(const std::optional<std::vector<SymExpr>>& p, const std::optional<std::vector<SymExpr>>& a,
                  const std::string& where) {
    if (!p || !a) return;
    for (size_t i = 0; i < p->size(); ++i) check_value((*p)[i], (*a)[i], cat(where, " dim ", i));
  }

  void check_rank(int p, int a, const std::string& where) {
    if (p >= 0 && a >= 0 && p != a)
      fail("call to ", callee_, ": ", where, " has rank ", a, " but the parameter expects rank ", p);
  }

  void check_dtype(DataType p, DataType a, const std::string& where) {
    if (!p.is_void() && !a.is_void() && p != a)
      fail("call to ", callee_, ": ", where, " has dtype ", a, " but the parameter expects ", p);
  }

  // An Object argument or parameter is checked at run time; a function
  // argument is not checked here.
  void check(const StructInfo& p, const StructInfo& a, const std::string& where) {
    if (p->kind == SIKind::Object || a->kind == SIKind::Object) return;
    // A list's length and elements are checked at run time.
    if (p->kind == SIKind::List || a->kind == SIKind::List) {
      if (is_base_of(p, a, ana_) == Tri::No)
        fail("call to ", callee_, ": ", where, " (", si_kind_text(a), ") does not fit the parameter's ",
             si_kind_text(p));
      return;
    }
    if (p->kind != a->kind)
      fail("call to ", callee_, ": ", where, " is a ", si_kind_text(a), " but the parameter expects a ",
           si_kind_text(p));
    switch (p->kind) {
      case SIKind::Prim:
        check_dtype(as<PrimSI>(p)->dtype, as<PrimSI>(a)->dtype, where);
        return check_value(as<PrimSI>(p)->value, as<PrimSI>(a)->value, cat(where, " value"));
      case SIKind::Shape:
        check_rank(as<ShapeSI>(p)->ndim, as<ShapeSI>(a)->ndim, where);
        return check_dims(as<ShapeSI>(p)->values, as<ShapeSI>(a)->values, where);
      case SIKind::Tensor:
        check_dtype(as<TensorSI>(p)->dtype, as<TensorSI>(a)->dtype, where);
        check_rank(as<TensorSI>(p)->ndim, as<TensorSI>(a)->ndim, where);
        return check_dims(as<TensorSI>(p)->shape, as<TensorSI>(a)->shape, where);
      case SIKind::Tuple: {
        auto& pf = as<TupleSI>(p)->fields;
        auto& af = as<TupleSI>(a)->fields;
        if (pf.size() != af.size())
          fail("call to ", callee_, ": ", where, " is a tuple of ", af.size(), " but the parameter expects ",
               pf.size());
        for (size_t i = 0; i < pf.size(); ++i) check(pf[i], af[i], cat(where, " field ", i));
        return;
      }
      default: return;
    }
  }

  // The declared return with bound variables replaced; variables of the
  // callee left unbound make their dims unknown. Variables the return
  // mentions but no parameter does are, for a local function, captured
  // from the scope it was defined in, and stay.
  StructInfo instantiate(const FuncSI& sig) const {
    std::vector<SymExpr> own;
    for (const StructInfo& p : *sig.params) collect_vars(p, own);
    if (!local_) collect_vars(sig.ret, own);
    std::vector<SymExpr> unbound;
    for (const SymExpr& v : own)
      if (!map_.count(v)) unbound.push_back(v);
    StructInfo ret = substitute(sig.ret, map_);
    return erase_vars(ret, [&](const SymExpr& v) { return !contains(unbound, v); });
  }

  std::string callee_;
  const Analyzer& ana_;
  bool local_;
  SymMap<SymExpr> map_;
};

// ---- Calls ---------------------------------------------------------------------------

StructInfo signature_of_function(const FunctionNode& f) {
  if (f.sinfo) return f.sinfo;
  std::vector<StructInfo> params;
  for (const Var& p : f.params) params.push_back(p->sinfo ? p->sinfo : object_si());
  StructInfo ret = f.ret ? f.ret : (f.body->sinfo ? f.body->sinfo : object_si());
  return func_si(std::move(params), std::move(ret), f.pure());
}

// The signature of a module item named by a global, or null when the module
// does not have it. A tensor program called directly is an Error.
StructInfo global_signature(const GlobalVarNode& gv, const InferContext& ctx, bool for_call) {
  if (ctx.mod) {
    if (Function f = ctx.mod->function(gv.name)) return signature_of_function(*f);
    if (ctx.mod->program(gv.name)) {
      if (for_call) fail("call to @", gv.name, ": @", gv.name, " is a tensor program; call it with call_tir");
      return opaque_func_si(object_si());
    }
    if (const ExternDecl* ext = ctx.mod->extern_decl(gv.name))
      return as<FuncSI>(ext->sinfo) ? ext->sinfo : opaque_func_si(object_si());
  }
  return gv.sinfo;
}

StructInfo infer_call(const CallNode& call, const InferContext& ctx) {
  const Expr& callee = call.callee;
  if (const OpInfo* op = call.op()) return op->infer ? op->infer(call, ctx) : object_si();
  if (auto gv = as<GlobalVarNode>(callee)) {
    StructInfo sig = global_signature(*gv, ctx, true);
    if (!sig) {
      if (ctx.mod) fail("call to @", gv->name, ": no such function in the module");
      return object_si();
    }
    auto f = as<FuncSI>(sig);
    if (!f) fail("call to @", gv->name, ": it is not a function");
    return SignatureBinder(cat("@", gv->name), ctx.ana).apply(*f, call.args);
  }
  if (auto v = as<VarNode>(callee)) {
    auto f = as<FuncSI>(sinfo_of(callee));
    if (!f) return object_si();
    std::string name = cat(is_dataflow_var(callee) ? "%" : "", v->name);
    return SignatureBinder(name, ctx.ana, /*local=*/true).apply(*f, call.args);
  }
  return object_si();
}

// ---- Tuples, If, SeqExpr ----------------------------------------------------------------

StructInfo infer_tuple_get_item(const TupleGetItemNode& t) {
  const StructInfo& si = sinfo_of(t.tuple);
  if (si->kind == SIKind::Object) return object_si();
  auto tup = as<TupleSI>(si);
  if (!tup) fail("tuple index ", t.index, " applied to a ", si_kind_text(si), ", not a tuple");
  if (t.index < 0 || size_t(t.index) >= tup->fields.size())
    fail("tuple index ", t.index, " out of range for a tuple of ", tup->fields.size());
  return tup->fields[size_t(t.index)];
}

// The condition is a bool scalar: Prim[bool] or a rank-0 bool tensor, as far
// as is known.
void check_condition(const StructInfo& si) {
  auto bool_or_void = [](DataType t) { return t.is_void() || t == DataType::boolean(); };
  if (auto p = as<PrimSI>(si)) {
    if (bool_or_void(p->dtype)) return;
    fail("if: the condition must be a bool scalar, got a Prim of dtype ", p->dtype);
  }
  if (auto t = as<TensorSI>(si)) {
    if (!bool_or_void(t->dtype)) fail("if: the condition must be a bool scalar, got a Tensor of dtype ", t->dtype);
    if (t->ndim > 0) fail("if: the condition must be a bool scalar, got a Tensor of rank ", t->ndim);
    return;
  }
  if (si->kind != SIKind::Object) fail("if: the condition must be a bool scalar, got a ", si_kind_text(si));
}

StructInfo infer_if(const IfNode& n, const InferContext& ctx) {
  check_condition(sinfo_of(n.cond));
  return unify(sinfo_of(n.then_branch), sinfo_of(n.else_branch), ctx.ana);
}

// Collects the symbolic variables mentioned by the struct info of the
// variables an expression uses without binding them: those are in scope
// outside it.
class OuterVars {
 public:
  std::vector<SymExpr> vars;

  void visit(const Expr& e) {
    if (!e) return;
    switch (e->kind) {
      case ExprKind::Var:
      case ExprKind::DataflowVar:
        if (!bound_.count(e.get()) && e->sinfo) collect_vars(e->sinfo, vars);
        return;
      case ExprKind::Tuple:
        for (const Expr& f : as<TupleNode>(e)->fields) visit(f);
        return;
      case ExprKind::TupleGetItem: return visit(as<TupleGetItemNode>(e)->tuple);
      case ExprKind::Call:
        visit(as<CallNode>(e)->callee);
        for (const Expr& a : as<CallNode>(e)->args) visit(a);
        return;
      case ExprKind::If:
        visit(as<IfNode>(e)->cond);
        visit(as<IfNode>(e)->then_branch);
        return visit(as<IfNode>(e)->else_branch);
      case ExprKind::SeqExpr:
        for (const BindingBlock& b : as<SeqExprNode>(e)->blocks) {
          for (const Binding& bd : b.bindings) {
            visit(bd.value);
            bound_.insert(bd.var.get());
          }
        }
        return visit(as<SeqExprNode>(e)->body);
      case ExprKind::Function:
        for (const Var& p : as<FunctionNode>(e)->params) bound_.insert(p.get());
        return visit(as<FunctionNode>(e)->body);
      default: return;
    }
  }

 private:
  std::unordered_set<const ExprNode*> bound_;
};

// A symbolic variable that a match_cast of this seq defines is out of scope
// after it, unless a variable from outside the seq already mentions it.
// When unsure, a variable is erased: that only makes the result coarser.
StructInfo infer_seq(const Expr& e) {
  auto seq = as<SeqExprNode>(e);
  const StructInfo& body = sinfo_of(seq->body);
  std::vector<SymExpr> defined;
  for (const BindingBlock& b : seq->blocks)
    for (const Binding& bd : b.bindings)
      if (bd.is_match_cast()) collect_definable_vars(bd.cast, defined);
  if (defined.empty()) return body;
  OuterVars outer;
  outer.visit(e);
  return erase_vars(body, [&](const SymExpr& v) { return !contains(defined, v) || contains(outer.vars, v); });
}

StructInfo infer_var(const Expr& e) {
  if (!e->sinfo) fail("variable '", as<VarNode>(e)->name, "' has no struct info");
  return e->sinfo;
}

}  // namespace

StructInfo infer_struct_info(const Expr& e, const InferContext& ctx) {
  RELAX_CHECK(e, "infer_struct_info on a null expression");
  switch (e->kind) {
    case ExprKind::Var:
    case ExprKind::DataflowVar: return infer_var(e);
    case ExprKind::Constant: return sinfo_of(e);
    case ExprKind::GlobalVar: {
      StructInfo sig = global_signature(*as<GlobalVarNode>(e), ctx, false);
      return sig ? sig : opaque_func_si(object_si());
    }
    case ExprKind::PrimValue: {
      auto p = as<PrimValueNode>(e);
      bool has_value = p->int_value.defined() && (p->dtype.is_integer());
      return prim_si(p->dtype, has_value ? p->int_value : SymExpr());
    }
    case ExprKind::StringImm: return object_si();
    case ExprKind::ShapeExpr: return shape_si(as<ShapeExprNode>(e)->values);
    case ExprKind::Tuple: {
      std::vector<StructInfo> fields;
      for (const Expr& f : as<TupleNode>(e)->fields) fields.push_back(sinfo_of(f));
      return tuple_si(std::move(fields));
    }
    case ExprKind::TupleGetItem: return infer_tuple_get_item(*as<TupleGetItemNode>(e));
    case ExprKind::Call: return infer_call(*as<CallNode>(e), ctx);
    case ExprKind::If: return infer_if(*as<IfNode>(e), ctx);
    case ExprKind::SeqExpr: return infer_seq(e);
    case ExprKind::Function: return signature_of_function(*as<FunctionNode>(e));
    case ExprKind::OpRef:
    case ExprKind::ExternFunc: return opaque_func_si(object_si());
  }
  return object_si();
}

namespace {

void ensure_children(const Expr& e, const InferContext& ctx) {
  switch (e->kind) {
    case ExprKind::Tuple:
      for (const Expr& f : as<TupleNode>(e)->fields) ensure_struct_info(f, ctx);
      return;
    case ExprKind::TupleGetItem: ensure_struct_info(as<TupleGetItemNode>(e)->tuple, ctx); return;
    case ExprKind::Call:
      ensure_struct_info(as<CallNode>(e)->callee, ctx);
      for (const Expr& a : as<CallNode>(e)->args) ensure_struct_info(a, ctx);
      return;
    case ExprKind::If:
      ensure_struct_info(as<IfNode>(e)->cond, ctx);
      ensure_struct_info(as<IfNode>(e)->then_branch, ctx);
      ensure_struct_info(as<IfNode>(e)->else_branch, ctx);
      return;
    case ExprKind::SeqExpr:
      // A binding's variable without struct info takes its value's (or the
      // match_cast's target).
      for (const BindingBlock& b : as<SeqExprNode>(e)->blocks) {
        for (const Binding& bd : b.bindings) {
          ensure_struct_info(bd.value, ctx);
          if (!bd.var->sinfo) bd.var->sinfo = bd.is_match_cast() ? bd.cast : bd.value->sinfo;
        }
      }
      ensure_struct_info(as<SeqExprNode>(e)->body, ctx);
      return;
    case ExprKind::Function:
      for (const Var& p : as<FunctionNode>(e)->params)
        if (!p->sinfo) p->sinfo = object_si();
      ensure_struct_info(as<FunctionNode>(e)->body, ctx);
      return;
    default: return;
  }
}

}  // namespace

const Expr& ensure_struct_info(const Expr& e, const InferContext& ctx) {
  RELAX_CHECK(e, "ensure_struct_info on a null expression");
  ensure_children(e, ctx);
  if (!e->sinfo) e->sinfo = infer_struct_info(e, ctx);
  return e;
}

}  // namespace relax
