// Legalisers of the data-dependent ops: the work that is sorting or
// compaction calls a runtime builtin (runtime/builtins_data.cc) through
// call_builtin; the ops whose dims depend on tensor values get their
// parameters from a builtin and do the data work in a tensor program.
//
//   topk, nonzero, unique, non_max_suppression
//       call_pure_builtin("relax.<op>", (operands..., attributes as prims)); a
//       result whose dims are known only at run time is bound by the
//       match_cast that follows the op (the importer emits it).
//   reduce_dynamic
//       call_pure_builtin("relax.reduce_dynamic_params") gives the reduced shape
//       with unit dims k, the reduction extents e and the result dims o,
//       bound by a match_cast; the program reduces x[i + r] over r < e for
//       every i < k (k, e sym_params) and writes the flat position of i.
//   list_at, list_insert, list_erase, list_length, list_split, list_concat
//       call_pure_builtin("relax.list_<op>", (operands..., attributes as
//       prims)): lists are VM tuples, built and read by the runtime.
//   dynamic_strided_slice
//       call_pure_builtin("relax.slice_params") gives the result dims n, the first
//       index b and the step p - m per dim (ONNX Slice's clamping done
//       there); the program copies out[i] = x[b + i * p - i * m].
#include <string>
#include <vector>

#include "ir/ops/common.h"
#include "passes/legalize/legalize.h"
#include "passes/legalize/te.h"

