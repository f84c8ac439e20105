// Elementwise ops: unary maps, numpy-broadcasting binary ops, where, clip
// and astype. A Prim scalar operand acts as a rank-0 tensor; when every
// operand is a scalar the result is a scalar.
#include "ir/ops/common.h"

namespace relax {
namespace {

using namespace ops;

// What a unary op accepts and returns.
enum class Unary { Any, Float, Bool, Integer, FloatPredicate };

struct UnaryDef {
  const char* name;
  Unary kind;
  const char* doc;
};

constexpr UnaryDef kUnary[] = {
    {"neg", Unary::Any, "-x, elementwise."},
    {"abs", Unary::Any, "|x|, elementwise."},
    {"exp", Unary::Float, "e^x, elementwise."},
    {"log", Unary::Float, "The natural logarithm of x, elementwise."},
    {"sqrt", Unary::Float, "The square root of x, elementwise."},
    {"rsqrt", Unary::Float, "1 / sqrt(x), elementwise."},
    {"tanh", Unary::Float, "The hyperbolic tangent of x, elementwise."},
    {"sigmoid", Unary::Float, "1 / (1 + exp(-x)), elementwise."},
    {"relu", Unary::Any, "max(x, 0), elementwise."},
    {"gelu", Unary::Float, "x * Phi(x) with Phi the standard normal CDF (the exact erf form), elementwise."},
    {"silu", Unary::Float, "x * sigmoid(x), elementwise."},
    {"softplus", Unary::Float, "log(1 + exp(x)), elementwise."},
    {"erf", Unary::Float, "The Gauss error function of x, elementwise."},
    {"sin", Unary::Float, "sin(x), elementwise (radians)."},
    {"cos", Unary::Float, "cos(x), elementwise (radians)."},
    {"tan", Unary::Float, "tan(x), elementwise (radians)."},
    {"floor", Unary::Any, "The largest integer not above x, elementwise; identity on integers."},
    {"ceil", Unary::Any, "The smallest integer not below x, elementwise; identity on integers."},
    {"round", Unary::Any, "x rounded to the nearest integer, ties to even, elementwise; identity on integers."},
    {"sign", Unary::Any, "-1, 0 or 1 as x is negative, zero or positive, elementwise."},
    {"reciprocal", Unary::Float, "1 / x, elementwise."},
    {"logical_not", Unary::Bool, "!x on a bool tensor, elementwise."},
    {"bitwise_not", Unary::Integer, "~x on an integer (or bool) tensor, elementwise."},
    {"isnan", Unary::FloatPredicate, "Whether x is NaN, elementwise; the result is bool."},
    {"isinf", Unary::FloatPredicate, "Whether x is +inf or -inf, elementwise; the result is bool."},
};

StructInfo infer_unary(const CallNode& call, Unary kind) {
  attrs_of(call);
  const std::string& op = op_name(call);
  StructInfo si = arg_sinfo(call, 0);
  TensorInfo x = tensor_info(op, si, "argument 0", true);
  switch (kind) {
    case Unary::Any:
      break;
    case Unary::Float:
    case Unary::FloatPredicate:
      require_float(op, x.dtype, "the operand");
      break;
    case Unary::Bool:
      require_bool(op, x.dtype, "the operand");
      break;
    case Unary::Integer:
      require_integer(op, x.dtype, "the operand", true);
      break;
  }
  if (kind == Unary::FloatPredicate) {
    if (x.is_prim) return prim_si(DataType::boolean());
    return make_tensor(DataType::boolean(), x.ndim, x.shape);
  }
  if (x.is_prim) return prim_si(x.dtype);
  return si;
}

// What a binary op accepts and returns.
enum class Binary { Arith, Compare, Logical, Bitwise, Shift };

// Folds two integer scalar values (Prim[i64, n] + Prim[i64, 1] is
// Prim[i64, n + 1]); null when the op has no symbolic counterpart.
using Fold = SymExpr (*)(const SymExpr&, const SymExpr&);

struct BinaryDef {
  const char* name;
  Binary kind;
  const char* doc;
  Fold fold = nullptr;
};

SymExpr fold_add(const SymExpr& a, const SymExpr& b) { return a + b; }
SymExpr fold_sub(const SymExpr& a, const SymExpr& b) { return a - b; }
SymExpr fold_mul(const SymExpr& a, const SymExpr& b) { return a * b; }
SymExpr fold_floordiv(const SymExpr& a, const SymExpr& b) { return b.is_const(0) ? SymExpr() : floordiv(a, b); }
SymExpr fold_mod(const SymExpr& a, const SymExpr& b) { return b.is_const(0) ? SymExpr() : floormod(a, b); }
SymExpr fold_max(const SymExpr& a, const SymExpr& b) { return max(a, b); }
SymExpr fold_min(const SymExpr& a, const SymExpr& b) { return min(a, b); }

constexpr BinaryDef kBinary[] = {
    {"add", Binary::Arith, "a + b with numpy broadcasting.", fold_add},
    {"subtract", Binary::Arith, "a - b with numpy broadcasting.", fold_sub},
    {"multiply", Binary::Arith, "a * b with numpy broadcasting.", fold_mul},
    {"divide", Binary::Arith, "a / b with numpy broadcasting: true division for floats, truncating for integers."},
    {"floor_divide", Binary::Arith, "floor(a / b) with numpy broadcasting (rounds toward -inf).", fold_floordiv},
    {"mod", Binary::Arith, "a - b * floor(a / b) with numpy broadcasting (the sign of b, as in Python).", fold_mod},
    {"power", Binary::Arith, "a raised to the power b with numpy broadcasting."},
    {"maximum", Binary::Arith, "The larger of a and b with numpy broadcasting.", fold_max},
    {"minimum", Binary::Arith, "The smaller of a and b with numpy broadcasting.", fold_min},
    {"equal", Binary::Compare, "a == b with numpy broadcasting; the result is bool."},
    {"not_equal", Binary::Compare, "a != b with numpy broadcasting; the result is bool."},
    {"less", Binary::Compare, "a < b with numpy broadcasting; the result is bool."},
    {"less_equal", Binary::Compare, "a <= b with numpy broadcasting; the result is bool."},
    {"greater", Binary::Compare, "a > b with numpy broadcasting; the result is bool."},
    {"greater_equal", Binary::Compare, "a >= b with numpy broadcasting; the result is bool."},
    {"logical_and", Binary::Logical, "a && b on bool operands with numpy broadcasting."},
    {"logical_or", Binary::Logical, "a || b on bool operands with numpy broadcasting."},
    {"logical_xor", Binary::Logical, "a != b on bool operands with numpy broadcasting."},
    {"bitwise_and", Binary::Bitwise, "a & b on integer (or bool) operands with numpy broadcasting."},
    {"bitwise_or", Binary::Bitwise, "a | b on integer (or bool) operands with numpy broadcasting."},
    {"bitwise_xor", Binary::Bitwise, "a ^ b on integer (or bool) operands with numpy broadcasting."},
    {"left_shift", Binary::Shift, "a << b on integer operands with numpy broadcasting."},
    {"right_shift", Binary::Shift,
     "a >> b on integer operands with numpy broadcasting (arithmetic for signed integers)."},
};

StructInfo infer_binary(const CallNode& call, const InferContext& ctx, Binary kind, Fold fold) {
  attrs_of(call);
  const std::string& op = op_name(call);
  TensorInfo a = tensor_arg(call, 0, true), b = tensor_arg(call, 1, true);
  DataType dtype = common_dtype(op, a.dtype, b.dtype);
  switch (kind) {
    case Binary::Arith:
    case Binary::Compare:
      break;
    case Binary::Logical:
      require_bool(op, a.dtype, "operand 0");
      require_bool(op, b.dtype, "operand 1");
      break;
    case Binary::Bitwise:
    case Binary::Shift:
      require_integer(op, a.dtype, "operand 0", kind == Binary::Bitwise);
      require_integer(op, b.dtype, "operand 1", kind == Binary::Bitwise);
      break;
  }
  if (kind == Binary::Compare || kind == Binary::Logical) dtype = DataType::boolean();
  if (a.is_prim && b.is_prim) {
    const SymExpr va = as<PrimSI>(arg_sinfo(call, 0))->value, vb = as<PrimSI>(arg_sinfo(call, 1))->value;
    SymExpr value = fold && dtype.is_int() && va.defined() && vb.defined() ? fold(va, vb) : SymExpr();
    return prim_si(dtype, value.defined() ? ctx.ana.simplify(value) : value);
  }
  TensorInfo r = broadcast(op, a, b, ctx.ana);
  return make_tensor(dtype, r.ndim, r.shape);
}

StructInfo infer_where(const CallNode& call, const InferContext& ctx) {
  attrs_of(call);
  const std::string& op = op_name(call);
  TensorInfo c = tensor_arg(call, 0, true), a = tensor_arg(call, 1, true), b = tensor_arg(call, 2, true);
  require_bool(op, c.dtype, "the condition");
  DataType dtype = common_dtype(op, a.dtype, b.dtype);
  if (c.is_prim && a.is_prim && b.is_prim) return prim_si(dtype);
  TensorInfo r = broadcast(op, broadcast(op, c, a, ctx.ana), b, ctx.ana);
  return make_tensor(dtype, r.ndim, r.shape);
}

StructInfo infer_clip(const CallNode& call, const InferContext&) {
  attrs_of(call);
  StructInfo si = arg_sinfo(call, 0);
  TensorInfo x = tensor_info(op_name(call), si, "argument 0", true);
  tensor_arg(call, 1, true);
  tensor_arg(call, 2, true);
  return x.is_prim ? prim_si(x.dtype) : si;
}

StructInfo infer_astype(const CallNode& call, const InferContext&) {
  DataType dtype = attrs_of(call).get_dtype("dtype");
  TensorInfo x = tensor_arg(call, 0, true);
  if (x.is_prim) return prim_si(dtype);
  return make_tensor(dtype, x.ndim, x.shape);
}

}  // namespace

void register_elementwise_ops(OpRegistry& reg) {
  for (const UnaryDef& d : kUnary) {
    Unary kind = d.kind;
    reg.add(d.name).doc(d.doc).args(1).infer(
        [kind](const CallNode& call, const InferContext&) { return infer_unary(call, kind); });
  }
  for (const BinaryDef& d : kBinary) {
    Binary kind = d.kind;
    Fold fold = d.fold;
    reg.add(d.name).doc(d.doc).args(2).infer(
        [kind, fold](const CallNode& call, const InferContext& ctx) { return infer_binary(call, ctx, kind, fold); });
  }
  reg.add("where")
      .doc(
          "where(cond, a, b): a where cond is true, else b; the three operands broadcast together and cond is "
          "bool.")
      .args(3)
      .infer(infer_where);
  reg.add("clip")
      .doc(
          "clip(x, lo, hi): min(max(x, lo), hi) elementwise; lo and hi are scalars or tensors that broadcast to "
          "x. The result has x's struct info.")
      .args(3)
      .infer(infer_clip);
  reg.add("astype")
      .doc("astype(x, dtype=D): x converted elementwise to dtype D (floats to integers truncate toward zero).")
      .args(1)
      .attr("dtype", AttrType::DType)
      .infer(infer_astype);
}

}  // namespace relax
