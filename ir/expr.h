// The graph IR.
//
// Values are expressions; programs are functions whose bodies are sequences
// of bindings. Every node is immutable once built (its struct info is set
// once, by whoever builds it: the normalizer, the parser or a pass), so a
// mutator that changes nothing returns the very same node.
//
//   Var          a variable bound by a function parameter or a binding.
//   DataflowVar  a Var bound inside a dataflow block and not visible after
//                it (text: %name).
//   GlobalVar    a reference to a function, tensor program or extern
//                declaration of the module (text: @name).
//   Constant     a named handle to a weight; the bytes live outside the IR
//                (in a safetensors file or a package's weight section).
//   PrimValue    a scalar: an integer SymExpr, or a float/bool immediate.
//   StringImm    a string (library and builtin names).
//   ShapeExpr    a shape value built from SymExprs.
//   Tuple, TupleGetItem
//   Call         callee(args, attrs); the callee is an OpRef, a GlobalVar, a
//                Var holding a function, or an ExternFunc. `sinfo_args`
//                carries the output struct info of the cross-level calls
//                (call_tir, call_library, call_builtin).
//   If           cond ? then : else, each branch a SeqExpr.
//   SeqExpr      binding blocks followed by a result expression.
//   Function     params -> body (a SeqExpr), with a declared return struct
//                info and attributes. Pure unless attrs say pure=false.
//   OpRef        a registered operator used as a callee.
//   ExternFunc   a symbol provided outside the module (a library function).
//
// Bindings: `var = value` or `var = match_cast(value, sinfo)`. A match_cast
// checks at run time that the value fits `sinfo` and binds the symbolic
// variables that appear in it for the first time: it is the only binding
// that introduces symbolic variables besides function parameters.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/attrs.h"
#include "ir/struct_info.h"

namespace relax {

struct OpInfo;

#define RELAX_EXPR_KINDS(X) X(Var) RELAX_EXPR_KINDS_BUT_VAR(X)
#define RELAX_EXPR_KINDS_BUT_VAR(X) \
  X(DataflowVar)                    \
  X(GlobalVar)                      \
  X(Constant)                       \
  X(PrimValue)                      \
  X(StringImm)                      \
  X(ShapeExpr)                      \
  X(Tuple)                          \
  X(TupleGetItem)                   \
  X(Call)                           \
  X(If)                             \
  X(SeqExpr)                        \
  X(Function)                       \
  X(OpRef)                          \
  X(ExternFunc)

enum class ExprKind : uint8_t {
#define X(k) k,
  RELAX_EXPR_KINDS(X)
#undef X
};
const char* expr_kind_name(ExprKind k);

struct ExprNode {
  explicit ExprNode(ExprKind k) : kind(k) {}
  virtual ~ExprNode() = default;
  const ExprKind kind;
  // Set once when the node is built or first normalized; null before.
  mutable StructInfo sinfo;
};
using Expr = std::shared_ptr<const ExprNode>;

#define X(k) struct k##Node;
RELAX_EXPR_KINDS(X)
#undef X

// Vars. A DataflowVarNode is a VarNode whose kind is DataflowVar.
struct VarNode : ExprNode {
  VarNode(ExprKind k, std::string n, StructInfo si) : ExprNode(k), name(std::move(n)) { sinfo = std::move(si); }
  std::string name;  // a hint for printing; identity is the node
};
struct DataflowVarNode : VarNode {
  DataflowVarNode(std::string n, StructInfo si) : VarNode(ExprKind::DataflowVar, std::move(n), std::move(si)) {}
};
using Var = std::shared_ptr<const VarNode>;

struct GlobalVarNode : ExprNode {
  explicit GlobalVarNode(std::string n) : ExprNode(ExprKind::GlobalVar), name(std::move(n)) {}
  std::string name;
};
struct ConstantNode : ExprNode {
  ConstantNode(std::string n, StructInfo si) : ExprNode(ExprKind::Constant), name(std::move(n)) {
    sinfo = std::move(si);
  }
  std::string name;  // the weight's name in the weight store
};
struct PrimValueNode : ExprNode {
  PrimValueNode(DataType d, SymExpr iv, double fv)
      : ExprNode(ExprKind::PrimValue), dtype(d), int_value(iv), float_value(fv) {}
  DataType dtype;
  SymExpr int_value;   // integer and bool dtypes
  double float_value;  // float dtypes
};
struct StringImmNode : ExprNode {
  explicit StringImmNode(std::string v) : ExprNode(ExprKind::StringImm), value(std::move(v)) {}
  std::string value;
};
struct ShapeExprNode : ExprNode {
  explicit ShapeExprNode(std::vector<SymExpr> v) : ExprNode(ExprKind::ShapeExpr), values(std::move(v)) {}
  std::vector<SymExpr> values;
};
struct TupleNode : ExprNode {
  explicit TupleNode(std::vector<Expr> f) : ExprNode(ExprKind::Tuple), fields(std::move(f)) {}
  std::vector<Expr> fields;
};
struct TupleGetItemNode : ExprNode {
  TupleGetItemNode(Expr t, int i) : ExprNode(ExprKind::TupleGetItem), tuple(std::move(t)), index(i) {}
  Expr tuple;
  int index;
};
struct CallNode : ExprNode {
  CallNode(Expr c, std::vector<Expr> a, Attrs at, std::vector<StructInfo> s)
      : ExprNode(ExprKind::Call),
        callee(std::move(c)),
        args(std::move(a)),
        attrs(std::move(at)),
        sinfo_args(std::move(s)) {}
  Expr callee;
  std::vector<Expr> args;
  Attrs attrs;
  std::vector<StructInfo> sinfo_args;
  // The op when the callee is an OpRef, else nullptr.
  const OpInfo* op() const;
};

struct Binding {
  Var var;
  Expr value;
  StructInfo cast;  // non-null: this is `var = match_cast(value, cast)`
  bool is_match_cast() const { return cast != nullptr; }
};
struct BindingBlock {
  bool dataflow = false;
  std::vector<Binding> bindings;
};

struct SeqExprNode : ExprNode {
  SeqExprNode(std::vector<BindingBlock> b, Expr r)
      : ExprNode(ExprKind::SeqExpr), blocks(std::move(b)), body(std::move(r)) {}
  std::vector<BindingBlock> blocks;
  Expr body;
};
using SeqExpr = std::shared_ptr<const SeqExprNode>;

struct IfNode : ExprNode {
  IfNode(Expr c, SeqExpr t, SeqExpr e)
      : ExprNode(ExprKind::If), cond(std::move(c)), then_branch(std::move(t)), else_branch(std::move(e)) {}
  Expr cond;
  SeqExpr then_branch;
  SeqExpr else_branch;
};
struct FunctionNode : ExprNode {
  FunctionNode(std::vector<Var> p, SeqExpr b, StructInfo r, Attrs a)
      : ExprNode(ExprKind::Function),
        params(std::move(p)),
        body(std::move(b)),
        ret(std::move(r)),
        attrs(std::move(a)) {}
  std::vector<Var> params;
  SeqExpr body;
  StructInfo ret;  // declared return struct info
  Attrs attrs;     // e.g. pure=false, and pass annotations
  bool pure() const { return attrs.get_bool("pure", true); }
};
using Function = std::shared_ptr<const FunctionNode>;

struct OpRefNode : ExprNode {
  explicit OpRefNode(const OpInfo* o) : ExprNode(ExprKind::OpRef), op(o) {}
  const OpInfo* op;
};
struct ExternFuncNode : ExprNode {
  explicit ExternFuncNode(std::string s) : ExprNode(ExprKind::ExternFunc), symbol(std::move(s)) {}
  std::string symbol;
};

// Typed downcast: nullptr when `e` is not of that kind (VarNode accepts both
// Var and DataflowVar).
template <typename T>
const T* as(const Expr& e);
#define X(k)                                                                             \
  template <>                                                                            \
  inline const k##Node* as<k##Node>(const Expr& e) {                                     \
    return e && e->kind == ExprKind::k ? static_cast<const k##Node*>(e.get()) : nullptr; \
  }
