// Tensor-program IR: name tables and type-checking builders.
//
// Typing rules enforced here:
//   - binary operands have the same dtype (lanes included);
//   - arithmetic (+ - * / // % min max) takes int, uint or float operands;
//   - comparisons take any non-void operands and give bool with the same lanes;
//   - && and || take bool operands; & | ^ take int, uint or bool; << >> int or uint;
//   - two Sym operands of + - * // % min max fold into one canonical Sym;
//   - intrinsics are float-only except abs (any number) and popcount (ints);
//     isnan/isinf/isfinite give bool;
//   - select needs a bool condition (scalar or of the operands' lanes);
//   - cast may widen a scalar to a vector of the target's lanes (a broadcast).
#include "ir/tir.h"

#include "ir/error.h"

namespace relax::tir {

// ---- Name tables ----------------------------------------------------------------

const char* scope_name(Scope s) {
  switch (s) {
    case Scope::Global:
      return "global";
    case Scope::Shared:
      return "shared";
    case Scope::Local:
      return "local";
  }
  return "?";
}

const char* binop_text(BinOp op) {
  switch (op) {
#define X(k, s)  \
  case BinOp::k: \
    return s;
    RELAX_TBINARY_OPS(X)
#undef X
  }
  return "?";
}

int binop_precedence(BinOp op) {
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

bool binop_is_compare(BinOp op) { return op >= BinOp::EQ && op <= BinOp::GE; }
bool binop_is_logical(BinOp op) { return op == BinOp::And || op == BinOp::Or; }

const char* unop_text(UnOp op) {
  switch (op) {
    case UnOp::Neg:
      return "-";
    case UnOp::Not:
      return "!";
    case UnOp::BitNot:
      return "~";
  }
  return "?";
}

const char* intrinsic_name(Intrinsic i) {
  switch (i) {
#define X(name, arity)  \
  case Intrinsic::name: \
    return #name;
    RELAX_INTRINSICS(X)
#undef X
  }
  return "?";
}

int intrinsic_arity(Intrinsic i) {
  switch (i) {
#define X(name, arity)  \
  case Intrinsic::name: \
    return arity;
    RELAX_INTRINSICS(X)
#undef X
  }
  return 0;
}

std::optional<Intrinsic> find_intrinsic(std::string_view name) {
#define X(n, arity) \
  if (name == #n) return Intrinsic::n;
  RELAX_INTRINSICS(X)
#undef X
  return std::nullopt;
}

const char* loop_kind_text(LoopKind k) {
  switch (k) {
#define X(kind, s)     \
  case LoopKind::kind: \
    return s;
    RELAX_LOOP_KINDS(X)
#undef X
  }
  return "?";
}

std::optional<LoopKind> find_loop_kind(std::string_view text) {
#define X(kind, s) \
  if (text == s) return LoopKind::kind;
  RELAX_LOOP_KINDS(X)
#undef X
  return std::nullopt;
}

Buffer make_buffer(const std::string& name, DataType dtype, std::vector<SymExpr> shape, Scope scope) {
  if (dtype.is_void()) fail("buffer '", name, "': the dtype must be known");
  for (const SymExpr& d : shape)
    if (!d.defined()) fail("buffer '", name, "': a null dimension");
  return std::make_shared<BufferNode>(name, dtype, std::move(shape), scope);
}

// ---- Scalar expressions --------------------------------------------------------------

namespace {

bool is_number(DataType t) { return t.is_integer() || t.is_float(); }

void check_operand(const TExpr& e, const char* what) {
  if (!e) fail(what, ": a null operand");
}

// Folds two index values when SymExpr has the operator.
std::optional<SymExpr> fold_sym(BinOp op, const SymExpr& a, const SymExpr& b) {
  switch (op) {
    case BinOp::Add:
      return a + b;
    case BinOp::Sub:
      return a - b;
    case BinOp::Mul:
      return a * b;
    case BinOp::FloorDiv:
    case BinOp::FloorMod:
      if (b.is_const(0)) fail("binary '", binop_text(op), "': division by zero");
      return op == BinOp::FloorDiv ? floordiv(a, b) : floormod(a, b);
    case BinOp::Min:
      return min(a, b);
    case BinOp::Max:
      return max(a, b);
    default:
      return std::nullopt;
  }
}

// The dtype of `a op b` for operands of dtype `t`; fails on a misuse.
DataType binary_result(BinOp op, DataType t) {
  const char* s = binop_text(op);
  if (t.is_void() || t.code == TypeCode::Handle) fail("binary '", s, "': operands of dtype ", t, " are not values");
  DataType boolean = DataType::boolean().with_lanes(t.lanes);
  if (binop_is_compare(op)) return boolean;
  if (binop_is_logical(op)) {
    if (!t.is_bool()) fail("binary '", s, "': operands must be bool, got ", t);
    return t;
  }
  switch (op) {
    case BinOp::BitAnd:
    case BinOp::BitOr:
    case BinOp::BitXor:
      if (!t.is_integer() && !t.is_bool()) fail("binary '", s, "': bitwise operands must be integers or bool, got ", t);
      return t;
    case BinOp::Shl:
    case BinOp::Shr:
      if (!t.is_integer()) fail("binary '", s, "': shift operands must be integers, got ", t);
      return t;
    default:
      if (!is_number(t)) fail("binary '", s, "': arithmetic operands must be numbers, got ", t);
      return t;
  }
}

}  // namespace

TExpr sym(SymExpr v) {
  if (!v.defined()) fail("sym: a null SymExpr");
  return std::make_shared<SymNodeT>(v);
}

TExpr imm(DataType dtype, double v) {
  if (!dtype.is_float()) fail("imm: ", dtype, " is not a float dtype (use imm_int)");
  return std::make_shared<ImmNode>(dtype, v, 0);
}

// Bools are stored as 0 or 1.
TExpr imm_int(DataType dtype, int64_t v) {
  if (!dtype.is_integer() && !dtype.is_bool()) fail("imm_int: ", dtype, " is not an integer or bool dtype");
  if (dtype.is_bool()) v = v != 0;
  return std::make_shared<ImmNode>(dtype, 0.0, v);
}

namespace {

// One scalar integer index per dimension.
void check_indices(const Buffer& b, const std::vector<TExpr>& indices, const char* what) {
  if (!b) fail(what, ": a null buffer");
  if (indices.size() != b->shape.size())
    fail(what, " '", b->name, "': ", indices.size(), " indices for a buffer of rank ", b->shape.size());
  for (const TExpr& i : indices) {
    check_operand(i, what);
    if (!i->dtype.is_integer() || !i->dtype.is_scalar())
      fail(what, " '", b->name, "': an index has dtype ", i->dtype, ", not a scalar integer");
  }
}

}  // namespace

TExpr load(Buffer b, std::vector<TExpr> indices) {
  check_indices(b, indices, "load from");
  return std::make_shared<LoadNode>(std::move(b), std::move(indices));
}

TExpr binary(BinOp op, TExpr a, TExpr b) {
  check_operand(a, "binary");
  check_operand(b, "binary");
  if (a->dtype != b->dtype)
    fail("binary '", binop_text(op), "': operand dtypes ", a->dtype, " and ", b->dtype, " differ");
  DataType result = binary_result(op, a->dtype);
  auto sa = as<SymNodeT>(a), sb = as<SymNodeT>(b);
  if (sa && sb) {
    if (auto v = fold_sym(op, sa->value, sb->value)) return sym(*v);
  }
  return std::make_shared<BinaryNode>(result, op, std::move(a), std::move(b));
}

TExpr unary(UnOp op, TExpr a) {
  check_operand(a, "unary");
  DataType t = a->dtype;
  const char* s = unop_text(op);
  switch (op) {
    case UnOp::Neg:
      if (!is_number(t)) fail("unary '", s, "': the operand must be a number, got ", t);
      if (auto sa = as<SymNodeT>(a)) return sym(-sa->value);
      break;
    case UnOp::Not:
      if (!t.is_bool()) fail("unary '", s, "': the operand must be bool, got ", t);
      break;
    case UnOp::BitNot:
      if (!t.is_integer()) fail("unary '", s, "': the operand must be an integer, got ", t);
      break;
  }
  return std::make_shared<UnaryNode>(t, op, std::move(a));
}

TExpr call(Intrinsic fn, std::vector<TExpr> args) {
  const char* name = intrinsic_name(fn);
  if (int(args.size()) != intrinsic_arity(fn))
    fail("intrinsic '", name, "' takes ", intrinsic_arity(fn), " arguments, got ", args.size());
  for (const TExpr& x : args) check_operand(x, name);
  DataType t = args[0]->dtype;
  if (fn == Intrinsic::shfl_xor) {
    if (t.bits != 32 || !t.is_scalar() || !(t.is_float() || t.is_integer()) || args[1]->dtype != DataType::i32())
      fail("intrinsic 'shfl_xor' takes a 32-bit scalar and an i32 lane mask, got ", t, " and ", args[1]->dtype);
    return std::make_shared<CallNodeT>(t, fn, std::move(args));
  }
  for (const TExpr& x : args)
    if (x->dtype != t) fail("intrinsic '", name, "': operand dtypes ", t, " and ", x->dtype, " differ");
  bool ok = fn == Intrinsic::abs ? is_number(t) : fn == Intrinsic::popcount ? t.is_integer() : t.is_float();
  if (!ok) fail("intrinsic '", name, "': operands of dtype ", t, " are not supported");
  bool predicate = fn == Intrinsic::isnan || fn == Intrinsic::isinf || fn == Intrinsic::isfinite;
  DataType result = predicate ? DataType::boolean().with_lanes(t.lanes) : t;
  return std::make_shared<CallNodeT>(result, fn, std::move(args));
}

TExpr cast(DataType dtype, TExpr a) {
  check_operand(a, "cast");
  if (a->dtype == dtype) return a;
  if (dtype.is_void() || a->dtype.is_void()) fail("cast: cannot convert ", a->dtype, " to ", dtype);
  if (a->dtype.lanes != dtype.lanes && a->dtype.lanes != 1)
    fail("cast: cannot convert ", a->dtype, " to ", dtype, ": lane counts differ");
  return std::make_shared<CastNode>(dtype, std::move(a));
}

TExpr select(TExpr cond, TExpr a, TExpr b) {
  check_operand(cond, "select");
  check_operand(a, "select");
  check_operand(b, "select");
  if (!cond->dtype.is_bool()) fail("select: the condition must be bool, got ", cond->dtype);
  if (a->dtype != b->dtype) fail("select: operand dtypes ", a->dtype, " and ", b->dtype, " differ");
  if (cond->dtype.lanes != 1 && cond->dtype.lanes != a->dtype.lanes)
    fail("select: a condition of ", cond->dtype.lanes, " lanes for operands of ", a->dtype.lanes);
  return std::make_shared<SelectNode>(std::move(cond), std::move(a), std::move(b));
}

// ---- Statements -------------------------------------------------------------------------

Stmt make_for(SymExpr var, SymExpr extent, LoopKind kind, Stmt body) {
  if (!var.is_var()) fail("for: the loop variable must be a symbolic variable");
  if (!extent.defined()) fail("for ", var.name(), ": a null extent");
  if (!body) fail("for ", var.name(), ": a null body");
  return std::make_shared<ForNode>(var, extent, kind, std::move(body));
}

Stmt make_store(Buffer b, std::vector<TExpr> indices, TExpr value) {
  check_indices(b, indices, "store to");
  check_operand(value, "store");
  if (value->dtype != b->dtype)
    fail("store to '", b->name, "': value dtype ", value->dtype, " differs from the buffer's ", b->dtype);
  return std::make_shared<StoreNode>(std::move(b), std::move(indices), std::move(value));
}

Stmt make_seq(std::vector<Stmt> stmts) {
  std::vector<Stmt> flat;
  for (Stmt& s : stmts) {
    if (!s) fail("seq: a null statement");
    if (auto seq = as<SeqNode>(s))
      flat.insert(flat.end(), seq->stmts.begin(), seq->stmts.end());
    else
      flat.push_back(std::move(s));
  }
  if (flat.size() == 1) return flat[0];
  return std::make_shared<SeqNode>(std::move(flat));
}

Stmt make_if(TExpr cond, Stmt then_case, Stmt else_case) {
  check_operand(cond, "if");
  if (cond->dtype != DataType::boolean()) fail("if: the condition must be a scalar bool, got ", cond->dtype);
  if (!then_case) fail("if: a null then branch");
  return std::make_shared<IfThenElseNode>(std::move(cond), std::move(then_case), std::move(else_case));
}

Stmt make_allocate(Buffer b, Stmt body) {
  if (!b) fail("alloc: a null buffer");
  if (!body) fail("alloc '", b->name, "': a null body");
  return std::make_shared<AllocateNode>(std::move(b), std::move(body));
}

Stmt make_barrier() { return std::make_shared<BarrierNode>(); }

Program make_program(std::string name, std::vector<Buffer> inputs, std::vector<Buffer> outputs,
                     std::vector<SymExpr> sym_params, Stmt body, Attrs attrs) {
  if (!body) fail("prog @", name, ": a null body");
  for (const SymExpr& v : sym_params)
    if (!v.is_var()) fail("prog @", name, ": a symbolic parameter must be a variable");
  auto p = std::make_shared<ProgramNode>();
  p->name = std::move(name);
  p->inputs = std::move(inputs);
  p->outputs = std::move(outputs);
  p->sym_params = std::move(sym_params);
  p->body = std::move(body);
  p->attrs = std::move(attrs);
  return p;
}

}  // namespace relax::tir
