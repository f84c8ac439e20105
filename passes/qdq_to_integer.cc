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
// Not bit for bit: the integer sum is exact where the f32 one rounds, and
// the scale is applied once to the sum instead of to every operand, so
// results move by a few ulps, as ONNX Runtime's own QDQ rewrite does.
// Convolutions keep their f32 kernels (the integer ones cost more at the
// channel counts measured: frontends/onnx/convert_quant.cc).
#include <unordered_map>

#include "ir/mutator.h"
#include "ir/normalize.h"
#include "ir/op.h"
#include "passes/passes.h"

namespace relax {
namespace {

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

  // The zero point of `d` as matmul_integer takes it: per tensor as it is,
  // or zeros of the operand's dtype where absent.
  Expr zero_point(const Dequantized& d, const Var& like, std::vector<Binding>& out) {
    if (d.zero_point) return d.zero_point;
    return emit(make_op_call("zeros", {make_shape({})}, {{"dtype", tensor_of(d.x)->dtype}}), like, "_zp", out);
  }

  std::optional<Expr> rewrite(const Expr& value, const Var& var, std::vector<Binding>& out) {
    const auto* c = as<CallNode>(value);
    if (!c || !c->op() || c->op()->name != "matmul") return std::nullopt;
    const TensorSI* y = tensor_of(value);
    if (!y || y->dtype != DataType::f32() || !c->attrs.get_dtype("out_dtype").is_void()) return std::nullopt;
    std::optional<Dequantized> a = dequantized(c->args[0]), b = dequantized(c->args[1]);
    if (!a || !b) return std::nullopt;
    // a per tensor; b per tensor or per column.
    const TensorSI *sa = tensor_of(a->scale), *sb = tensor_of(b->scale), *xb = tensor_of(b->x);
    if (sa->ndim != 0) return std::nullopt;
    const bool per_column = sb->ndim == 1;
    if (sb->ndim != 0 && !(per_column && b->axis == xb->ndim - 1)) return std::nullopt;
    Expr za = zero_point(*a, var, out), zb = zero_point(*b, var, out);
    Expr acc = emit(make_op_call("matmul_integer", {a->x, b->x, za, zb}), var, "_acc", out);
    Expr accf = emit(make_op_call("astype", {acc}, {{"dtype", DataType::f32()}}), var, "_accf", out);
    Expr scale = emit(make_op_call("multiply", {a->scale, b->scale}), var, "_scale", out);
    Expr r = make_op_call("multiply", {accf, scale});
    r->sinfo = infer_struct_info(r, InferContext{ana_, mod_});
    return r;
  }

  std::unordered_map<const VarNode*, Expr> values_;
};

}  // namespace

IRModule qdq_to_integer(const IRModule& mod) {
  return map_functions(mod, [&](const std::string&, const Function& f) { return Rewriter(mod).visit_function(f); });
}

}  // namespace relax
