// ONNX converters: the elementwise family. Arithmetic, comparisons, logic
// and bitwise ops, unary math, activations (as compositions of graph ops,
// SwiGLU included), Where, Clip, the variadic Max/Min/Sum/Mean,
// Cast/CastLike/BitCast and Identity (Dropout, which draws random numbers in
// training mode, is in convert_random.cc).
//
// Shape arithmetic is folded at import time: when every input is an integer
// tensor of rank 0 or 1 known element by element (ctx.sym_values), the ops
// marked foldable in the tables below compute their result symbolically
// (numpy broadcasting between the inputs; booleans as 0/1) and emit
// nothing. A fold that cannot be proven exact (integer division of
// possibly negative values, a comparison the analyzer cannot decide, ...)
// falls back to emitting the op.
#include <cmath>
#include <limits>
#include <numbers>

#include "frontends/onnx/compose.h"
#include "frontends/onnx/context.h"
#include "frontends/onnx/onnx_proto.h"

namespace relax::onnx_fe {
namespace {

// ============================================================================
// Symbolic folding
// ============================================================================

using Elems = std::vector<SymExpr>;
// One result element from the corresponding (broadcast) input elements;
// nullopt when it cannot be computed exactly.
using SymFold = std::optional<SymExpr> (*)(const Analyzer& ana, const Elems& x);

// An input known element by element.
struct SymArg {
  Elems v;
  bool scalar = false;
  DataType dtype;
};

std::optional<SymArg> sym_arg(const Context& ctx, size_t i) {
  auto v = ctx.sym_values(i);
  if (!v) return std::nullopt;
  const Value& in = ctx.input(i);
  if (in.sym) return SymArg{*v, in.sym_shape.empty(), in.sym_dtype};  // sym_values: rank 0 or 1 only
  const HostTensor* d = ctx.data(i);
  if (!d || d->shape.size() > 1) return std::nullopt;
  return SymArg{*v, d->shape.empty(), d->dtype};
}

// Every input (all present), or nullopt.
std::optional<std::vector<SymArg>> sym_args(const Context& ctx) {
  if (ctx.num_inputs() == 0 || ctx.has_attr("broadcast")) return std::nullopt;
  std::vector<SymArg> args;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    auto a = sym_arg(ctx, i);
    if (!a || !(a->dtype.is_integer() || a->dtype.is_bool())) return std::nullopt;
    args.push_back(std::move(*a));
  }
  return args;
}

// Whether a folded element is representable in `t` (only constants are
// checked: symbolic values are sizes, which fit).
bool fits(const SymExpr& e, DataType t) {
  if (!e.is_const()) return true;
  int64_t v = e.const_value();
  if (t.is_bool()) return v == 0 || v == 1;
  if (t.bits >= 64) return !t.is_uint() || v >= 0;
  if (t.is_int()) return v >= -(int64_t(1) << (t.bits - 1)) && v < (int64_t(1) << (t.bits - 1));
  return v >= 0 && v < (int64_t(1) << t.bits);
}

// Applies `f` elementwise with numpy broadcasting between rank-0/1 inputs.
std::optional<Value> fold_elementwise(const Context& ctx, const std::vector<SymArg>& args, DataType dtype, SymFold f) {
  size_t n = 1;
  bool scalar = true;
  for (const SymArg& a : args) {
    scalar = scalar && a.scalar;
    if (a.v.size() == 1) continue;
    if (n != 1 && n != a.v.size()) return std::nullopt;
    n = a.v.size();
  }
  Elems out;
  for (size_t i = 0; i < n; ++i) {
    Elems x;
    for (const SymArg& a : args) x.push_back(a.v.size() == 1 ? a.v[0] : a.v[i]);
    std::optional<SymExpr> r = f(ctx.ana(), x);
    if (!r || !r->defined()) return std::nullopt;
    SymExpr e = ctx.ana().simplify(*r);
    if (!fits(e, dtype)) return std::nullopt;
    out.push_back(e);
  }
  return sym_value(std::move(out), scalar, dtype);
}

// Folds the node when all its inputs are symbolic; the result has the dtype
// of input 0 (bool when `to_bool`).
std::optional<Value> try_fold(const Context& ctx, SymFold f, bool to_bool) {
  if (!f) return std::nullopt;
  auto args = sym_args(ctx);
  if (!args) return std::nullopt;
  return fold_elementwise(ctx, *args, to_bool ? DataType::boolean() : (*args)[0].dtype, f);
}

bool nonneg(const Analyzer& ana, const SymExpr& e) { return ana.prove_less_equal(0, e) == Tri::Yes; }

std::optional<SymExpr> from_tri(Tri t) {
  if (t == Tri::Unknown) return std::nullopt;
  return SymExpr(t == Tri::Yes ? 1 : 0);
}

using Fold = std::optional<SymExpr>;
Fold fold_add(const Analyzer&, const Elems& x) { return x[0] + x[1]; }
Fold fold_sub(const Analyzer&, const Elems& x) { return x[0] - x[1]; }
Fold fold_mul(const Analyzer&, const Elems& x) { return x[0] * x[1]; }
// ONNX integer Div truncates; it equals floor division for non-negative operands.
Fold fold_div(const Analyzer& ana, const Elems& x) {
  if (x[1].is_const(0) || !nonneg(ana, x[0]) || !nonneg(ana, x[1])) return std::nullopt;
  return floordiv(x[0], x[1]);
}
// Mod with fmod=0: the sign of the divisor, as floormod.
Fold fold_mod(const Analyzer&, const Elems& x) {
  if (x[1].is_const(0)) return std::nullopt;
  return floormod(x[0], x[1]);
}
// Mod with fmod=1: the sign of the dividend; floormod for non-negative operands.
Fold fold_fmod(const Analyzer& ana, const Elems& x) {
  if (x[1].is_const(0) || !nonneg(ana, x[0]) || !nonneg(ana, x[1])) return std::nullopt;
  return floormod(x[0], x[1]);
}
Fold fold_max(const Analyzer&, const Elems& x) {
  SymExpr r = x[0];
  for (size_t i = 1; i < x.size(); ++i) r = max(r, x[i]);
  return r;
}
Fold fold_min(const Analyzer&, const Elems& x) {
  SymExpr r = x[0];
  for (size_t i = 1; i < x.size(); ++i) r = min(r, x[i]);
  return r;
}
Fold fold_sum(const Analyzer&, const Elems& x) {
  SymExpr r = x[0];
  for (size_t i = 1; i < x.size(); ++i) r = r + x[i];
  return r;
}
Fold fold_neg(const Analyzer&, const Elems& x) { return -x[0]; }
Fold fold_abs(const Analyzer& ana, const Elems& x) {
  if (nonneg(ana, x[0])) return x[0];
  if (ana.prove_less_equal(x[0], 0) == Tri::Yes) return -x[0];
  return max(x[0], -x[0]);
}
Fold fold_equal(const Analyzer& ana, const Elems& x) { return from_tri(ana.prove_equal(x[0], x[1])); }
Fold fold_less(const Analyzer& ana, const Elems& x) { return from_tri(ana.prove_less(x[0], x[1])); }
Fold fold_less_equal(const Analyzer& ana, const Elems& x) { return from_tri(ana.prove_less_equal(x[0], x[1])); }
Fold fold_greater(const Analyzer& ana, const Elems& x) { return from_tri(ana.prove_less(x[1], x[0])); }
Fold fold_greater_equal(const Analyzer& ana, const Elems& x) { return from_tri(ana.prove_less_equal(x[1], x[0])); }
// Booleans are 0/1.
Fold fold_not(const Analyzer&, const Elems& x) { return 1 - x[0]; }
Fold fold_and(const Analyzer&, const Elems& x) { return min(x[0], x[1]); }
Fold fold_or(const Analyzer&, const Elems& x) { return max(x[0], x[1]); }
Fold fold_xor(const Analyzer&, const Elems& x) { return x[0] + x[1] - 2 * x[0] * x[1]; }
// where(c, a, b) with c in {0, 1}.
Fold fold_where(const Analyzer& ana, const Elems& x) {
  if (x[0].is_const()) return x[0].is_const(0) ? x[2] : x[1];
  if (ana.prove_equal(x[1], x[2]) == Tri::Yes) return x[1];
  return x[0] * x[1] + (1 - x[0]) * x[2];
}

// ============================================================================
// Concrete folding: small float tensors known at import time
// ============================================================================
//
// Exporters compute sizes in float too: torchvision's detection transforms
// pad a batch to ceil(max_size / 32) * 32 through Cast to float, ReduceMax,
// Div and Ceil, all on constants. Where every input is known data (or
// constant symbolic values) of at most kFoldElems elements, these ops are
// evaluated here, in double rounded to the output dtype (exact for + - * /
// and sqrt on f32), so that the sizes become integers again and the dims
// after them stay constant. Only ops that are correctly rounded fold.

constexpr int64_t kFoldElems = 4096;

struct ConstArg {
  std::vector<double> v;
  std::vector<int64_t> shape;
  DataType dtype;
};

// Input i's elements as doubles when known and small.
std::optional<ConstArg> const_arg(const Context& ctx, size_t i) {
  if (!ctx.has_input(i)) return std::nullopt;
  if (const HostTensor* d = ctx.data(i)) {
    if (d->numel() > kFoldElems) return std::nullopt;
    ConstArg a{{}, d->shape, d->dtype};
    if (auto ints = d->to_ints()) {
      for (int64_t x : *ints) {
        if (x > (int64_t(1) << 53) || x < -(int64_t(1) << 53)) return std::nullopt;
        a.v.push_back(double(x));
      }
    } else if (auto f = d->to_floats()) {
      a.v = std::move(*f);
    } else {
      return std::nullopt;
    }
    return a;
  }
  const Value& in = ctx.input(i);
  if (!in.sym || int64_t(in.sym->size()) > kFoldElems) return std::nullopt;
  ConstArg a{{}, in.sym_shape, in.sym_dtype};
  for (const SymExpr& e : *in.sym) {
    if (!e.is_const()) return std::nullopt;
    a.v.push_back(double(e.const_value()));
  }
  return a;
}

// The numpy broadcast of two shapes; nullopt when they do not broadcast.
std::optional<std::vector<int64_t>> broadcast_shapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  size_t n = std::max(a.size(), b.size());
  std::vector<int64_t> out(n);
  for (size_t k = 0; k < n; ++k) {
    int64_t x = k < n - a.size() ? 1 : a[k - (n - a.size())];
    int64_t y = k < n - b.size() ? 1 : b[k - (n - b.size())];
    if (x != y && x != 1 && y != 1) return std::nullopt;
    out[k] = x == 1 ? y : x;
  }
  return out;
}

