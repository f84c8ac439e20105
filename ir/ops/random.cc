// Random number generation: random_uniform, random_normal, multinomial.
//
// The ops are pure: their values are a function of the `seed` attribute and
// of each output element's row-major index only, through the counter-based
// generator Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy
// as 1, 2, 3", SC'11). Element i draws the four 32-bit words
//   (r0, r1, r2, r3) = philox4x32_10(counter = (lo32(i), hi32(i), 0, 0),
//                                    key = (lo32(seed), hi32(seed)))
// with Random123's round function and constants (multipliers 0xD2511F53,
// 0xCD9E8D57, key increments 0x9E3779B9, 0xBB67AE85; counter (0,0,0,0) and
// key (0,0) give 6627e8d5 e169c58d bc57ac4c 9b00dbd8). Results are thus the
// same on every target, for every thread count and on every run of the
// compiled program (two calls with the same seed and shape agree, so common
// subexpressions may be merged). Uniform fractions in [0, 1):
//   u24(r)    = (r >> 8) * 2^-24                 (16- and 32-bit floats, in f32)
//   u53(a, b) = ((a << 21) | (b >> 11)) * 2^-53  (f64, in f64)
// Bernoulli and Dropout are compositions (random_uniform, a comparison,
// where); the frontend chooses seeds (see frontends/onnx/convert_random.cc).
#include "ir/ops/common.h"

namespace relax {
namespace {

using namespace ops;

const char* const kGenerator =
    " Element i (row-major index) draws words r0..r3 = Philox-4x32-10(counter (lo32(i), hi32(i), 0, 0), key "
    "(lo32(seed), hi32(seed))), u24(r) = (r >> 8) * 2^-24, u53(a, b) = ((a << 21) | (b >> 11)) * 2^-53 (see "
    "ir/ops/random.cc): the values depend only on seed and i, on every target and run.";

// The float dtypes a generator produces: f16, bf16, f32, f64.
void require_generator_dtype(const std::string& op, DataType dtype) {
  bool ok = (dtype.code == TypeCode::Float && (dtype.bits == 16 || dtype.bits == 32 || dtype.bits == 64)) ||
            dtype == DataType::bf16();
  if (!ok) fail(op, ": dtype must be f16, bf16, f32 or f64, got ", dtype);
}

// random_uniform / random_normal: a tensor of the given shape and dtype.
StructInfo infer_generator(const CallNode& call, const InferContext& ctx) {
  DataType dtype = attrs_of(call).get_dtype("dtype");
  const std::string& op = op_name(call);
  require_generator_dtype(op, dtype);
  ShapeInfo s = shape_arg(call, 0);
  if (!s.values) return tensor_si_ndim(dtype, s.ndim);
  check_dims_nonnegative(op, *s.values, ctx.ana);
  return tensor_si(dtype, *s.values);
}

// multinomial: (batch, classes) logits -> (batch, sample_size) class indices.
StructInfo infer_multinomial(const CallNode& call, const InferContext&) {
  Attrs attrs = attrs_of(call);
  const std::string& op = op_name(call);
  DataType dtype = attrs.get_dtype("dtype");
  int64_t samples = attrs.get_int("sample_size");
  if (dtype != DataType::i32() && dtype != DataType::i64()) fail(op, ": dtype must be i32 or i64, got ", dtype);
  if (samples < 1) fail(op, ": sample_size must be positive, got ", samples);
  TensorInfo x = tensor_arg(call, 0);
  require_float(op, x.dtype, "the logits");
  if (!x.unknown_rank() && x.ndim != 2) fail(op, ": logits must have rank 2 (batch, classes), got rank ", x.ndim);
  if (!x.shape) return tensor_si_ndim(dtype, 2);
  return tensor_si(dtype, {(*x.shape)[0], SymExpr(samples)});
}

}  // namespace

void register_random_ops(OpRegistry& reg) {
  using T = AttrType;
  // random_uniform and random_normal: a shape, a float dtype, the
  // distribution's two parameters and a seed.
  auto generator = [&](const char* name, const char* doc, const char* a, double da, const char* b, double db) {
    reg.add(name)
        .doc(std::string(doc) + kGenerator)
        .args(1)
        .attr("dtype", T::DType)
        .attr(a, T::Float, da)
        .attr(b, T::Float, db)
        .attr("seed", T::Int, int64_t(0))
        .infer(infer_generator);
  };
  generator("random_uniform",
            "random_uniform(shape, dtype=D, low=a, high=b, seed=s): a tensor of the given shape and float dtype D "
            "whose element i is a + (b - a) * u, u = u24(r0) computed in f32 (u53(r0, r1) in f64 for f64), rounded "
            "to D.",
            "low", 0.0, "high", 1.0);
  generator("random_normal",
            "random_normal(shape, dtype=D, mean=m, scale=s, seed=k): a tensor of the given shape and float dtype D "
            "whose element i is m + s * sqrt(-2 ln(1 - u1)) * cos(2 pi u2) (Box-Muller) with u1 = u24(r0), u2 = "
            "u24(r1) computed in f32 (u53(r0, r1), u53(r2, r3) in f64 for f64), rounded to D.",
            "mean", 0.0, "scale", 1.0);
  reg.add("multinomial")
      .doc(std::string("multinomial(x, sample_size=n, seed=k, dtype=D): x is (batch, classes) unnormalized log "
                       "probabilities; result (b, j), output element i = b * n + j, is the smallest class c with "
                       "u * S < sum_{c' <= c} e_c', where e_c = exp(x[b, c] - max_c x[b, c]), S = sum_c e_c and "
                       "u = u24(r0) computed in f32 (u53(r0, r1) in f64 for f64 logits); classes - 1 when rounding "
                       "leaves none. D is i32 or i64.") +
           kGenerator)
      .args(1)
      .attr("sample_size", T::Int, int64_t(1))
      .attr("seed", T::Int, int64_t(0))
      .attr("dtype", T::DType, DataType::i32())
      .infer(infer_multinomial);
}

}  // namespace relax
