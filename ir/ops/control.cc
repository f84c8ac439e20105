// Control-flow ops: loops and scans over function values.
//
// The body of a loop or scan is an ordinary function passed as the first
// argument (a variable holding a function, or a function expression), so
// every pass sees it; the VM lowering turns these calls into bytecode loops.
// A body returns a tuple of its results, or a single non-tuple value when it
// has exactly one.
//
// Carried values may change shape from one iteration to the next only as far
// as the body's parameters allow: a parameter must be a base of both the
// initial value and the body's result for that value, and the final value is
// described by the unification of the two.
//
// Symbolic variables that the body's parameters define are bound to the
// operands' dims, as a call binds them; the body's results are read with
// those bindings, and variables left unbound become unknown dims. Other
// variables in the results are the enclosing scope's (captured).
#include <algorithm>

#include "ir/ops/common.h"

namespace relax {
namespace {

using namespace ops;

// The body's signature: a function with known parameters.
const FuncSI& body_signature(const CallNode& call) {
  StructInfo si = arg_sinfo(call, 0);
  const auto* f = as<FuncSI>(si);
  if (!f || !f->params) fail(op_name(call), ": argument 0 (the body) must be a function, got ", kind_name(si));
  return *f;
}

// The body's results: the fields of a returned tuple, else the one value.
std::vector<StructInfo> body_results(const FuncSI& f) {
  if (const auto* t = as<TupleSI>(f.ret)) return t->fields;
  return {f.ret};
}

// The body's parameters bound to the operands' struct info, as a call binds them.
class ParamBinding {
 public:
  explicit ParamBinding(const std::vector<StructInfo>& params) {
    for (const StructInfo& p : params) collect_definable_vars(p, own_);
  }
  // Binds the variables that appear alone as a dim (or prim value) of `param`.
  void bind(const StructInfo& param, const StructInfo& value) {
    const auto* p = as<TensorSI>(param);
    const auto* v = as<TensorSI>(value);
    if (p && v && p->shape && v->shape && p->shape->size() == v->shape->size()) {
      for (size_t i = 0; i < p->shape->size(); ++i) bind_var((*p->shape)[i], (*v->shape)[i]);
    } else if (const auto* pp = as<PrimSI>(param)) {
      if (const auto* vp = as<PrimSI>(value)) bind_var(pp->value, vp->value);
    }
  }
  // `si` (a parameter or a result) with the bindings applied; the body's own
  // variables left unbound become unknown.
  StructInfo apply(const StructInfo& si) const {
    StructInfo out = substitute(si, map_);
    return erase_vars(
        out, [&](const SymExpr& v) { return map_.count(v) || std::find(own_.begin(), own_.end(), v) == own_.end(); });
  }