// The flat index into a tensor of `shape` (broadcast to `out`) of the
// element at flat index `i` of `out`.
int64_t broadcast_index(int64_t i, const std::vector<int64_t>& out, const std::vector<int64_t>& shape) {
  int64_t idx = 0, stride = 1;
  for (size_t k = out.size(); k-- > 0;) {
    int64_t pos = i % out[k];
    i /= out[k];
    size_t off = out.size() - shape.size();
    if (k >= off) {
      int64_t d = shape[k - off];
      if (d != 1) idx += pos * stride;
      stride *= d;
    }
  }
  return idx;
}

// The value rounded as `t` stores it (floats), or truncated toward zero
// (integers, as ONNX's Cast does); nullopt when an integer cannot hold it.
std::optional<double> round_to(double v, DataType t) {
  if (t.is_float()) {
    if (t.bits == 32) return double(float(v));
    if (t.bits == 16) return t.code == TypeCode::BFloat ? double(bfloat_to_float(float_to_bfloat(float(v))))
                                                        : double(half_to_float(float_to_half(float(v))));
    return v;
  }
  if (t.is_bool()) return v != 0 ? 1.0 : 0.0;
  if (!std::isfinite(v)) return std::nullopt;
  double r = std::trunc(v);
  double lo = t.is_uint() ? 0 : -std::ldexp(1.0, t.bits - 1), hi = std::ldexp(1.0, t.bits - int(!t.is_uint()));
  if (r < lo || r >= hi || std::fabs(r) > std::ldexp(1.0, 53)) return std::nullopt;
  return r;
}