namespace relax {
namespace {

using namespace te;

int rank_of(const Expr& e) {
  const auto* t = as<TensorSI>(e->sinfo);
  return t ? t->ndim : -1;
}

std::optional<Expr> legalize_topk(LegalizeContext& ctx, const CallNode& call) {
  Attrs attrs = ops::attrs_of(call);
  SymExpr k = ops::get_sym(attrs, "k");
  if (!k.defined() || rank_of(call.args[0]) < 1) return std::nullopt;
  return ctx.call_pure_builtin("relax.topk",
                               {call.args[0], make_prim_int(k), make_prim_int(attrs.get_int("axis")),
                                make_prim_bool(attrs.get_bool("largest")), make_prim_bool(attrs.get_bool("sorted"))},
                               call.sinfo);
}

std::optional<Expr> legalize_nonzero(LegalizeContext& ctx, const CallNode& call) {
  return ctx.call_pure_builtin("relax.nonzero", {call.args[0]}, call.sinfo);
}

std::optional<Expr> legalize_unique(LegalizeContext& ctx, const CallNode& call) {
  Attrs attrs = ops::attrs_of(call);
  return ctx.call_pure_builtin(
      "relax.unique", {call.args[0], make_prim_int(attrs.get_int("axis")), make_prim_bool(attrs.get_bool("sorted"))},
      call.sinfo);
}

std::optional<Expr> legalize_nms(LegalizeContext& ctx, const CallNode& call) {
  std::vector<Expr> args{call.args[0], call.args[1], make_prim_int(ops::attrs_of(call).get_int("center_point_box"))};
  args.insert(args.end(), call.args.begin() + 2, call.args.end());
  return ctx.call_pure_builtin("relax.non_max_suppression", std::move(args), call.sinfo);
}

// ---- reduce_dynamic ------------------------------------------------------------------

std::optional<Expr> legalize_reduce_dynamic(LegalizeContext& ctx, const CallNode& call) {
  Attrs attrs = ops::attrs_of(call);
  std::string kind = attrs.get_string("kind");
  bool keepdims = attrs.get_bool("keepdims");
  int r = rank_of(call.args[0]);
  const auto* out_si = as<TensorSI>(call.sinfo);
  if (r < 0 || !out_si || out_si->ndim < 0) return std::nullopt;
  int m = out_si->ndim;
  if (keepdims && m != r) return std::nullopt;
  DataType t = out_si->dtype, acc = compute_dtype(t);
  if (t.is_bool() && kind != "max" && kind != "min") return std::nullopt;
  if (t.is_bool()) acc = DataType::u(8);  // max = any, min = all

  Expr params = ctx.call_pure_builtin(
      "relax.reduce_dynamic_params",
      {call.args[0], call.args[1], make_prim_bool(attrs.get_bool("noop_with_empty_axes")), make_prim_bool(keepdims)},
      shape_si_ndim(2 * r + (keepdims ? 0 : m)));
  std::vector<SymExpr> p = *ctx.bind_shape(params, "reduce_p");
  std::vector<SymExpr> kept(p.begin(), p.begin() + r), ext(p.begin() + r, p.begin() + 2 * r);
  std::vector<SymExpr> dims = keepdims ? kept : std::vector<SymExpr>(p.begin() + 2 * r, p.end());

  ProgramBuilder pb(ctx, "reduce_dynamic_" + kind);
  Buffer x = pb.input(call.args[0], "x");
  Buffer y = pb.output(tensor_si(t, dims), "out");
  if (!x || !y) return std::nullopt;
  std::vector<SymExpr> k, e;
  for (int j = 0; j < r; ++j) {
    k.push_back(pb.sym(kept[size_t(j)]));
    e.push_back(pb.sym(ext[size_t(j)]));
  }
  Reducer red = kind == "max"    ? max_reducer(acc)
                : kind == "min"  ? min_reducer(acc)
                : kind == "prod" ? prod_reducer(acc)
                                 : sum_reducer(acc);
  SymExpr count = num_elements(e);
  LoopHints hints{true, false, count};
  Stmt body = loop_nest(
      k,
      [&](const Index& i) {
        Local a = local("acc", acc);
        Stmt sum = accumulate(
            a, e,
            [&](const Index& rr) {
              Index in;
              for (int j = 0; j < r; ++j) in.push_back(i[size_t(j)] + rr[size_t(j)]);
              return cast(acc, load(x, in));
            },
            red.combine);
        TExpr v = a.get();
        if (kind == "mean") {
          TExpr n = from_index(acc, count);
          v = acc.is_float() ? v / n : tir::binary(tir::BinOp::Div, v, max_(n, one(acc)));
        }
        Index at = keepdims ? i : unflatten(flat_index(i, k), y->shape);
        return with_locals({a}, tir::make_seq({a.set(red.init), sum, tir::make_store(y, at, cast(t, v))}));
      },
      hints);
  return pb.finish(body);
}

// ---- dynamic_strided_slice ---------------------------------------------------------------

std::optional<Expr> legalize_dynamic_strided_slice(LegalizeContext& ctx, const CallNode& call) {
  int r = rank_of(call.args[0]);
  const auto* out_si = as<TensorSI>(call.sinfo);
  if (r < 0 || !out_si) return std::nullopt;
  std::vector<Expr> args(call.args.begin(), call.args.end());
  Expr params = ctx.call_pure_builtin("relax.slice_params", args, shape_si_ndim(4 * r));
  std::vector<SymExpr> p = *ctx.bind_shape(params, "slice_p");

  ProgramBuilder pb(ctx, "dynamic_strided_slice");
  Buffer x = pb.input(call.args[0], "x");
  Buffer y = pb.output(tensor_si(out_si->dtype, std::vector<SymExpr>(p.begin(), p.begin() + r)), "out");
  if (!x || !y) return std::nullopt;
  std::vector<SymExpr> b, up, down;
  for (int j = 0; j < r; ++j) {
    b.push_back(pb.sym(p[size_t(r + j)]));
    up.push_back(pb.sym(p[size_t(2 * r + j)]));
    down.push_back(pb.sym(p[size_t(3 * r + j)]));
  }
  return pb.finish(compute(y, [&](const Index& i) {
    Index in;
    for (size_t j = 0; j < size_t(r); ++j) in.push_back(idx(b[j]) + i[j] * idx(up[j]) - i[j] * idx(down[j]));
    return load(x, in);
  }));
}

// ---- bitcast ------------------------------------------------------------------------

// The same bytes read as another dtype of the same width: a view the
// runtime makes without copying (relax.reinterpret), not a loop nest.
std::optional<Expr> legalize_bitcast(LegalizeContext& ctx, const CallNode& call) {
  const auto* out = as<TensorSI>(call.sinfo);
  if (!out || !as<TensorSI>(call.args[0]->sinfo)) return std::nullopt;
  DataType d = out->dtype;
  int64_t packed = int64_t(d.code) | int64_t(d.bits) << 8 | int64_t(d.lanes) << 16;
  return ctx.call_pure_builtin("relax.reinterpret", {call.args[0], make_prim_int(packed)}, call.sinfo);
}

// ---- lists (ONNX sequences) ----------------------------------------------------------

// list_<op>(args...) -> relax.list_<op>(args..., attributes as prims).
std::optional<Expr> legalize_list(LegalizeContext& ctx, const CallNode& call) {
  const std::string& op = ops::op_name(call);
  std::vector<Expr> args(call.args.begin(), call.args.end());
  Attrs attrs = ops::attrs_of(call);
  if (op == "list_split") {
    args.insert(args.begin() + 1, {make_prim_int(attrs.get_int("axis")), make_prim_bool(attrs.get_bool("keepdims"))});
  } else if (op == "list_concat") {
    args.push_back(make_prim_int(attrs.get_int("axis")));
    args.push_back(make_prim_bool(attrs.get_bool("new_axis")));
  }
  return ctx.call_pure_builtin("relax." + op, std::move(args), call.sinfo);
}

}  // namespace

void register_dynamic_legalizers(LegalizerRegistry& reg) {
  for (const char* op : {"list_at", "list_insert", "list_erase", "list_length", "list_split", "list_concat"})
    reg.add(op, legalize_list);
  reg.add("bitcast", legalize_bitcast);
  reg.add("topk", legalize_topk);
  reg.add("nonzero", legalize_nonzero);
  reg.add("unique", legalize_unique);
  reg.add("non_max_suppression", legalize_nms);
  reg.add("reduce_dynamic", legalize_reduce_dynamic);
  reg.add("dynamic_strided_slice", legalize_dynamic_strided_slice);
}

}  // namespace relax
