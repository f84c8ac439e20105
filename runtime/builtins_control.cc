// Builtins for functions as values and for ONNX Loop and Scan: the VM runs
// the iterations and calls the body (compiled kernels do the work inside);
// what these builtins add is slicing the scan inputs and stacking the
// per-iteration outputs, which is data movement only.
#include <algorithm>
#include <cstring>

#include "runtime/builtin_util.h"
#include "runtime/compare.h"
#include "runtime/error.h"
#include "runtime/vm.h"

namespace relax::rt {
namespace {

Tensor scalar_tensor(DType d, int64_t v, PoolAllocator* pool) {
  Tensor t = Tensor::empty(d, {}, pool);
  if (d == DType::i64())
    t.data_as<int64_t>()[0] = v;
  else
    t.data_as<uint8_t>()[0] = uint8_t(v != 0);
  return t;
}

// x[..., index, ...] along `axis`, the axis removed (a copy).
Tensor slice_along(const Tensor& x, int axis, int64_t index, PoolAllocator* pool) {
  std::vector<int64_t> shape = x.shape();
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= shape[size_t(i)];
  for (size_t i = size_t(axis) + 1; i < shape.size(); ++i) inner *= shape[i];
  int64_t len = shape[size_t(axis)];
  shape.erase(shape.begin() + axis);
  Tensor out = Tensor::empty(x.dtype(), shape, pool);
  size_t eb = elem_bytes(x, "loop/scan"), chunk = size_t(inner) * eb;
  const char* src = static_cast<const char*>(x.data());
  char* dst = static_cast<char*>(out.data());
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(dst + size_t(o) * chunk, src + size_t(o * len + index) * chunk, chunk);
  return out;
}

// The parts stacked along a new axis `axis`; all parts share one shape.
Tensor stack(const std::vector<Tensor>& parts, int axis, PoolAllocator* pool, const char* what) {
  const Tensor& first = parts.at(0);
  for (const Tensor& p : parts)
    if (p.shape() != first.shape() || !(p.dtype() == first.dtype()))
      rt_fail(what, ": iterations produced ", first.type_str(), " and ", p.type_str(),
              "; they must agree to be stacked");
  std::vector<int64_t> shape = first.shape();
  if (axis < 0 || axis > int(shape.size())) rt_fail(what, ": axis ", axis, " out of range");
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= shape[size_t(i)];
  for (size_t i = size_t(axis); i < shape.size(); ++i) inner *= shape[i];
  int64_t len = int64_t(parts.size());
  shape.insert(shape.begin() + axis, len);
  Tensor out = Tensor::empty(first.dtype(), shape, pool);
  size_t chunk = size_t(inner) * elem_bytes(first, "loop/scan");
  char* dst = static_cast<char*>(out.data());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < len; ++k)
      std::memcpy(dst + size_t(o * len + k) * chunk,
                  static_cast<const char*>(parts[size_t(k)].data()) + size_t(o) * chunk, chunk);
  return out;
}

std::vector<Value> results_of(const Value& r) {
  if (r.is_tuple()) return r.tuple();
  return {r};
}

// make_closure(function index, captured...)
void make_closure(BuiltinCall& c) {
  auto obj = std::make_shared<ClosureObj>();
  obj->function = int(c.arg(0).int_value());
  if (obj->function < 0 || size_t(obj->function) >= c.vm.exe().functions.size())
    rt_fail("make_closure: no function #", obj->function);
  for (size_t i = 1; i < c.num_args; ++i) obj->captured.push_back(*c.args[i]);
  c.out = Closure(std::move(obj));
}

// call_closure(closure, args...)
void call_closure(BuiltinCall& c) {
  std::vector<Value> args;
  for (size_t i = 1; i < c.num_args; ++i) args.push_back(*c.args[i]);
  c.out = c.vm.call(c.arg(0), std::move(args));
}

// loop(body, max_trip_count, cond, init tuple, scan-output dtypes)
void loop(BuiltinCall& c) {
  int64_t trip = scalar_int(c.arg(1), "Loop's max trip count");
  bool cond = scalar_int(c.arg(2), "Loop's condition") != 0;
  std::vector<Value> carried = c.arg(3).tuple("Loop's initial values");
  const std::vector<int64_t>& scan_dtypes = c.arg(4).shape("Loop's scan output dtypes");
  std::vector<std::vector<Tensor>> scans(scan_dtypes.size());
  PoolAllocator* pool = c.vm.pool();
  for (int64_t i = 0; i < trip && cond; ++i) {
    std::vector<Value> args{scalar_tensor(DType::i64(), i, pool), scalar_tensor(DType::boolean(), 1, pool)};
    args.insert(args.end(), carried.begin(), carried.end());
    std::vector<Value> r = results_of(c.vm.call(c.arg(0), std::move(args)));
    if (r.size() != 1 + carried.size() + scans.size())
      rt_fail("Loop's body returned ", r.size(), " values, expected ", 1 + carried.size() + scans.size());
    cond = scalar_int(r[0], "Loop's condition") != 0;
    for (size_t k = 0; k < carried.size(); ++k) carried[k] = r[1 + k];
    for (size_t k = 0; k < scans.size(); ++k)
      scans[k].push_back(r[1 + carried.size() + k].tensor("a Loop scan output"));
  }
  std::vector<Value> out = carried;
  for (size_t k = 0; k < scans.size(); ++k) {
    if (scans[k].empty())
      out.emplace_back(Tensor::empty(DType::unpack(scan_dtypes[k]), {0}, pool));
    else
      out.emplace_back(stack(scans[k], 0, pool, "Loop's scan output"));
  }
  c.out = make_tuple(std::move(out));
}

int norm_axis(int64_t axis, int rank, const char* what) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) rt_fail(what, ": axis ", axis, " out of range for rank ", rank);
  return int(a);
}