std::optional<Value> const_value(DataType t, std::vector<int64_t> shape, const std::vector<double>& v) {
  std::vector<double> r;
  for (double x : v) {
    std::optional<double> y = round_to(x, t);
    if (!y) return std::nullopt;
    r.push_back(*y);
  }
  Value out;
  if (t.is_float()) {
    out.data = std::make_shared<HostTensor>(HostTensor::from_floats(t, std::move(shape), r));
  } else {
    out.data = std::make_shared<HostTensor>(
        HostTensor::from_ints(t, std::move(shape), std::vector<int64_t>(r.begin(), r.end())));
  }
  return out;
}

using ConstFn = double (*)(const std::vector<double>& x);

// Folds an elementwise op of float operands (numpy broadcasting); the
// result has input 0's dtype. Integer operands are left to the symbolic fold.
std::optional<Value> try_const_fold(const Context& ctx, ConstFn f) {
  if (!f || ctx.num_inputs() == 0 || ctx.has_attr("broadcast")) return std::nullopt;
  std::vector<ConstArg> args;
  std::vector<int64_t> shape;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    std::optional<ConstArg> a = const_arg(ctx, i);
    if (!a || !a->dtype.is_float()) return std::nullopt;
    auto b = broadcast_shapes(shape, a->shape);
    if (!b) return std::nullopt;
    shape = *b;
    args.push_back(std::move(*a));
  }
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (n > kFoldElems) return std::nullopt;
  std::vector<double> out;
  std::vector<double> x(args.size());
  for (int64_t i = 0; i < n; ++i) {
    for (size_t k = 0; k < args.size(); ++k) {
      // each operand rounded to the op's dtype, as the op would read it
      x[k] = *round_to(args[k].v[size_t(broadcast_index(i, shape, args[k].shape))], args[0].dtype);
    }
    out.push_back(f(x));
  }
  return const_value(args[0].dtype, shape, out);
}

double cf_neg(const std::vector<double>& x) { return -x[0]; }
double cf_abs(const std::vector<double>& x) { return std::fabs(x[0]); }
double cf_sqrt(const std::vector<double>& x) { return std::sqrt(x[0]); }
double cf_reciprocal(const std::vector<double>& x) { return 1.0 / x[0]; }
double cf_floor(const std::vector<double>& x) { return std::floor(x[0]); }
double cf_ceil(const std::vector<double>& x) { return std::ceil(x[0]); }
double cf_round(const std::vector<double>& x) { return std::nearbyint(x[0]); }  // to even (the default mode)
double cf_relu(const std::vector<double>& x) { return std::isnan(x[0]) ? x[0] : std::max(x[0], 0.0); }
double cf_sign(const std::vector<double>& x) { return x[0] > 0 ? 1.0 : x[0] < 0 ? -1.0 : x[0]; }
double cf_add(const std::vector<double>& x) { return x[0] + x[1]; }
double cf_sub(const std::vector<double>& x) { return x[0] - x[1]; }
double cf_mul(const std::vector<double>& x) { return x[0] * x[1]; }
double cf_div(const std::vector<double>& x) { return x[0] / x[1]; }
// Max and Min propagate NaN, as the graph ops do.
double cf_max(const std::vector<double>& x) {
  double r = x[0];
  for (double v : x) r = std::isnan(r) || std::isnan(v) ? NAN : std::max(r, v);
  return r;
}
double cf_min(const std::vector<double>& x) {
  double r = x[0];
  for (double v : x) r = std::isnan(r) || std::isnan(v) ? NAN : std::min(r, v);
  return r;
}
double cf_sum(const std::vector<double>& x) {
  double r = 0;
  for (double v : x) r += v;
  return r;
}

