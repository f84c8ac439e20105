// Legalisers of the ops along one axis (ir/ops/scan_sort.cc): cumsum,
// cumprod and hardmax. topk and non_max_suppression sort, so they are
// runtime builtins (dynamic.cc). Accumulation is in f32 for narrow floats.
#include <string>

#include "ir/ops/common.h"
#include "passes/legalize/legalize.h"
#include "passes/legalize/te.h"

namespace relax {
namespace {

using namespace te;
using tir::BinOp;
using tir::Intrinsic;

// Every dim but `axis`.
std::vector<SymExpr> drop_axis(const std::vector<SymExpr>& shape, size_t axis) {
  std::vector<SymExpr> out;
  for (size_t j = 0; j < shape.size(); ++j)
    if (j != axis) out.push_back(shape[j]);
  return out;
}

// The full index from the index over every dim but `axis`, and `v` at axis.
Index insert_axis(const Index& o, size_t axis, const TExpr& v) {
  Index i(o.begin(), o.begin() + std::ptrdiff_t(axis));
  i.push_back(v);
  i.insert(i.end(), o.begin() + std::ptrdiff_t(axis), o.end());
  return i;
}

// ---- cumsum, cumprod, hardmax --------------------------------------------------------------

std::optional<Expr> legalize_cumulative(LegalizeContext& ctx, const CallNode& call) {
  const std::string& op = ops::op_name(call);
  Attrs attrs = ops::attrs_of(call);
  bool sum = op == "cumsum", exclusive = attrs.get_bool("exclusive"), reverse = attrs.get_bool("reverse");
  ProgramBuilder pb(ctx, call, op);
  Buffer x = pb.arg(0, "x"), axis_buf = pb.arg(1, "axis"), y = pb.result("out");
  if (!pb.known()) return pb.unknown();
  DataType t = x->dtype, acc = compute_dtype(t);
  if (t.is_bool()) return std::nullopt;
  Reducer red = sum ? sum_reducer(acc) : prod_reducer(acc);
  size_t r = x->shape.size();

  if (!axis_buf) {
    size_t axis = size_t(ops::normalize_axis(op, attrs.get_int("axis"), int(r)));
    SymExpr len = x->shape[axis];
    LoopHints hints{true, false, len};
    return pb.finish(loop_nest(
        drop_axis(x->shape, axis),
        [&](const Index& o) {
          Local a = local("acc", acc);
          Stmt scan = loop_nest(
              {len},
              [&](const Index& k) {
                TExpr pos = reverse ? idx(len) - idx(1) - k[0] : k[0];
                Index i = insert_axis(o, axis, pos);
                Stmt add = a.set(red.combine(a.get(), cast(acc, load(x, i))));
                Stmt store = tir::make_store(y, i, cast(t, a.get()));
                return exclusive ? tir::make_seq({store, add}) : tir::make_seq({add, store});
              },
              LoopHints{false, false, 1}, "k");
          return with_locals({a}, tir::make_seq({a.set(red.init), scan}));
        },
        hints));
  }
  // The axis read at run time: each element combines the elements of its
  // line up to it, the line walked over the largest dim with clamped
  // (never out of bounds) coordinates.
  SymExpr longest = 1;
  for (const SymExpr& d : x->shape) longest = max(longest, d);
  Index zeros(axis_buf->shape.size(), idx(0));
  TExpr a0 = as_index(load(axis_buf, zeros));
  TExpr axis = select(lt(a0, idx(0)), a0 + idx(int64_t(r)), a0);
  return pb.finish(compute_reduce(
      y, {longest}, red,
      [&](const Index& i, const Index& k) {
        TExpr at = idx(0);  // i's coordinate on the axis
        for (size_t j = 0; j < r; ++j) at = select(eq(axis, idx(int64_t(j))), i[j], at);
        Index xi;
        TExpr in_line = tir::imm_int(DataType::boolean(), 0);
        for (size_t j = 0; j < r; ++j) {
          TExpr on = eq(axis, idx(int64_t(j)));
          xi.push_back(select(on, min_(k[0], idx(x->shape[j]) - idx(1)), i[j]));
          in_line = or_(in_line, and_(on, lt(k[0], idx(x->shape[j]))));
        }
        TExpr take = reverse ? (exclusive ? gt(k[0], at) : ge(k[0], at)) : (exclusive ? lt(k[0], at) : le(k[0], at));
        return select(and_(in_line, take), cast(acc, load(x, xi)), red.init);
      },
      [&](const Index&, const TExpr& a) { return cast(t, a); }));
}

std::optional<Expr> legalize_hardmax(LegalizeContext& ctx, const CallNode& call) {
  ProgramBuilder pb(ctx, call, "hardmax");
  Buffer x = pb.arg(0, "x"), y = pb.result("out");
  if (!pb.known()) return pb.unknown();
  size_t axis = size_t(ops::normalize_axis("hardmax", ops::attrs_of(call).get_int("axis"), int(x->shape.size())));
  SymExpr len = x->shape[axis];
  DataType t = x->dtype;
  return pb.finish(loop_nest(
      drop_axis(x->shape, axis),
      [&](const Index& o) {
        Local best = local("best", t), at = local("at", DataType::i64());
        Stmt scan = loop_nest(
            {len},
            [&](const Index& k) {
              TExpr v = load(x, insert_axis(o, axis, k[0]));
              TExpr better = gt(v, best.get());
              if (t.is_float())  // the first NaN wins, as numpy's argmax
                better = or_(better, and_(intrin(Intrinsic::isnan, v), not_(intrin(Intrinsic::isnan, best.get()))));
              better = or_(eq(k[0], idx(0)), better);
              return tir::make_seq({at.set(select(better, k[0], at.get())), best.set(select(better, v, best.get()))});
            },
            LoopHints{false, false, 1}, "k");
        Stmt write = loop_nest(
            {len},
            [&](const Index& k) {
              return tir::make_store(y, insert_axis(o, axis, k[0]), select(eq(k[0], at.get()), one(t), zero(t)));
            },
            LoopHints{false, false, 1}, "k");
        return with_locals({best, at}, tir::make_seq({at.set(idx(0)), best.set(min_value(t)), scan, write}));
      },
      LoopHints{true, false, len * 2}));
}

}  // namespace

void register_scan_sort_legalizers(LegalizerRegistry& reg) {
  reg.add("cumsum", legalize_cumulative);
  reg.add("cumprod", legalize_cumulative);
  reg.add("hardmax", legalize_hardmax);
}

}  // namespace relax
