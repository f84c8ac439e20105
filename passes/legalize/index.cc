// Legalisers of the indexing ops (ir/ops/index.cc) that are plain loop
// nests: arange, eye, trilu, one_hot, gather_elements, gather_nd, tile, pad,
// scatter_elements, scatter_nd, col2im and reverse_sequence. Indices read
// from data wrap when negative; gathers clamp them into range, scatters skip
// the updates they leave out of range. Scatters copy the data, then apply the updates in a serial loop in
// row-major order of the indices (so the last duplicate wins).
#include <string>

#include "ir/ops/common.h"
#include "passes/legalize/legalize.h"
#include "passes/legalize/te.h"

namespace relax {
namespace {

using namespace te;

// A scalar operand: a rank-0 tensor (loaded) or a Prim value.
std::optional<TExpr> scalar_operand(ProgramBuilder& pb, const Expr& arg, const std::string& name) {
  if (as<TensorSI>(arg->sinfo)) {
    Buffer b = pb.input(arg, name);
    if (!b || !b->shape.empty()) return std::nullopt;
    return load(b, {});
  }
  const auto* p = as<PrimSI>(arg->sinfo);
  if (!p || p->dtype.is_void()) return std::nullopt;
  return pb.scalar(arg, p->dtype);
}

std::optional<Expr> legalize_arange(LegalizeContext& ctx, const CallNode& call) {
  ProgramBuilder pb(ctx, "arange");
  std::optional<TExpr> start = scalar_operand(pb, call.args[1], "start");
  std::optional<TExpr> delta = scalar_operand(pb, call.args[2], "delta");
  if (!start || !delta) return std::nullopt;
  Buffer y = pb.output(call.sinfo, "out");
  if (!y) return std::nullopt;
  DataType t = y->dtype;
  return pb.finish(compute(y, [&](const Index& i) { return cast(t, *start) + cast(t, i[0]) * cast(t, *delta); }));
}

std::optional<Expr> legalize_eye(LegalizeContext& ctx, const CallNode& call) {
  ProgramBuilder pb(ctx, call, "eye");
  Buffer y = pb.result("out");
  if (!pb.known()) return pb.unknown();
  int64_t k = ops::attrs_of(call).get_int("k");
  DataType t = y->dtype;
  return pb.finish(compute(y, [&](const Index& i) { return select(eq(i[1] - i[0], idx(k)), one(t), zero(t)); }));
}

std::optional<Expr> legalize_trilu(LegalizeContext& ctx, const CallNode& call) {
  ProgramBuilder pb(ctx, "trilu");
  Buffer x = pb.input(call.args[0], "x");
  std::optional<TExpr> k = scalar_operand(pb, call.args[1], "k");
  Buffer y = pb.output(call.sinfo, "out");
  if (!x || !k || !y) return std::nullopt;
  bool upper = ops::attrs_of(call).get_bool("upper", true);
  return pb.finish(compute(y, [&](const Index& i) {
    size_t n = i.size();
    TExpr diff = i[n - 1] - i[n - 2], kk = as_index(*k);
    TExpr keep = upper ? ge(diff, kk) : le(diff, kk);
    return select(keep, load(x, i), zero(x->dtype));
  }));
}

std::optional<Expr> legalize_one_hot(LegalizeContext& ctx, const CallNode& call) {
  ProgramBuilder pb(ctx, call, "one_hot");
  Buffer ind = pb.arg(0, "indices"), values = pb.arg(1, "values"), y = pb.result("out");
  if (!pb.known()) return pb.unknown();
  size_t axis = size_t(ops::normalize_axis("one_hot", ops::attrs_of(call).get_int("axis"), int(y->shape.size())));
  SymExpr depth = y->shape[axis];
  return pb.finish(compute(y, [&](const Index& i) {
    Index ii(i.begin(), i.begin() + long(axis));
    ii.insert(ii.end(), i.begin() + long(axis) + 1, i.end());
    TExpr v = as_index(load(ind, ii));
    v = select(lt(v, idx(0)), v + idx(depth), v);
    return select(eq(v, i[axis]), load(values, {idx(1)}), load(values, {idx(0)}));
  }));
}

std::optional<Expr> legalize_gather_elements(LegalizeContext& ctx, const CallNode& call) {
  ProgramBuilder pb(ctx, call, "gather_elements");
  Buffer x = pb.arg(0, "x"), ind = pb.arg(1, "indices"), y = pb.result("out");
  if (!pb.known()) return pb.unknown();
  size_t axis =
      size_t(ops::normalize_axis("gather_elements", ops::attrs_of(call).get_int("axis"), int(x->shape.size())));
  if (!pb.check_indices(x, ind, "GatherElements", {int64_t(axis)})) return std::nullopt;
  return pb.finish(compute(y, [&](const Index& i) {
    Index xi = i;
    xi[axis] = wrap_clamp_index(load(ind, i), x->shape[axis]);
    return load(x, xi);
  }));
}

std::optional<Expr> legalize_tile(LegalizeContext& ctx, const CallNode& call) {
  ProgramBuilder pb(ctx, call, "tile");
  Buffer x = pb.arg(0, "x"), y = pb.result("out");
  if (!pb.known()) return pb.unknown();
  return pb.finish(compute(y, [&](const Index& i) {
    Index xi;
    for (size_t k = 0; k < i.size(); ++k) xi.push_back(tir::binary(tir::BinOp::FloorMod, i[k], idx(x->shape[k])));
    return load(x, xi);
  }));
}

// ---- gather_nd, scatters ----------------------------------------------------------------

// An extent no larger than any of `dims` (they should be equal; invalid
// inputs must still not be read or written out of bounds).
SymExpr safe_extent(const std::vector<SymExpr>& dims) {
  Analyzer ana;
  SymExpr e = dims[0];
  for (size_t k = 1; k < dims.size(); ++k) {
    if (ana.can_prove_less_equal(e, dims[k])) continue;
    e = ana.can_prove_less_equal(dims[k], e) ? dims[k] : ana.simplify(min(e, dims[k]));
  }
  return e;
}

// An index read from data, negative values counting from the end of `dim`.
TExpr wrap_index(const TExpr& i, const SymExpr& dim) {
  TExpr v = as_index(i);
  return select(lt(v, idx(0)), v + idx(dim), v);
}
TExpr in_range(const TExpr& v, const SymExpr& dim) { return and_(ge(v, idx(0)), lt(v, idx(dim))); }

// How a scatter combines the old element with the update.
using Combine = std::function<TExpr(const TExpr& old, const TExpr& v)>;
Combine combiner(const std::string& reduction, DataType t) {
  bool b = t.is_bool();
  if (reduction == "add") return [b](const TExpr& o, const TExpr& v) { return b ? or_(o, v) : o + v; };
  if (reduction == "mul") return [b](const TExpr& o, const TExpr& v) { return b ? and_(o, v) : o * v; };
  if (reduction == "max") return [b](const TExpr& o, const TExpr& v) { return b ? or_(o, v) : max_(o, v); };
  if (reduction == "min") return [b](const TExpr& o, const TExpr& v) { return b ? and_(o, v) : min_(o, v); };
  return [](const TExpr&, const TExpr& v) { return v; };
}

Index slice(const Index& i, size_t begin, size_t end) { return Index(i.begin() + long(begin), i.begin() + long(end)); }

// The struct info of a result shaped like the (bound) data operand `x`: the
// call's when it has a shape.
StructInfo shaped_like(const CallNode& call, const Expr& x) {
  if (const auto* t = as<TensorSI>(call.sinfo); t && t->shape) return call.sinfo;
  const auto* t = as<TensorSI>(x->sinfo);
  if (!t || !t->shape) return nullptr;
  return tensor_si(t->dtype, *t->shape);
}

std::optional<Expr> legalize_gather_nd(LegalizeContext& ctx, const CallNode& call) {
  ProgramBuilder pb(ctx, "gather_nd");
  Buffer x = pb.input(call.args[0], "x");
  Buffer ind = pb.input(call.args[1], "indices");
  Buffer y = pb.output(call.sinfo, "out");
  if (!x || !ind || !y || ind->shape.empty() || !ind->shape.back().is_const()) return std::nullopt;
  size_t b = size_t(ops::attrs_of(call).get_int("batch_dims"));
  size_t q = ind->shape.size(), m = size_t(ind->shape.back().const_value());
  if (b + m > x->shape.size() || y->shape.size() != q - 1 + x->shape.size() - b - m) return std::nullopt;
  Analyzer ana;
  std::vector<int64_t> axes;
  for (size_t k = 0; k < m; ++k) axes.push_back(int64_t(b + k));
  if (m && !pb.check_indices(x, ind, "GatherND", axes)) return std::nullopt;
  return pb.finish(compute(y, [&](const Index& i) {
    Index xi;
    for (size_t k = 0; k < b; ++k) {
      bool same = ana.can_prove_equal(x->shape[k], ind->shape[k]);
      xi.push_back(same ? i[k] : min_(i[k], idx(x->shape[k] - 1)));
    }
    Index ii = slice(i, 0, q - 1);
    ii.push_back(nullptr);
    for (size_t k = 0; k < m; ++k) {
      ii.back() = idx(int64_t(k));
      xi.push_back(wrap_clamp_index(load(ind, ii), x->shape[b + k]));
    }
    xi.insert(xi.end(), i.begin() + long(q - 1), i.end());
    return load(x, xi);
  }));
}

// out = x, the first statement of every scatter.
Stmt copy_of(const Buffer& x, const Buffer& y) {
  return compute(y, [&](const Index& i) { return load(x, i); });
}

// A scatter's data x (its dims bound first: the result takes them), indices,
// updates and result; nullopt when one has no known shape.
struct ScatterOperands {
  Buffer x, ind, upd, y;
};
std::optional<ScatterOperands> scatter_operands(LegalizeContext& ctx, ProgramBuilder& pb, const CallNode& call) {
  std::optional<Expr> data = ctx.bind_tensor(call.args[0], "x");
  if (!data) return std::nullopt;
  ScatterOperands s{pb.input(*data, "x"), pb.input(call.args[1], "indices"), pb.input(call.args[2], "updates"),
                    pb.output(shaped_like(call, *data), "out")};
  if (!s.x || !s.ind || !s.upd || !s.y) return std::nullopt;
  return s;
}

std::optional<Expr> legalize_scatter_elements(LegalizeContext& ctx, const CallNode& call) {
  ProgramBuilder pb(ctx, "scatter_elements");
  std::optional<ScatterOperands> s = scatter_operands(ctx, pb, call);
  if (!s) return ctx.decline("an operand or the result has no known shape");
  const Buffer &x = s->x, &ind = s->ind, &upd = s->upd, &y = s->y;
  size_t r = x->shape.size();
  if (ind->shape.size() != r || upd->shape.size() != r || y->shape.size() != r) return std::nullopt;
  Attrs attrs = ops::attrs_of(call);
  size_t axis = size_t(ops::normalize_axis("scatter_elements", attrs.get_int("axis"), int(r)));
  Combine combine = combiner(attrs.get_string("reduction", "none"), y->dtype);
  std::vector<SymExpr> extents;
  for (size_t k = 0; k < r; ++k) {
    std::vector<SymExpr> dims{ind->shape[k], upd->shape[k]};
    if (k != axis) dims.push_back(y->shape[k]);
    extents.push_back(safe_extent(dims));
  }
  LoopHints serial{false, false, 1};
  Stmt scatter = loop_nest(
      extents,
      [&](const Index& j) {
        Local at = local("at", DataType::i64());
        Index t = j;
        t[axis] = at.get();
        Stmt store = tir::make_store(y, t, combine(load(y, t), cast(y->dtype, load(upd, j))));
        return with_locals({at}, tir::make_seq({at.set(wrap_index(load(ind, j), y->shape[axis])),
                                                tir::make_if(in_range(at.get(), y->shape[axis]), store)}));
      },
      serial, "j");
  if (!pb.check_indices(x, ind, "ScatterElements", {int64_t(axis)})) return std::nullopt;
  return pb.finish(tir::make_seq({copy_of(x, y), scatter}));
}

std::optional<Expr> legalize_scatter_nd(LegalizeContext& ctx, const CallNode& call) {
  ProgramBuilder pb(ctx, "scatter_nd");
  std::optional<ScatterOperands> s = scatter_operands(ctx, pb, call);
  if (!s) return ctx.decline("an operand or the result has no known shape");
  const Buffer &x = s->x, &ind = s->ind, &upd = s->upd, &y = s->y;
  if (ind->shape.empty() || !ind->shape.back().is_const())
    return ctx.decline("the index tuples' length is not a constant");
  size_t r = x->shape.size(), q = ind->shape.size(), m = size_t(ind->shape.back().const_value());
  if (m > r || upd->shape.size() != q - 1 + r - m || y->shape.size() != r) return std::nullopt;
  Combine combine = combiner(ops::attrs_of(call).get_string("reduction", "none"), y->dtype);
  // updates[j..., s...] goes to out[indices[j...], s...]: j over the index
  // tuples (serial, in order), s over the slice each one addresses.
  std::vector<SymExpr> outer, inner;
  for (size_t k = 0; k + 1 < q; ++k) outer.push_back(safe_extent({ind->shape[k], upd->shape[k]}));
  for (size_t k = m; k < r; ++k) inner.push_back(safe_extent({y->shape[k], upd->shape[q - 1 + k - m]}));
  LoopHints serial{false, false, 1};
  Stmt scatter = loop_nest(
      outer,
      [&](const Index& j) {
        Buffer at = tir::make_buffer("at", DataType::i64(), {SymExpr(int64_t(m))}, tir::Scope::Local);
        std::vector<Stmt> body;
        TExpr ok;
        Index ij = j;
        ij.push_back(nullptr);
        for (size_t k = 0; k < m; ++k) {
          ij.back() = idx(int64_t(k));
          TExpr atk = load(at, {idx(int64_t(k))});
          body.push_back(tir::make_store(at, {idx(int64_t(k))}, wrap_index(load(ind, ij), y->shape[k])));
          ok = ok ? and_(ok, in_range(atk, y->shape[k])) : in_range(atk, y->shape[k]);
        }
        Stmt slice_update = loop_nest(
            inner,
            [&](const Index& s) {
              Index t;
              for (size_t k = 0; k < m; ++k) t.push_back(load(at, {idx(int64_t(k))}));
              t.insert(t.end(), s.begin(), s.end());
              Index u = j;
              u.insert(u.end(), s.begin(), s.end());
              return tir::make_store(y, t, combine(load(y, t), cast(y->dtype, load(upd, u))));
            },
            {}, "k");
        if (m == 0) return slice_update;  // every update replaces the whole data
        body.push_back(tir::make_if(ok, slice_update));
        return tir::make_allocate(at, tir::make_seq(body));
      },
      serial, "j");
  std::vector<int64_t> axes;
  for (size_t k = 0; k < m; ++k) axes.push_back(int64_t(k));
  if (m && !pb.check_indices(x, ind, "ScatterND", axes)) return std::nullopt;
  return pb.finish(tir::make_seq({copy_of(x, y), scatter}));
}

// ---- pad ----------------------------------------------------------------------------------

// One axis of pad. Negative pads crop first: x's elements [lo, lo + keep)
// survive, then `pre` elements are added before them; output element i sits
// at t = i - pre in the kept window. The values are graph-level (pb.sym maps
// them, so a run-time one is one sym_param). `period` (reflect) is
// max(2 * (keep - 1), 1) and `divisor` (wrap, reflect) max(keep, 1): never
// 0, even where the guard is false.
struct PadAxis {
  SymExpr lo, keep, pre, period, divisor;
  bool padded = false;    // some pad of this axis may be non-zero
  bool nonempty = false;  // keep >= 1 is proven
};

PadAxis pad_axis(const Analyzer& ana, const SymExpr& dim, const SymExpr& b, const SymExpr& e) {
  SymExpr zero = 0, one = 1;
  PadAxis p;
  p.lo = ana.simplify(max(-b, zero));
  p.keep = ana.simplify(max(dim - p.lo - max(-e, zero), zero));
  p.pre = ana.simplify(max(b, zero));
  p.period = ana.simplify(max(2 * (p.keep - 1), one));
  p.divisor = ana.simplify(max(p.keep, one));
  p.padded = !(b.is_const(0) && e.is_const(0));
  p.nonempty = ana.can_prove_less_equal(one, p.keep);
  return p;
}

// The x index that output index i reads on a padded axis under `mode`
// (reflect, edge or wrap); the kept window is not empty here.
TExpr pad_source(ProgramBuilder& pb, const std::string& mode, const TExpr& i, const PadAxis& p) {
  using tir::BinOp;
  TExpr t = i - idx(pb.sym(p.pre)), src;
  if (mode == "edge") {
    src = max_(min_(t, idx(pb.sym(p.keep) - 1)), idx(0));
  } else if (mode == "wrap") {
    src = tir::binary(BinOp::FloorMod, t, idx(pb.sym(p.divisor)));
  } else {  // reflect: the edge elements are not repeated
    TExpr period = idx(pb.sym(p.period));
    TExpr m = tir::binary(BinOp::FloorMod, t, period);
    src = select(ge(m, idx(pb.sym(p.divisor))), period - m, m);
  }
  return p.lo.is_const(0) ? src : src + idx(pb.sym(p.lo));
}

std::optional<Expr> legalize_pad(LegalizeContext& ctx, const CallNode& call) {
  std::optional<Expr> data = ctx.bind_tensor(call.args[0], "x");
  std::optional<std::vector<SymExpr>> pads = ctx.bind_shape(call.args[1], "pads");
  if (!data || !pads) return std::nullopt;
  const auto* xt = as<TensorSI>((*data)->sinfo);
  const std::vector<SymExpr>& xdims = *xt->shape;
  size_t r = xdims.size();
  if (pads->size() != 2 * r) return std::nullopt;
  StructInfo out_si = call.sinfo;
  if (const auto* t = as<TensorSI>(call.sinfo); !t || !t->shape) {
    std::vector<SymExpr> dims;
    for (size_t a = 0; a < r; ++a) dims.push_back(ctx.analyzer().simplify(xdims[a] + (*pads)[a] + (*pads)[a + r]));
    out_si = tensor_si(xt->dtype, dims);
  }
  std::string mode = ops::attrs_of(call).get_string("mode", "constant");
  ProgramBuilder pb(ctx, "pad");
  Buffer x = pb.input(*data, "x");
  Buffer y = pb.output(out_si, "out");
  if (!x || !y || y->shape.size() != r) return std::nullopt;
  std::optional<TExpr> value = zero(y->dtype);
  if (mode == "constant") value = scalar_operand(pb, call.args[2], "value");
  if (!value) return std::nullopt;
  TExpr fill =
      y->dtype.is_bool() && !(*value)->dtype.is_bool() ? ne(*value, zero((*value)->dtype)) : cast(y->dtype, *value);
  // Pads may be negative; only dims are sizes.
  Analyzer ana(Analyzer::Assume::Unbounded);
  for (const SymExpr& d : xdims)
    for (const SymExpr& v : free_vars(d)) ana.bind(v, 0, Interval::kPosInf);
  std::vector<PadAxis> axes;
  for (size_t a = 0; a < r; ++a) axes.push_back(pad_axis(ana, xdims[a], (*pads)[a], (*pads)[a + r]));
  if (mode == "constant") {
    // Fill, then copy the kept window into place.
    std::vector<SymExpr> keep;
    for (const PadAxis& p : axes) keep.push_back(pb.sym(p.keep));
    Stmt copy = loop_nest(keep, [&](const Index& k) {
      Index yi, xi;
      for (size_t a = 0; a < r; ++a) {
        yi.push_back(k[a] + idx(pb.sym(axes[a].pre)));
        xi.push_back(k[a] + idx(pb.sym(axes[a].lo)));
      }
      return tir::make_store(y, yi, load(x, xi));
    });
    return pb.finish(tir::make_seq({compute(y, [&](const Index&) { return fill; }), copy}));
  }
  // reflect, edge, wrap: every output element reads x; an empty kept window
  // on a padded axis leaves nothing to read (numpy refuses it), so the
  // result is zeros then.
  TExpr guard;
  for (const PadAxis& p : axes) {
    if (!p.padded || p.nonempty) continue;
    TExpr c = ge(idx(pb.sym(p.keep)), idx(1));
    guard = guard ? and_(guard, c) : c;
  }
  Stmt body = compute(y, [&](const Index& i) {
    Index xi;
    for (size_t a = 0; a < r; ++a) xi.push_back(axes[a].padded ? pad_source(pb, mode, i[a], axes[a]) : i[a]);
    return load(x, xi);
  });
  if (guard) body = tir::make_if(guard, body, compute(y, [&](const Index&) { return zero(y->dtype); }));
  return pb.finish(body);
}

// col2im is written as a gather: each image element sums the column
// entries of every kernel tap whose block position lands on it (a tap
// contributes when the position minus the tap's offset is a multiple of
// the stride inside the block grid), so no output element is written twice.
// An index clamped into [0, dim).
TExpr clamp_index(const TExpr& i, const SymExpr& dim) { return max_(min_(i, idx(dim) - idx(1)), idx(0)); }

std::optional<Expr> legalize_col2im(LegalizeContext& ctx, const CallNode& call) {
  Attrs attrs = ops::attrs_of(call);
  ProgramBuilder pb(ctx, "col2im");
  Buffer x = pb.input(call.args[0], "x");
  auto image = ctx.bind_shape(call.args[1], "image");
  auto block = ctx.bind_shape(call.args[2], "block");
  if (!x || !image || !block) return std::nullopt;
  // The result's shape, when the rule could not prove the channel count.
  StructInfo out_si = call.sinfo;
  const auto* xs = as<TensorSI>(call.args[0]->sinfo);
  if (const auto* t = as<TensorSI>(out_si); t && !t->shape && xs && xs->shape) {
    SymExpr per = 1;
    for (const SymExpr& b : *block) per = per * b;
    std::vector<SymExpr> dims{(*xs->shape)[0], ctx.analyzer().simplify(floordiv((*xs->shape)[1], per))};
    dims.insert(dims.end(), image->begin(), image->end());
    out_si = tensor_si(t->dtype, dims);
  }
  Buffer y = pb.output(out_si, "y");
  if (!y) return std::nullopt;
  int k = int(block->size());
  if (int(y->shape.size()) != k + 2) return std::nullopt;
  std::vector<SymExpr> kernel;
  for (const SymExpr& b : *block) kernel.push_back(pb.sym(b));
  std::vector<int64_t> dil = ops::spatial_list("col2im", "dilations", attrs.get_ints("dilations"), k, 1);
  std::vector<int64_t> str = ops::spatial_list("col2im", "strides", attrs.get_ints("strides"), k, 1);
  std::vector<int64_t> pads = attrs.get_ints("pads");
  if (pads.empty()) pads.assign(size_t(2 * k), 0);
  if (int(pads.size()) != 2 * k) return std::nullopt;
  // The number of block positions along each axis.
  std::vector<SymExpr> blocks;
  for (int j = 0; j < k; ++j) {
    SymExpr span = y->shape[2 + j] + (pads[j] + pads[k + j]) - SymExpr(dil[j]) * (kernel[j] - 1) - 1;
    blocks.push_back(floordiv(span, SymExpr(str[j])) + 1);
  }
  DataType t = compute_dtype(y->dtype);
  LoopHints hints{true, false, num_elements(kernel)};
  return pb.finish(loop_nest(
      y->shape,
      [&](const Index& i) {
        Local acc = local("acc", t);
        Stmt taps = loop_nest(
            kernel,
            [&](const Index& r) {
              std::vector<TExpr> ok;
              Index pos;
              for (int j = 0; j < k; ++j) {
                TExpr d = i[2 + j] + idx(pads[j]) - r[j] * idx(dil[j]);
                TExpr b = tir::binary(tir::BinOp::FloorDiv, d, idx(str[j]));
                TExpr good = and_(ge(d, idx(0)), lt(b, idx(blocks[j])));
                if (str[j] != 1) good = and_(good, eq(tir::binary(tir::BinOp::FloorMod, d, idx(str[j])), idx(0)));
                ok.push_back(good);
                pos.push_back(clamp_index(b, blocks[j]));
              }
              TExpr all = ok[0];
              for (size_t q = 1; q < ok.size(); ++q) all = and_(all, ok[q]);
              TExpr row = i[1] * idx(num_elements(kernel)) + flat_index(r, kernel);
              TExpr col = flat_index(pos, blocks);
              TExpr v = cast(t, load(x, {i[0], clamp_index(row, x->shape[1]), clamp_index(col, x->shape[2])}));
              return acc.set(acc.get() + select(all, v, zero(t)));
            },
            LoopHints{false, false, 1}, "k");
        return with_locals({acc},
                           tir::make_seq({acc.set(zero(t)), taps, tir::make_store(y, i, cast(y->dtype, acc.get()))}));
      },
      hints));
}

std::optional<Expr> legalize_reverse_sequence(LegalizeContext& ctx, const CallNode& call) {
  Attrs attrs = ops::attrs_of(call);
  ProgramBuilder pb(ctx, call, "reverse_sequence");
  Buffer x = pb.arg(0, "x"), lens = pb.arg(1, "lengths"), y = pb.result("y");
  if (!pb.known()) return pb.unknown();
  int n = int(x->shape.size());
  int b = ops::normalize_axis("reverse_sequence", attrs.get_int("batch_axis"), n);
  int t = ops::normalize_axis("reverse_sequence", attrs.get_int("time_axis"), n);
  SymExpr T = x->shape[size_t(t)];
  return pb.finish(compute(y, [&](const Index& i) {
    TExpr len = max_(min_(as_index(load(lens, {i[size_t(b)]})), idx(T)), idx(0));
    Index xi = i;
    TExpr ti = i[size_t(t)];
    xi[size_t(t)] = clamp_index(select(lt(ti, len), len - idx(1) - ti, ti), T);
    return load(x, xi);
  }));
}

}  // namespace

void register_index_legalizers(LegalizerRegistry& reg) {
  reg.add("col2im", legalize_col2im);
  reg.add("reverse_sequence", legalize_reverse_sequence);
  reg.add("arange", legalize_arange);
  reg.add("eye", legalize_eye);
  reg.add("trilu", legalize_trilu);
  reg.add("one_hot", legalize_one_hot);
  reg.add("gather_elements", legalize_gather_elements);
  reg.add("tile", legalize_tile);
  reg.add("gather_nd", legalize_gather_nd);
  reg.add("scatter_elements", legalize_scatter_elements);
  reg.add("scatter_nd", legalize_scatter_nd);
  reg.add("pad", legalize_pad);
}

}  // namespace relax