// ============================================================================
// Emission helpers
// ============================================================================

// The dtype of input i, which must be known.
DataType known_dtype(Context& ctx, size_t i) {
  DataType t = ctx.dtype(i);
  if (t.is_void()) ctx.unsupported("an input of unknown element type");
  return t;
}

Value emit(Context& ctx, const std::string& op, std::vector<Expr> args, Attrs attrs = {}) {
  return expr_value(ctx.emit_op(op, std::move(args), std::move(attrs)));
}

// Before opset 7, binary ops broadcast only with broadcast=1, aligning the
// second operand's dims with the first's from `axis` (default: trailing, as
// numpy does). Returns the second operand reshaped for numpy broadcasting.
Expr legacy_rhs(Context& ctx) {
  Expr b = ctx.expr(1);
  if (ctx.opset() >= 7 || !ctx.attr_int("broadcast", 0) || !ctx.has_attr("axis")) return b;
  int na = ctx.ndim(0), nb = ctx.ndim(1);
  if (na < 0 || nb < 0) ctx.unsupported("legacy broadcasting (axis) with an operand of unknown rank");
  int64_t axis = ctx.attr_int("axis");
  if (axis < 0) axis += na;
  int64_t trailing = na - axis - nb;
  if (axis < 0 || trailing < 0)
    ctx.fail("broadcast axis ", ctx.attr_int("axis"), " does not fit ranks ", na, " and ", nb);
  if (trailing == 0) return b;
  std::vector<int64_t> axes;
  for (int64_t k = 0; k < trailing; ++k) axes.push_back(nb + k);
  return ctx.emit_op("expand_dims", {b}, Attrs{{"axis", axes}});
}

// Expression building for compositions over one dtype.
struct Math {
  Context& ctx;
  DataType dtype;

  Expr c(double v) { return ctx.scalar(dtype, v); }
  Expr op(const std::string& name, std::vector<Expr> args) { return ctx.emit_op(name, std::move(args)); }
  Expr add(Expr a, Expr b) { return op("add", {a, b}); }
  Expr sub(Expr a, Expr b) { return op("subtract", {a, b}); }
  Expr mul(Expr a, Expr b) { return op("multiply", {a, b}); }
  Expr div(Expr a, Expr b) { return op("divide", {a, b}); }
  Expr where(Expr cond, Expr a, Expr b) { return op("where", {cond, a, b}); }
};

Math math(Context& ctx) { return Math{ctx, known_dtype(ctx, 0)}; }

// ============================================================================
// Tables: the ops that map onto one graph op
// ============================================================================

struct UnaryDef {
  const char* onnx;
  const char* op;
  SymFold fold = nullptr;
  ConstFn const_fold = nullptr;  // on small constant float tensors
};

constexpr UnaryDef kUnary[] = {
    {"Neg", "neg", fold_neg, cf_neg},
    {"Abs", "abs", fold_abs, cf_abs},
    {"Not", "logical_not", fold_not},
    {"Exp", "exp"},
    {"Log", "log"},
    {"Sqrt", "sqrt", nullptr, cf_sqrt},
    {"Reciprocal", "reciprocal", nullptr, cf_reciprocal},
    {"Sin", "sin"},
    {"Cos", "cos"},
    {"Tan", "tan"},
    {"Asin", "asin"},
    {"Acos", "acos"},
    {"Atan", "atan"},
    {"Sinh", "sinh"},
    {"Cosh", "cosh"},
    {"Asinh", "asinh"},
    {"Acosh", "acosh"},
    {"Atanh", "atanh"},
    {"Erf", "erf"},
    {"Sign", "sign", nullptr, cf_sign},
    {"Floor", "floor", nullptr, cf_floor},
    {"Ceil", "ceil", nullptr, cf_ceil},
    {"Round", "round", nullptr, cf_round},
    {"IsNaN", "isnan"},
    {"Relu", "relu", nullptr, cf_relu},
    {"Sigmoid", "sigmoid"},
    {"Tanh", "tanh"},
    {"Softplus", "softplus"},
    {"BitwiseNot", "bitwise_not"},
};

struct BinaryDef {
  const char* onnx;
  const char* op;
  SymFold fold = nullptr;
  bool to_bool = false;          // the folded result is bool
  ConstFn const_fold = nullptr;  // on small constant float tensors
};

constexpr BinaryDef kBinary[] = {
    {"Add", "add", fold_add, false, cf_add},
    {"Sub", "subtract", fold_sub, false, cf_sub},
    {"Mul", "multiply", fold_mul, false, cf_mul},
    {"Div", "divide", fold_div, false, cf_div},
    {"Equal", "equal", fold_equal, true},
    {"Less", "less", fold_less, true},
    {"LessOrEqual", "less_equal", fold_less_equal, true},
    {"Greater", "greater", fold_greater, true},
    {"GreaterOrEqual", "greater_equal", fold_greater_equal, true},
    {"And", "logical_and", fold_and, true},
    {"Or", "logical_or", fold_or, true},
    {"Xor", "logical_xor", fold_xor, true},
    {"BitwiseAnd", "bitwise_and"},
    {"BitwiseOr", "bitwise_or"},
    {"BitwiseXor", "bitwise_xor"},
};

