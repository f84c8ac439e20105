// ONNX converters: If, Loop and Scan.
//
// Subgraphs become functions (Context::import_subgraph) that capture the
// values of enclosing graphs. If becomes a graph-level `if` whose branches
// are the bodies of the two zero-parameter branch functions; Loop and Scan become the
// graph ops `loop` and `scan` (ir/ops/control.cc) that take their body
// function as an argument.
//
// Carried values (Loop) and states (Scan) may change shape across
// iterations in ONNX; the body's parameters start as the initial values'
// struct info and are widened until the body's results fit them. Results
// whose rank is known but dims are not (data-dependent) are match_cast to
// fresh symbolic dims so that later shapes stay symbolic.
#include <limits>

#include "frontends/onnx/context.h"
#include "ir/struct_info.h"

namespace relax::onnx_fe {
namespace {

const DataType kI64 = DataType::i64();
const DataType kBool = DataType::boolean();

// The hint for naming output k.
std::string out_name(Context& ctx, size_t k) {
  return k < ctx.num_outputs() && ctx.output_used(k) ? ctx.node().output(int(k)) : ctx.op_type();
}

// Input i as a rank-0 tensor (single-element rank-1 inputs are reshaped).
Expr scalar_input(Context& ctx, size_t i) {
  Expr e = ctx.expr(i);
  if (ctx.ndim(i) == 0) return e;
  return ctx.emit_op("reshape", {e, make_shape({})}, {});
}

// A value of known rank but unknown dims gets fresh symbolic dims; `dims`,
// when given, are the dims to cast to instead.
Expr refine(Context& ctx, Expr v, const std::string& hint, std::optional<std::vector<SymExpr>> dims = std::nullopt) {
  const auto* t = as<TensorSI>(sinfo_of(v));
  if (!t || t->shape || t->ndim < 0) return v;
  if (!dims) {
    dims.emplace();
    for (int i = 0; i < t->ndim; ++i) dims->push_back(ctx.fresh_sym(cat(hint, "_dim", i)));
  }
  return ctx.emit_match_cast(v, tensor_si(t->dtype, *dims), hint);
}

// Element k of a tuple-valued `v`, bound and refined.
Expr field(Context& ctx, const Expr& v, size_t k, std::optional<std::vector<SymExpr>> dims = std::nullopt) {
  std::string hint = out_name(ctx, k);
  return refine(ctx, ctx.emit(make_tuple_get_item(v, int(k)), hint), hint, std::move(dims));
}

// The results a function returns: the tuple's fields, or the single value.
std::vector<StructInfo> results_of(const Expr& fn) {
  const auto* f = as<FuncSI>(sinfo_of(fn));
  RELAX_CHECK(f, "an imported subgraph is a function");
  if (const auto* t = as<TupleSI>(f->ret)) return t->fields;
  return {f->ret};
}

// A coarser struct info for a parameter that did not hold the body's result:
// first the unification, then rank only, then nothing but the dtype.
StructInfo widen(const StructInfo& param, const StructInfo& result, int attempt, const Analyzer& ana) {
  StructInfo u = unify(param, result, ana);
  const auto* t = as<TensorSI>(u);
  if (attempt == 0 || !t) return u;
  if (attempt == 1 && t->ndim >= 0) return tensor_si_ndim(t->dtype, t->ndim);
  return tensor_si_ndim(t->dtype, -1);
}

// Imports a loop or scan body whose parameters are `fixed`, then `carried`,
// then `slices`; its results for the carried values are those at
// `first_result` on. The carried parameters are widened until they hold those
// results.
Expr import_body(Context& ctx, const onnx::GraphProto& g, const std::vector<StructInfo>& fixed,
                 std::vector<StructInfo> carried, size_t first_result, const std::vector<StructInfo>& slices) {
  for (int attempt = 0; attempt < 4; ++attempt) {
    std::vector<StructInfo> params = fixed;
    params.insert(params.end(), carried.begin(), carried.end());
    params.insert(params.end(), slices.begin(), slices.end());
    if (size_t(g.input_size()) != params.size())
      ctx.fail("the body has ", g.input_size(), " inputs, expected ", params.size());
    Expr fn = ctx.import_subgraph(g, params);
    std::vector<StructInfo> results = results_of(fn);
    if (results.size() < first_result + carried.size())
      ctx.fail("the body has ", results.size(), " outputs, expected at least ", first_result + carried.size());
    bool stable = true;
    for (size_t k = 0; k < carried.size(); ++k) {
      const StructInfo& r = results[first_result + k];
      if (is_base_of(carried[k], r, ctx.ana()) == Tri::Yes) continue;
      carried[k] = widen(carried[k], r, attempt, ctx.ana());
      stable = false;
    }
    if (stable) return fn;
  }
  ctx.fail("the body's carried values do not settle on a struct info");
}

// ---- If --------------------------------------------------------------------------

// A constant condition, when the input's data is known.
std::optional<bool> const_condition(Context& ctx, size_t i) {
  auto v = ctx.const_ints(i);
  if (!v || v->size() != 1) return std::nullopt;
  return (*v)[0] != 0;
}

std::vector<Value> unpack(Context& ctx, const Expr& r, size_t n) {
  if (n == 1) return {expr_value(refine(ctx, r, out_name(ctx, 0)))};
  std::vector<Value> out;
  for (size_t k = 0; k < n; ++k) out.push_back(expr_value(field(ctx, r, k)));
  return out;
}

// A branch: the body of the zero-parameter function its subgraph imports as.
SeqExpr branch(Context& ctx, const onnx::GraphProto& g) {
  Expr fn = ctx.import_subgraph(g, {});
  const auto* f = as<FunctionNode>(fn);
  RELAX_CHECK(f && f->params.empty(), "a branch imports as a function without parameters");
  return f->body;
}

// A branch that raises `message` at run time, typed as giving values of
// struct info `si` (a tuple for several outputs) that it never gives.
SeqExpr raising_branch(const std::string& message, const StructInfo& si) {
  Var v = make_var("unreached", si);
  Expr call = make_op_call("call_builtin", {make_string("relax.raise"), make_tuple({make_string(message)})}, {}, {si});
  return make_seq({BindingBlock{false, {Binding{v, call, nullptr}}}}, v);
}

// Both branches of an If whose condition is known only at run time. ONNX
// runs only the branch taken, so a branch that cannot be imported with the
// shapes known here (silero-vad's 8 kHz branch given a 16 kHz chunk: an
// LSTM input of the wrong rank) raises its error at run time instead, if
// ever taken; the If then has the other branch's struct info.
std::pair<SeqExpr, SeqExpr> both_branches(Context& ctx, const onnx::GraphProto& then_g,
                                          const onnx::GraphProto& else_g) {
  SeqExpr b[2];
  std::string err[2];
  const onnx::GraphProto* g[2] = {&then_g, &else_g};
  for (int k = 0; k < 2; ++k) {
    try {
      b[k] = branch(ctx, *g[k]);
    } catch (const Error& e) {
      err[k] = e.what();
    }
  }
  if (!b[0] && !b[1]) throw Error(err[0]);
  for (int k = 0; k < 2; ++k)
    if (!b[k]) {
      ctx.note(cat("If '", ctx.node().name(), "': its ", k == 0 ? "then" : "else",
                   " branch cannot be built for these shapes; it raises its error at run time if taken: ", err[k]));
      b[k] = raising_branch(cat("If '", ctx.node().name(), "': its ", k == 0 ? "then" : "else",
                                " branch was taken, which cannot run on these shapes: ", err[k]),
                            b[1 - k]->sinfo);
    }
  return {b[0], b[1]};
}

std::vector<Value> convert_if(Context& ctx) {
  const onnx::GraphProto* then_g = ctx.attr_graph("then_branch");
  const onnx::GraphProto* else_g = ctx.attr_graph("else_branch");
  if (!then_g || !else_g) ctx.fail("needs the then_branch and else_branch attributes");
  if (then_g->output_size() != else_g->output_size() || size_t(then_g->output_size()) < ctx.num_outputs())
    ctx.fail("the branches have ", then_g->output_size(), " and ", else_g->output_size(), " outputs for ",
             ctx.num_outputs(), " node outputs");
  size_t n = size_t(then_g->output_size());
  std::string hint = n == 1 ? "" : ctx.op_type();
  // A condition known at import time selects its branch now.
  if (std::optional<bool> c = const_condition(ctx, 0)) return unpack(ctx, ctx.emit(branch(ctx, *c ? *then_g : *else_g), hint), n);
  Expr cond = scalar_input(ctx, 0);
  auto [then_b, else_b] = both_branches(ctx, *then_g, *else_g);
  return unpack(ctx, ctx.emit(make_if(cond, then_b, else_b), hint), n);
}

// ---- Loop ------------------------------------------------------------------------

// Whether the body hands its condition parameter back unchanged.
bool passes_condition_through(const Expr& fn) {
  const auto* f = as<FunctionNode>(fn);
  if (!f || f->params.size() < 2) return false;
  const Expr& ret = f->body->body;
  const auto* t = as<TupleNode>(ret);
  const Expr& first = t ? (t->fields.empty() ? Expr() : t->fields[0]) : ret;
  return first == Expr(f->params[1]);
}

std::vector<Value> convert_loop(Context& ctx) {
  const onnx::GraphProto* g = ctx.attr_graph("body");
  if (!g) ctx.fail("needs the body attribute");
  size_t n = ctx.num_inputs() > 2 ? ctx.num_inputs() - 2 : 0;
  Expr trip = ctx.has_input(0)
                  ? scalar_input(ctx, 0)
                  : ctx.constant(HostTensor::from_ints(kI64, {}, {std::numeric_limits<int64_t>::max()}), "no_limit");
  Expr cond = ctx.has_input(1) ? scalar_input(ctx, 1) : ctx.constant(HostTensor::from_ints(kBool, {}, {1}), "true");
  std::vector<Expr> init;
  std::vector<StructInfo> carried;
  for (size_t k = 0; k < n; ++k) {
    init.push_back(ctx.expr(2 + k));
    carried.push_back(sinfo_of(init.back()));
  }
  Expr body = import_body(ctx, *g, {tensor_si(kI64, {}), tensor_si(kBool, {})}, carried, 1, {});
  bool runs_to_limit = passes_condition_through(body) && (!ctx.has_input(1) || const_condition(ctx, 1) == true);
  Expr fn = ctx.emit(body, "loop_body");
  Expr r = ctx.emit_op("loop", {fn, trip, cond, make_tuple(init)}, {});

  // The number of iterations: the trip count when the condition stays true.
  SymExpr iters;
  if (auto m = ctx.sym_values(0); runs_to_limit && m && m->size() == 1) iters = ctx.ana().simplify(max((*m)[0], 0));
  if (!iters.defined()) iters = ctx.fresh_sym(out_name(ctx, n) + "_iters");
  std::vector<StructInfo> results = results_of(fn);
  std::vector<Value> out;
  for (size_t k = 0; k < ctx.num_outputs(); ++k) {
    if (!ctx.output_used(k)) {
      out.emplace_back();
      continue;
    }
    std::optional<std::vector<SymExpr>> dims;
    if (k >= n && 1 + k < results.size()) {
      if (const auto* t = as<TensorSI>(results[1 + k]); t && t->shape) {
        dims = std::vector<SymExpr>{iters};
        dims->insert(dims->end(), t->shape->begin(), t->shape->end());
      }
    }
    out.push_back(expr_value(field(ctx, r, k, dims)));
  }
  return out;
}

// ---- Scan ------------------------------------------------------------------------

// `si` without its axis `axis` (negative from the end).
StructInfo drop_axis(Context& ctx, const StructInfo& si, int64_t axis) {
  const auto* t = as<TensorSI>(si);
  if (!t) ctx.fail("scan inputs and states must be tensors");
  if (t->ndim < 0) return si;
  if (axis < -t->ndim || axis >= t->ndim) ctx.fail("axis ", axis, " is out of range for rank ", t->ndim);
  if (axis < 0) axis += t->ndim;
  if (!t->shape) return tensor_si_ndim(t->dtype, t->ndim - 1);
  std::vector<SymExpr> dims = *t->shape;
  dims.erase(dims.begin() + axis);
  return tensor_si(t->dtype, std::move(dims));
}

std::vector<Value> convert_scan(Context& ctx) {
  const onnx::GraphProto* g = ctx.attr_graph("body");
  if (!g) ctx.fail("needs the body attribute");
  bool batched = ctx.opset() < 9;  // Scan-8: a leading batch axis and sequence_lens
  size_t first = batched ? 1 : 0;
  if (batched && ctx.has_input(0)) ctx.unsupported("Scan-8 with sequence_lens");
  size_t m = size_t(ctx.attr_int("num_scan_inputs", 0));
  if (m == 0 || first + m > ctx.num_inputs()) ctx.fail("num_scan_inputs must be in [1, number of inputs]");
  size_t n = ctx.num_inputs() - first - m;
  std::vector<int64_t> in_axes = ctx.attr_ints("scan_input_axes", std::vector<int64_t>(m, 0));
  if (in_axes.size() != m) ctx.fail("scan_input_axes has ", in_axes.size(), " entries for ", m, " scan inputs");

  std::vector<Expr> init, inputs;
  std::vector<StructInfo> states, slices;
  for (size_t k = 0; k < n; ++k) {
    init.push_back(ctx.expr(first + k));
    StructInfo s = sinfo_of(init.back());
    states.push_back(batched ? drop_axis(ctx, s, 0) : s);
  }
  for (size_t j = 0; j < m; ++j) {
    inputs.push_back(ctx.expr(first + n + j));
    StructInfo s = sinfo_of(inputs.back());
    if (batched) s = drop_axis(ctx, s, 0);
    slices.push_back(drop_axis(ctx, s, in_axes[j]));
  }
  Expr fn = ctx.emit(import_body(ctx, *g, {}, states, 0, slices), "scan_body");
  // In the declared order of the op's attributes; absent ones mean all 0.
  Attrs attrs;
  const char* names[] = {"scan_input_axes", "scan_input_directions", "scan_output_axes", "scan_output_directions"};
  for (const char* a : names) {
    const char* onnx_name = batched && a == names[1] ? "directions" : a;
    if (ctx.has_attr(onnx_name)) attrs.set(a, ctx.attr_ints(onnx_name));
  }
  if (batched) attrs.set("batched", true);
  Expr r = ctx.emit_op("scan", {fn, make_tuple(init), make_tuple(inputs)}, attrs);
  std::vector<Value> out;
  for (size_t k = 0; k < ctx.num_outputs(); ++k)
    out.push_back(ctx.output_used(k) ? expr_value(field(ctx, r, k)) : Value{});
  return out;
}

}  // namespace

void register_control_converters(ConverterRegistry& r) {
  r.add("If", 1, convert_if);
  r.add("Loop", 1, convert_loop);
  r.add("Scan", 8, convert_scan);
}

}  // namespace relax::onnx_fe
