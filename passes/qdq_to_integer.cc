// qdq-to-integer: a matrix product of two dequantized 8-bit tensors (the
// QDQ form quantization tools write: QuantizeLinear -> DequantizeLinear
// on both inputs of a MatMul, weights stored as int8 and dequantized) is
// computed as their integer product scaled once:
//
//   matmul(dequantize(a, sa, za), dequantize(b, sb, zb))
//     = f32(matmul_integer(a, b, za, zb)) * (sa * sb)
//
// which the cpu computes with integer dot products (runtime/qgemm.h) from
// weights packed once at build time, instead of f32 products of the
// dequantized values. Taken where the scales are f32 and the quantization
// is per tensor, except b's, which may be per column (axis = b's last);
// zero points absent (0) or of the operand's dtype and granularity.
//
// A convolution likewise, conv(dequantize(x), dequantize(w)) with w a
// constant (per tensor or per output channel) and a reduction of at least
// kConvMinK taps, as conv_integer (the integer product over x's patches);
// shorter ones keep their f32 kernels, faster there.
//
// Not bit for bit: the integer sum is exact where the f32 one rounds, and
// the scale is applied once to the sum instead of to every operand, so
// results move by a few ulps, as ONNX Runtime's own QDQ rewrite does (and
// where a value then quantized sits on a rounding tie, by one step).
#include <unordered_map>

#include "ir/mutator.h"
#include "ir/normalize.h"
#include "ir/op.h"
#include "passes/passes.h"

namespace relax {
namespace {

// The shortest reduction (taps per output channel, C / groups * KH * KW)
// a convolution is taken at. Measured on four QDQ 3x3 convolutions with
// relu (one thread, f32 kernels -> integer): 16 channels at 56x56 (K 144)
// 0.81 -> 2.1 ms; 32 at 40x40 (K 288) 1.38 -> 1.39-1.57; 64 at 28x28
// (K 576) 2.3 -> 1.47; 128 at 14x14 2.3 -> 1.55; 256 at 7x7 3.0 -> 0.98.
constexpr int64_t kConvMinK = 512;

bool is_8bit_int(DataType d) { return (d.is_int() || d.is_uint()) && d.bits == 8; }

const TensorSI* tensor_of(const Expr& e) { return e->sinfo ? as<TensorSI>(e->sinfo) : nullptr; }

// The operands of `dequantize(x, scale, zp?)` when x is 8-bit and the
// scale f32, its result f32 and the zero point, if any, of x's dtype.
struct Dequantized {
  Expr x, scale, zero_point;  // zero_point null when absent
  int64_t axis;               // normalised against x's rank
};

std::optional<Dequantized> as_dequantized(const Expr& e) {
  const auto* c = as<CallNode>(e);
  if (!c || !c->op() || c->op()->name != "dequantize") return std::nullopt;
  const TensorSI *x = tensor_of(c->args[0]), *s = tensor_of(c->args[1]), *y = tensor_of(e);
  if (!x || !s || !y || x->ndim < 2 || !is_8bit_int(x->dtype) || s->dtype != DataType::f32() ||
      y->dtype != DataType::f32() || c->attrs.get_int("block_size") != 0)
    return std::nullopt;
  Dequantized d{c->args[0], c->args[1], nullptr, c->attrs.get_int("axis", 1)};
  if (d.axis < 0) d.axis += x->ndim;
  if (c->args.size() > 2) {
    const TensorSI* z = tensor_of(c->args[2]);
    if (!z || z->dtype != x->dtype || z->ndim != s->ndim) return std::nullopt;
    d.zero_point = c->args[2];
  }
  return d;
}

class Rewriter : public ExprMutator {
 public:
  explicit Rewriter(const IRModule& mod) : ExprMutator(&mod) {}

  void visit_binding(const Binding& b, std::vector<Binding>& out) override {
    Expr value = visit(b.value);
    if (!b.is_match_cast()) {
      values_[b.var.get()] = value;
      if (std::optional<Expr> r = rewrite(value, b.var, out)) value = *r;
    }
    out.push_back(value == b.value ? b : Binding{b.var, value, b.cast});
  }

 private:
  std::optional<Dequantized> dequantized(const Expr& operand) const {
    const auto* v = as<VarNode>(operand);
    if (!v) return std::nullopt;
    auto it = values_.find(v);
    return it == values_.end() ? std::nullopt : as_dequantized(it->second);
  }

  // Binds `value` (its struct info deduced) to a fresh variable.
  Expr emit(Expr value, const Var& like, const char* suffix, std::vector<Binding>& out) {
    value->sinfo = infer_struct_info(value, InferContext{ana_, mod_});
    std::string name = like->name + suffix;
    Var v = is_dataflow_var(like) ? make_dataflow_var(name, value->sinfo) : make_var(name, value->sinfo);
    out.push_back(Binding{v, value, nullptr});
    return v;
  }