 private:
  void bind_var(const SymExpr& p, const SymExpr& v) {
    if (p.defined() && v.defined() && p.is_var() && !map_.count(p)) map_.emplace(p, v);
  }
  std::vector<SymExpr> own_;
  SymMap<SymExpr> map_;
};

// Errors when `param` provably cannot hold `value` (`what` names the value).
void check_fits(const std::string& op, const StructInfo& param, const StructInfo& value, const std::string& what,
                const Analyzer& ana) {
  if (is_base_of(param, value, ana) == Tri::No)
    fail(op, ": the body's parameter for ", what, " cannot hold it (", kind_name(value), " given to a ",
         kind_name(param), " parameter of another dtype, rank or shape)");
}

// Errors unless argument i is a scalar: a Prim or a rank-0 tensor.
void check_scalar(const std::string& op, const CallNode& call, size_t i, const std::string& what) {
  TensorInfo t = tensor_arg(call, i, true);
  if (t.ndim > 0) fail(op, ": ", what, " must be a scalar, got a tensor of rank ", t.ndim);
}

// A tensor with a leading axis of `n` (undefined: unknown) prepended.
StructInfo prepend_axis(const StructInfo& si, const SymExpr& n) {
  const auto* t = as<TensorSI>(si);
  if (!t) return object_si();
  if (t->unknown_rank()) return tensor_si_ndim(t->dtype, -1);
  if (!t->shape || !n.defined()) return tensor_si_ndim(t->dtype, t->ndim + 1);
  Dims dims{n};
  dims.insert(dims.end(), t->shape->begin(), t->shape->end());
  return tensor_si(t->dtype, std::move(dims));
}

// `si` without its axis `axis` (already normalized); `len` receives its length.
StructInfo remove_axis(const std::string& op, const StructInfo& si, int64_t axis, const std::string& what,
                       SymExpr* len) {
  TensorInfo t = tensor_info(op, si, what, false);
  if (t.unknown_rank()) return tensor_si_ndim(t.dtype, -1);
  int ax = normalize_axis(op, axis, t.ndim);
  if (!t.shape) return tensor_si_ndim(t.dtype, t.ndim - 1);
  Dims dims = *t.shape;
  if (len) *len = dims[ax];
  dims.erase(dims.begin() + ax);
  return tensor_si(t.dtype, std::move(dims));
}

// ---- loop ---------------------------------------------------------------------

StructInfo infer_loop(const CallNode& call, const InferContext& ctx) {
  attrs_of(call);
  const std::string& op = op_name(call);
  const FuncSI& body = body_signature(call);
  check_scalar(op, call, 1, "max_trip_count");
  require_integer(op, tensor_arg(call, 1, true).dtype, "max_trip_count", false);
  check_scalar(op, call, 2, "cond");
  require_bool(op, tensor_arg(call, 2, true).dtype, "cond");
  std::vector<StructInfo> init = tuple_arg(call, 3);
  const std::vector<StructInfo>& params = *body.params;
  size_t n = init.size();
  if (params.size() != n + 2)
    fail(op, ": the body takes ", params.size(), " parameters, expected ", n + 2, " (iteration number, condition and ",
         n, " carried values)");
  std::vector<StructInfo> results = body_results(body);
  if (results.size() < n + 1)
    fail(op, ": the body returns ", results.size(), " values, expected at least ", n + 1,
         " (condition and carried values)");

  ParamBinding binding(params);
  for (size_t k = 0; k < n; ++k) binding.bind(params[k + 2], init[k]);
  std::vector<StructInfo> out;
  for (size_t k = 0; k < n; ++k) {
    StructInfo param = binding.apply(params[k + 2]), result = binding.apply(results[k + 1]);
    check_fits(op, param, init[k], cat("carried value ", k), ctx.ana);
    check_fits(op, param, result, cat("the body's result for carried value ", k), ctx.ana);
    out.push_back(unify(init[k], result, ctx.ana));
  }
  for (size_t j = n + 1; j < results.size(); ++j) out.push_back(prepend_axis(binding.apply(results[j]), SymExpr()));
  return tuple_si(std::move(out));
}

// ---- scan ---------------------------------------------------------------------

// An Ints attribute with one entry per operand (empty: all zero).
std::vector<int64_t> per_operand(const std::string& op, const Attrs& attrs, const std::string& name, size_t n) {
  std::vector<int64_t> v = attrs.get_ints(name);
  if (v.empty()) return std::vector<int64_t>(n, 0);
  if (v.size() != n) fail(op, ": ", name, " has ", v.size(), " entries, expected ", n);
  return v;
}

void check_directions(const std::string& op, const std::vector<int64_t>& dirs, const std::string& name) {
  for (int64_t d : dirs)
    if (d != 0 && d != 1) fail(op, ": ", name, " entries must be 0 (forward) or 1 (reverse), got ", d);
}

// Agrees a length seen on several operands: the first known one is kept, a
// provably different one is an Error.
void agree(const std::string& op, SymExpr& known, const SymExpr& next, const std::string& what, const Analyzer& ana) {
  if (!next.defined()) return;
  if (!known.defined()) {
    known = next;
    return;
  }
  if (ana.can_prove_not_equal(known, next)) fail(op, ": ", what, " is ", next, " here but ", known, " before");
}

// With `batched`, strips the leading batch axis of an operand, agreeing its length.
StructInfo strip_batch(const std::string& op, const StructInfo& si, bool batched, const std::string& what,
                       SymExpr& batch, const Analyzer& ana) {
  if (!batched) return si;
  SymExpr b;
  StructInfo rest = remove_axis(op, si, 0, what, &b);
  agree(op, batch, b, "the batch size", ana);
  return rest;
}

// The stacked scan output: the per-iteration value with an axis of length
// `len` inserted at `axis` (in the stacked rank; negative counts from the end).
StructInfo insert_axis(const std::string& op, const StructInfo& si, int64_t axis, const SymExpr& len, size_t k) {
  const auto* t = as<TensorSI>(si);
  if (!t) fail(op, ": scan output ", k, " must be a tensor, got ", kind_name(si));
  if (t->unknown_rank()) return tensor_si_ndim(t->dtype, -1);
  int ax = normalize_axis(op, axis, t->ndim + 1);
  if (!t->shape || !len.defined()) return tensor_si_ndim(t->dtype, t->ndim + 1);
  Dims dims = *t->shape;
  dims.insert(dims.begin() + ax, len);
  return tensor_si(t->dtype, std::move(dims));
}

StructInfo infer_scan(const CallNode& call, const InferContext& ctx) {
  Attrs attrs = attrs_of(call);
  const std::string& op = op_name(call);
  const FuncSI& body = body_signature(call);
  bool batched = attrs.get_bool("batched");
  std::vector<StructInfo> init = tuple_arg(call, 1), inputs = tuple_arg(call, 2);
  size_t n = init.size(), m = inputs.size();
  if (m == 0) fail(op, ": needs at least one scan input");
  const std::vector<StructInfo>& params = *body.params;
  if (params.size() != n + m)
    fail(op, ": the body takes ", params.size(), " parameters, expected ", n + m, " (", n, " states and ", m,
         " scan input slices)");
  std::vector<StructInfo> results = body_results(body);
  if (results.size() < n) fail(op, ": the body returns ", results.size(), " values, expected at least ", n);
  size_t k_out = results.size() - n;
  std::vector<int64_t> in_axes = per_operand(op, attrs, "scan_input_axes", m);
  std::vector<int64_t> in_dirs = per_operand(op, attrs, "scan_input_directions", m);
  std::vector<int64_t> out_axes = per_operand(op, attrs, "scan_output_axes", k_out);
  std::vector<int64_t> out_dirs = per_operand(op, attrs, "scan_output_directions", k_out);
  check_directions(op, in_dirs, "scan_input_directions");
  check_directions(op, out_dirs, "scan_output_directions");

  // What the body sees: the states and the slices of the inputs.
  SymExpr batch, len;
  std::vector<StructInfo> seen;
  for (size_t k = 0; k < n; ++k) seen.push_back(strip_batch(op, init[k], batched, cat("state ", k), batch, ctx.ana));
  for (size_t j = 0; j < m; ++j) {
    std::string what = cat("scan input ", j);
    StructInfo item = strip_batch(op, inputs[j], batched, what, batch, ctx.ana);
    SymExpr l;
    seen.push_back(remove_axis(op, item, in_axes[j], what, &l));
    agree(op, len, l, "the scan length", ctx.ana);
  }
  ParamBinding binding(params);
  for (size_t i = 0; i < n + m; ++i) binding.bind(params[i], seen[i]);
  for (size_t i = 0; i < n + m; ++i)
    check_fits(op, binding.apply(params[i]), seen[i], i < n ? cat("state ", i) : cat("a slice of scan input ", i - n),
               ctx.ana);

  auto with_batch = [&](const StructInfo& si) { return batched ? prepend_axis(si, batch) : si; };
  std::vector<StructInfo> out;
  for (size_t k = 0; k < n; ++k) {
    StructInfo result = binding.apply(results[k]);
    check_fits(op, binding.apply(params[k]), result, cat("the body's result for state ", k), ctx.ana);
    out.push_back(with_batch(unify(seen[k], result, ctx.ana)));
  }
  for (size_t k = 0; k < k_out; ++k)
    out.push_back(with_batch(insert_axis(op, binding.apply(results[n + k]), out_axes[k], len, k)));
  return tuple_si(std::move(out));
}

}  // namespace

void register_control_ops(OpRegistry& reg) {
  using T = AttrType;
  reg.add("loop")
      .doc(
          "loop(body, max_trip_count, cond, init): ONNX Loop. With i = 0 and the carried values v = init (a "
          "tuple), while i < max_trip_count and cond: (cond, v..., s...) = body(i, cond, v...); i += 1. "
          "max_trip_count is an integer scalar and cond a bool scalar (rank-0 tensors or Prims); the body takes "
          "(Tensor[(), i64], Tensor[(), bool], v...) and returns the new condition, the new carried values and "
          "K per-iteration values. The result is a tuple of the final carried values followed by the K "
          "per-iteration values of every iteration, each stacked along a new leading axis whose length is the "
          "number of iterations run (unknown statically). No iteration: the carried values are init.")
      .args(4)
      .lowering(OpLowering::VM)
      .infer(infer_loop);
  reg.add("scan")
      .doc(
          "scan(body, init, inputs, scan_input_axes, scan_input_directions, scan_output_axes, "
          "scan_output_directions, batched): ONNX Scan. All scan inputs (a tuple) have the same length T along "
          "their scan axis (scan_input_axes[j], negative from the end). For t in 0..T-1: (s..., y...) = "
          "body(s..., x_j[t]...) where s are the states (starting from the tuple init) and x_j[t] is the slice "
          "of input j at position t (T-1-t when scan_input_directions[j] is 1), the scan axis removed. The "
          "result is a tuple of the final states followed by each per-iteration value y_k stacked along a new "
          "axis scan_output_axes[k] (of the stacked rank; negative from the end), in iteration order or, when "
          "scan_output_directions[k] is 1, reversed. Empty attribute lists mean all 0. With batched (ONNX "
          "Scan-8), every state and input has a leading batch axis that is not part of the body's view: the "
          "scan runs independently for each batch index (axes count without the batch axis) and every result "
          "has the batch axis first.")
      .args(3)
      .attr("scan_input_axes", T::Ints, std::vector<int64_t>{})
      .attr("scan_input_directions", T::Ints, std::vector<int64_t>{})
      .attr("scan_output_axes", T::Ints, std::vector<int64_t>{})
      .attr("scan_output_directions", T::Ints, std::vector<int64_t>{})
      .attr("batched", T::Bool, false)
      .lowering(OpLowering::VM)
      .infer(infer_scan);
}

}  // namespace relax
