// ONNX converters: random generators, Dropout, and Optional ops on plain
// tensors.
//
// Generators map to the pure, counter-based graph ops of ir/ops/random.cc
// (random_uniform, random_normal, multinomial), whose values depend only on
// an explicit seed and each element's index. Bernoulli and training-mode
// Dropout are compositions of random_uniform with a comparison and where.
//
// Seeds. ONNX's `seed` attribute (a float for the generators, an int for
// Dropout) becomes the graph op's int64 seed: an integral value as itself,
// any other float by its 32-bit pattern. Without one, ONNX says "one will be
// auto generated"; we fix it at compile time to the FNV-1a 64-bit hash of
// the node's first output name, so distinct nodes get distinct streams and
// every run of a compiled model draws the same values.
//
// Optional values. The importer rejects optional-typed graph inputs and
// outputs; inside a graph a non-empty optional is represented by its
// element itself, so Optional(x) is x, OptionalHasElement of a present
// input is true (of an omitted one false) and OptionalGetElement is the
// identity. An empty Optional() needs a real optional type: unsupported.
#include <bit>
#include <cmath>

#include "frontends/onnx/context.h"
#include "frontends/onnx/onnx_proto.h"

namespace relax::onnx_fe {
namespace {

// ---- Helpers ------------------------------------------------------------------------

// FNV-1a, 64 bits.
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// The seed of the node's generator (see the file comment).
int64_t node_seed(const Context& ctx) {
  const onnx::AttributeProto* a = ctx.attr("seed");
  if (!a) return int64_t(fnv1a(ctx.node().output_size() ? ctx.output_name(0) : ctx.op_type()));
  if (a->type() == onnx::AttributeProto::INT) return a->i();
  float f = ctx.attr_float("seed");
  if (std::isfinite(f) && std::trunc(f) == f && std::fabs(f) < 9.2e18f) return int64_t(f);
  return int64_t(std::bit_cast<uint32_t>(f));
}

// The `dtype` attribute as an IR dtype; `def` when absent.
DataType attr_dtype(const Context& ctx, DataType def) {
  if (!ctx.has_attr("dtype")) return def;
  int t = int(ctx.attr_int("dtype"));
  auto d = dtype_of(t);
  if (!d) ctx.unsupported("dtype " + onnx_type_name(t));
  return *d;
}

DataType known_dtype(Context& ctx, size_t i) {
  DataType t = ctx.dtype(i);
  if (t.is_void()) ctx.unsupported(cat("input ", i, " of unknown element type"));
  return t;
}

// The shape of input i as a shape value (symbolic dims when known).
Expr shape_of_input(Context& ctx, size_t i) {
  if (auto dims = ctx.shape(i)) return make_shape(*dims);
  return ctx.emit_op("shape_of", {ctx.expr(i)});
}

// A uniform [0, 1) tensor of `shape`.
Expr uniform01(Context& ctx, Expr shape, DataType dtype, int64_t seed) {
  return ctx.emit_op("random_uniform", {shape}, Attrs{{"dtype", dtype}, {"low", 0.0}, {"high", 1.0}, {"seed", seed}});
}

// ---- Generators ---------------------------------------------------------------------

// RandomUniform(Like) and RandomNormal(Like): the ONNX attribute names are
// the graph op's (low/high, mean/scale).
struct GeneratorDef {
  const char* onnx;
  const char* op;
  bool like;  // the shape (and default dtype) of the input; else the `shape` attribute
  const char* a;
  double a_def;
  const char* b;
  double b_def;
};

const GeneratorDef kGenerators[] = {
    {"RandomUniform", "random_uniform", false, "low", 0.0, "high", 1.0},
    {"RandomUniformLike", "random_uniform", true, "low", 0.0, "high", 1.0},
    {"RandomNormal", "random_normal", false, "mean", 0.0, "scale", 1.0},
    {"RandomNormalLike", "random_normal", true, "mean", 0.0, "scale", 1.0},
};

std::vector<Value> convert_generator(Context& ctx, const GeneratorDef& d) {
  Expr shape;
  DataType dtype;
  if (d.like) {
    shape = shape_of_input(ctx, 0);
    dtype = attr_dtype(ctx, ctx.has_attr("dtype") ? DataType() : known_dtype(ctx, 0));
  } else {
    if (!ctx.has_attr("shape")) ctx.fail("the shape attribute is required");
    std::vector<SymExpr> dims;
    for (int64_t v : ctx.attr_ints("shape")) dims.push_back(v);
    shape = make_shape(dims);
    dtype = attr_dtype(ctx, DataType::f32());
  }
  Attrs attrs{{"dtype", dtype},
              {d.a, double(ctx.attr_float(d.a, float(d.a_def)))},
              {d.b, double(ctx.attr_float(d.b, float(d.b_def)))},
              {"seed", node_seed(ctx)}};
  return {expr_value(ctx.emit_op(d.op, {shape}, std::move(attrs)))};
}

// Bernoulli(p): 1 where u < p, u uniform in [0, 1) of p's dtype; in `dtype`
// (default p's).
std::vector<Value> convert_bernoulli(Context& ctx) {
  DataType pt = known_dtype(ctx, 0);
  DataType dtype = attr_dtype(ctx, pt);
  Expr u = uniform01(ctx, shape_of_input(ctx, 0), pt, node_seed(ctx));
  Expr hit = ctx.emit_op("less", {u, ctx.expr(0)});
  if (dtype.is_bool()) return {expr_value(hit)};
  return {expr_value(ctx.emit_op("astype", {hit}, Attrs{{"dtype", dtype}}))};
}

std::vector<Value> convert_multinomial(Context& ctx) {
  DataType dtype = attr_dtype(ctx, DataType::i32());
  if (dtype != DataType::i32() && dtype != DataType::i64()) ctx.fail("dtype must be int32 or int64, got ", dtype);
  Attrs attrs{{"sample_size", ctx.attr_int("sample_size", 1)}, {"seed", node_seed(ctx)}, {"dtype", dtype}};
  return {expr_value(ctx.emit_op("multinomial", {ctx.expr(0)}, std::move(attrs)))};
}

// ---- Dropout ------------------------------------------------------------------------

// A scalar input known at import time; nullopt when known only at run time.
std::optional<double> const_scalar(const Context& ctx, size_t i) {
  auto v = ctx.const_floats(i);
  if (!v) return std::nullopt;
  if (v->size() != 1) ctx.fail("input ", i, " must be a scalar, got ", v->size(), " elements");
  return (*v)[0];
}

// Dropout at inference: the output is the input and the mask all true
// (before opset 10 the mask has the input's type).
std::vector<Value> dropout_identity(Context& ctx) {
  std::vector<Value> out{ctx.input(0)};
  if (ctx.num_outputs() < 2 || !ctx.output_used(1)) return out;
  DataType mask = ctx.opset() < 10 ? known_dtype(ctx, 0) : DataType::boolean();
  Expr ones = make_op_call("ones", {shape_of_input(ctx, 0)}, Attrs{{"dtype", mask}});
  out.push_back(expr_value(ctx.emit(ones, ctx.output_name(1))));
  return out;
}

// Dropout. Training mode exists from opset 12 on (input 2, default false;
// older versions are treated as inference, as their test data expects).
// In training mode, with u = random_uniform(x's shape, f32, seed):
//   mask = u >= ratio (in f32), output = where(mask, x / (1 - ratio), 0);
// with a run-time training_mode t: output = where(t, that, x) and
// mask = mask || !t. A constant false training_mode or a constant 0 ratio
// (default 0.5) is the identity.
std::vector<Value> convert_dropout(Context& ctx) {
  bool train_known = true, training = false;
  if (ctx.opset() >= 12 && ctx.has_input(2)) {
    auto t = const_scalar(ctx, 2);
    train_known = t.has_value();
    training = !t || *t != 0;
  }
  std::optional<double> ratio = ctx.has_input(1) ? const_scalar(ctx, 1) : std::optional<double>(0.5);
  if (!training || (ratio && *ratio == 0)) return dropout_identity(ctx);
  if (ratio && !(*ratio > 0 && *ratio < 1)) ctx.fail("ratio must be in [0, 1), got ", *ratio);

  Expr x = ctx.expr(0);
  DataType xt = known_dtype(ctx, 0);
  Expr r32, scale;
  if (ratio) {
    r32 = ctx.scalar(DataType::f32(), *ratio);
    scale = ctx.scalar(xt, 1.0 / (1.0 - *ratio));
  } else {
    Expr r = ctx.expr(1);
    r32 = known_dtype(ctx, 1) == DataType::f32() ? r : ctx.emit_op("astype", {r}, Attrs{{"dtype", DataType::f32()}});
    Expr rx = known_dtype(ctx, 1) == xt ? r : ctx.emit_op("astype", {r}, Attrs{{"dtype", xt}});
    Expr one = ctx.scalar(xt, 1.0);
    scale = ctx.emit_op("divide", {one, ctx.emit_op("subtract", {one, rx})});
  }
  Expr u = uniform01(ctx, shape_of_input(ctx, 0), DataType::f32(), node_seed(ctx));
  Expr mask = ctx.emit_op("greater_equal", {u, r32});
  Expr y = ctx.emit_op("where", {mask, ctx.emit_op("multiply", {x, scale}), ctx.scalar(xt, 0)});
  if (!train_known) {
    Expr t = ctx.expr(2);
    y = ctx.emit_op("where", {t, y, x});
    if (ctx.output_used(1)) mask = ctx.emit_op("logical_or", {mask, ctx.emit_op("logical_not", {t})});
  }
  std::vector<Value> out{expr_value(y)};
  if (ctx.num_outputs() >= 2 && ctx.output_used(1)) out.push_back(expr_value(mask));
  return out;
}

// ---- Optional on plain tensors ----------------------------------------------------

std::vector<Value> convert_optional(Context& ctx) {
  if (!ctx.has_input(0)) ctx.unsupported("an empty Optional (needs an optional type)");
  return {ctx.input(0)};
}

std::vector<Value> convert_optional_has_element(Context& ctx) {
  return {sym_value({SymExpr(int64_t(ctx.has_input(0)))}, true, DataType::boolean())};
}

std::vector<Value> convert_optional_get_element(Context& ctx) {
  if (!ctx.has_input(0)) ctx.fail("OptionalGetElement of an empty optional");
  return {ctx.input(0)};
}

}  // namespace

void register_random_converters(ConverterRegistry& r) {
  for (const GeneratorDef& d : kGenerators) r.add(d.onnx, 1, [&d](Context& ctx) { return convert_generator(ctx, d); });
  r.add("Bernoulli", 15, convert_bernoulli);
  r.add("Multinomial", 7, convert_multinomial);
  r.add("Dropout", 1, convert_dropout);
  r.add("Optional", 15, convert_optional);
  r.add("OptionalHasElement", 15, convert_optional_has_element);
  r.add("OptionalGetElement", 15, convert_optional_get_element);
}

}  // namespace relax::onnx_fe
