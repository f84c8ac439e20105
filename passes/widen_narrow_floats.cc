// widen-narrow-floats: on a target whose kernels multiply no narrow float
// natively (traits: precisions without f16 or bf16), the products of f16
// and bf16 tensors run as f32 ones: conv, conv_transpose and matmul of
// narrow operands become
//
//   astype(op(astype(x, f32), astype(w, f32)), f16)
//
// so that they take the f32 paths (the library convolutions and matmuls)
// where the narrow ones were generic loop nests. A bias added to the
// result right after (an ONNX Conv's or Gemm's third input, imported as an
// add) joins the f32 side: it is rounded once, as the op with its bias
// would be, not after the product and again after the add. Each op's result is still
// rounded to its dtype by the cast after it, and the generic narrow
// kernels accumulated in f32 already, so the answer is the one the narrow
// op gave. A constant weight's cast is weight-only: lift-transform-params
// moves it to @transform_params and the build folds it, so the package
// holds the f32 weight.
#include <optional>
#include <unordered_map>

#include "ir/mutator.h"
#include "ir/op.h"
#include "ir/normalize.h"
#include "passes/passes.h"

namespace relax {
namespace {

bool narrow_float(DataType t) { return t == DataType::f(16) || t == DataType::bf16(); }

class Widener : public ExprMutator {
 public:
  explicit Widener(const IRModule& mod) : ExprMutator(&mod) {}

  void visit_binding(const Binding& b, std::vector<Binding>& out) override {
    Expr value = visit(b.value);
    if (!b.is_match_cast()) {
      values_[b.var.get()] = value;
      if (std::optional<Expr> r = widen(value, b.var, out))
        value = *r;
      else if (std::optional<Expr> r = add_bias(value, b.var, out))
        value = *r;
    }
    out.push_back(value == b.value ? b : Binding{b.var, value, b.cast});
  }

 private:
  Expr emit(Expr value, const Var& like, const std::string& suffix, std::vector<Binding>& out) {
    value->sinfo = infer_struct_info(value, InferContext{ana_, mod_});
    std::string name = like->name + suffix;
    Var v = is_dataflow_var(like) ? make_dataflow_var(name, value->sinfo) : make_var(name, value->sinfo);
    out.push_back(Binding{v, value, nullptr});
    return v;
  }

  // A product whose tensor operands and result are all of one narrow float
  // dtype, out_dtype unset or that dtype.
  std::optional<Expr> widen(const Expr& value, const Var& var, std::vector<Binding>& out) {
    const auto* c = as<CallNode>(value);
    const auto* y = as<TensorSI>(value->sinfo);
    if (!c || !c->op() || !y || !narrow_float(y->dtype)) return std::nullopt;
    const std::string& op = c->op()->name;
    if (op != "conv" && op != "conv_transpose" && op != "matmul") return std::nullopt;
    const DataType narrow = y->dtype;
    DataType declared = c->attrs.get_dtype("out_dtype");
    if (!declared.is_void() && declared != narrow) return std::nullopt;
    for (const Expr& a : c->args) {
      const auto* t = as<TensorSI>(a->sinfo);
      if (!t || t->dtype != narrow) return std::nullopt;
    }
    std::vector<Expr> wide;
    for (size_t k = 0; k < c->args.size(); ++k)
      wide.push_back(emit(make_op_call("astype", {c->args[k]}, {{"dtype", DataType::f32()}}), var,
                          "_f32_" + std::to_string(k), out));
    Attrs attrs = c->attrs;
    if (!declared.is_void()) attrs.set("out_dtype", DataType::void_());
    Expr product = emit(make_op_call(op, wide, std::move(attrs)), var, "_f32", out);
    wide_[var.get()] = product;
    return narrowed(product, narrow);
  }

  // add(p, bias) of a widened product p and a narrow constant (or a
  // reshape of one) of fewer elements: astype(add(p_f32, astype(bias)), f16).
  std::optional<Expr> add_bias(const Expr& value, const Var& var, std::vector<Binding>& out) {
    const auto* c = as<CallNode>(value);
    if (!c || !c->op() || c->op()->name != "add" || c->args.size() != 2) return std::nullopt;
    for (int side = 0; side < 2; ++side) {
      const auto* p = as<VarNode>(c->args[side]);
      auto it = p ? wide_.find(p) : wide_.end();
      if (it == wide_.end()) continue;
      const Expr& bias = c->args[1 - side];
      const auto* bt = as<TensorSI>(bias->sinfo);
      const auto* y = as<TensorSI>(value->sinfo);
      if (!bt || !y || bt->dtype != y->dtype || !weight_only(bias)) return std::nullopt;
      Expr wide_bias = emit(make_op_call("astype", {bias}, {{"dtype", DataType::f32()}}), var, "_bias_f32", out);
      Expr sum = emit(make_op_call("add", {it->second, wide_bias}), var, "_f32", out);
      return narrowed(sum, y->dtype);
    }
    return std::nullopt;
  }

  // A constant, or a binding of this function computed from constants
  // alone (the importer's reshape of a bias).
  bool weight_only(const Expr& e) const {
    if (e->kind == ExprKind::Constant) return true;
    const auto* v = as<VarNode>(e);
    auto it = v ? values_.find(v) : values_.end();
    if (it == values_.end()) return false;
    const auto* c = as<CallNode>(it->second);
    if (!c) return false;
    for (const Expr& a : c->args)
      if (a->kind != ExprKind::Constant && a->kind != ExprKind::ShapeExpr && !weight_only(a)) return false;
    return true;
  }

  Expr narrowed(const Expr& wide, DataType narrow) {
    Expr r = make_op_call("astype", {wide}, {{"dtype", narrow}});
    r->sinfo = infer_struct_info(r, InferContext{ana_, mod_});
    return r;
  }

  std::unordered_map<const VarNode*, Expr> wide_;    // a product's narrow result -> its f32 value
  std::unordered_map<const VarNode*, Expr> values_;  // every binding's value, for weight_only
};

}  // namespace

IRModule widen_narrow_floats(const IRModule& mod) {
  return map_functions(mod, [&](const std::string&, const Function& f) { return Widener(mod).visit_function(f); });
}

}  // namespace relax
