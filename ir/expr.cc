// Graph IR builders. They set struct info only where it is known without
// deduction; everything else is left null for the normalizer.
#include "ir/expr.h"

#include <algorithm>

#include "ir/error.h"
#include "ir/op.h"

namespace relax {

const char* expr_kind_name(ExprKind k) {
  switch (k) {
#define X(kind) \
  case ExprKind::kind: return #kind;
    RELAX_EXPR_KINDS(X)
#undef X
  }
  return "?";
}

Var as_var(const Expr& e) {
  RELAX_CHECK(is_var(e), "as_var on a ", e ? expr_kind_name(e->kind) : "null expression");
  return std::static_pointer_cast<const VarNode>(e);
}

const OpInfo* CallNode::op() const {
  auto ref = as<OpRefNode>(callee);
  return ref ? ref->op : nullptr;
}

// ---- Leaves ----------------------------------------------------------------------

Var make_var(const std::string& name, StructInfo si) {
  return std::make_shared<VarNode>(ExprKind::Var, name, std::move(si));
}

Var make_dataflow_var(const std::string& name, StructInfo si) {
  return std::make_shared<DataflowVarNode>(name, std::move(si));
}

// The struct info of a global comes from the module; the normalizer sets it.
Expr make_global_var(const std::string& name) { return std::make_shared<GlobalVarNode>(name); }

Expr make_constant(const std::string& name, StructInfo si) {
  return std::make_shared<ConstantNode>(name, std::move(si));
}

Expr make_prim_int(SymExpr v, DataType dtype) {
  RELAX_CHECK(v.defined(), "make_prim_int with a null value");
  auto e = std::make_shared<PrimValueNode>(dtype, v, 0.0);
  e->sinfo = prim_si(dtype, v);
  return e;
}

Expr make_prim_float(double v, DataType dtype) {
  auto e = std::make_shared<PrimValueNode>(dtype, SymExpr(), v);
  e->sinfo = prim_si(dtype);
  return e;
}

Expr make_prim_bool(bool v) {
  auto e = std::make_shared<PrimValueNode>(DataType::boolean(), SymExpr(int64_t(v)), 0.0);
  e->sinfo = prim_si(DataType::boolean());
  return e;
}

Expr make_string(const std::string& s) {
  auto e = std::make_shared<StringImmNode>(s);
  e->sinfo = object_si();
  return e;
}

Expr make_shape(std::vector<SymExpr> values) {
  StructInfo si = shape_si(values);
  auto e = std::make_shared<ShapeExprNode>(std::move(values));
  e->sinfo = std::move(si);
  return e;
}

// ---- Compound expressions ------------------------------------------------------------

Expr make_tuple(std::vector<Expr> fields) {
  std::vector<StructInfo> sis;
  for (const Expr& f : fields) {
    RELAX_CHECK(f, "make_tuple with a null field");
    sis.push_back(f->sinfo);
  }
  auto e = std::make_shared<TupleNode>(std::move(fields));
  bool known = std::all_of(sis.begin(), sis.end(), [](const StructInfo& s) { return s != nullptr; });
  if (known) e->sinfo = tuple_si(std::move(sis));
  return e;
}

// The field's struct info when the tuple's is a known tuple and the index is
// in range; errors are the normalizer's to report.
Expr make_tuple_get_item(Expr tuple, int index) {
  RELAX_CHECK(tuple, "make_tuple_get_item with a null tuple");
  auto t = as<TupleSI>(tuple->sinfo);
  auto e = std::make_shared<TupleGetItemNode>(std::move(tuple), index);
  if (t && index >= 0 && size_t(index) < t->fields.size()) e->sinfo = t->fields[size_t(index)];
  return e;
}

Expr make_call(Expr callee, std::vector<Expr> args, Attrs attrs, std::vector<StructInfo> sinfo_args) {
  RELAX_CHECK(callee, "make_call with a null callee");
  return std::make_shared<CallNode>(std::move(callee), std::move(args), std::move(attrs), std::move(sinfo_args));
}

Expr make_op_ref(const std::string& op) {
  const OpInfo* info = find_op(op);
  if (!info) fail("unknown op '", op, "'");
  auto e = std::make_shared<OpRefNode>(info);
  e->sinfo = opaque_func_si(object_si());
  return e;
}

Expr make_op_call(const std::string& op, std::vector<Expr> args, Attrs attrs, std::vector<StructInfo> sinfo_args) {
  return make_call(make_op_ref(op), std::move(args), std::move(attrs), std::move(sinfo_args));
}

Expr make_extern(const std::string& symbol) {
  auto e = std::make_shared<ExternFuncNode>(symbol);
  e->sinfo = opaque_func_si(object_si());
  return e;
}

// A seq's struct info is its body's, except that symbolic variables its own
// match_casts define are out of scope outside it: deciding which to erase is
// the normalizer's job, so such seqs are left without struct info here.
SeqExpr make_seq(std::vector<BindingBlock> blocks, Expr body) {
  RELAX_CHECK(body, "make_seq with a null body");
  bool has_cast = false;
  for (const BindingBlock& b : blocks)
    for (const Binding& bd : b.bindings) has_cast |= bd.is_match_cast();
  auto e = std::make_shared<SeqExprNode>(std::move(blocks), std::move(body));
  if (!has_cast) e->sinfo = e->body->sinfo;
  return e;
}

// The If's struct info unifies its branches: the normalizer computes it.
Expr make_if(Expr cond, SeqExpr then_branch, SeqExpr else_branch) {
  RELAX_CHECK(cond && then_branch && else_branch, "make_if with a null part");
  return std::make_shared<IfNode>(std::move(cond), std::move(then_branch), std::move(else_branch));
}

// A parameter without struct info counts as Object. Without a declared
// return the body's struct info stands in when known.
Function make_function(std::vector<Var> params, SeqExpr body, StructInfo ret, Attrs attrs) {
  RELAX_CHECK(body, "make_function with a null body");
  std::vector<StructInfo> psi;
  for (const Var& p : params) {
    RELAX_CHECK(p, "make_function with a null parameter");
    psi.push_back(p->sinfo ? p->sinfo : object_si());
  }
  auto f = std::make_shared<FunctionNode>(std::move(params), std::move(body), std::move(ret), std::move(attrs));
  StructInfo r = f->ret ? f->ret : f->body->sinfo;
  if (r) f->sinfo = func_si(std::move(psi), std::move(r), f->pure());
  return f;
}

const StructInfo& sinfo_of(const Expr& e) {
  RELAX_CHECK(e, "sinfo_of a null expression");
  if (!e->sinfo) fail("a ", expr_kind_name(e->kind), " expression has no struct info yet (normalize it first)");
  return e->sinfo;
}

}  // namespace relax
