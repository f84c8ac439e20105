// Further elementwise math ops: the inverse and hyperbolic trigonometric
// functions, C-style remainder, and the conversions that astype does not
// cover (float8 conversions with explicit overflow and rounding rules,
// bit reinterpretation). A Prim scalar operand acts as a rank-0 tensor; when
// every operand is a scalar the result is a scalar.
#include "ir/ops/common.h"

namespace relax {
namespace {

using namespace ops;

// Float-only unary maps: the result has the operand's struct info.
struct FloatUnaryDef {
  const char* name;
  const char* doc;
};

constexpr FloatUnaryDef kFloatUnary[] = {
    {"asin", "arcsin(x), elementwise, in [-pi/2, pi/2]; NaN outside [-1, 1]."},
    {"acos", "arccos(x), elementwise, in [0, pi]; NaN outside [-1, 1]."},
    {"atan", "arctan(x), elementwise, in (-pi/2, pi/2)."},
    {"sinh", "The hyperbolic sine of x, elementwise."},
    {"cosh", "The hyperbolic cosine of x, elementwise."},
    {"asinh", "The inverse hyperbolic sine of x, elementwise."},
    {"acosh", "The inverse hyperbolic cosine of x, elementwise; NaN below 1."},
    {"atanh", "The inverse hyperbolic tangent of x, elementwise; NaN outside [-1, 1]."},
};

StructInfo infer_float_unary(const CallNode& call, const InferContext&) {
  attrs_of(call);
  const std::string& op = op_name(call);
  StructInfo si = arg_sinfo(call, 0);
  TensorInfo x = tensor_info(op, si, "argument 0", true);
  require_float(op, x.dtype, "the operand");
  return x.is_prim ? prim_si(x.dtype) : si;
}

// fmod(a, b): same dtype, numpy broadcasting.
StructInfo infer_fmod(const CallNode& call, const InferContext& ctx) {
  attrs_of(call);
  const std::string& op = op_name(call);
  TensorInfo a = tensor_arg(call, 0, true), b = tensor_arg(call, 1, true);
  DataType dtype = common_dtype(op, a.dtype, b.dtype);
  if (a.dtype.is_bool() || b.dtype.is_bool()) fail(op, ": operands must be numbers, got bool");
  if (a.is_prim && b.is_prim) return prim_si(dtype);
  TensorInfo r = broadcast(op, a, b, ctx.ana);
  return make_tensor(dtype, r.ndim, r.shape);
}

bool is_float8(DataType t) {
  switch (t.code) {
    case TypeCode::Float8E4M3FN:
    case TypeCode::Float8E4M3FNUZ:
    case TypeCode::Float8E5M2:
    case TypeCode::Float8E5M2FNUZ:
    case TypeCode::Float8E8M0:
      return true;
    default:
      return false;
  }
}

// astype_float8(x, dtype, saturate, round_mode): x's shape, dtype D.
StructInfo infer_astype_float8(const CallNode& call, const InferContext&) {
  const std::string& op = op_name(call);
  Attrs attrs = attrs_of(call);
  DataType dtype = attrs.get_dtype("dtype");
  if (!is_float8(dtype)) fail(op, ": dtype must be a float8 type, got ", dtype.str());
  std::string mode = attrs.get_string("round_mode");
  if (mode != "up" && mode != "down" && mode != "nearest")
    fail(op, ": round_mode must be up, down or nearest, got '", mode, "'");
  TensorInfo x = tensor_arg(call, 0, true);
  if (!x.dtype.is_void() && !x.dtype.is_float() && !x.dtype.is_integer() && !x.dtype.is_bool())
    fail(op, ": the operand must be a number, got ", x.dtype.str());
  if (x.is_prim) return prim_si(dtype);
  return make_tensor(dtype, x.ndim, x.shape);
}

// bitcast(x, dtype): x's shape, dtype D of the same bit width.
StructInfo infer_bitcast(const CallNode& call, const InferContext&) {
  const std::string& op = op_name(call);
  DataType dtype = attrs_of(call).get_dtype("dtype");
  if (dtype.is_void() || !dtype.is_scalar()) fail(op, ": dtype must be a scalar element type, got ", dtype.str());
  TensorInfo x = tensor_arg(call, 0, true);
  if (!x.dtype.is_void() && x.dtype.bits != dtype.bits)
    fail(op, ": ", x.dtype.str(), " (", int(x.dtype.bits), " bits) and ", dtype.str(), " (", int(dtype.bits),
         " bits) differ in width");
  if (x.is_prim) return prim_si(dtype);
  return make_tensor(dtype, x.ndim, x.shape);
}

}  // namespace

void register_math_ops(OpRegistry& reg) {
  for (const FloatUnaryDef& d : kFloatUnary) reg.add(d.name).doc(d.doc).args(1).infer(infer_float_unary);
  reg.add("fmod")
      .doc(
          "fmod(a, b): a - b * trunc(a / b) with numpy broadcasting, the remainder of truncating division (the "
          "sign of a, as C's fmod); for integers and floats.")
      .args(2)
      .infer(infer_fmod);
  reg.add("astype_float8")
      .doc(
          "astype_float8(x, dtype=D, saturate=S, round_mode=R): x converted to the float8 type D by ONNX Cast's "
          "rules. Values round to nearest even (for f8e8m0: R = up, away from zero; down, toward zero; nearest, "
          "ties up). With S, values beyond the largest finite value, infinities included, become +-that value; "
          "without, they become inf where D has one (f8e5m2), else NaN. astype is this op with S = true, R = up.")
      .args(1)
      .attr("dtype", AttrType::DType)
      .attr("saturate", AttrType::Bool, true)
      .attr("round_mode", AttrType::String, std::string("up"))
      .infer(infer_astype_float8);
  reg.add("bitcast")
      .doc(
          "bitcast(x, dtype=D): x's bits reinterpreted as elements of D, which has the same bit width as x's "
          "dtype (bool counts as 8 bits); the shape is unchanged.")
      .args(1)
      .attr("dtype", AttrType::DType)
      .infer(infer_bitcast);
}

}  // namespace relax
