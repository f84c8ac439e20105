// Legalisers of the shape-manipulation ops (ir/ops/manipulate.cc): copies
// with index maps. Runtime shapes are bound to fresh variables by a
// match_cast first (the pass does it for operands; reshape's target here).
#include <optional>
#include <algorithm>

#include "ir/ops/common.h"
#include "passes/legalize/legalize.h"
#include "passes/legalize/te.h"

namespace relax {
namespace {

using namespace te;

// The result's struct info with a shape: the call's, or one built from a
// shape argument bound by ctx.bind_shape.
StructInfo shaped_result(LegalizeContext& ctx, const CallNode& call, const Expr& shape_arg, DataType dtype) {
  if (const auto* t = as<TensorSI>(call.sinfo); t && t->shape) return call.sinfo;
  std::optional<std::vector<SymExpr>> dims = ctx.bind_shape(shape_arg);
  if (!dims) return nullptr;
  if (const auto* t = as<TensorSI>(call.sinfo); t && !t->dtype.is_void()) dtype = t->dtype;
  if (dtype.is_void()) return nullptr;
  return tensor_si(dtype, *dims);
}

DataType dtype_of(const Expr& e) {
  if (const auto* t = as<TensorSI>(e->sinfo)) return t->dtype;
  if (const auto* p = as<PrimSI>(e->sinfo)) return p->dtype;
  return DataType::void_();
}

std::optional<Expr> legalize_reshape(LegalizeContext& ctx, const CallNode& call) {
  ProgramBuilder pb(ctx, call, "reshape");
  Buffer x = pb.arg(0, "x");
  if (!pb.known()) return pb.unknown();
  Buffer y = pb.output(shaped_result(ctx, call, call.args[1], x->dtype), "out");
  if (!y) return std::nullopt;
  return pb.finish(compute(y, [&](const Index& i) { return load(x, unflatten(flat_index(i, y->shape), x->shape)); }));
}

constexpr const char* kTranspose = "layout.transpose";

// A permutation that keeps axes [0, k) and swaps the runs [k, j) and [j,
// n): its k and j, else nullopt.
std::optional<std::pair<int, int>> swapped_runs(const std::vector<int>& perm) {
  const int n = int(perm.size());
  int k = 0;
  while (k < n && perm[size_t(k)] == k) ++k;
  if (k >= n - 1) return std::nullopt;
  const int j = perm[size_t(k)];
  for (int a = k; a < n; ++a) {
    const int want = a - k < n - j ? j + (a - k) : k + (a - k - (n - j));
    if (perm[size_t(a)] != want) return std::nullopt;
  }
  return std::pair{k, j};
}

// On the cpu, two runs of axes swapped (NCHW <-> NHWC, a matrix
// transpose, a blocked layout's conversions) of 4-byte elements, neither
// side of the matrices known to be shorter than a tile: batched 2-D
// transposes by the runtime, 16 x 16 tiles through registers
// (runtime/builtins_layout.cc); the loop nest read one side a row apart. A
// short side stays a loop nest, which fuses with the elementwise ops
// around it. (The sizes from the call's operand: a program's buffer names
// its dims afresh.)
std::optional<Expr> library_transpose(LegalizeContext& ctx, const CallNode& call, const std::vector<int>& perm) {
  const auto* xsi = as<TensorSI>(call.args[0]->sinfo);
  if (!ctx.libraries() || !xsi || !xsi->shape || xsi->dtype.bits != 32 || xsi->dtype.lanes != 1) return std::nullopt;
  std::optional<std::pair<int, int>> runs = swapped_runs(perm);
  if (!runs) return std::nullopt;
  auto product = [&](int a, int b) {
    SymExpr p(1);
    for (int d = a; d < b; ++d) p = p * (*xsi->shape)[size_t(d)];
    return ctx.analyzer().simplify(p);
  };
  const SymExpr rows = product(runs->first, runs->second), cols = product(runs->second, int(perm.size()));
  auto short_side = [](const SymExpr& d) { return d.is_const() && d.const_value() < 16; };
  if (short_side(rows) || short_side(cols)) return std::nullopt;
  if (!ctx.module().extern_decl(kTranspose)) ctx.module().add_extern(kTranspose);
  Expr params = make_shape({product(0, runs->first), rows, cols});
  Expr r = make_op_call("call_library", {make_string(kTranspose), make_tuple({call.args[0], params})}, {}, {call.sinfo});
  r->sinfo = call.sinfo;
  return r;
}

std::optional<Expr> legalize_permute_dims(LegalizeContext& ctx, const CallNode& call) {
  ProgramBuilder pb(ctx, call, "permute_dims");
  Buffer x = pb.arg(0, "x"), y = pb.result("out");
  if (!pb.known()) return pb.unknown();
  int n = int(x->shape.size());
  std::vector<int64_t> axes = ops::attrs_of(call).get_ints("axes");
  std::vector<int> perm;
  if (axes.empty()) {
    for (int k = n - 1; k >= 0; --k) perm.push_back(k);
  } else {
    perm = ops::normalize_axes("permute_dims", axes, n);
  }
  if (std::optional<Expr> lib = library_transpose(ctx, call, perm)) return lib;
  return pb.finish(compute(y, [&](const Index& i) {
    Index xi(size_t(n), nullptr);
    for (size_t k = 0; k < perm.size(); ++k) xi[size_t(perm[k])] = i[k];
    return load(x, xi);
  }));
}

// `i` with `off` added at `axis`.
Index shifted(const Index& i, size_t axis, const SymExpr& off) {
  Index o = i;
  o[axis] = o[axis] + idx(off);
  return o;
}

// The result of a concat whose dims were not deduced (the parts' other dims
// are different variables, equal only at run time): each part whose other
// dims are not provably the first part's is match_cast to them (checked at
// run time), and the result has the first part's dims with the sum of the
// parts' dims at `axis`. `parts` is updated to the bound values.
std::optional<StructInfo> unify_concat_parts(LegalizeContext& ctx, std::vector<Expr>& parts, const CallNode& call) {
  const auto* out = as<TensorSI>(call.sinfo);
  if (!out || out->ndim < 0 || out->shape || out->dtype.is_void()) return std::nullopt;
  int ndim = out->ndim;
  size_t axis = size_t(ops::normalize_axis("concat", ops::attrs_of(call).get_int("axis"), ndim));
  std::vector<std::vector<SymExpr>> shapes;
  for (Expr& part : parts) {
    std::optional<Expr> bound = ctx.bind_tensor(part, "part");
    if (!bound) return std::nullopt;
    part = *bound;
    const auto* t = as<TensorSI>(part->sinfo);
    if (!t || !t->shape || t->ndim != ndim) return std::nullopt;
    shapes.push_back(*t->shape);
  }
  std::vector<SymExpr> dims = shapes[0];
  SymExpr total = 0;
  for (size_t k = 0; k < parts.size(); ++k) {
    std::vector<SymExpr> want = dims;
    want[axis] = shapes[k][axis];
    bool same = true;
    for (int d = 0; d < ndim; ++d) same = same && ctx.analyzer().can_prove_equal(shapes[k][size_t(d)], want[size_t(d)]);
    if (!same) parts[k] = ctx.emit_match_cast(parts[k], tensor_si(dtype_of(parts[k]), want), "part");
    total = total + shapes[k][axis];
  }
  dims[axis] = total;
  return tensor_si(out->dtype, dims);
}

std::optional<Expr> legalize_concat(LegalizeContext& ctx, const CallNode& call) {
  ProgramBuilder pb(ctx, "concat");
  std::optional<std::vector<Expr>> fields = ctx.tuple_fields(call.args[0], "part");
  if (!fields || fields->empty()) return std::nullopt;
  StructInfo out_si = call.sinfo;
  if (std::optional<StructInfo> si = unify_concat_parts(ctx, *fields, call)) out_si = *si;
  std::vector<Buffer> ins;
  for (size_t k = 0; k < fields->size(); ++k) {
    Buffer b = pb.input((*fields)[k], "x" + std::to_string(k));
    if (!b) return std::nullopt;
    ins.push_back(b);
  }
  Buffer y = pb.output(out_si, "out");
  if (!y) return std::nullopt;
  size_t axis = size_t(ops::normalize_axis("concat", ops::attrs_of(call).get_int("axis"), int(y->shape.size())));
  std::vector<Stmt> parts;
  SymExpr off = 0;
  for (const Buffer& in : ins) {
    parts.push_back(
        loop_nest(in->shape, [&](const Index& i) { return tir::make_store(y, shifted(i, axis, off), load(in, i)); }));
    off = off + in->shape[axis];
  }
  // concat_axis: passes may read the program as the concat it is
  // (fuse-concat-into-conv lets a convolution read the parts instead).
  return pb.finish(tir::make_seq(parts), "", Attrs{{"concat_axis", int64_t(axis)}});
}

std::optional<Expr> legalize_split(LegalizeContext& ctx, const CallNode& call) {
  ProgramBuilder pb(ctx, "split");
  Buffer x = pb.input(call.args[0], "x");
  const auto* t = as<TupleSI>(call.sinfo);
  if (!x || !t) return std::nullopt;
  std::vector<Buffer> outs;
  for (size_t k = 0; k < t->fields.size(); ++k) {
    Buffer b = pb.output(t->fields[k], "out" + std::to_string(k));
    if (!b) return std::nullopt;
    outs.push_back(b);
  }
  size_t axis = size_t(ops::normalize_axis("split", ops::attrs_of(call).get_int("axis"), int(x->shape.size())));
  std::vector<Stmt> parts;
  SymExpr off = 0;
  for (const Buffer& out : outs) {
    parts.push_back(compute(out, [&](const Index& i) { return load(x, shifted(i, axis, off)); }));
    off = off + out->shape[axis];
  }
  Expr r = pb.finish(tir::make_seq(parts));
  // One part (an ONNX Split with one output): the program's one output is
  // a tensor, the split's value still a tuple of it.
  if (outs.size() == 1) return make_tuple({ctx.emit(r, "split")});
  return r;
}

std::optional<Expr> legalize_strided_slice(LegalizeContext& ctx, const CallNode& call) {
  ProgramBuilder pb(ctx, call, "strided_slice");
  Buffer x = pb.arg(0, "x"), y = pb.result("out");
  if (!pb.known()) return pb.unknown();
  Attrs attrs = ops::attrs_of(call);
  std::vector<int> axes = ops::normalize_axes("strided_slice", attrs.get_ints("axes"), int(x->shape.size()));
  std::vector<SymExpr> begin = ops::get_syms(attrs, "begin");
  std::vector<int64_t> strides = attrs.get_ints("strides");
  if (strides.empty()) strides.assign(axes.size(), 1);
  std::vector<SymExpr> start(x->shape.size(), SymExpr(0));
  std::vector<int64_t> step(x->shape.size(), 1);
  for (size_t k = 0; k < axes.size(); ++k) {
    size_t a = size_t(axes[k]);
    const SymExpr& d = x->shape[a];
    SymExpr b = pb.sym(begin[k]);
    // numpy clamping of the first element: [0, d] going up, [0, d - 1] going down.
    start[a] = strides[k] > 0 ? min(b, d) : min(b, d - 1);
    step[a] = strides[k];
  }
  return pb.finish(compute(y, [&](const Index& i) {
    Index xi;
    for (size_t a = 0; a < i.size(); ++a) xi.push_back(idx(start[a]) + i[a] * idx(step[a]));
    return load(x, xi);
  }));
}

// Copies where the result's index drops (squeeze) or gains (expand_dims)
// unit axes: `keep[a]` says whether the bigger tensor's axis a is one of
// the smaller's.
std::optional<Expr> legalize_unit_axes(LegalizeContext& ctx, const CallNode& call, bool expand) {
  const std::string& op = ops::op_name(call);
  ProgramBuilder pb(ctx, call, op);
  Buffer x = pb.arg(0, "x"), y = pb.result("out");
  if (!pb.known()) return pb.unknown();
  const Buffer& big = expand ? y : x;
  int n = int(big->shape.size());
  std::vector<int64_t> axes = ops::attrs_of(call).get_ints("axis");
  std::vector<bool> unit(size_t(n), false);
  if (axes.empty()) {
    for (int a = 0; a < n; ++a) unit[size_t(a)] = big->shape[size_t(a)].is_const(1);
  } else {
    for (int a : ops::normalize_axes(op, axes, n)) unit[size_t(a)] = true;
  }
  size_t small = size_t(std::count(unit.begin(), unit.end(), false));
  if (small != (expand ? x : y)->shape.size()) return std::nullopt;
  return pb.finish(compute(y, [&](const Index& i) {
    Index xi;
    size_t next = 0;
    for (int a = 0; a < n; ++a) {
      if (expand) {
        if (!unit[size_t(a)]) xi.push_back(i[size_t(a)]);
      } else {
        xi.push_back(unit[size_t(a)] ? idx(0) : i[next++]);
      }
    }
    return load(x, xi);
  }));
}

std::optional<Expr> legalize_squeeze(LegalizeContext& ctx, const CallNode& call) {
  return legalize_unit_axes(ctx, call, false);
}
std::optional<Expr> legalize_expand_dims(LegalizeContext& ctx, const CallNode& call) {
  return legalize_unit_axes(ctx, call, true);
}

std::optional<Expr> legalize_broadcast_to(LegalizeContext& ctx, const CallNode& call) {
  ProgramBuilder pb(ctx, call, "broadcast_to");
  Buffer x = pb.arg(0, "x");
  if (!pb.known()) return pb.unknown();
  Buffer y = pb.output(shaped_result(ctx, call, call.args[1], x->dtype), "out");
  if (!y) return std::nullopt;
  return pb.finish(compute(y, [&](const Index& i) { return load_bcast(x, i, y); }));
}

std::optional<Expr> legalize_take(LegalizeContext& ctx, const CallNode& call) {
  ProgramBuilder pb(ctx, call, "take");
  Buffer x = pb.arg(0, "x");
  if (!pb.known()) return pb.unknown();
  Buffer ind;
  std::optional<TExpr> scalar;
  if (as<TensorSI>(call.args[1]->sinfo)) {
    ind = pb.input(call.args[1], "indices");
    if (!ind) return std::nullopt;
  } else {
    scalar = pb.scalar(call.args[1], DataType::i64());
    if (!scalar) return std::nullopt;
  }
  Buffer y = pb.output(call.sinfo, "out");
  if (!y) return std::nullopt;
  size_t axis = size_t(ops::normalize_axis("take", ops::attrs_of(call).get_int("axis"), int(x->shape.size())));
  size_t r = ind ? ind->shape.size() : 0;
  // An index out of range fails the run (as ONNX Runtime does); the gather itself clamps.
  if (!pb.check_indices(x, ind, "Gather", {int64_t(axis)}, ind ? nullptr : *scalar)) return std::nullopt;
  return pb.finish(compute(y, [&](const Index& i) {
    TExpr at = ind ? load(ind, Index(i.begin() + long(axis), i.begin() + long(axis + r))) : *scalar;
    Index xi(i.begin(), i.begin() + long(axis));
    xi.push_back(wrap_clamp_index(at, x->shape[axis]));
    xi.insert(xi.end(), i.begin() + long(axis + r), i.end());
    return load(x, xi);
  }));
}

// full / zeros / ones: the result filled with one value.
std::optional<Expr> legalize_fill(LegalizeContext& ctx, const CallNode& call) {
  const std::string& op = ops::op_name(call);
  DataType dtype = ops::attrs_of(call).get_dtype("dtype");
  if (op == "full" && dtype.is_void()) dtype = dtype_of(call.args[1]);
  ProgramBuilder pb(ctx, op);
  Buffer fill;
  std::optional<TExpr> scalar;
  if (op == "full") {
    if (as<TensorSI>(call.args[1]->sinfo)) {
      fill = pb.input(call.args[1], "value");
      if (!fill || !fill->shape.empty()) return std::nullopt;
    } else {
      DataType pt = dtype_of(call.args[1]);
      if (pt.is_void()) return std::nullopt;
      scalar = pb.scalar(call.args[1], pt);
      if (!scalar) return std::nullopt;
    }
  }
  Buffer y = pb.output(shaped_result(ctx, call, call.args[0], dtype), "out");
  if (!y) return std::nullopt;
  DataType t = y->dtype;
  return pb.finish(compute(y, [&](const Index&) {
    if (op == "zeros") return zero(t);
    if (op == "ones") return one(t);
    TExpr v = fill ? load(fill, {}) : *scalar;
    if (t.is_bool() && !v->dtype.is_bool()) return ne(v, zero(v->dtype));
    return cast(t, v);
  }));
}

}  // namespace

void register_manipulate_legalizers(LegalizerRegistry& reg) {
  reg.add("reshape", legalize_reshape);
  reg.add("permute_dims", legalize_permute_dims);
  reg.add("concat", legalize_concat);
  reg.add("split", legalize_split);
  reg.add("strided_slice", legalize_strided_slice);
  reg.add("squeeze", legalize_squeeze);
  reg.add("expand_dims", legalize_expand_dims);
  reg.add("broadcast_to", legalize_broadcast_to);
  reg.add("take", legalize_take);
  for (const char* op : {"full", "zeros", "ones"}) reg.add(op, legalize_fill);
}

}  // namespace relax