// Max, Min, Sum: a left fold of a binary graph op over 1..n inputs.
struct VariadicDef {
  const char* onnx;
  const char* op;
  SymFold fold;
  ConstFn const_fold;
};

constexpr VariadicDef kVariadic[] = {
    {"Max", "maximum", fold_max, cf_max},
    {"Min", "minimum", fold_min, cf_min},
    {"Sum", "add", fold_sum, cf_sum},
};

std::vector<Value> convert_unary(Context& ctx, const UnaryDef& d) {
  if (auto v = try_fold(ctx, d.fold, false)) return {*v};
  if (auto v = try_const_fold(ctx, d.const_fold)) return {*v};
  return {emit(ctx, d.op, {ctx.expr(0)})};
}

std::vector<Value> convert_binary(Context& ctx, const BinaryDef& d) {
  if (auto v = try_fold(ctx, d.fold, d.to_bool)) return {*v};
  if (auto v = try_const_fold(ctx, d.const_fold)) return {*v};
  Expr a = ctx.expr(0);
  return {expr_value(broadcast_op(ctx, d.op, {a, legacy_rhs(ctx)}))};
}

Expr fold_left(Context& ctx, const std::string& op) {
  Expr acc = ctx.expr(0);
  for (size_t i = 1; i < ctx.num_inputs(); ++i) acc = broadcast_op(ctx, op, {acc, ctx.expr(i)});
  return acc;
}

std::vector<Value> convert_variadic(Context& ctx, const VariadicDef& d) {
  if (ctx.num_inputs() == 0) ctx.fail("needs at least one input");
  if (auto v = try_fold(ctx, d.fold, false)) return {*v};
  if (auto v = try_const_fold(ctx, d.const_fold)) return {*v};
  if (ctx.num_inputs() == 1) return {ctx.input(0)};
  return {expr_value(fold_left(ctx, d.op))};
}

// ============================================================================
// Arithmetic with special cases
// ============================================================================

// Mod: fmod=0 is the floor remainder (sign of the divisor), fmod=1 C's fmod.
std::vector<Value> convert_mod(Context& ctx) {
  bool fmod = ctx.attr_int("fmod", 0) != 0;
  if (auto v = try_fold(ctx, fmod ? fold_fmod : fold_mod, false)) return {*v};
  return {emit(ctx, fmod ? "fmod" : "mod", {ctx.expr(0), ctx.expr(1)})};
}

// Pow: base and exponent may differ in type; the result has the base's.
// A float exponent of an integer base is applied in the exponent's type
// and the result converted back; otherwise the exponent is converted.
std::vector<Value> convert_pow(Context& ctx) {
  DataType tx = known_dtype(ctx, 0), ty = known_dtype(ctx, 1);
  // x ** 2 (a norm's square, as torch exports a LayerNorm before opset 17)
  // is x * x, which is exact (pow is correctly rounded): no pow call per
  // element. Only when the exponent is one element of rank at most x's,
  // so that broadcasting it leaves x's shape.
  if (tx == ty && tx.is_float()) {
    const HostTensor* e = ctx.data(1);
    if (e && e->numel() == 1 && ctx.ndim(0) >= 0 && int(e->shape.size()) <= ctx.ndim(0) && e->float_at(0) == 2.0) {
      Expr x = ctx.expr(0);
      return {emit(ctx, "multiply", {x, x})};
    }
  }
  Expr x = ctx.expr(0), y = legacy_rhs(ctx);
  if (tx == ty) return {emit(ctx, "power", {x, y})};
  if (tx.is_integer() && ty.is_float()) {
    Expr xf = ctx.emit_op("astype", {x}, Attrs{{"dtype", ty}});
    Expr p = ctx.emit_op("power", {xf, y});
    return {emit(ctx, "astype", {p}, Attrs{{"dtype", tx}})};
  }
  Expr yc = ctx.emit_op("astype", {y}, Attrs{{"dtype", tx}});
  return {emit(ctx, "power", {x, yc})};
}

std::vector<Value> convert_mean(Context& ctx) {
  if (ctx.num_inputs() == 0) ctx.fail("needs at least one input");
  if (ctx.num_inputs() == 1) return {ctx.input(0)};
  Math m = math(ctx);
  return {expr_value(m.div(fold_left(ctx, "add"), m.c(double(ctx.num_inputs()))))};
}

std::vector<Value> convert_bitshift(Context& ctx) {
  std::string dir = ctx.attr_string("direction");
  if (dir != "LEFT" && dir != "RIGHT") ctx.fail("direction must be LEFT or RIGHT, got '", dir, "'");
  return {emit(ctx, dir == "LEFT" ? "left_shift" : "right_shift", {ctx.expr(0), ctx.expr(1)})};
}

