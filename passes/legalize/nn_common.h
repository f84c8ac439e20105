// Pieces the nn legalisers share (passes/legalize/nn.cc: the
// convolutions; pool.cc: pooling, max_unpool, lrn, nll_loss): a window's
// geometry, padding tests, loop builders, and the row-wise in-place form.
#pragma once

#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "ir/ops/common.h"
#include "passes/legalize/legalize.h"
#include "passes/legalize/te.h"

namespace relax::nn_legalize {

using namespace te;
using tir::LoopKind;

struct Window {
  std::vector<int64_t> strides, dilation, pad_begin, pad_end;
};

inline Window read_window(const std::string& op, const Attrs& attrs, int sp) {
  Window w;
  w.strides = ops::spatial_list(op, "strides", attrs.get_ints("strides"), sp, 1);
  w.dilation = ops::spatial_list(op, "dilation", attrs.get_ints("dilation"), sp, 1);
  std::vector<int64_t> pad = attrs.get_ints("padding");
  if (int(pad.size()) == 2 * sp) {
    w.pad_begin.assign(pad.begin(), pad.begin() + sp);
    w.pad_end.assign(pad.begin() + sp, pad.end());
  } else {
    w.pad_begin = w.pad_end = ops::spatial_list(op, "padding", pad, sp, 0);
  }
  return w;
}

inline TExpr clamp_index(const TExpr& i, const SymExpr& dim) { return max_(min_(i, idx(dim) - idx(1)), idx(0)); }
inline TExpr in_range(const TExpr& i, const SymExpr& lo, const SymExpr& hi) {
  return and_(ge(i, idx(lo)), lt(i, idx(hi)));
}
inline TExpr all_of(const std::vector<TExpr>& cs) {
  TExpr r;
  for (const TExpr& c : cs) r = r ? and_(r, c) : c;
  return r;
}

// The loop kind of a row loop: vectorized unless it is short (the code
// generator handles any remainder).
inline LoopKind row_kind(const SymExpr& extent) {
  bool ok = !extent.is_const() || extent.const_value() >= 8;
  return ok ? LoopKind::Vectorized : LoopKind::Serial;
}
inline LoopKind outer_kind(const SymExpr& work) {
  return !work.is_const() || work.const_value() >= kParallelWork ? LoopKind::Parallel : LoopKind::Serial;
}

inline Stmt loop(const std::string& name, const SymExpr& extent, LoopKind kind,
                 const std::function<Stmt(const TExpr&)>& body) {
  SymExpr v = SymExpr::var(name);
  return tir::make_for(v, extent, kind, body(idx(v)));
}
inline Stmt serial_nest(const std::vector<SymExpr>& extents, const std::string& prefix,
                        const std::function<Stmt(const Index&)>& body) {
  return loop_nest(extents, body, LoopHints{false, false, 1}, prefix);
}

// Helpers for the row-wise in-place form: `for nc in (N * M)`, then the
// outer spatial axes, then per row `init`, the taps, `finish`.
struct RowNest {
  SymExpr outer_extent;       // N * M
  SymExpr m;                  // M (the second dim)
  std::vector<SymExpr> rows;  // outer spatial extents of the output
  SymExpr width;              // the last spatial extent of the output
  SymExpr work;               // for the parallel decision
  std::function<Stmt(const TExpr& n, const TExpr& m, const Index& os)> row;
  // The rows of an output y (N, M, spatial...); `row` is left to set.
  static RowNest of(const Buffer& y, const SymExpr& work) {
    RowNest nest;
    nest.m = y->shape[1];
    nest.outer_extent = y->shape[0] * nest.m;
    nest.rows.assign(y->shape.begin() + 2, y->shape.end() - 1);
    nest.width = y->shape.back();
    nest.work = work;
    return nest;
  }
  Stmt build() const {
    return loop("nm", outer_extent, outer_kind(work), [&](const TExpr& nm) {
      TExpr n = tir::binary(tir::BinOp::FloorDiv, nm, idx(m));
      TExpr mm = tir::binary(tir::BinOp::FloorMod, nm, idx(m));
      return serial_nest(rows, "r", [&](const Index& os) { return row(n, mm, os); });
    });
  }
};

inline Index cat_index(std::initializer_list<TExpr> head, const Index& mid, const TExpr& last = nullptr) {
  Index out(head);
  out.insert(out.end(), mid.begin(), mid.end());
  if (last) out.push_back(last);
  return out;
}

}  // namespace relax::nn_legalize
