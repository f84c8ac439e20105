// The tensor-program IR: loop nests over buffers with symbolic shapes.
//
// Every graph op is legalised into a Program, so an op's semantics are
// written once and every backend compiles them. A Program takes its inputs
// and outputs as buffers (destination-passing style: the caller allocates
// the outputs) plus optional extra symbolic parameters. Symbolic variables
// in parameter buffer shapes are bound from the buffers at call time.
//
// Scalar expressions (TExpr):
//   Sym      an i64 index value: a SymExpr over shape variables and loop
//            variables. Index arithmetic stays canonical, so analyses and
//            the Analyzer apply directly to indices.
//   Imm      a typed immediate (float, int, bool).
//   Load     buffer[indices]; indices are TExprs (usually Sym, but a gather
//            may index with loaded data).
//   Binary   arithmetic, comparison (bool result), logical and bitwise ops.
//   Unary    neg, logical not, bitwise not.
//   Call     a math intrinsic (exp, log, tanh, erf, sqrt, pow, ...).
//   Cast     conversion to another dtype.
//   Select   cond ? a : b (both evaluated).
//
// Statements (Stmt):
//   For      for var in [0, extent) with a loop kind: serial, parallel,
//            vectorized, unrolled, or bound to a GPU axis.
//   Store    buffer[indices] = value.
//   Seq      statements in order.
//   IfThenElse
//   Allocate a local (per thread) or shared (per workgroup) buffer live in
//            its body; or, only at the root of a program's body, a global
//            one: the program's workspace, scratch for the whole call
//            (lift-workspaces turns it into an output the caller plans).
//   Barrier  a workgroup barrier.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/attrs.h"
#include "ir/dtype.h"
#include "ir/sym.h"