// One unbatched scan.
std::vector<Value> scan_once(BuiltinCall& c, std::vector<Value> states, const std::vector<Tensor>& inputs,
                             const std::vector<int64_t>& in_axes, const std::vector<int64_t>& in_dirs,
                             const std::vector<int64_t>& out_axes, const std::vector<int64_t>& out_dirs) {
  PoolAllocator* pool = c.vm.pool();
  int64_t len = -1;
  std::vector<int> axes;
  for (size_t j = 0; j < inputs.size(); ++j) {
    int ax = norm_axis(j < in_axes.size() ? in_axes[j] : 0, inputs[j].ndim(), "Scan input");
    axes.push_back(ax);
    int64_t l = inputs[j].dim(ax);
    if (len >= 0 && l != len) rt_fail("Scan: input ", j, " has ", l, " steps, input 0 has ", len);
    len = l;
  }
  std::vector<std::vector<Tensor>> outs;
  for (int64_t t = 0; t < len; ++t) {
    std::vector<Value> args = states;
    for (size_t j = 0; j < inputs.size(); ++j) {
      bool rev = j < in_dirs.size() && in_dirs[j] == 1;
      args.emplace_back(slice_along(inputs[j], axes[j], rev ? len - 1 - t : t, pool));
    }
    std::vector<Value> r = results_of(c.vm.call(c.arg(0), std::move(args)));
    if (r.size() < states.size())
      rt_fail("Scan's body returned ", r.size(), " values, expected at least ", states.size());
    for (size_t k = 0; k < states.size(); ++k) states[k] = r[k];
    if (outs.empty()) outs.resize(r.size() - states.size());
    for (size_t k = 0; k < outs.size(); ++k) outs[k].push_back(r[states.size() + k].tensor("a Scan output"));
  }
  std::vector<Value> result = states;
  for (size_t k = 0; k < outs.size(); ++k) {
    if (k < out_dirs.size() && out_dirs[k] == 1) std::reverse(outs[k].begin(), outs[k].end());
    int ax = norm_axis(k < out_axes.size() ? out_axes[k] : 0, outs[k][0].ndim() + 1, "Scan output");
    result.emplace_back(stack(outs[k], ax, pool, "Scan output"));
  }
  return result;
}

// scan(body, init tuple, inputs tuple, in_axes, in_dirs, out_axes, out_dirs, batched)
void scan(BuiltinCall& c) {
  std::vector<Value> states = c.arg(1).tuple("Scan's initial states");
  std::vector<Tensor> inputs;
  for (const Value& v : c.arg(2).tuple("Scan's inputs")) inputs.push_back(v.tensor("a Scan input"));
  const auto& in_axes = c.arg(3).shape();
  const auto& in_dirs = c.arg(4).shape();
  const auto& out_axes = c.arg(5).shape();
  const auto& out_dirs = c.arg(6).shape();
  bool batched = c.arg(7).int_value() != 0;
  if (inputs.empty()) rt_fail("Scan needs at least one input");
  if (!batched) {
    c.out = make_tuple(scan_once(c, states, inputs, in_axes, in_dirs, out_axes, out_dirs));
    return;
  }
  // Scan-8: a leading batch axis on every state and input, scanned independently.
  int64_t batch = inputs[0].dim(0);
  std::vector<std::vector<Tensor>> per_result;
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<Value> st;
    for (const Value& s : states) st.emplace_back(slice_along(s.tensor("a Scan state"), 0, b, c.vm.pool()));
    std::vector<Tensor> in;
    for (const Tensor& x : inputs) in.push_back(slice_along(x, 0, b, c.vm.pool()));
    std::vector<Value> r = scan_once(c, st, in, in_axes, in_dirs, out_axes, out_dirs);
    if (per_result.empty()) per_result.resize(r.size());
    for (size_t k = 0; k < r.size(); ++k) per_result[k].push_back(r[k].tensor("a Scan result"));
  }
  std::vector<Value> out;
  for (auto& parts : per_result) out.emplace_back(stack(parts, 0, c.vm.pool(), "Scan result"));
  c.out = make_tuple(std::move(out));
}

}  // namespace

void register_control_builtins() {
  register_builtin("relax.make_closure", make_closure, /*touches_data=*/false);
  register_builtin("relax.call_closure", call_closure);
  register_builtin("relax.loop", loop);
  register_builtin("relax.scan", scan);
}

}  // namespace relax::rt