std::vector<Value> convert_where(Context& ctx) {
  auto args = sym_args(ctx);
  if (args && args->size() == 3) {
    if (auto v = fold_elementwise(ctx, *args, (*args)[1].dtype, fold_where)) return {*v};
  }
  return {emit(ctx, "where", {ctx.expr(0), ctx.expr(1), ctx.expr(2)})};
}

// Clip: the bounds are attributes before opset 11, optional inputs after.
// A missing bound does not clamp.
std::vector<Value> convert_clip(Context& ctx) {
  Expr x = ctx.expr(0), lo, hi;
  if (ctx.opset() < 11) {
    DataType t = known_dtype(ctx, 0);
    if (ctx.has_attr("min")) lo = ctx.scalar(t, ctx.attr_float("min"));
    if (ctx.has_attr("max")) hi = ctx.scalar(t, ctx.attr_float("max"));
  } else {
    if (ctx.has_input(1)) lo = ctx.expr(1);
    if (ctx.has_input(2)) hi = ctx.expr(2);
  }
  if (lo && hi) return {emit(ctx, "clip", {x, lo, hi})};
  if (lo) return {emit(ctx, "maximum", {x, lo})};
  if (hi) return {emit(ctx, "minimum", {x, hi})};
  return {ctx.input(0)};
}

std::vector<Value> convert_isinf(Context& ctx) {
  bool neg = ctx.attr_int("detect_negative", 1) != 0, pos = ctx.attr_int("detect_positive", 1) != 0;
  Expr x = ctx.expr(0);
  if (neg && pos) return {emit(ctx, "isinf", {x})};
  Math m = math(ctx);
  double inf = std::numeric_limits<double>::infinity();
  if (pos) return {emit(ctx, "equal", {x, m.c(inf)})};
  if (neg) return {emit(ctx, "equal", {x, m.c(-inf)})};
  return {emit(ctx, "greater", {x, m.c(inf)})};  // never true
}

// ============================================================================
// Activations: compositions of graph ops
// ============================================================================

std::vector<Value> convert_leaky_relu(Context& ctx) {
  Math m = math(ctx);
  Expr x = ctx.expr(0);
  Expr neg = m.op("less", {x, m.c(0)});
  return {expr_value(m.where(neg, m.mul(m.c(ctx.attr_float("alpha", 0.01f)), x), x))};
}

// Before opset 7 a rank-1 slope of more than one element holds one value
// per channel (axis 1 of x): reshaped to [C, 1, ...] for numpy broadcasting.
Expr prelu_slope(Context& ctx) {
  Expr slope = ctx.expr(1);
  auto s = ctx.shape(1);
  int nx = ctx.ndim(0);
  if (ctx.opset() >= 7 || !s || s->size() != 1 || (*s)[0].is_const(1) || nx < 3) return slope;
  std::vector<int64_t> axes;
  for (int k = 1; k < nx - 1; ++k) axes.push_back(k);
  return ctx.emit_op("expand_dims", {slope}, Attrs{{"axis", axes}});
}

// PRelu: slope broadcasts to x (unidirectionally); x * slope where x < 0.
std::vector<Value> convert_prelu(Context& ctx) {
  Math m = math(ctx);
  Expr x = ctx.expr(0), slope = prelu_slope(ctx);
  Expr neg = m.op("less", {x, m.c(0)});
  return {expr_value(m.where(neg, m.mul(x, slope), x))};
}

std::vector<Value> convert_elu(Context& ctx) {
  Math m = math(ctx);
  Expr x = ctx.expr(0);
  Expr neg = m.op("less", {x, m.c(0)});
  Expr em1 = m.sub(m.op("exp", {x}), m.c(1));
  return {expr_value(m.where(neg, m.mul(m.c(ctx.attr_float("alpha", 1.0f)), em1), x))};
}

// Selu: gamma * (x > 0 ? x : alpha * (exp(x) - 1)).
std::vector<Value> convert_selu(Context& ctx) {
  Math m = math(ctx);
  Expr x = ctx.expr(0);
  double alpha = ctx.attr_float("alpha", 1.67326319217681884765625f);
  double gamma = ctx.attr_float("gamma", 1.05070102214813232421875f);
  Expr pos = m.op("greater", {x, m.c(0)});
  Expr neg = m.mul(m.c(alpha), m.sub(m.op("exp", {x}), m.c(1)));
  return {expr_value(m.mul(m.c(gamma), m.where(pos, x, neg)))};
}

// Celu: max(0, x) + min(0, alpha * (exp(x / alpha) - 1)).
std::vector<Value> convert_celu(Context& ctx) {
  Math m = math(ctx);
  Expr x = ctx.expr(0), alpha = m.c(ctx.attr_float("alpha", 1.0f));
  Expr em1 = m.sub(m.op("exp", {m.div(x, alpha)}), m.c(1));
  Expr neg = m.op("minimum", {m.c(0), m.mul(alpha, em1)});
  return {expr_value(m.add(m.op("maximum", {m.c(0), x}), neg))};
}

std::vector<Value> convert_thresholded_relu(Context& ctx) {
  Math m = math(ctx);
  Expr x = ctx.expr(0);
  Expr above = m.op("greater", {x, m.c(ctx.attr_float("alpha", 1.0f))});
  return {expr_value(m.where(above, x, m.c(0)))};
}

