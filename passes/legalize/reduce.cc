// Legalisers of the reductions (ir/ops/reduce.cc): sum, mean, max, min,
// prod, argmax, argmin, softmax, log_softmax and layer_norm. Narrow floats
// (f16, bf16, f8) accumulate in f32. reduce_dynamic (axes read at run time)
// is left to the VM lowering.
#include <algorithm>

#include "ir/ops/common.h"
#include "passes/legalize/legalize.h"
#include "passes/legalize/te.h"

namespace relax {
namespace {

using namespace te;
using tir::Intrinsic;
using tir::LoopKind;

// Which axes of a rank-n tensor are reduced (none listed: all).
std::vector<bool> reduced_axes(const std::string& op, const std::vector<int64_t>& axes, int n) {
  std::vector<bool> red(size_t(n), axes.empty());
  for (int a : ops::normalize_axes(op, axes, n)) red[size_t(a)] = true;
  return red;
}

// The input index from an output index (with or without the kept unit
// dims) and the reduction index (the reduced axes in increasing order).
Index input_index(const std::vector<bool>& red, bool keepdims, const Index& out, const Index& r) {
  Index in;
  size_t o = 0, k = 0;
  for (size_t j = 0; j < red.size(); ++j) {
    if (red[j]) {
      in.push_back(r[k++]);
      if (keepdims) ++o;
    } else {
      in.push_back(out[o++]);
    }
  }
  return in;
}

std::vector<SymExpr> reduced_extents(const Buffer& x, const std::vector<bool>& red) {
  std::vector<SymExpr> ext;
  for (size_t j = 0; j < red.size(); ++j)
    if (red[j]) ext.push_back(x->shape[j]);
  return ext;
}

// Lane-wise max and min on the cpu: kLanes running results in a local
// buffer `part`, one per lane of a vector loop (each an elementwise max
// or min, so nothing is reordered), folded in lane order at the end; a
// single running result was a serial chain of compares.
constexpr int64_t kLanes = 16;
Buffer lane_buffer(DataType t) { return tir::make_buffer("part", t, {SymExpr(kLanes)}, tir::Scope::Local); }
Stmt lane_init(const Buffer& part, const Reducer& r) {
  SymExpr l0 = SymExpr::var("l0");
  return tir::make_for(l0, kLanes, LoopKind::Vectorized, tir::make_store(part, {idx(l0)}, r.init));
}
// One scan of at(j) over the whole blocks of kLanes in j < len, in a
// vector loop; lane_rest takes the elements after them.
Stmt lane_scan(const Buffer& part, const SymExpr& len, const Reducer& r, const std::function<TExpr(const TExpr&)>& at) {
  SymExpr l1 = SymExpr::var("l1"), kb = SymExpr::var("kb");
  return tir::make_for(
      kb, floordiv(len, SymExpr(kLanes)), LoopKind::Serial,
      tir::make_for(
          l1, kLanes, LoopKind::Vectorized,
          tir::make_store(part, {idx(l1)}, r.combine(load(part, {idx(l1)}), at(idx(kb) * idx(kLanes) + idx(l1))))));
}
// The elements of a scan past its whole blocks, at(j) for the kr-th of
// them, each given to into(kr, at(j)). Never into the vector loop's lanes:
// a scalar store into them stalled the next vector load of them (a
// softmax's fold, a whole tensor's min and max over rows of 36).
Stmt lane_rest(const SymExpr& len, const std::function<TExpr(const TExpr&)>& at,
               const std::function<Stmt(const TExpr&, const TExpr&)>& into) {
  SymExpr kr = SymExpr::var("kr");
  TExpr whole = idx(floordiv(len, SymExpr(kLanes)) * SymExpr(kLanes));
  return tir::make_for(kr, floormod(len, SymExpr(kLanes)), LoopKind::Serial, into(idx(kr), at(whole + idx(kr))));
}
// a = the lanes folded in order, from r.init.
Stmt lane_fold(const Buffer& part, const Local& a, const Reducer& r) {
  SymExpr l2 = SymExpr::var("l2");
  return tir::make_seq(
      {a.set(r.init), tir::make_for(l2, kLanes, LoopKind::Serial, a.set(r.combine(a.get(), load(part, {idx(l2)}))))});
}

std::optional<Expr> legalize_reduce(LegalizeContext& ctx, const CallNode& call) {
  const std::string& op = ops::op_name(call);
  Attrs attrs = ops::attrs_of(call);
  ProgramBuilder pb(ctx, call, op);
  Buffer x = pb.arg(0, "x"), y = pb.result("out");
  if (!pb.known()) return pb.unknown();
  bool keepdims = attrs.get_bool("keepdims");
  std::vector<bool> red = reduced_axes(op, attrs.get_ints("axis"), int(x->shape.size()));
  std::vector<SymExpr> ext = reduced_extents(x, red);
  DataType t = x->dtype;
  DataType acc = compute_dtype(t);
  Reducer r = op == "max"    ? max_reducer(acc)
              : op == "min"  ? min_reducer(acc)
              : op == "prod" ? prod_reducer(acc)
                             : sum_reducer(acc);
  if (t.is_bool() && (op == "sum" || op == "mean" || op == "prod")) return std::nullopt;
  SymExpr count = num_elements(ext);
  // On the cpu, max and min over the last axis (with any others): 16
  // running results, one per lane of a vector loop over the last axis
  // (each an elementwise max, so no reordering is involved), folded at the
  // end; a single running result was a serial chain of compares.
  const SymExpr last = x->shape.empty() ? SymExpr(1) : x->shape.back();  // a scalar: one running result
  if (ctx.libraries() && (op == "max" || op == "min") && !red.empty() && red.back() && acc == t && !t.is_bool() &&
      (!last.is_const() || last.const_value() >= 32)) {
    std::vector<SymExpr> outer_ext(ext.begin(), ext.end() - 1);
    LoopHints hints{true, false, count};
    return pb.finish(loop_nest(
        y->shape,
        [&](const Index& i) {
          // Each row's elements past its whole blocks go into lanes of
          // their own, `rest` (lane_rest; one scalar running result made
          // short rows a serial chain).
          Buffer part = lane_buffer(acc), rest = tir::make_buffer("rest", acc, {SymExpr(kLanes)}, tir::Scope::Local);
          Local a = local("acc", acc), b = local("acc_rest", acc);
          Stmt scan = loop_nest(
              outer_ext,
              [&](const Index& ko) {
                auto at = [&](const TExpr& j) {
                  Index k = ko;
                  k.push_back(j);
                  return cast(acc, load(x, input_index(red, keepdims, i, k)));
                };
                return tir::make_seq(
                    {lane_scan(part, last, r, at), lane_rest(last, at, [&](const TExpr& kr, const TExpr& v) {
                       return tir::make_store(rest, {kr}, r.combine(load(rest, {kr}), v));
                     })});
              },
              LoopHints{false, false, 1}, "k");
          Stmt all =
              tir::make_seq({lane_init(part, r), lane_init(rest, r), scan, lane_fold(part, a, r), lane_fold(rest, b, r),
                             a.set(r.combine(a.get(), b.get())), tir::make_store(y, i, cast(t, a.get()))});
          return tir::make_allocate(part, tir::make_allocate(rest, with_locals({a, b}, all)));
        },
        hints));
  }
  // On the cpu, a reduction over axes that kept ones follow (the plane of
  // a blocked layout's (N, C / 16, H, W, 16), passes/block_layout.cc; a
  // sum over a sequence of (B, S, D)): the trailing kept elements are a row
  // of the output, set to the first value and then combined with each
  // reduced element's row in a vector loop. Each output still combines its
  // inputs in the same order; one running result per output read them a
  // row apart (a blocked mean over 28x28: 6.6 GB/s).
  size_t row = 0;
  while (row < red.size() && !red[red.size() - 1 - row]) ++row;
  const bool some_reduced = std::find(red.begin(), red.end(), true) != red.end();
  if (ctx.libraries() && acc == t && t.is_float() && row > 0 && some_reduced && op != "prod") {
    const std::vector<SymExpr> outer(y->shape.begin(), y->shape.end() - long(row)),
        inner(y->shape.end() - long(row), y->shape.end());
    auto at = [](const Index& io, const Index& ii) {
      Index i = io;
      i.insert(i.end(), ii.begin(), ii.end());
      return i;
    };
    const LoopHints vector_row{false, true, 1};
    return pb.finish(loop_nest(
        outer,
        [&](const Index& io) {
          Stmt init = loop_nest(
              inner, [&](const Index& ii) { return tir::make_store(y, at(io, ii), r.init); }, vector_row, "j");
          Stmt scan = loop_nest(
              ext,
              [&](const Index& k) {
                return loop_nest(
                    inner,
                    [&](const Index& ii) {
                      const Index i = at(io, ii);
                      return tir::make_store(y, i, r.combine(load(y, i), load(x, input_index(red, keepdims, i, k))));
                    },
                    vector_row, "j");
              },
              LoopHints{false, false, 1}, "k");
          if (op != "mean") return tir::make_seq({init, scan});
          const TExpr n = from_index(acc, count);
          Stmt divide = loop_nest(
              inner,
              [&](const Index& ii) {
                const Index i = at(io, ii);
                return tir::make_store(y, i, load(y, i) / n);
              },
              vector_row, "j");
          return tir::make_seq({init, scan, divide});
        },
        LoopHints{true, false, count}));
  }
  return pb.finish(compute_reduce(
      y, ext, r, [&](const Index& i, const Index& k) { return cast(acc, load(x, input_index(red, keepdims, i, k))); },
      [&](const Index&, const TExpr& a) {
        if (op != "mean") return cast(t, a);
        TExpr n = from_index(acc, count);
        if (acc.is_float()) return cast(t, a / n);
        return cast(t, tir::binary(tir::BinOp::Div, a, max_(n, one(acc))));
      }));
}

std::optional<Expr> legalize_arg_reduce(LegalizeContext& ctx, const CallNode& call) {
  const std::string& op = ops::op_name(call);
  Attrs attrs = ops::attrs_of(call);
  ProgramBuilder pb(ctx, call, op);
  Buffer x = pb.arg(0, "x"), y = pb.result("out");
  if (!pb.known()) return pb.unknown();
  bool keepdims = attrs.get_bool("keepdims");
  int ndim = int(x->shape.size());
  std::vector<bool> red(size_t(ndim), false);
  red[size_t(ops::normalize_axis(op, attrs.get_int("axis"), ndim))] = true;
  std::vector<SymExpr> ext = reduced_extents(x, red);
  DataType t = x->dtype;
  bool is_max = op == "argmax";
  LoopHints hints{true, false, ext[0]};
  return pb.finish(loop_nest(
      y->shape,
      [&](const Index& i) {
        Local best = local("best", t), at = local("at", DataType::i64());
        Stmt scan = loop_nest(
            ext,
            [&](const Index& k) {
              TExpr v = load(x, input_index(red, keepdims, i, k));
              TExpr better = is_max ? gt(v, best.get()) : lt(v, best.get());
              // The first NaN wins, as in numpy.
              if (t.is_float())
                better = or_(better, and_(intrin(Intrinsic::isnan, v), not_(intrin(Intrinsic::isnan, best.get()))));
              return tir::make_seq({at.set(select(better, k[0], at.get())), best.set(select(better, v, best.get()))});
            },
            LoopHints{false, false, 1}, "k");
        Stmt body = tir::make_seq({best.set(load(x, input_index(red, keepdims, i, {idx(0)}))), at.set(idx(0)), scan,
                                   tir::make_store(y, i, at.get())});
        return with_locals({best, at}, body);
      },
      hints));
}

// softmax and log_softmax along one axis: max, sum of exp(x - max), write.
std::optional<Expr> legalize_softmax(LegalizeContext& ctx, const CallNode& call) {
  const std::string& op = ops::op_name(call);
  ProgramBuilder pb(ctx, call, op);
  Buffer x = pb.arg(0, "x"), y = pb.result("out");
  if (!pb.known()) return pb.unknown();
  int ndim = int(x->shape.size());
  size_t axis = size_t(ops::normalize_axis(op, ops::attrs_of(call).get_int("axis"), ndim));
  std::vector<SymExpr> outer;
  for (size_t j = 0; j < x->shape.size(); ++j)
    if (j != axis) outer.push_back(x->shape[j]);
  SymExpr len = x->shape[axis];
  DataType t = x->dtype, acc = compute_dtype(t);
  bool log_form = op == "log_softmax";
  auto at = [&](const Index& o, const TExpr& j) {
    Index i(o.begin(), o.begin() + axis);
    i.push_back(j);
    i.insert(i.end(), o.begin() + axis, o.end());
    return i;
  };
  LoopHints hints{true, false, len * 3};
  return pb.finish(loop_nest(
      outer,
      [&](const Index& o) {
        Local m = local("m", acc), s = local("s", acc);
        auto xv = [&](const TExpr& j) { return cast(acc, load(x, at(o, j))); };
        Stmt max_loop = accumulate(
            m, {len}, [&](const Index& k) { return xv(k[0]); }, [](auto& a, auto& v) { return max_(a, v); }, "k");
        // On the cpu, f32 softmax: exp once per element, stored and summed in
        // one vector loop (the sum reordered into per-lane partial sums),
        // then scaled in place; exp was otherwise computed twice, and the
        // serial sum kept the loop scalar.
        if (ctx.libraries() && !log_form && acc == t) {
          bool vector = !len.is_const() || len.const_value() % 8 == 0 || len.const_value() >= 16;
          // The max lane-wise too, over the last axis when it is long or symbolic (as the reductions').
          Buffer part;
          if (axis + 1 == x->shape.size() && (!len.is_const() || len.const_value() >= 32)) {
            Reducer r = max_reducer(acc);
            part = lane_buffer(acc);
            // The max's last elements go into the folded lanes' max.
            max_loop = tir::make_seq(
                {lane_init(part, r), lane_scan(part, len, r, xv), lane_fold(part, m, r),
                 lane_rest(len, xv, [&](const TExpr&, const TExpr& v) { return m.set(r.combine(m.get(), v)); })});
          } else {
            max_loop = tir::make_seq({m.set(min_value(acc)), max_loop});
          }
          tir::LoopKind kind = vector ? tir::LoopKind::Vectorized : tir::LoopKind::Serial;
          SymExpr k1 = SymExpr::var("k1"), k2 = SymExpr::var("k2");
          Stmt sum_store = tir::make_for(
              k1, len, kind,
              tir::make_seq({tir::make_store(y, at(o, idx(k1)), intrin(Intrinsic::exp, xv(idx(k1)) - m.get())),
                             s.set(s.get() + load(y, at(o, idx(k1))))}));
          // Scaled by the sum's reciprocal, as ONNX Runtime does: a multiply
          // an element instead of a division (within an ulp of it).
          Stmt divide =
              tir::make_for(k2, len, kind, tir::make_store(y, at(o, idx(k2)), load(y, at(o, idx(k2))) * s.get()));
          Stmt all = with_locals(
              {m, s}, tir::make_seq({max_loop, s.set(zero(acc)), sum_store, s.set(one(acc) / s.get()), divide}));
          return part ? tir::make_allocate(part, all) : all;
        }
        Stmt sum_loop = accumulate(
            s, {len}, [&](const Index& k) { return intrin(Intrinsic::exp, xv(k[0]) - m.get()); },
            [](auto& a, auto& v) { return a + v; }, "k");
        LoopHints inner{false, true, 1};
        Stmt write = loop_nest(
            {len},
            [&](const Index& k) {
              TExpr v = log_form ? xv(k[0]) - m.get() - intrin(Intrinsic::log, s.get())
                                 : intrin(Intrinsic::exp, xv(k[0]) - m.get()) / s.get();
              return tir::make_store(y, at(o, k[0]), cast(t, v));
            },
            inner, "k");
        return with_locals({m, s}, tir::make_seq({m.set(min_value(acc)), max_loop, s.set(zero(acc)), sum_loop, write}));
      },
      hints));
}

// layer_norm over `axes`: two passes (mean, then the biased variance).
std::optional<Expr> legalize_layer_norm(LegalizeContext& ctx, const CallNode& call) {
  Attrs attrs = ops::attrs_of(call);
  ProgramBuilder pb(ctx, call, "layer_norm");
  Buffer x = pb.arg(0, "x"), gamma = pb.arg(1, "gamma"), beta = pb.arg(2, "beta"), y = pb.result("out");
  if (!pb.known()) return pb.unknown();
  int ndim = int(x->shape.size());
  std::vector<int> axes = ops::normalize_axes("layer_norm", attrs.get_ints("axes"), ndim);
  std::vector<int> outer_axes;
  for (int j = 0; j < ndim; ++j)
    if (std::find(axes.begin(), axes.end(), j) == axes.end()) outer_axes.push_back(j);
  std::vector<SymExpr> outer, inner;
  for (int j : outer_axes) outer.push_back(x->shape[size_t(j)]);
  for (int j : axes) inner.push_back(x->shape[size_t(j)]);
  DataType t = x->dtype, acc = compute_dtype(t);
  double eps = attrs.get_float("epsilon", 1e-5);
  auto xi = [&](const Index& o, const Index& r) {
    Index i(size_t(ndim), nullptr);
    for (size_t k = 0; k < outer_axes.size(); ++k) i[size_t(outer_axes[k])] = o[k];
    for (size_t k = 0; k < axes.size(); ++k) i[size_t(axes[k])] = r[k];
    return i;
  };
  SymExpr count = num_elements(inner);
  LoopHints hints{true, false, count * 3};
  return pb.finish(loop_nest(
      outer,
      [&](const Index& o) {
        Local mean = local("mean", acc), var = local("var", acc);
        auto xv = [&](const Index& r) { return cast(acc, load(x, xi(o, r))); };
        TExpr n = from_index(acc, count);
        Stmt sum = accumulate(
            mean, inner, xv, [](auto& a, auto& v) { return a + v; }, "k");
        Stmt sq = accumulate(
            var, inner,
            [&](const Index& r) {
              TExpr d = xv(r) - mean.get();
              return d * d;
            },
            [](auto& a, auto& v) { return a + v; }, "k");
        Stmt write = loop_nest(
            inner,
            [&](const Index& r) {
              TExpr norm = (xv(r) - mean.get()) * intrin(Intrinsic::rsqrt, var.get() / n + const_of(acc, eps));
              TExpr v = norm * cast(acc, load(gamma, r)) + cast(acc, load(beta, r));
              return tir::make_store(y, xi(o, r), cast(t, v));
            },
            LoopHints{false, true, 1}, "k");
        return with_locals({mean, var}, tir::make_seq({mean.set(zero(acc)), sum, mean.set(mean.get() / n),
                                                       var.set(zero(acc)), sq, write}));
      },
      hints));
}

}  // namespace

void register_reduce_legalizers(LegalizerRegistry& reg) {
  for (const char* op : {"sum", "mean", "max", "min", "prod"}) reg.add(op, legalize_reduce);
  reg.add("argmax", legalize_arg_reduce);
  reg.add("argmin", legalize_arg_reduce);
  reg.add("softmax", legalize_softmax);
  reg.add("log_softmax", legalize_softmax);
  reg.add("layer_norm", legalize_layer_norm);
}

}  // namespace relax