  // The zero point of `d` as the integer ops take it: as it is,
  // or zeros of the operand's dtype where absent.
  Expr zero_point(const Dequantized& d, const Var& like, std::vector<Binding>& out) {
    if (d.zero_point) return d.zero_point;
    return emit(make_op_call("zeros", {make_shape({})}, {{"dtype", tensor_of(d.x)->dtype}}), like, "_zp", out);
  }

  // f32(integer(x, w, zx, zw)) * (sx * sw), the scales' product shaped by
  // expand_dims over `axes` where that is not empty: the bindings before,
  // the last value returned.
  Expr scaled_product(const char* integer, const Dequantized& x, const Dequantized& w, Attrs attrs,
                      const std::vector<int64_t>& axes, const Var& var, std::vector<Binding>& out) {
    Expr zx = zero_point(x, var, out), zw = zero_point(w, var, out);
    Expr acc = emit(make_op_call(integer, {x.x, w.x, zx, zw}, std::move(attrs)), var, "_acc", out);
    Expr accf = emit(make_op_call("astype", {acc}, {{"dtype", DataType::f32()}}), var, "_accf", out);
    Expr scale = emit(make_op_call("multiply", {x.scale, w.scale}), var, "_scale", out);
    if (!axes.empty()) scale = emit(make_op_call("expand_dims", {scale}, {{"axis", axes}}), var, "_scale", out);
    Expr r = make_op_call("multiply", {accf, scale});
    r->sinfo = infer_struct_info(r, InferContext{ana_, mod_});
    return r;
  }

  // matmul(dequantize(a, sa, za), dequantize(b, sb, zb)), sa per tensor and
  // sb per tensor or per column (axis = b's last).
  std::optional<Expr> rewrite_matmul(const CallNode& c, const Var& var, std::vector<Binding>& out) {
    std::optional<Dequantized> a = dequantized(c.args[0]), b = dequantized(c.args[1]);
    if (!a || !b) return std::nullopt;
    const TensorSI *sa = tensor_of(a->scale), *sb = tensor_of(b->scale), *xb = tensor_of(b->x);
    if (sa->ndim != 0 || (sb->ndim != 0 && !(sb->ndim == 1 && b->axis == xb->ndim - 1))) return std::nullopt;
    return scaled_product("matmul_integer", *a, *b, {}, {}, var, out);
  }

  // conv(dequantize(x, sx, zx), dequantize(w, sw, zw)) with sx per tensor
  // and sw per tensor or per output channel (axis 0), w constant and a
  // reduction of at least kConvMinK taps; sw shaped to the output's
  // channels.
  std::optional<Expr> rewrite_conv(const CallNode& c, const Var& var, std::vector<Binding>& out) {
    std::optional<Dequantized> x = dequantized(c.args[0]), w = dequantized(c.args[1]);
    if (!x || !w || w->x->kind != ExprKind::Constant) return std::nullopt;
    const TensorSI *sx = tensor_of(x->scale), *sw = tensor_of(w->scale), *wq = tensor_of(w->x);
    if (sx->ndim != 0 || !wq->shape || (wq->ndim != 4 && wq->ndim != 3)) return std::nullopt;
    if (sw->ndim != 0 && !(sw->ndim == 1 && w->axis == 0)) return std::nullopt;
    int64_t K = 1;
    for (size_t i = 1; i < wq->shape->size(); ++i) {
      if (!(*wq->shape)[i].is_const()) return std::nullopt;
      K *= (*wq->shape)[i].const_value();
    }
    if (K < kConvMinK) return std::nullopt;
    Attrs attrs;  // conv's but out_dtype (void here)
    for (const auto& [name, v] : c.attrs)
      if (name != "out_dtype") attrs.set(name, v);
    std::vector<int64_t> axes;
    for (int64_t a = 1; sw->ndim == 1 && a < wq->ndim - 1; ++a) axes.push_back(a);
    return scaled_product("conv_integer", *x, *w, std::move(attrs), axes, var, out);
  }

  // An f32 matmul or conv (no out_dtype) of two dequantized operands.
  std::optional<Expr> rewrite(const Expr& value, const Var& var, std::vector<Binding>& out) {
    const auto* c = as<CallNode>(value);
    const TensorSI* y = tensor_of(value);
    if (!c || !c->op() || !y || y->dtype != DataType::f32() || !c->attrs.get_dtype("out_dtype").is_void())
      return std::nullopt;
    if (c->op()->name == "matmul") return rewrite_matmul(*c, var, out);
    if (c->op()->name == "conv") return rewrite_conv(*c, var, out);
    return std::nullopt;
  }

  std::unordered_map<const VarNode*, Expr> values_;
};

}  // namespace

IRModule qdq_to_integer(const IRModule& mod) {
  return map_functions(mod, [&](const std::string&, const Function& f) { return Rewriter(mod).visit_function(f); });
}

}  // namespace relax
