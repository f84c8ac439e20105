// ONNX converters: quantization and integer arithmetic.
//
//   QuantizeLinear, DequantizeLinear   the graph ops quantize / dequantize
//   DynamicQuantizeLinear              reductions for the range, then quantize
//   MatMulInteger                      the matmul_integer op (8-bit operands of
//                                      rank >= 2), else as below
//   ConvInteger                        in f32 where every partial sum is an
//                                      integer below 2^24 (exact_in_f32), else
//                                      the conv_integer op (8-bit operands),
//                                      else astype to i32, subtract the zero
//                                      points, conv with an i32 result
//   QLinearMatMul, QLinearConv         the integer product as above, scaled in
//                                      f32 by x_scale * w_scale / y_scale, plus
//                                      y_zero_point, then quantize (scale 1),
//                                      which rounds half to even and saturates
#include <algorithm>
#include <cstdlib>

#include "frontends/onnx/context.h"
#include "frontends/onnx/onnx_proto.h"

namespace relax::onnx_fe {
namespace {

const DataType kF32 = DataType::f32();
const DataType kI32 = DataType::i32();

Expr astype(Context& ctx, Expr x, DataType dtype) { return ctx.emit_op("astype", {std::move(x)}, {{"dtype", dtype}}); }
Expr binary(Context& ctx, const char* op, Expr a, Expr b) { return ctx.emit_op(op, {std::move(a), std::move(b)}); }
Expr f32(double v) { return make_prim_float(v, kF32); }

// An ONNX element-type attribute as a dtype (void when absent or 0).
DataType dtype_attr(Context& ctx, const std::string& name) {
  int64_t t = ctx.attr_int(name, 0);
  if (t == 0) return DataType::void_();
  std::optional<DataType> d = dtype_of(int(t));
  if (!d) ctx.unsupported(cat(name, " ", onnx_type_name(int(t))));
  return *d;
}

std::vector<Expr> present_inputs(Context& ctx, size_t n) {
  std::vector<Expr> args;
  for (size_t i = 0; i < n && ctx.has_input(i); ++i) args.push_back(ctx.expr(i));
  return args;
}

// ---- QuantizeLinear / DequantizeLinear / DynamicQuantizeLinear --------------------

std::vector<Value> convert_quantize(Context& ctx) {
  DataType out = dtype_attr(ctx, "output_dtype");
  if (ctx.has_input(2)) {
    DataType zp = ctx.dtype(2);
    if (!out.is_void() && !zp.is_void() && out != zp)
      ctx.fail("output_dtype ", out, " differs from the zero point's dtype ", zp);
    if (zp.is_void()) ctx.unsupported("a zero point of unknown dtype");
    out = zp;
  }
  if (out.is_void()) out = DataType::u(8);
  Attrs attrs{{"axis", ctx.attr_int("axis", 1)},
              {"block_size", ctx.attr_int("block_size", 0)},
              {"out_dtype", out},
              {"saturate", ctx.attr_int("saturate", 1) != 0}};
  if (DataType p = dtype_attr(ctx, "precision"); !p.is_void()) attrs.set("precision", p);
  return {expr_value(ctx.emit_op("quantize", present_inputs(ctx, 3), attrs))};
}

std::vector<Value> convert_dequantize(Context& ctx) {
  Attrs attrs{{"axis", ctx.attr_int("axis", 1)}, {"block_size", ctx.attr_int("block_size", 0)}};
  if (DataType out = dtype_attr(ctx, "output_dtype"); !out.is_void()) attrs.set("out_dtype", out);
  return {expr_value(ctx.emit_op("dequantize", present_inputs(ctx, 3), attrs))};
}

// uint8 over [min(0, min(x)), max(0, max(x))]: scale = range / 255 (1 / 255
// for an empty range), zero point = round(clamp(-min / scale, 0, 255)).
std::vector<Value> convert_dynamic_quantize(Context& ctx) {
  Expr x = ctx.expr(0);
  DataType dt = ctx.dtype(0);
  if (dt != kF32) ctx.unsupported(cat("DynamicQuantizeLinear on ", dt));
  Expr hi = binary(ctx, "maximum", ctx.emit_op("max", {x}), f32(0));
  Expr lo = binary(ctx, "minimum", ctx.emit_op("min", {x}), f32(0));
  Expr range = binary(ctx, "subtract", hi, lo);
  Expr empty = binary(ctx, "equal", range, f32(0));
  range = ctx.emit_op("where", {empty, f32(1), range});
  Expr scale = ctx.emit(make_op_call("divide", {range, f32(255)}), ctx.output_name(1));
  Expr zp = binary(ctx, "subtract", f32(0), binary(ctx, "divide", lo, scale));
  zp = ctx.emit_op("round", {ctx.emit_op("clip", {zp, f32(0), f32(255)})});
  zp = ctx.emit(make_op_call("astype", {zp}, {{"dtype", DataType::u(8)}}), ctx.output_name(2));
  Expr y = ctx.emit_op("quantize", {x, scale, zp}, {{"out_dtype", DataType::u(8)}});
  return {expr_value(y), expr_value(scale), expr_value(zp)};
}

// ---- Integer products ------------------------------------------------------------------

// `v` minus its zero point (input `zp_index`, when present), both as
// `dtype` (i32, or f32 where the product is exact in it); `shape_zp`
// reshapes the zero point to broadcast against `v` first.
Expr minus_zero_point(Context& ctx, size_t v_index, size_t zp_index, DataType dtype,
                      const std::function<Expr(Expr)>& shape_zp = {}) {
  Expr v = astype(ctx, ctx.expr(v_index), dtype);
  if (!ctx.has_input(zp_index)) return v;
  Expr zp = astype(ctx, ctx.expr(zp_index), dtype);
  if (shape_zp) zp = shape_zp(zp);
  return binary(ctx, "subtract", v, zp);
}

// The largest |v - zp| of input v and its zero point (input `zp_index`):
// exact from the data when both are known (a scalar zero point, or one per
// row of v: per output channel, or per column of a matmul's B), else the
// span of 8-bit operands (u8 - u8 and i8 - i8 both reach 255); nullopt
// for wider or unknown dtypes.
std::optional<int64_t> magnitude_bound(Context& ctx, size_t v_index, size_t zp_index, bool zp_per_column) {
  DataType d = ctx.dtype(v_index);
  if (!(d.is_int() || d.is_uint()) || d.bits > 8) return std::nullopt;
  int64_t span = !ctx.has_input(zp_index) ? (d.is_uint() ? 255 : 128) : 255;
  const HostTensor* v = ctx.data(v_index);
  const HostTensor* zp = ctx.has_input(zp_index) ? ctx.data(zp_index) : nullptr;
  if (!v || (ctx.has_input(zp_index) && !zp)) return span;
  auto vs = v->to_ints();
  std::optional<std::vector<int64_t>> zs = zp ? zp->to_ints() : std::vector<int64_t>{0};
  if (!vs || !zs || zs->empty() || v->shape.empty()) return span;
  int64_t n = int64_t(vs->size()), z = int64_t(zs->size());
  const int64_t cols = v->shape.back();
  if (z > 1 && (zp_per_column ? z != cols : z != v->shape[0])) return span;
  const int64_t rows_inner = z > 1 ? n / z : n;  // per row: z == rows >= 2
  int64_t m = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t zi = z == 1 ? (*zs)[0] : zp_per_column ? (*zs)[size_t(i % cols)] : (*zs)[size_t(i / rows_inner)];
    m = std::max(m, std::abs((*vs)[size_t(i)] - zi));
  }
  return m;
}

// Whether an integer product of reduction length k (nullopt: unknown) of
// 8-bit operands is exact in f32: every partial sum of k products is an
// integer of magnitude at most k * |a| * |b| <= 2^24, whatever the order
// of the additions, so the f32 kernels (fused multiply-adds, vector width
// and threads) give the i32 result bit for bit. Convolutions of up to
// 258 taps (3x3 over 28 channels, 1x1 over 258) qualify with any 8-bit
// operands, more with known weights of smaller range; most matmuls of
// transformers (k = 768) do not.
bool exact_in_f32(Context& ctx, size_t a, size_t a_zp, size_t b, size_t b_zp, bool b_zp_per_column,
                  std::optional<int64_t> k) {
  std::optional<int64_t> ma = magnitude_bound(ctx, a, a_zp, false), mb = magnitude_bound(ctx, b, b_zp, b_zp_per_column);
  if (!k || !ma || !mb) return false;
  return double(*k) * double(*ma) * double(*mb) <= double(1 << 24);
}

// The reduction length of a product over input i's dims [from, to), when
// they are all known.
std::optional<int64_t> known_product(Context& ctx, size_t i, int from, int to) {
  auto s = ctx.shape(i);
  if (!s || from < 0 || to > int(s->size())) return std::nullopt;
  int64_t k = 1;
  for (int d = from; d < to; ++d) {
    if (!(*s)[size_t(d)].is_const()) return std::nullopt;
    k *= (*s)[size_t(d)].const_value();
  }
  return k;
}

// A per-row vector (one value per row of a matrix of rank `rank`) as a column
// that broadcasts over the rows; scalars are left alone.
std::function<Expr(Expr)> per_row(Context& ctx, size_t index, int rank) {
  return [&ctx, index, rank](Expr e) {
    if (rank < 2 || ctx.ndim(index) != 1) return e;
    return ctx.emit_op("expand_dims", {e}, {{"axis", std::vector<int64_t>{-1}}});
  };
}

// A per-output-channel vector (length O) shaped to broadcast against a
// conv weight (O, C, k...) or, with `on_output`, a conv result (N, O, out...).
std::function<Expr(Expr)> per_channel(Context& ctx, size_t index, int rank, bool on_output) {
  return [&ctx, index, rank, on_output](Expr e) {
    if (ctx.ndim(index) != 1 || rank < 3) return e;
    std::vector<int64_t> axes;
    if (on_output) axes.push_back(0);
    for (int a = on_output ? 2 : 1; a < rank; ++a) axes.push_back(a);
    return ctx.emit_op("expand_dims", {e}, {{"axis", axes}});
  };
}

// The attributes of the conv graph op for an ONNX Conv-style node with data
// input `x` and weight input `w`.
Attrs conv_attrs(Context& ctx, size_t x, size_t w) {
  int rank = ctx.ndim(w);
  if (rank < 3) ctx.unsupported("a convolution weight of unknown rank");
  size_t k = size_t(rank - 2);
  std::vector<int64_t> ones(k, 1);
  std::vector<int64_t> strides = ctx.attr_ints("strides", ones), dilations = ctx.attr_ints("dilations", ones);
  std::vector<int64_t> pads = ctx.attr_ints("pads", std::vector<int64_t>(2 * k, 0));
  if (strides.size() != k || dilations.size() != k || pads.size() != 2 * k)
    ctx.fail("strides, dilations and pads must have ", k, ", ", k, " and ", 2 * k, " entries");
  std::string auto_pad = ctx.attr_string("auto_pad", "NOTSET");
  if (auto_pad == "VALID") {
    pads.assign(2 * k, 0);
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    // Output ceil(in / stride); the extra padding goes at the end for SAME_UPPER.
    auto xs = ctx.shape(x), ws = ctx.shape(w);
    for (size_t i = 0; i < k; ++i) {
      if (!xs || !ws || !(*xs)[2 + i].is_const() || !(*ws)[2 + i].is_const())
        ctx.unsupported("auto_pad SAME with symbolic spatial dims");
      int64_t in = (*xs)[2 + i].const_value(), kern = (*ws)[2 + i].const_value(), s = strides[i];
      int64_t out = (in + s - 1) / s;
      int64_t total = std::max<int64_t>(0, (out - 1) * s + (kern - 1) * dilations[i] + 1 - in);
      int64_t small = total / 2, big = total - small;
      pads[i] = auto_pad == "SAME_UPPER" ? small : big;
      pads[i + k] = auto_pad == "SAME_UPPER" ? big : small;
    }
  } else if (auto_pad != "NOTSET") {
    ctx.fail("unknown auto_pad '", auto_pad, "'");
  }
  return Attrs{{"strides", strides}, {"padding", pads}, {"dilation", dilations}, {"groups", ctx.attr_int("group", 1)}};
}

bool is_8bit(DataType d) { return (d.is_int() || d.is_uint()) && d.bits == 8; }

// Input `zp`, or a zero of `dtype` when it is absent.
Expr zero_point_or_zero(Context& ctx, size_t zp, DataType dtype) {
  if (ctx.has_input(zp)) return ctx.expr(zp);
  return ctx.constant(HostTensor::from_ints(dtype, {}, {0}), "zero_point");
}

// (A - a_zero_point) @ (B - b_zero_point), an i32 result; a_zero_point
// may be per row of A. 8-bit operands of rank 2 or more: the
// matmul_integer op (integer dot products on the cpu); others astype to
// i32 (or to f32 where that is exact) and matmul.
Expr integer_matmul(Context& ctx, size_t a, size_t a_zp, size_t b, size_t b_zp) {
  const DataType da = ctx.dtype(a), db = ctx.dtype(b);
  if (is_8bit(da) && is_8bit(db) && ctx.ndim(a) >= 2 && ctx.ndim(b) >= 2 &&
      (!ctx.has_input(a_zp) || ctx.dtype(a_zp) == da) && (!ctx.has_input(b_zp) || ctx.dtype(b_zp) == db)) {
    Expr za = zero_point_or_zero(ctx, a_zp, da);
    if (ctx.has_input(a_zp)) za = per_row(ctx, a_zp, ctx.ndim(a))(za);
    return ctx.emit_op("matmul_integer", {ctx.expr(a), ctx.expr(b), za, zero_point_or_zero(ctx, b_zp, db)});
  }
  int rb = ctx.ndim(b);
  // B is (.., K, N), or (K) for a vector.
  std::optional<int64_t> k = rb == 1 ? known_product(ctx, b, 0, 1) : known_product(ctx, b, rb - 2, rb - 1);
  bool f = rb >= 1 && exact_in_f32(ctx, a, a_zp, b, b_zp, true, k);
  Expr lhs = minus_zero_point(ctx, a, a_zp, f ? kF32 : kI32, per_row(ctx, a_zp, ctx.ndim(a)));
  Expr rhs = minus_zero_point(ctx, b, b_zp, f ? kF32 : kI32);
  if (f) return astype(ctx, ctx.emit_op("matmul", {lhs, rhs}), kI32);
  return ctx.emit_op("matmul", {lhs, rhs}, {{"out_dtype", kI32}});
}

// conv(X - x_zero_point, W - w_zero_point), an i32 result; w_zero_point
// may be per output channel. Computed in f32 where that is exact (the f32
// kernels run 2-8 times the i32 ones' rate).
Expr integer_conv(Context& ctx, size_t x, size_t x_zp, size_t w, size_t w_zp) {
  bool f = exact_in_f32(ctx, x, x_zp, w, w_zp, false, known_product(ctx, w, 1, ctx.ndim(w)));
  const DataType dx = ctx.dtype(x), dw = ctx.dtype(w);
  // Where f32 is exact, its kernels stay: measured on the corpus, the
  // integer product's patches cost more than they save at the few channels
  // that allows (dynquant_seg, 3 and 8 channels: 0.25 ms in f32, 1.04 ms
  // as conv_integer; dynquant_resnet's 32-channel layers even).
  if (!f && is_8bit(dx) && is_8bit(dw) && (!ctx.has_input(x_zp) || ctx.dtype(x_zp) == dx) &&
      (!ctx.has_input(w_zp) || ctx.dtype(w_zp) == dw)) {
    return ctx.emit_op("conv_integer",
                       {ctx.expr(x), ctx.expr(w), zero_point_or_zero(ctx, x_zp, dx), zero_point_or_zero(ctx, w_zp, dw)},
                       conv_attrs(ctx, x, w));
  }
  Expr lhs = minus_zero_point(ctx, x, x_zp, f ? kF32 : kI32);
  Expr rhs = minus_zero_point(ctx, w, w_zp, f ? kF32 : kI32, per_channel(ctx, w_zp, ctx.ndim(w), false));
  Attrs attrs = conv_attrs(ctx, x, w);
  if (f) return astype(ctx, ctx.emit_op("conv", {lhs, rhs}, attrs), kI32);
  attrs.set("out_dtype", kI32);
  return ctx.emit_op("conv", {lhs, rhs}, attrs);
}

std::vector<Value> convert_matmul_integer(Context& ctx) { return {expr_value(integer_matmul(ctx, 0, 2, 1, 3))}; }

std::vector<Value> convert_conv_integer(Context& ctx) { return {expr_value(integer_conv(ctx, 0, 2, 1, 3))}; }

// The output of a QLinear op: the i32 accumulator `acc` times `multiplier`
// (f32), plus the zero point (input `y_zp`, shaped by `shape_zp`), quantized
// with scale 1 to the zero point's dtype (or `fallback`).
Expr requantize(Context& ctx, Expr acc, Expr multiplier, size_t y_zp, const std::function<Expr(Expr)>& shape_zp,
                DataType fallback) {
  Expr real = binary(ctx, "multiply", astype(ctx, acc, kF32), multiplier);
  DataType out = fallback;
  if (ctx.has_input(y_zp)) {
    out = ctx.dtype(y_zp);
    real = binary(ctx, "add", real, shape_zp(astype(ctx, ctx.expr(y_zp), kF32)));
  }
  return ctx.emit_op("quantize", {real, f32(1)}, {{"out_dtype", out}});
}

Expr scale_f32(Context& ctx, size_t i, const std::function<Expr(Expr)>& shape) {
  Expr s = ctx.expr(i);
  if (ctx.dtype(i) != kF32) s = astype(ctx, s, kF32);
  return shape ? shape(s) : s;
}

// Inputs: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point.
std::vector<Value> convert_qlinear_matmul(Context& ctx) {
  int rank = ctx.ndim(0);
  Expr acc = integer_matmul(ctx, 0, 2, 3, 5);
  Expr ab = binary(ctx, "multiply", scale_f32(ctx, 1, per_row(ctx, 1, rank)), scale_f32(ctx, 4, {}));
  Expr multiplier = binary(ctx, "divide", ab, scale_f32(ctx, 6, per_row(ctx, 6, rank)));
  return {expr_value(requantize(ctx, acc, multiplier, 7, per_row(ctx, 7, rank), ctx.dtype(0)))};
}

// Inputs: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B (i32).
std::vector<Value> convert_qlinear_conv(Context& ctx) {
  int rank = ctx.ndim(3);
  Expr acc = integer_conv(ctx, 0, 2, 3, 5);
  if (ctx.has_input(8)) acc = binary(ctx, "add", acc, per_channel(ctx, 8, rank, true)(astype(ctx, ctx.expr(8), kI32)));
  Expr xw = binary(ctx, "multiply", scale_f32(ctx, 1, {}), scale_f32(ctx, 4, per_channel(ctx, 4, rank, true)));
  Expr multiplier = binary(ctx, "divide", xw, scale_f32(ctx, 6, {}));
  return {expr_value(requantize(ctx, acc, multiplier, 7, [](Expr e) { return e; }, ctx.dtype(0)))};
}

}  // namespace

void register_quant_converters(ConverterRegistry& r) {
  r.add("QuantizeLinear", 10, convert_quantize);
  r.add("DequantizeLinear", 10, convert_dequantize);
  r.add("DynamicQuantizeLinear", 11, convert_dynamic_quantize);
  r.add("MatMulInteger", 10, convert_matmul_integer);
  r.add("ConvInteger", 10, convert_conv_integer);
  r.add("QLinearMatMul", 10, convert_qlinear_matmul);
  r.add("QLinearConv", 10, convert_qlinear_conv);
}

}  // namespace relax::onnx_fe
