// Legalisers of the elementwise ops (ir/ops/elementwise.cc) and the further
// elementwise math ops (ir/ops/math.cc): one loop nest over the result,
// operands read with numpy broadcasting; a Prim operand is an immediate or
// a sym_param.
#include "ir/error.h"
#include "ir/ops/common.h"
#include "passes/legalize/legalize.h"
#include "passes/legalize/te.h"

namespace relax {
namespace {

using namespace te;
using tir::BinOp;
using tir::Intrinsic;

// A tensor operand (a buffer read with broadcasting) or a scalar one.
struct Operand {
  Buffer buf;
  TExpr scalar;
  DataType dtype() const { return buf ? buf->dtype : scalar->dtype; }
  TExpr at(const Index& i, const Buffer& out) const { return buf ? load_bcast(buf, i, out) : scalar; }
};

std::optional<Operand> operand(ProgramBuilder& pb, const Expr& arg, const std::string& name) {
  if (as<TensorSI>(arg->sinfo)) {
    Buffer b = pb.input(arg, name);
    if (!b) return std::nullopt;
    return Operand{b, nullptr};
  }
  const auto* p = as<PrimSI>(arg->sinfo);
  if (!p || p->dtype.is_void()) return std::nullopt;
  std::optional<TExpr> s = pb.scalar(arg, p->dtype);
  if (!s) return std::nullopt;
  return Operand{nullptr, *s};
}

// The result of a broadcasting op whose dims the operands' do not determine
// at compile time (two of them different variables, either of which may be
// 1): call_pure_builtin("relax.broadcast_shape", (tensor operands..., "var")) bound
// by a match_cast to fresh variables bcast_d0, bcast_d1, ...; the program
// then reads each operand with run-time `dim == 1` selects (load_bcast).
std::optional<StructInfo> runtime_broadcast(LegalizeContext& ctx, const CallNode& call, size_t num_operands) {
  const auto* t = as<TensorSI>(call.sinfo);
  if (!t || t->ndim < 0 || t->shape || t->dtype.is_void()) return std::nullopt;
  std::vector<Expr> tensors;
  for (size_t k = 0; k < num_operands; ++k)
    if (as<TensorSI>(call.args[k]->sinfo)) tensors.push_back(call.args[k]);
  if (tensors.empty()) return std::nullopt;
  if (!ctx.call_name().empty()) tensors.push_back(make_string(ctx.call_name()));  // names it in an error
  Expr value = ctx.call_pure_builtin("relax.broadcast_shape", tensors, shape_si_ndim(t->ndim));
  return tensor_si(t->dtype, *ctx.bind_shape(value, "bcast"));
}

// Legalises an n-ary elementwise op whose value is f(operands).
using ElemFn = std::function<TExpr(const std::vector<TExpr>& v, DataType out)>;

std::optional<Expr> elementwise(LegalizeContext& ctx, const CallNode& call, const std::string& name, const ElemFn& f,
                                size_t num_operands) {
  ProgramBuilder pb(ctx, name);
  static const char* kNames[] = {"a", "b", "c"};
  std::vector<Operand> ops;
  for (size_t k = 0; k < num_operands; ++k) {
    auto o = operand(pb, call.args[k], num_operands == 1 ? "x" : kNames[k]);
    if (!o) return std::nullopt;
    ops.push_back(*o);
  }
  Buffer out = pb.output(call.sinfo, "out");
  if (out) {
    ctx.check_broadcast(std::vector<Expr>(call.args.begin(), call.args.begin() + num_operands),
                        *as<TensorSI>(call.sinfo)->shape);
  } else if (std::optional<StructInfo> si = runtime_broadcast(ctx, call, num_operands)) {
    out = pb.output(*si, "out");
  }
  if (!out) return std::nullopt;
  return pb.finish(compute(out, [&](const Index& i) {
    std::vector<TExpr> v;
    for (const Operand& o : ops) v.push_back(o.at(i, out));
    return f(v, out->dtype);
  }));
}

// ---- scalar semantics ------------------------------------------------------------------

TExpr bin(BinOp op, const TExpr& a, const TExpr& b) { return tir::binary(op, a, b); }

// A float math function evaluated in f32 for narrow floats.
TExpr float_math(const std::function<TExpr(const TExpr&)>& f, const TExpr& x) {
  DataType t = compute_dtype(x->dtype);
  return cast(x->dtype, f(cast(t, x)));
}

// An integer divisor that is never 0 (division by zero is undefined; the
// kernel must not trap).
TExpr safe_divisor(const TExpr& b) { return select(eq(b, zero(b->dtype)), one(b->dtype), b); }

TExpr int_div(BinOp op, const TExpr& a, const TExpr& b) {
  if (auto* imm = tir::as<tir::ImmNode>(b); imm && imm->int_value != 0) return bin(op, a, b);
  return select(eq(b, zero(b->dtype)), zero(a->dtype), bin(op, a, safe_divisor(b)));
}

// Python's a % b for floats: fmod with the sign moved to b's.
TExpr float_mod(const TExpr& a, const TExpr& b) {
  TExpr r = call(Intrinsic::fmod, {a, b});
  TExpr z = zero(a->dtype);
  TExpr adjust = and_(ne(r, z), ne(lt(r, z), lt(b, z)));
  return select(adjust, r + b, r);
}

TExpr int_power(const TExpr& a, const TExpr& b) {
  DataType f64 = DataType::f(64);
  TExpr p = call(Intrinsic::pow, {cast(f64, a), cast(f64, b)});
  return cast(a->dtype, intrin(Intrinsic::trunc, p));
}

TExpr shift(BinOp op, const TExpr& a, const TExpr& b) {
  DataType t = a->dtype;
  TExpr bits = const_of(t, t.bits);
  TExpr inrange = and_(ge(b, zero(t)), lt(b, bits));
  TExpr safe_b = select(inrange, b, zero(t));
  TExpr shifted = bin(op, a, safe_b);
  TExpr overflow = zero(t);
  if (op == BinOp::Shr && t.is_int()) overflow = select(lt(a, zero(t)), -one(t), zero(t));
  return select(inrange, shifted, overflow);
}

using Fn2 = std::function<TExpr(const TExpr&, const TExpr&)>;

Fn2 binary_fn(const std::string& op, DataType t) {
  bool fl = t.is_float();
  if (op == "add") return [](auto& a, auto& b) { return a + b; };
  if (op == "subtract") return [](auto& a, auto& b) { return a - b; };
  if (op == "multiply") return [](auto& a, auto& b) { return a * b; };
  if (op == "divide") {
    if (fl) return [](auto& a, auto& b) { return a / b; };
    return [](auto& a, auto& b) { return int_div(BinOp::Div, a, b); };
  }
  if (op == "floor_divide") {
    if (fl)
      return [](auto& a, auto& b) { return float_math([&](auto& x) { return intrin(Intrinsic::floor, x); }, a / b); };
    return [](auto& a, auto& b) { return int_div(BinOp::FloorDiv, a, b); };
  }
  if (op == "mod") {
    if (fl)
      return [](auto& a, auto& b) {
        DataType ct = compute_dtype(a->dtype);
        return cast(a->dtype, float_mod(cast(ct, a), cast(ct, b)));
      };
    return [](auto& a, auto& b) { return int_div(BinOp::FloorMod, a, b); };
  }
  if (op == "fmod") {
    if (fl)
      return [](auto& a, auto& b) {
        DataType ct = compute_dtype(a->dtype);
        return cast(a->dtype, call(Intrinsic::fmod, {cast(ct, a), cast(ct, b)}));
      };
    // C's a % b: a - b * trunc(a / b); integer Div truncates.
    return [](auto& a, auto& b) {
      return select(eq(b, zero(b->dtype)), zero(a->dtype), a - bin(BinOp::Div, a, safe_divisor(b)) * b);
    };
  }
  if (op == "power") {
    if (fl)
      return [](auto& a, auto& b) {
        DataType ct = compute_dtype(a->dtype);
        return cast(a->dtype, call(Intrinsic::pow, {cast(ct, a), cast(ct, b)}));
      };
    return [](auto& a, auto& b) { return int_power(a, b); };
  }
  if (op == "maximum") return [](auto& a, auto& b) { return max_(a, b); };
  if (op == "minimum") return [](auto& a, auto& b) { return min_(a, b); };
  if (op == "equal") return [](auto& a, auto& b) { return eq(a, b); };
  if (op == "not_equal") return [](auto& a, auto& b) { return ne(a, b); };
  if (op == "less") return [](auto& a, auto& b) { return lt(a, b); };
  if (op == "less_equal") return [](auto& a, auto& b) { return le(a, b); };
  if (op == "greater") return [](auto& a, auto& b) { return gt(a, b); };
  if (op == "greater_equal") return [](auto& a, auto& b) { return ge(a, b); };
  if (op == "logical_and") return [](auto& a, auto& b) { return and_(a, b); };
  if (op == "logical_or") return [](auto& a, auto& b) { return or_(a, b); };
  if (op == "logical_xor") return [](auto& a, auto& b) { return ne(a, b); };
  if (op == "bitwise_and") return [](auto& a, auto& b) { return bin(BinOp::BitAnd, a, b); };
  if (op == "bitwise_or") return [](auto& a, auto& b) { return bin(BinOp::BitOr, a, b); };
  if (op == "bitwise_xor") return [](auto& a, auto& b) { return bin(BinOp::BitXor, a, b); };
  if (op == "left_shift") return [](auto& a, auto& b) { return shift(BinOp::Shl, a, b); };
  if (op == "right_shift") return [](auto& a, auto& b) { return shift(BinOp::Shr, a, b); };
  return nullptr;
}

constexpr const char* kBinaryOps[] = {"add",           "subtract",    "multiply",   "divide",      "floor_divide",
                                      "mod",           "fmod",        "power",      "maximum",     "minimum",
                                      "equal",         "not_equal",   "less",       "less_equal",  "greater",
                                      "greater_equal", "logical_and", "logical_or", "logical_xor", "bitwise_and",
                                      "bitwise_or",    "bitwise_xor", "left_shift", "right_shift"};

std::optional<Expr> legalize_binary(LegalizeContext& ctx, const CallNode& call) {
  const std::string& op = ops::op_name(call);
  return elementwise(
      ctx, call, op,
      [&](const std::vector<TExpr>& v, DataType) {
        Fn2 f = binary_fn(op, v[0]->dtype);
        RELAX_CHECK(f, "no scalar rule for ", op);
        return f(v[0], v[1]);
      },
      2);
}

// ---- unary -------------------------------------------------------------------------------

using Fn1 = std::function<TExpr(const TExpr&)>;

Fn1 math(Intrinsic fn) {
  return [fn](const TExpr& x) { return float_math([fn](const TExpr& y) { return intrin(fn, y); }, x); };
}
Fn1 math(const Fn1& f) {
  return [f](const TExpr& x) { return float_math(f, x); };
}

Fn1 unary_fn(const std::string& op, DataType t) {
  bool fl = t.is_float();
  auto identity = [](const TExpr& x) { return x; };
  static const std::pair<const char*, Intrinsic> kIntrinsic[] = {
      {"exp", Intrinsic::exp},     {"log", Intrinsic::log},     {"sqrt", Intrinsic::sqrt},
      {"rsqrt", Intrinsic::rsqrt}, {"tanh", Intrinsic::tanh},   {"sigmoid", Intrinsic::sigmoid},
      {"erf", Intrinsic::erf},     {"sin", Intrinsic::sin},     {"cos", Intrinsic::cos},
      {"tan", Intrinsic::tan},     {"asin", Intrinsic::asin},   {"acos", Intrinsic::acos},
      {"atan", Intrinsic::atan},   {"sinh", Intrinsic::sinh},   {"cosh", Intrinsic::cosh},
      {"asinh", Intrinsic::asinh}, {"acosh", Intrinsic::acosh}, {"atanh", Intrinsic::atanh}};
  for (const auto& [name, fn] : kIntrinsic)
    if (op == name) return math(fn);
  if (op == "neg") return [](const TExpr& x) { return -x; };
  if (op == "abs") {
    if (t.is_uint() || t.is_bool()) return identity;
    return [](const TExpr& x) { return intrin(Intrinsic::abs, x); };
  }
  if (op == "relu") return [](const TExpr& x) { return max_(x, zero(x->dtype)); };
  if (op == "gelu")
    return math([](const TExpr& x) {
      DataType d = x->dtype;
      return x * const_of(d, 0.5) * (one(d) + intrin(Intrinsic::erf, x * const_of(d, 0.70710678118654752440)));
    });
  if (op == "silu") return math([](const TExpr& x) { return x * intrin(Intrinsic::sigmoid, x); });
  if (op == "softplus")
    // log(1 + exp(x)) without overflow: max(x, 0) + log1p(exp(-|x|)).
    return math([](const TExpr& x) {
      return max_(x, zero(x->dtype)) + intrin(Intrinsic::log1p, intrin(Intrinsic::exp, -intrin(Intrinsic::abs, x)));
    });
  if (op == "floor" || op == "ceil") {
    if (!fl) return identity;
    return math(op == "floor" ? Intrinsic::floor : Intrinsic::ceil);
  }
  if (op == "round") {
    if (!fl) return identity;
    return math(round_half_even);
  }
  if (op == "sign")
    return [](const TExpr& x) {
      DataType d = x->dtype;
      if (d.is_bool()) return x;
      TExpr neg = d.is_uint() ? zero(d) : const_of(d, -1);
      return select(gt(x, zero(d)), one(d), select(lt(x, zero(d)), neg, x));
    };
  if (op == "reciprocal") return [](const TExpr& x) { return one(x->dtype) / x; };
  if (op == "logical_not") return [](const TExpr& x) { return not_(x); };
  if (op == "bitwise_not") {
    if (t.is_bool()) return [](const TExpr& x) { return not_(x); };
    return [](const TExpr& x) { return tir::unary(tir::UnOp::BitNot, x); };
  }
  if (op == "isnan") return [](const TExpr& x) { return intrin(Intrinsic::isnan, x); };
  if (op == "isinf") return [](const TExpr& x) { return intrin(Intrinsic::isinf, x); };
  return nullptr;
}

constexpr const char* kUnaryOps[] = {
    "neg",         "abs",   "exp",   "log",  "sqrt", "rsqrt", "tanh", "sigmoid", "relu",  "gelu",       "silu",
    "softplus",    "erf",   "sin",   "cos",  "tan",  "floor", "ceil", "round",   "sign",  "reciprocal", "logical_not",
    "bitwise_not", "isnan", "isinf", "asin", "acos", "atan",  "sinh", "cosh",    "asinh", "acosh",      "atanh"};

std::optional<Expr> legalize_unary(LegalizeContext& ctx, const CallNode& call) {
  const std::string& op = ops::op_name(call);
  return elementwise(
      ctx, call, op,
      [&](const std::vector<TExpr>& v, DataType) {
        Fn1 f = unary_fn(op, v[0]->dtype);
        RELAX_CHECK(f, "no scalar rule for ", op);
        return f(v[0]);
      },
      1);
}

// ---- where, clip, conversions ---------------------------------------------------------------

std::optional<Expr> legalize_where(LegalizeContext& ctx, const CallNode& call) {
  return elementwise(
      ctx, call, "where", [](const std::vector<TExpr>& v, DataType) { return select(v[0], v[1], v[2]); }, 3);
}

std::optional<Expr> legalize_clip(LegalizeContext& ctx, const CallNode& call) {
  return elementwise(
      ctx, call, "clip", [](const std::vector<TExpr>& v, DataType) { return min_(max_(v[0], v[1]), v[2]); }, 3);
}

// x converted to the float8 type `to` (one with a largest finite value) by
// ONNX Cast's tables. Saturating, values beyond +-max, infinities included,
// clamp to +-max before rounding (the reference clips, then rounds) and NaN
// stays NaN. Otherwise the cast alone: it rounds to nearest even and sends
// what overflows to NaN or inf as the type has them (the target's encoding).
TExpr to_float8(const TExpr& v, DataType to, bool saturate) {
  if (!saturate) return cast(to, v);
  // The clamp in f32 (f64 stays): a narrow source cannot hold every bound.
  DataType t = v->dtype.is_float() ? compute_dtype(v->dtype) : DataType::f32();
  TExpr x = cast(t, v);
  return cast(to, saturate_to(x, to));
}

// x converted to `to` by ONNX Cast's rules: to bool is x != 0; floats to
// integers truncate toward zero; to a float8 type saturate (astype is Cast
// with saturate = 1). Floats to the sub-byte integers (i4, u4, i2, u2)
// truncate to a wide integer whose low bits are kept, as the reference
// (numpy with ml_dtypes) does: -9.0 -> i4 7, not -8.
TExpr convert(const TExpr& x, DataType to) {
  if (to.is_bool() && !x->dtype.is_bool()) return ne(x, zero(x->dtype));
  if (narrow_float_max(to) != 0) return to_float8(x, to, true);
  if (to.is_integer() && to.bits < 8 && x->dtype.is_float()) return cast(to, cast(DataType::i32(), x));
  return cast(to, x);
}

std::optional<Expr> legalize_astype(LegalizeContext& ctx, const CallNode& call) {
  return elementwise(
      ctx, call, "astype", [](const std::vector<TExpr>& v, DataType out) { return convert(v[0], out); }, 1);
}

std::optional<Expr> legalize_astype_float8(LegalizeContext& ctx, const CallNode& call) {
  Attrs attrs = ops::attrs_of(call);
  DataType to = attrs.get_dtype("dtype");
  if (narrow_float_max(to) == 0) return std::nullopt;  // f8e8m0 and its rounding modes: not yet
  bool saturate = attrs.get_bool("saturate", true);
  return elementwise(
      ctx, call, "astype_float8",
      [&](const std::vector<TExpr>& v, DataType out) { return to_float8(v[0], out, saturate); }, 1);
}

}  // namespace

void register_elementwise_legalizers(LegalizerRegistry& reg) {
  for (const char* op : kBinaryOps) reg.add(op, legalize_binary);
  for (const char* op : kUnaryOps) reg.add(op, legalize_unary);
  reg.add("where", legalize_where);
  reg.add("clip", legalize_clip);
  reg.add("astype", legalize_astype);
  reg.add("astype_float8", legalize_astype_float8);
}

}  // namespace relax