// clip(alpha * x + beta, 0, 1)
Expr hard_sigmoid(Math& m, Expr x, double alpha, double beta) {
  return m.op("clip", {m.add(m.mul(m.c(alpha), x), m.c(beta)), m.c(0), m.c(1)});
}

std::vector<Value> convert_hard_sigmoid(Context& ctx) {
  Math m = math(ctx);
  return {expr_value(hard_sigmoid(m, ctx.expr(0), ctx.attr_float("alpha", 0.2f), ctx.attr_float("beta", 0.5f)))};
}

std::vector<Value> convert_hard_swish(Context& ctx) {
  Math m = math(ctx);
  Expr x = ctx.expr(0);
  return {expr_value(m.mul(x, hard_sigmoid(m, x, 1.0 / 6, 0.5)))};
}

// x / (1 + |x|)
std::vector<Value> convert_softsign(Context& ctx) {
  Math m = math(ctx);
  Expr x = ctx.expr(0);
  return {expr_value(m.div(x, m.add(m.c(1), m.op("abs", {x}))))};
}

// x * tanh(softplus(x))
std::vector<Value> convert_mish(Context& ctx) {
  Math m = math(ctx);
  Expr x = ctx.expr(0);
  return {expr_value(m.mul(x, m.op("tanh", {m.op("softplus", {x})})))};
}

// approximate=none: the erf form (gelu); tanh:
// 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))).
std::vector<Value> convert_gelu(Context& ctx) {
  std::string approx = ctx.attr_string("approximate", "none");
  if (approx == "none") return {emit(ctx, "gelu", {ctx.expr(0)})};
  if (approx != "tanh") ctx.fail("approximate must be none or tanh, got '", approx, "'");
  Math m = math(ctx);
  Expr x = ctx.expr(0);
  Expr x3 = m.mul(m.mul(x, x), x);
  Expr inner = m.mul(m.c(std::sqrt(2 / std::numbers::pi)), m.add(x, m.mul(m.c(0.044715), x3)));
  Expr t = m.add(m.c(1), m.op("tanh", {inner}));
  return {expr_value(m.mul(m.mul(m.c(0.5), x), t))};
}

// x * sigmoid(alpha * x)
std::vector<Value> convert_swish(Context& ctx) {
  double alpha = ctx.attr_float("alpha", 1.0f);
  if (alpha == 1.0) return {emit(ctx, "silu", {ctx.expr(0)})};
  Math m = math(ctx);
  Expr x = ctx.expr(0);
  return {expr_value(m.mul(x, m.op("sigmoid", {m.mul(m.c(alpha), x)})))};
}

// SwiGLU (opset 28): Y = A * sigmoid(alpha * A) * B, A and B of one shape.
std::vector<Value> convert_swiglu(Context& ctx) {
  auto as = ctx.shape(0), bs = ctx.shape(1);
  if (as && bs) {
    bool differ = as->size() != bs->size();
    for (size_t i = 0; !differ && i < as->size(); ++i) differ = ctx.ana().can_prove_not_equal((*as)[i], (*bs)[i]);
    if (differ) ctx.fail("A and B must have the same shape");
  }
  double alpha = ctx.attr_float("alpha", 1.0f);
  Expr a = ctx.expr(0);
  Expr gate = alpha == 1.0 ? op(ctx, "silu", {a})
                           : mul(ctx, a, op(ctx, "sigmoid", {mul(ctx, a, scalar_like(ctx, ctx.dtype(0), alpha))}));
  return {expr_value(mul(ctx, gate, ctx.expr(1)))};
}

// x < -lambd: x + bias; x > lambd: x - bias; else 0.
std::vector<Value> convert_shrink(Context& ctx) {
  Math m = math(ctx);
  Expr x = ctx.expr(0);
  double bias = ctx.attr_float("bias", 0.0f), lambd = ctx.attr_float("lambd", 0.5f);
  Expr above = m.where(m.op("greater", {x, m.c(lambd)}), m.sub(x, m.c(bias)), m.c(0));
  return {expr_value(m.where(m.op("less", {x, m.c(-lambd)}), m.add(x, m.c(bias)), above))};
}

// ============================================================================
// Conversions, Identity
// ============================================================================

bool is_float8(DataType t) {
  return t.code == TypeCode::Float8E4M3FN || t.code == TypeCode::Float8E4M3FNUZ || t.code == TypeCode::Float8E5M2 ||
         t.code == TypeCode::Float8E5M2FNUZ || t.code == TypeCode::Float8E8M0;
}

// Wraps a constant to `t` as a C cast does (bool: nonzero is 1).
SymExpr wrap_const(int64_t v, DataType t) {
  if (t.is_bool()) return int64_t(v != 0);
  if (t.bits >= 64) return v;
  uint64_t u = uint64_t(v) & ((uint64_t(1) << t.bits) - 1);
  if (t.is_int() && (u >> (t.bits - 1))) return int64_t(u) - (int64_t(1) << t.bits);
  return int64_t(u);
}

