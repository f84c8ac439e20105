// ONNX converters: the reduce family. Reductions (Reduce*), arg-reductions,
// softmax-like ops, MatMul / Gemm / Einsum, TopK, CumSum / CumProd, Det, the
// signal-processing ops (DFT, STFT, windows, MelWeightMatrix) and
// NonMaxSuppression.
//
// Integers that fix output dims (k, sizes, lengths) are read at import
// time, symbolically where the graph computes them from shapes; one known
// only at run time becomes a fresh variable bound by match_cast, so output
// shapes stay symbolic. Axes known only at run time (graph inputs) become
// operands of the graph op (reduce_dynamic, cumsum / cumprod, dft), whose
// result dims that the axes decide are bound to fresh variables by
// match_cast. The rows of NonMaxSuppression's result are a fresh variable
// too.
#include <cmath>
#include <functional>
#include <limits>

#include "frontends/onnx/context.h"
#include "frontends/onnx/onnx_proto.h"

namespace relax::onnx_fe {
namespace {

using Ints = std::vector<int64_t>;

// ---- Helpers ----------------------------------------------------------------------------

// The dims of input i; unsupported when they are not known (even symbolically).
std::vector<SymExpr> known_shape(Context& ctx, size_t i, const char* why) {
  std::optional<std::vector<SymExpr>> s = ctx.shape(i);
  if (!s) ctx.unsupported(cat("an input of unknown shape (", why, ")"));
  return *s;
}

// Input i as one integer known at import time (symbolically or as data).
std::optional<SymExpr> scalar_sym(Context& ctx, size_t i) {
  std::optional<std::vector<SymExpr>> v = ctx.sym_values(i);
  if (!v) return std::nullopt;
  if (v->size() != 1) ctx.fail("input ", i, " must hold one integer, got ", v->size());
  return (*v)[0];
}

// Input i as one integer: known at import time, or else a fresh variable
// `hint` that a match_cast binds to the value at run time.
SymExpr scalar_or_fresh(Context& ctx, size_t i, const char* hint) {
  if (std::optional<SymExpr> v = scalar_sym(ctx, i)) return *v;
  Expr t = ctx.expr(i);
  if (ctx.dtype(i) != DataType::i64()) t = ctx.emit_op("astype", {t}, {{"dtype", DataType::i64()}});
  Expr shape = ctx.emit_op("tensor_to_shape", {ctx.emit_op("reshape", {t, make_shape({1})})});
  SymExpr v = ctx.fresh_sym(hint);
  ctx.emit_match_cast(shape, shape_si({v}), hint);
  return v;
}

// Input i as integer constants (axes) when known at import time: constant
// data, constant symbolic values, or a tensor of no elements. Nullopt when
// only known at run time.
std::optional<Ints> known_ints(Context& ctx, size_t i) {
  if (std::optional<Ints> v = ctx.const_ints(i)) return v;
  if (std::optional<std::vector<SymExpr>> v = ctx.sym_values(i)) {
    Ints out;
    for (const SymExpr& e : *v) {
      if (!e.is_const()) return std::nullopt;
      out.push_back(e.const_value());
    }
    return out;
  }
  if (std::optional<std::vector<SymExpr>> dims = ctx.shape(i))
    for (const SymExpr& d : *dims)
      if (d.is_const(0)) return Ints{};
  return std::nullopt;
}

// Input i as one axis known at import time; nullopt when only known at run time.
std::optional<int64_t> known_axis(Context& ctx, size_t i) {
  std::optional<Ints> v = known_ints(ctx, i);
  if (!v) return std::nullopt;
  if (v->size() != 1) ctx.fail("the axis must be one integer, got ", v->size());
  return (*v)[0];
}

// Rebinds y, whose rank its op's rule knows but not its dims, by match_cast
// to dims dim(j), a null one becoming a fresh variable, so that later
// shapes are symbolic. y is returned as is when its dims or its rank are
// unknown.
Expr bind_dims(Context& ctx, Expr y, const std::function<SymExpr(int)>& dim, const char* hint) {
  const auto* t = as<TensorSI>(sinfo_of(y));
  if (!t || t->shape || t->ndim < 0) return y;
  std::vector<SymExpr> dims;
  for (int j = 0; j < t->ndim; ++j) {
    SymExpr d = dim(j);
    dims.push_back(d.defined() ? d : ctx.fresh_sym(hint));
  }
  return ctx.emit_match_cast(y, tensor_si(t->dtype, std::move(dims)));
}

// The dims of e's struct info, when known.
std::optional<std::vector<SymExpr>> dims_of(const Expr& e) {
  const auto* t = as<TensorSI>(sinfo_of(e));
  if (!t || !t->shape) return std::nullopt;
  return *t->shape;
}

// The dtype an `output_datatype`-style attribute names.
DataType dtype_attr(Context& ctx, const char* name, int def) {
  int64_t t = ctx.attr_int(name, def);
  std::optional<DataType> d = dtype_of(int(t));
  if (!d) ctx.unsupported(cat(name, " = ", onnx_type_name(int(t))));
  return *d;
}

// Input i's dtype, which must be known (for scalar constants of that dtype).
DataType known_dtype(Context& ctx, size_t i) {
  DataType d = ctx.dtype(i);
  if (d.is_void()) ctx.unsupported(cat("input ", i, " of unknown dtype"));
  return d;
}

Expr binary(Context& ctx, const char* op, Expr a, Expr b) { return ctx.emit_op(op, {std::move(a), std::move(b)}); }

// Applies a float-only elementwise op (sqrt, log, exp) to x; an integer x
// is computed in f64 and converted back, as ONNX's integer reductions do.
Expr float_unary(Context& ctx, const char* op, Expr x, DataType dtype) {
  if (dtype.is_float()) return ctx.emit_op(op, {x});
  Expr f = ctx.emit_op("astype", {x}, {{"dtype", DataType::f(64)}});
  return ctx.emit_op("astype", {ctx.emit_op(op, {f})}, {{"dtype", dtype}});
}

// ---- Reductions -----------------------------------------------------------------------

// A reduction is pre(x), reduced by `op` over the axes, then post(...).
enum class Pre { None, Abs, Square };
enum class Post { None, Sqrt, Log };

struct ReduceDef {
  const char* onnx;
  int axes_input_opset;  // from this opset on, axes is an input, before an attribute
  Pre pre;
  const char* op;  // the graph reduction; nullptr: log-sum-exp
  Post post;
};

// clang-format off
constexpr ReduceDef kReduce[] = {
    {"ReduceSum",       13, Pre::None,   "sum",   Post::None},
    {"ReduceMean",      18, Pre::None,   "mean",  Post::None},
    {"ReduceMax",       18, Pre::None,   "max",   Post::None},
    {"ReduceMin",       18, Pre::None,   "min",   Post::None},
    {"ReduceProd",      18, Pre::None,   "prod",  Post::None},
    {"ReduceL1",        18, Pre::Abs,    "sum",   Post::None},
    {"ReduceL2",        18, Pre::Square, "sum",   Post::Sqrt},
    {"ReduceLogSum",    18, Pre::None,   "sum",   Post::Log},
    {"ReduceSumSquare", 18, Pre::Square, "sum",   Post::None},
    {"ReduceLogSumExp", 18, Pre::None,   nullptr, Post::None},
};
// clang-format on

// The axes of a reduction: known at import time (`known`, empty for every
// axis) or a tensor read at run time (`tensor`). noop: no axes reduce
// nothing (noop_with_empty_axes) rather than everything.
struct ReduceAxes {
  std::optional<Ints> known;
  Expr tensor;
  bool noop = false;
  bool is_identity() const { return known && known->empty() && noop; }
};

ReduceAxes reduce_axes(Context& ctx, const ReduceDef& d) {
  ReduceAxes r;
  r.noop = ctx.attr_int("noop_with_empty_axes", 0) != 0;
  if (ctx.opset() < d.axes_input_opset) {
    r.known = ctx.attr_ints("axes");
  } else if (!ctx.has_input(1)) {
    r.known = Ints{};
  } else {
    r.known = known_ints(ctx, 1);
    if (!r.known) r.tensor = ctx.expr(1);
  }
  return r;
}

// x reduced by the graph reduction `kind` over the axes. Over run-time axes
// the result's dims are those of `like` when given (a value known to have
// the same shape), else fresh variables; with keepdims a dim of 1 stays 1.
Expr reduce_over(Context& ctx, const ReduceAxes& axes, const char* kind, Expr x, bool keepdims, Expr like = {}) {
  if (axes.is_identity()) return x;
  if (axes.known) return ctx.emit_op(kind, {x}, {{"axis", *axes.known}, {"keepdims", keepdims}});
  Expr y = ctx.emit_op("reduce_dynamic", {x, axes.tensor},
                       {{"kind", std::string(kind)}, {"keepdims", keepdims}, {"noop_with_empty_axes", axes.noop}});
  std::optional<std::vector<SymExpr>> same = like ? dims_of(like) : std::nullopt;
  std::optional<std::vector<SymExpr>> xdims = dims_of(x);
  return bind_dims(
      ctx, y,
      [&](int j) {
        if (same && j < int(same->size())) return (*same)[j];
        if (keepdims && xdims && j < int(xdims->size()) && (*xdims)[j].is_const(1)) return SymExpr(1);
        return SymExpr();
      },
      "reduced_dim");
}

// log(sum(exp(x))) computed stably: with m the max over the axes (0 where
// it is infinite), log(sum(exp(x - m))) + m.
Expr log_sum_exp(Context& ctx, Expr x, DataType dtype, const ReduceAxes& axes, bool keepdims) {
  if (axes.is_identity()) return x;
  if (!dtype.is_float()) {
    Expr f = ctx.emit_op("astype", {x}, {{"dtype", DataType::f(64)}});
    return ctx.emit_op("astype", {log_sum_exp(ctx, f, DataType::f(64), axes, keepdims)}, {{"dtype", dtype}});
  }
  Expr m = reduce_over(ctx, axes, "max", x, true);
  m = ctx.emit_op("where", {ctx.emit_op("isinf", {m}), ctx.scalar(dtype, 0), m});
  Expr e = ctx.emit_op("exp", {binary(ctx, "subtract", x, m)});
  Expr s = ctx.emit_op("log", {reduce_over(ctx, axes, "sum", e, keepdims, keepdims ? m : Expr())});
  if (!keepdims) {
    // Drop the reduced dims (1s in m).
    if (!axes.known) {
      m = reduce_over(ctx, axes, "max", m, false, s);
    } else if (axes.known->empty()) {
      m = ctx.emit_op("reshape", {m, make_shape({})});
    } else {
      m = ctx.emit_op("squeeze", {m}, {{"axis", *axes.known}});
    }
  }
  return binary(ctx, "add", s, m);
}

// A sum, product, max or min of integers known at import time (a shape's
// product, as tf2onnx writes the element count): folded to its value.
std::optional<Value> fold_reduce(Context& ctx, const ReduceDef& d, const ReduceAxes& axes, bool keepdims) {
  std::string op = d.op ? d.op : "";
  if (d.pre != Pre::None || d.post != Post::None || !axes.known || axes.is_identity()) return std::nullopt;
  if (op != "sum" && op != "prod" && op != "max" && op != "min") return std::nullopt;
  if (ctx.ndim(0) != 1 || !ctx.dtype(0).is_integer()) return std::nullopt;
  for (int64_t a : *axes.known)
    if (a != 0 && a != -1) return std::nullopt;
  std::optional<std::vector<SymExpr>> v = ctx.sym_values(0);
  if (!v || (v->empty() && (op == "max" || op == "min"))) return std::nullopt;
  SymExpr r = op == "sum" ? SymExpr(0) : op == "prod" ? SymExpr(1) : (*v)[0];
  for (const SymExpr& e : *v)
    r = op == "sum" ? r + e : op == "prod" ? r * e : op == "max" ? max(r, e) : min(r, e);
  return sym_value({ctx.ana().simplify(r)}, !keepdims, ctx.dtype(0));
}

// A sum, product, max or min over every element of a small float tensor
// known at import time (torchvision's transforms take the max of sizes cast
// to float): folded to its value, rounded to the dtype.
std::optional<Value> fold_float_reduce(Context& ctx, const ReduceDef& d, const ReduceAxes& axes, bool keepdims) {
  std::string op = d.op ? d.op : "";
  if (d.pre != Pre::None || d.post != Post::None || !axes.known || axes.is_identity()) return std::nullopt;
  if (op != "sum" && op != "prod" && op != "max" && op != "min") return std::nullopt;
  const HostTensor* t = ctx.data(0);
  if (!t || !t->dtype.is_float() || t->numel() == 0 || t->numel() > 4096) return std::nullopt;
  int64_t rank = int64_t(t->shape.size());
  std::vector<bool> reduced(size_t(rank), axes.known->empty());
  for (int64_t a : *axes.known) {
    if (a < -rank || a >= rank) return std::nullopt;
    reduced[size_t(a < 0 ? a + rank : a)] = true;
  }
  for (bool r : reduced)
    if (!r) return std::nullopt;  // only a reduction over every axis
  if ((op == "sum" || op == "prod") && t->numel() > 2) return std::nullopt;  // only exact (one rounding)
  std::optional<std::vector<double>> v = t->to_floats();
  if (!v) return std::nullopt;
  double r = op == "sum" ? 0.0 : op == "prod" ? 1.0 : (*v)[0];
  for (double e : *v) {
    if (op == "sum") r += e;
    else if (op == "prod") r *= e;
    else if (std::isnan(e) || std::isnan(r)) r = NAN;
    else r = op == "max" ? std::max(r, e) : std::min(r, e);
  }
  std::vector<int64_t> shape = keepdims ? std::vector<int64_t>(size_t(rank), 1) : std::vector<int64_t>{};
  Value out;
  out.data = std::make_shared<HostTensor>(HostTensor::from_floats(t->dtype, shape, {r}));
  return out;
}

Value convert_reduce(Context& ctx, const ReduceDef& d) {
  bool keepdims = ctx.attr_int("keepdims", 1) != 0;
  ReduceAxes axes = reduce_axes(ctx, d);
  if (std::optional<Value> v = fold_reduce(ctx, d, axes, keepdims)) return *v;
  if (std::optional<Value> v = fold_float_reduce(ctx, d, axes, keepdims)) return *v;
  Expr x = ctx.expr(0);
  if (!d.op) return expr_value(log_sum_exp(ctx, x, known_dtype(ctx, 0), axes, keepdims));
  if (d.pre == Pre::Abs) x = ctx.emit_op("abs", {x});
  if (d.pre == Pre::Square) x = binary(ctx, "multiply", x, x);
  x = reduce_over(ctx, axes, d.op, x, keepdims);
  if (d.post == Post::Sqrt) x = float_unary(ctx, "sqrt", x, known_dtype(ctx, 0));
  if (d.post == Post::Log) x = float_unary(ctx, "log", x, known_dtype(ctx, 0));
  return expr_value(x);
}

// ArgMax / ArgMin. select_last_index: the op on x reversed along the axis,
// whose index i is dim-1-i in x.
Value convert_arg_reduce(Context& ctx, const char* op) {
  Expr x = ctx.expr(0);
  int64_t axis = ctx.attr_int("axis", 0);
  bool keepdims = ctx.attr_int("keepdims", 1) != 0;
  Attrs attrs{{"axis", axis}, {"keepdims", keepdims}};
  if (!ctx.attr_int("select_last_index", 0)) return expr_value(ctx.emit_op(op, {x}, attrs));
  std::vector<SymExpr> dims = known_shape(ctx, 0, "select_last_index");
  int r = int(dims.size());
  if (axis < -r || axis >= r) ctx.fail("axis ", axis, " is out of range for rank ", r);
  int64_t ax = axis < 0 ? axis + r : axis;
  SymExpr last = dims[ax] - 1;
  Expr rev = ctx.emit_op("strided_slice", {x},
                         {{"axes", Ints{ax}},
                          {"begin", std::vector<SymExpr>{last}},
                          {"end", std::vector<SymExpr>{SymExpr(-1)}},
                          {"strides", Ints{-1}}});
  Expr idx = ctx.emit_op(op, {rev}, attrs);
  return expr_value(binary(ctx, "subtract", ctx.expr_of(sym_value({last}, true)), idx));
}

// ---- Softmax-like ops --------------------------------------------------------------------

// Softmax, LogSoftmax, Hardmax. From opset 13 along `axis` (default -1);
// before, x is coerced to 2-D [prod(dims[:axis]), prod(dims[axis:])] and
// the op runs along dim 1 (default axis 1).
Value convert_softmax(Context& ctx, const char* op) {
  Expr x = ctx.expr(0);
  if (ctx.opset() >= 13) return expr_value(ctx.emit_op(op, {x}, {{"axis", ctx.attr_int("axis", -1)}}));
  int64_t axis = ctx.attr_int("axis", 1);
  int r = ctx.ndim(0);
  if (r >= 0 && (axis < -r || axis >= r)) ctx.fail("axis ", axis, " is out of range for rank ", r);
  // Along the last axis the 2-D form is the op itself.
  if (axis == -1 || (r > 0 && axis == r - 1)) return expr_value(ctx.emit_op(op, {x}, {{"axis", int64_t(-1)}}));
  std::vector<SymExpr> dims = known_shape(ctx, 0, "the 2-D coercion of opset < 13");
  int64_t ax = axis < 0 ? axis + r : axis;
  SymExpr rows = 1, cols = 1;
  for (int i = 0; i < r; ++i) (i < ax ? rows : cols) = (i < ax ? rows : cols) * dims[i];
  Expr x2 = ctx.emit_op("reshape", {x, make_shape({ctx.ana().simplify(rows), ctx.ana().simplify(cols)})});
  Expr y2 = ctx.emit_op(op, {x2}, {{"axis", int64_t(1)}});
  return expr_value(ctx.emit_op("reshape", {y2, make_shape(dims)}));
}

// ---- Matrix products ----------------------------------------------------------------------

// Gemm: alpha * op(A) @ op(B) + beta * C, op transposing when transA/transB.
Value convert_gemm(Context& ctx) {
  Expr a = ctx.expr(0), b = ctx.expr(1);
  Attrs transpose{{"axes", Ints{1, 0}}};
  if (ctx.attr_int("transA", 0)) a = ctx.emit_op("permute_dims", {a}, transpose);
  if (ctx.attr_int("transB", 0)) b = ctx.emit_op("permute_dims", {b}, transpose);
  Expr y = binary(ctx, "matmul", a, b);
  double alpha = ctx.attr_float("alpha", 1.0), beta = ctx.attr_float("beta", 1.0);
  if (alpha != 1.0) y = binary(ctx, "multiply", y, ctx.scalar(known_dtype(ctx, 0), alpha));
  if (!ctx.has_input(2) || beta == 0.0) return expr_value(y);
  Expr c = ctx.expr(2);
  if (beta != 1.0) c = binary(ctx, "multiply", c, ctx.scalar(known_dtype(ctx, 2), beta));
  return expr_value(binary(ctx, "add", y, c));
}

Value convert_einsum(Context& ctx) {
  std::vector<Expr> operands;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) operands.push_back(ctx.expr(i));
  return expr_value(ctx.emit_op("einsum", {make_tuple(operands)}, {{"subscripts", ctx.attr_string("equation")}}));
}

// ---- TopK, cumulative ops, Det -----------------------------------------------------------

// TopK: k is an attribute before opset 10, then input 1; largest and sorted
// from opset 11.
std::vector<Value> convert_topk(Context& ctx) {
  SymExpr k = ctx.opset() < 10 ? SymExpr(ctx.attr_int("k")) : scalar_or_fresh(ctx, 1, "k");
  Attrs attrs{{"k", k},
              {"axis", ctx.attr_int("axis", -1)},
              {"largest", ctx.attr_int("largest", 1) != 0},
              {"sorted", ctx.attr_int("sorted", 1) != 0}};
  Expr t = ctx.emit(make_op_call("topk", {ctx.expr(0)}, attrs), "topk");
  Expr values = ctx.emit(make_tuple_get_item(t, 0), ctx.output_name(0));
  Expr indices = ctx.emit(make_tuple_get_item(t, 1), ctx.output_name(1));
  return {expr_value(values), expr_value(indices)};
}

// CumSum / CumProd: the axis is input 1, an operand of the op when only
// known at run time (the result has x's shape either way).
Value convert_cumulative(Context& ctx, const char* op) {
  Attrs attrs{{"exclusive", ctx.attr_int("exclusive", 0) != 0}, {"reverse", ctx.attr_int("reverse", 0) != 0}};
  std::vector<Expr> args{ctx.expr(0)};
  if (std::optional<int64_t> axis = known_axis(ctx, 1)) {
    attrs.set("axis", *axis);
  } else {
    args.push_back(ctx.expr(1));
  }
  return expr_value(ctx.emit_op(op, args, attrs));
}

// ---- Signal processing ---------------------------------------------------------------------

// DFT: before opset 20 the axis is an attribute (default 1), from 20 input 2
// (default -2); dft_length is input 1 in both. An axis known only at run
// time is an operand of dft: the dims it may change become fresh variables.
Value convert_dft(Context& ctx) {
  int64_t axis = ctx.attr_int("axis", 1);
  std::vector<Expr> args{ctx.expr(0)};
  if (ctx.opset() >= 20) {
    axis = -2;
    if (ctx.has_input(2)) {
      if (std::optional<int64_t> a = known_axis(ctx, 2)) {
        axis = *a;
      } else {
        args.push_back(ctx.expr(2));
      }
    }
  }
  bool inverse = ctx.attr_int("inverse", 0) != 0, onesided = ctx.attr_int("onesided", 0) != 0;
  Attrs attrs{{"axis", axis}, {"inverse", inverse}, {"onesided", onesided}};
  std::optional<SymExpr> length;
  if (ctx.has_input(1)) {
    length = scalar_or_fresh(ctx, 1, "dft_length");
    attrs.set("length", *length);
  }
  Expr y = ctx.emit_op("dft", args, attrs);
  if (args.size() == 1) return expr_value(y);
  // A dim keeps its size when transforming it would not change it (see
  // the dft op); the last holds the complex parts.
  std::optional<std::vector<SymExpr>> xdims = ctx.shape(0);
  auto dim = [&](int j) -> SymExpr {
    if (!xdims || j >= int(xdims->size())) return SymExpr();
    if (j + 1 == int(xdims->size())) return SymExpr(onesided && inverse ? 1 : 2);
    const SymExpr& d = (*xdims)[j];
    SymExpr n = length ? *length : onesided && inverse ? 2 * (d - 1) : d;
    SymExpr out = onesided && !inverse ? floordiv(n, 2) + 1 : n;
    return ctx.ana().can_prove_equal(out, d) ? d : SymExpr();
  };
  return expr_value(bind_dims(ctx, y, dim, "dft_dim"));
}

// STFT(signal, frame_step, [window], [frame_length]).
Value convert_stft(Context& ctx) {
  Attrs attrs{{"frame_step", scalar_or_fresh(ctx, 1, "frame_step")}, {"onesided", ctx.attr_int("onesided", 1) != 0}};
  if (ctx.has_input(3)) attrs.set("frame_length", scalar_or_fresh(ctx, 3, "frame_length"));
  std::vector<Expr> args{ctx.expr(0)};
  if (ctx.has_input(2)) args.push_back(ctx.expr(2));
  return expr_value(ctx.emit_op("stft", args, attrs));
}

// HannWindow, HammingWindow, BlackmanWindow(size).
Value convert_window(Context& ctx, const char* kind) {
  Attrs attrs{{"kind", std::string(kind)},
              {"size", scalar_or_fresh(ctx, 0, "size")},
              {"periodic", ctx.attr_int("periodic", 1) != 0},
              {"dtype", dtype_attr(ctx, "output_datatype", kFloat)}};
  return expr_value(ctx.emit_op("window", {}, attrs));
}

// MelWeightMatrix(num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz).
Value convert_mel_weight_matrix(Context& ctx) {
  Attrs attrs{{"num_mel_bins", scalar_or_fresh(ctx, 0, "num_mel_bins")},
              {"dft_length", scalar_or_fresh(ctx, 1, "dft_length")},
              {"dtype", dtype_attr(ctx, "output_datatype", kFloat)}};
  return expr_value(ctx.emit_op("mel_weight_matrix", {ctx.expr(2), ctx.expr(3), ctx.expr(4)}, attrs));
}

// NonMaxSuppression(boxes, scores, [max_output_boxes_per_class], [iou_threshold],
// [score_threshold]): an omitted input before a present one takes its
// default (0 boxes, IoU threshold 0). The result is (fresh, 3).
Value convert_nms(Context& ctx) {
  std::vector<Expr> args{ctx.expr(0), ctx.expr(1)};
  size_t last = 1;
  for (size_t i = 2; i < 5; ++i)
    if (ctx.has_input(i)) last = i;
  for (size_t i = 2; i <= last; ++i) {
    if (ctx.has_input(i)) {
      args.push_back(ctx.expr(i));
    } else {
      args.push_back(i == 2 ? ctx.scalar(DataType::i64(), 0) : ctx.scalar(known_dtype(ctx, 0), 0));
    }
  }
  Expr y = ctx.emit_op("non_max_suppression", args, {{"center_point_box", ctx.attr_int("center_point_box", 0)}});
  return expr_value(ctx.emit_match_cast(y, tensor_si(DataType::i64(), {ctx.fresh_sym("num_selected"), SymExpr(3)})));
}

}  // namespace

