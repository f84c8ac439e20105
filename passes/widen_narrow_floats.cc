// widen-narrow-floats: on a target whose kernels multiply no narrow float
// natively (traits: precisions without f16 or bf16), the products of f16
// and bf16 tensors run as f32 ones, and so does what follows them: conv,
// conv_transpose and matmul of narrow operands become
//
//   astype(op(astype(x, f32), astype(w, f32)), f16)
//
// so that they take the f32 paths (the library convolutions and matmuls)
// where the narrow ones were generic loop nests; and an elementwise,
// pooling, normalising, reducing or layout op of a narrow dtype one of
// whose operands already has an f32 twin runs on the twins (its other
// narrow operands cast up, exactly) and gets a twin itself. A widened
// region thus reads and writes f32 from one product to the next, and a
// value is rounded to its narrow dtype only where it leaves the region (an
// op that is not widened, a function's result): the cast pairs between
// ops vanish, and the library calls take their epilogues (bias, ReLU,
// residual) as in the f32 model. The answer is the f32 model's rounded at
// the region's edges, closer to the exact one than rounding after every
// op; it is how ONNX Runtime's CPU provider runs an fp16 model's ops that
// have no fp16 kernel (in f32, cast at the edges of each run of them). A
// constant weight's cast is weight-only: lift-transform-params moves it to
// @transform_params and the build folds it, so the package holds the f32
// weight.
#include <optional>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

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
    if (!b.is_match_cast())
      if (std::optional<Expr> r = widen(value, b.var, out)) value = *r;
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

  // Ops that compute a narrow float as they would an f32 one, rounded.
  static bool follows(std::string_view op) {
    static const std::unordered_set<std::string_view> ops = {
        "add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "neg", "abs", "exp", "log", "sqrt",
        "rsqrt", "tanh", "sigmoid", "relu", "gelu", "silu", "softplus", "erf", "reciprocal", "clip", "where",
        "max_pool", "avg_pool", "softmax", "log_softmax", "layer_norm", "sum", "mean", "max", "min", "reshape",
        "permute_dims", "concat", "squeeze", "expand_dims", "strided_slice", "broadcast_to", "take", "resize", "pad"};
    return ops.count(op) != 0;
  }

  // A product whose tensor operands and result are all of one narrow float
  // dtype (out_dtype unset or that dtype), or an op that follows() with a
  // narrow result and an operand that has a twin: the op on f32 operands,
  // recorded as the result's twin; the result itself its twin cast down.
  // A cast up of a value with a twin is the twin.
  std::optional<Expr> widen(const Expr& value, const Var& var, std::vector<Binding>& out) {
    const auto* c = as<CallNode>(value);
    const auto* y = as<TensorSI>(value->sinfo);
    if (!c || !c->op() || !y) return std::nullopt;
    const std::string& op = c->op()->name;
    if (op == "astype" && y->dtype == DataType::f32()) {
      const Expr* twin = twin_of(c->args[0]);
      if (twin) return *twin;
      return std::nullopt;
    }
    if (!narrow_float(y->dtype)) return std::nullopt;
    const DataType narrow = y->dtype;
    const bool product = op == "conv" || op == "conv_transpose" || op == "matmul";
    if (!product && !follows(op)) return std::nullopt;
    DataType declared = c->attrs.get_dtype("out_dtype");
    if (!declared.is_void() && declared != narrow) return std::nullopt;
    bool any_twin = false;
    for (const Expr& a : c->args) {
      const auto* t = as<TensorSI>(a->sinfo);
      if (!t) {
        if (product) return std::nullopt;
        continue;
      }
      if (t->dtype.is_float() ? t->dtype != narrow : product) return std::nullopt;
      any_twin = any_twin || twin_of(a);
    }
    if (!product && !any_twin) return std::nullopt;
    std::vector<Expr> wide;
    for (size_t k = 0; k < c->args.size(); ++k) {
      const Expr& a = c->args[k];
      const auto* t = as<TensorSI>(a->sinfo);
      if (const Expr* twin = twin_of(a))
        wide.push_back(*twin);
      else if (t && t->dtype == narrow)
        wide.push_back(emit(make_op_call("astype", {a}, {{"dtype", DataType::f32()}}), var, "_f32_" + std::to_string(k), out));
      else
        wide.push_back(a);
    }
    Attrs attrs = c->attrs;
    if (!declared.is_void()) attrs.set("out_dtype", DataType::void_());
    Expr wide_value = emit(make_op_call(op, wide, std::move(attrs)), var, "_f32", out);
    wide_[var.get()] = wide_value;
    return narrowed(wide_value, narrow);
  }

  const Expr* twin_of(const Expr& e) const {
    const auto* v = as<VarNode>(e);
    auto it = v ? wide_.find(v) : wide_.end();
    return it == wide_.end() ? nullptr : &it->second;
  }

  Expr narrowed(const Expr& wide, DataType narrow) {
    Expr r = make_op_call("astype", {wide}, {{"dtype", narrow}});
    r->sinfo = infer_struct_info(r, InferContext{ana_, mod_});
    return r;
  }

  std::unordered_map<const VarNode*, Expr> wide_;    // a widened op's narrow result -> its f32 twin
};

}  // namespace

IRModule widen_narrow_floats(const IRModule& mod) {
  return map_functions(mod, [&](const std::string&, const Function& f) { return Widener(mod).visit_function(f); });
}

}  // namespace relax