// Folds a cast of symbolic integers to an integer or bool type.
std::optional<Value> fold_cast(Context& ctx, DataType to) {
  if (!(to.is_integer() || to.is_bool())) return std::nullopt;
  auto a = sym_arg(ctx, 0);
  if (!a || !(a->dtype.is_integer() || a->dtype.is_bool())) return std::nullopt;
  Elems out;
  for (const SymExpr& e : a->v) {
    if (e.is_const()) {
      out.push_back(wrap_const(e.const_value(), to));
    } else if (!to.is_bool()) {
      out.push_back(e);
    } else {
      std::optional<SymExpr> b = from_tri(ctx.ana().prove_not_equal(e, 0));
      if (!b) return std::nullopt;
      out.push_back(*b);
    }
  }
  return sym_value(std::move(out), a->scalar, to);
}

// Folds a cast from or to a float type of small constant data (int to
// float rounds to nearest; float to int truncates toward zero and is left
// to run time when the integer type cannot hold the value). Float8 targets
// are left to run time (saturation).
std::optional<Value> fold_const_cast(Context& ctx, DataType to) {
  std::optional<ConstArg> a = const_arg(ctx, 0);
  if (!a || !(a->dtype.is_float() || to.is_float()) || is_float8(to) || is_float8(a->dtype)) return std::nullopt;
  if (!(to.is_float() || to.is_integer() || to.is_bool())) return std::nullopt;
  if (!(a->dtype.is_float() || a->dtype.is_integer() || a->dtype.is_bool())) return std::nullopt;
  if (to.is_float() && to.bits < 16) return std::nullopt;
  return const_value(to, a->shape, a->v);
}

// Cast / CastLike to `to`, honouring saturate and round_mode for float8.
std::vector<Value> cast_to(Context& ctx, DataType to) {
  if (auto v = fold_cast(ctx, to)) return {*v};
  if (auto v = fold_const_cast(ctx, to)) return {*v};
  if (ctx.dtype(0) == to) return {ctx.input(0)};
  Expr x = ctx.expr(0);
  bool saturate = ctx.attr_int("saturate", 1) != 0;
  std::string round_mode = to.code == TypeCode::Float8E8M0 ? ctx.attr_string("round_mode", "up") : "up";
  if (is_float8(to) && (!saturate || round_mode != "up"))
    return {emit(ctx, "astype_float8", {x}, Attrs{{"dtype", to}, {"saturate", saturate}, {"round_mode", round_mode}})};
  return {emit(ctx, "astype", {x}, Attrs{{"dtype", to}})};
}

DataType dtype_attr(Context& ctx, const char* what) {
  int to = int(ctx.attr_int("to", -1));
  if (!ctx.has_attr("to")) ctx.fail("attribute 'to' is required");
  auto t = dtype_of(to);
  if (!t) ctx.unsupported(std::string(what) + " to " + onnx_type_name(to));
  return *t;
}

std::vector<Value> convert_cast(Context& ctx) { return cast_to(ctx, dtype_attr(ctx, "Cast")); }

std::vector<Value> convert_cast_like(Context& ctx) { return cast_to(ctx, known_dtype(ctx, 1)); }

std::vector<Value> convert_bitcast(Context& ctx) {
  DataType to = dtype_attr(ctx, "BitCast");
  if (ctx.dtype(0) == to) return {ctx.input(0)};
  return {emit(ctx, "bitcast", {ctx.expr(0)}, Attrs{{"dtype", to}})};
}

std::vector<Value> convert_identity(Context& ctx) { return {ctx.input(0)}; }

}  // namespace

void register_elementwise_converters(ConverterRegistry& r) {
  for (const UnaryDef& d : kUnary) r.add(d.onnx, 1, [&d](Context& ctx) { return convert_unary(ctx, d); });
  for (const BinaryDef& d : kBinary) r.add(d.onnx, 1, [&d](Context& ctx) { return convert_binary(ctx, d); });
  for (const VariadicDef& d : kVariadic) r.add(d.onnx, 1, [&d](Context& ctx) { return convert_variadic(ctx, d); });
  r.add("Mod", 10, convert_mod);
  r.add("Pow", 1, convert_pow);
  r.add("Mean", 1, convert_mean);
  r.add("BitShift", 11, convert_bitshift);
  r.add("Where", 9, convert_where);
  r.add("Clip", 1, convert_clip);
  r.add("IsInf", 10, convert_isinf);
  r.add("LeakyRelu", 1, convert_leaky_relu);
  r.add("PRelu", 1, convert_prelu);
  r.add("Elu", 1, convert_elu);
  r.add("Selu", 1, convert_selu);
  r.add("Celu", 12, convert_celu);
  r.add("ThresholdedRelu", 10, convert_thresholded_relu);
  r.add("HardSigmoid", 1, convert_hard_sigmoid);
  r.add("HardSwish", 14, convert_hard_swish);
  r.add("Softsign", 1, convert_softsign);
  r.add("Mish", 18, convert_mish);
  r.add("Gelu", 20, convert_gelu);
  r.add("Swish", 24, convert_swish);
  r.add("SwiGLU", 28, convert_swiglu);
  r.add("Shrink", 9, convert_shrink);
  r.add("Cast", 1, convert_cast);
  r.add("CastLike", 15, convert_cast_like);
  r.add("BitCast", 26, convert_bitcast);
  r.add("Identity", 1, convert_identity);
}

}  // namespace relax::onnx_fe