void register_reduce_converters(ConverterRegistry& r) {
  for (const ReduceDef& d : kReduce)
    r.add(d.onnx, 1, [&d](Context& ctx) { return std::vector<Value>{convert_reduce(ctx, d)}; });
  auto one = [](Value (*fn)(Context&, const char*), const char* op) {
    return [fn, op](Context& ctx) { return std::vector<Value>{fn(ctx, op)}; };
  };
  auto plain = [](Value (*fn)(Context&)) { return [fn](Context& ctx) { return std::vector<Value>{fn(ctx)}; }; };
  r.add("ArgMax", 1, one(convert_arg_reduce, "argmax"));
  r.add("ArgMin", 1, one(convert_arg_reduce, "argmin"));
  r.add("Softmax", 1, one(convert_softmax, "softmax"));
  r.add("LogSoftmax", 1, one(convert_softmax, "log_softmax"));
  r.add("Hardmax", 1, one(convert_softmax, "hardmax"));
  r.add("MatMul", 1,
        [](Context& ctx) { return std::vector<Value>{expr_value(binary(ctx, "matmul", ctx.expr(0), ctx.expr(1)))}; });
  r.add("Gemm", 1, plain(convert_gemm));
  r.add("Einsum", 12, plain(convert_einsum));
  r.add("TopK", 1, convert_topk);
  r.add("CumSum", 11, one(convert_cumulative, "cumsum"));
  r.add("CumProd", 26, one(convert_cumulative, "cumprod"));
  r.add("Det", 11, [](Context& ctx) { return std::vector<Value>{expr_value(ctx.emit_op("det", {ctx.expr(0)}))}; });
  r.add("DFT", 17, plain(convert_dft));
  r.add("STFT", 17, plain(convert_stft));
  r.add("HannWindow", 17, one(convert_window, "hann"));
  r.add("HammingWindow", 17, one(convert_window, "hamming"));
  r.add("BlackmanWindow", 17, one(convert_window, "blackman"));
  r.add("MelWeightMatrix", 17, plain(convert_mel_weight_matrix));
  r.add("NonMaxSuppression", 10, plain(convert_nms));
  r.add("TfIdfVectorizer", 9,
        [](Context& ctx) -> std::vector<Value> { ctx.unsupported("TfIdfVectorizer (string n-gram op)"); });
}

}  // namespace relax::onnx_fe