namespace relax::tir {

enum class Scope : uint8_t { Global, Shared, Local };
const char* scope_name(Scope s);

struct BufferNode {
  BufferNode(std::string n, DataType d, std::vector<SymExpr> s, Scope sc)
      : name(std::move(n)), dtype(d), shape(std::move(s)), scope(sc) {}
  std::string name;
  DataType dtype;
  std::vector<SymExpr> shape;
  Scope scope;
};
using Buffer = std::shared_ptr<const BufferNode>;
Buffer make_buffer(const std::string& name, DataType dtype, std::vector<SymExpr> shape, Scope scope = Scope::Global);

// ---- Scalar expressions ----------------------------------------------------

#define RELAX_TEXPR_KINDS(X) X(Sym) X(Imm) X(Load) X(Binary) X(Unary) X(Call) X(Cast) X(Select)
enum class TKind : uint8_t {
#define X(k) k,
  RELAX_TEXPR_KINDS(X)
#undef X
};

// Binary operators, listed once with their text spelling. Comparisons and
// logical ops produce bool. Div is true division for floats and truncating
// division for integers; FloorDiv/FloorMod round toward -inf (Python).
#define RELAX_TBINARY_OPS(X)                                                                                     \
  X(Add, "+")                                                                                                    \
  X(Sub, "-")                                                                                                    \
  X(Mul, "*") X(Div, "/") X(FloorDiv, "//") X(FloorMod, "%") X(Min, "min") X(Max, "max") X(EQ, "==") X(NE, "!=") \
      X(LT, "<") X(LE, "<=") X(GT, ">") X(GE, ">=") X(And, "&&") X(Or, "||") X(BitAnd, "&") X(BitOr, "|")        \
          X(BitXor, "^") X(Shl, "<<") X(Shr, ">>")
enum class BinOp : uint8_t {
#define X(k, s) k,
  RELAX_TBINARY_OPS(X)
#undef X
};
const char* binop_text(BinOp op);
// Binding strength of the infix spelling, for printing and parsing text:
// 1 (||) to 10 (* / // %); unary operators bind at 11, atoms at 12.
int binop_precedence(BinOp op);
bool binop_is_compare(BinOp op);  // EQ..GE
bool binop_is_logical(BinOp op);  // And, Or

enum class UnOp : uint8_t { Neg, Not, BitNot };
const char* unop_text(UnOp op);  // "-", "!", "~"

// Math intrinsics, listed once: name and arity. Each is elementwise on its
// float (or, where it makes sense, integer) operands, except shfl_xor(x,
// mask): the value of x in the lane (lane ^ mask) of the calling thread's
// warp, for GPU code generators that have warps (CUDA), 32-bit x only.
#define RELAX_INTRINSICS(X)                                                                                          \
  X(exp, 1)                                                                                                          \
  X(exp2, 1)                                                                                                         \
  X(log, 1) X(log2, 1) X(log1p, 1) X(expm1, 1) X(sqrt, 1) X(rsqrt, 1) X(tanh, 1) X(sigmoid, 1) X(erf, 1) X(sin, 1)   \
      X(cos, 1) X(tan, 1) X(asin, 1) X(acos, 1) X(atan, 1) X(sinh, 1) X(cosh, 1) X(asinh, 1) X(acosh, 1) X(atanh, 1) \
          X(abs, 1) X(floor, 1) X(ceil, 1) X(round, 1) X(trunc, 1) X(isnan, 1) X(isinf, 1) X(isfinite, 1)            \
              X(popcount, 1) X(pow, 2) X(atan2, 2) X(fmod, 2) X(copysign, 2) X(fma, 3) X(shfl_xor, 2)
enum class Intrinsic : uint8_t {
#define X(name, arity) name,
  RELAX_INTRINSICS(X)
#undef X
};
const char* intrinsic_name(Intrinsic i);
int intrinsic_arity(Intrinsic i);
std::optional<Intrinsic> find_intrinsic(std::string_view name);

struct TExprNode {
  TExprNode(TKind k, DataType d) : kind(k), dtype(d) {}
  virtual ~TExprNode() = default;
  const TKind kind;
  const DataType dtype;
};
using TExpr = std::shared_ptr<const TExprNode>;

struct SymNodeT : TExprNode {  // kind Sym, dtype i64
  explicit SymNodeT(SymExpr v) : TExprNode(TKind::Sym, DataType::i64()), value(v) {}
  SymExpr value;
};
struct ImmNode : TExprNode {
  ImmNode(DataType d, double f, int64_t i) : TExprNode(TKind::Imm, d), float_value(f), int_value(i) {}
  double float_value;  // float dtypes
  int64_t int_value;   // int, uint and bool dtypes (uint64 stored bit-cast)
};
struct LoadNode : TExprNode {
  LoadNode(Buffer b, std::vector<TExpr> idx)
      : TExprNode(TKind::Load, b->dtype), buffer(std::move(b)), indices(std::move(idx)) {}
  Buffer buffer;
  std::vector<TExpr> indices;
};
struct BinaryNode : TExprNode {
  BinaryNode(DataType d, BinOp o, TExpr x, TExpr y)
      : TExprNode(TKind::Binary, d), op(o), a(std::move(x)), b(std::move(y)) {}
  BinOp op;
  TExpr a, b;
};
struct UnaryNode : TExprNode {
  UnaryNode(DataType d, UnOp o, TExpr x) : TExprNode(TKind::Unary, d), op(o), a(std::move(x)) {}
  UnOp op;
  TExpr a;
};
struct CallNodeT : TExprNode {
  CallNodeT(DataType d, Intrinsic f, std::vector<TExpr> a) : TExprNode(TKind::Call, d), fn(f), args(std::move(a)) {}
  Intrinsic fn;
  std::vector<TExpr> args;
};
struct CastNode : TExprNode {
  CastNode(DataType d, TExpr x) : TExprNode(TKind::Cast, d), a(std::move(x)) {}
  TExpr a;
};
struct SelectNode : TExprNode {
  SelectNode(TExpr c, TExpr x, TExpr y)
      : TExprNode(TKind::Select, x->dtype), cond(std::move(c)), a(std::move(x)), b(std::move(y)) {}
  TExpr cond, a, b;
};

template <typename T>
const T* as(const TExpr& e);
template <>
inline const SymNodeT* as<SymNodeT>(const TExpr& e) {
  return e && e->kind == TKind::Sym ? static_cast<const SymNodeT*>(e.get()) : nullptr;
}
template <>
inline const ImmNode* as<ImmNode>(const TExpr& e) {
  return e && e->kind == TKind::Imm ? static_cast<const ImmNode*>(e.get()) : nullptr;
}
template <>
inline const LoadNode* as<LoadNode>(const TExpr& e) {
  return e && e->kind == TKind::Load ? static_cast<const LoadNode*>(e.get()) : nullptr;
}
template <>
inline const BinaryNode* as<BinaryNode>(const TExpr& e) {
  return e && e->kind == TKind::Binary ? static_cast<const BinaryNode*>(e.get()) : nullptr;
}
template <>
inline const UnaryNode* as<UnaryNode>(const TExpr& e) {
  return e && e->kind == TKind::Unary ? static_cast<const UnaryNode*>(e.get()) : nullptr;
}
template <>
inline const CallNodeT* as<CallNodeT>(const TExpr& e) {
  return e && e->kind == TKind::Call ? static_cast<const CallNodeT*>(e.get()) : nullptr;
}
template <>
inline const CastNode* as<CastNode>(const TExpr& e) {
  return e && e->kind == TKind::Cast ? static_cast<const CastNode*>(e.get()) : nullptr;
}
template <>
inline const SelectNode* as<SelectNode>(const TExpr& e) {
  return e && e->kind == TKind::Select ? static_cast<const SelectNode*>(e.get()) : nullptr;
}

// Builders. Binary ops on two Sym operands of an op SymExpr has (+ - * // %
// min max) fold into one canonical Sym. Type errors (mismatched dtypes,
// float operands to a bitwise op) raise an Error.
TExpr sym(SymExpr v);
TExpr imm(DataType dtype, double v);       // float dtypes
TExpr imm_int(DataType dtype, int64_t v);  // int/uint/bool dtypes
TExpr load(Buffer b, std::vector<TExpr> indices);
TExpr binary(BinOp op, TExpr a, TExpr b);
TExpr unary(UnOp op, TExpr a);
TExpr call(Intrinsic fn, std::vector<TExpr> args);
TExpr cast(DataType dtype, TExpr a);  // returns `a` when already of dtype
TExpr select(TExpr cond, TExpr a, TExpr b);

// ---- Statements --------------------------------------------------------------

#define RELAX_STMT_KINDS(X) X(For) X(Store) X(Seq) X(IfThenElse) X(Allocate) X(Barrier)
enum class SKind : uint8_t {
#define X(k) k,
  RELAX_STMT_KINDS(X)
#undef X
};

#define RELAX_LOOP_KINDS(X)                                                                           \
  X(Serial, "range")                                                                                  \
  X(Parallel, "parallel")                                                                             \
  X(Vectorized, "vectorized") X(Unrolled, "unrolled") X(BlockX, "blockIdx.x") X(BlockY, "blockIdx.y") \
      X(BlockZ, "blockIdx.z") X(ThreadX, "threadIdx.x") X(ThreadY, "threadIdx.y") X(ThreadZ, "threadIdx.z")
enum class LoopKind : uint8_t {
#define X(k, s) k,
  RELAX_LOOP_KINDS(X)
#undef X
};
const char* loop_kind_text(LoopKind k);
std::optional<LoopKind> find_loop_kind(std::string_view text);

struct StmtNode {
  explicit StmtNode(SKind k) : kind(k) {}
  virtual ~StmtNode() = default;
  const SKind kind;
};
using Stmt = std::shared_ptr<const StmtNode>;

struct ForNode : StmtNode {
  ForNode(SymExpr v, SymExpr e, LoopKind k, Stmt b)
      : StmtNode(SKind::For), var(v), extent(e), loop_kind(k), body(std::move(b)) {}
  SymExpr var;  // a SymExpr variable, in [0, extent)
  SymExpr extent;
  LoopKind loop_kind;
  Stmt body;
};
struct StoreNode : StmtNode {
  StoreNode(Buffer b, std::vector<TExpr> i, TExpr v)
      : StmtNode(SKind::Store), buffer(std::move(b)), indices(std::move(i)), value(std::move(v)) {}
  Buffer buffer;
  std::vector<TExpr> indices;
  TExpr value;
};
struct SeqNode : StmtNode {
  explicit SeqNode(std::vector<Stmt> s) : StmtNode(SKind::Seq), stmts(std::move(s)) {}
  std::vector<Stmt> stmts;
};
struct IfThenElseNode : StmtNode {
  IfThenElseNode(TExpr c, Stmt t, Stmt e)
      : StmtNode(SKind::IfThenElse), cond(std::move(c)), then_case(std::move(t)), else_case(std::move(e)) {}
  TExpr cond;
  Stmt then_case;
  Stmt else_case;  // may be null
};
struct AllocateNode : StmtNode {
  AllocateNode(Buffer b, Stmt body) : StmtNode(SKind::Allocate), buffer(std::move(b)), body(std::move(body)) {}
  Buffer buffer;  // scope Local or Shared; Global: a workspace, at the body's root
  Stmt body;
};
struct BarrierNode : StmtNode {
  BarrierNode() : StmtNode(SKind::Barrier) {}
};

template <typename T>
const T* as(const Stmt& s);
#define X(k)                                                                          \
  template <>                                                                         \
  inline const k##Node* as<k##Node>(const Stmt& s) {                                  \
    return s && s->kind == SKind::k ? static_cast<const k##Node*>(s.get()) : nullptr; \
  }
RELAX_STMT_KINDS(X)
#undef X

Stmt make_for(SymExpr var, SymExpr extent, LoopKind kind, Stmt body);
Stmt make_store(Buffer b, std::vector<TExpr> indices, TExpr value);
Stmt make_seq(std::vector<Stmt> stmts);  // flattens nested Seqs; one stmt -> itself
Stmt make_if(TExpr cond, Stmt then_case, Stmt else_case = nullptr);
Stmt make_allocate(Buffer b, Stmt body);
Stmt make_barrier();

// ---- Programs ------------------------------------------------------------------

struct ProgramNode {
  std::string name;
  std::vector<Buffer> inputs;
  std::vector<Buffer> outputs;      // written by the program (destination-passing)
  std::vector<SymExpr> sym_params;  // symbolic ints passed explicitly, not deducible from buffers
  Stmt body;
  Attrs attrs;
};
using Program = std::shared_ptr<const ProgramNode>;

Program make_program(std::string name, std::vector<Buffer> inputs, std::vector<Buffer> outputs,
                     std::vector<SymExpr> sym_params, Stmt body, Attrs attrs = {});

}  // namespace relax::tir