RELAX_EXPR_KINDS_BUT_VAR(X)
#undef X
template <>
inline const VarNode* as<VarNode>(const Expr& e) {
  return e && (e->kind == ExprKind::Var || e->kind == ExprKind::DataflowVar) ? static_cast<const VarNode*>(e.get())
                                                                             : nullptr;
}
inline bool is_var(const Expr& e) { return as<VarNode>(e) != nullptr; }
inline bool is_dataflow_var(const Expr& e) { return e && e->kind == ExprKind::DataflowVar; }
// Reinterprets an Expr known to be a Var.
Var as_var(const Expr& e);

// Builders. They set struct info only where it is known without deduction
// (vars, constants, literals); calls get theirs from the normalizer
// (ir/normalize.h).
Var make_var(const std::string& name, StructInfo si);
Var make_dataflow_var(const std::string& name, StructInfo si);
Expr make_global_var(const std::string& name);
Expr make_constant(const std::string& name, StructInfo si);
Expr make_prim_int(SymExpr v, DataType dtype = DataType::i64());
Expr make_prim_float(double v, DataType dtype = DataType::f32());
Expr make_prim_bool(bool v);
Expr make_string(const std::string& s);
Expr make_shape(std::vector<SymExpr> values);
Expr make_tuple(std::vector<Expr> fields);
Expr make_tuple_get_item(Expr tuple, int index);
Expr make_call(Expr callee, std::vector<Expr> args, Attrs attrs = {}, std::vector<StructInfo> sinfo_args = {});
Expr make_op_call(const std::string& op, std::vector<Expr> args, Attrs attrs = {},
                  std::vector<StructInfo> sinfo_args = {});  // unknown op: Error
Expr make_op_ref(const std::string& op);                     // unknown op: Error
Expr make_extern(const std::string& symbol);
SeqExpr make_seq(std::vector<BindingBlock> blocks, Expr body);
Expr make_if(Expr cond, SeqExpr then_branch, SeqExpr else_branch);
Function make_function(std::vector<Var> params, SeqExpr body, StructInfo ret, Attrs attrs = {});

// The struct info of an expression; Error when it has none yet.
const StructInfo& sinfo_of(const Expr& e);

}  // namespace relax
