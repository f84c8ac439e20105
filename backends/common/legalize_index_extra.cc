// Legalisers of col2im and reverse_sequence (ir/ops/index.cc).
//
// col2im is written as a gather: each image element sums the column
// entries of every kernel tap whose block position lands on it (a tap
// contributes when the position minus the tap's offset is a multiple of
// the stride inside the block grid), so no output element is written twice.
#include "backends/common/legalize.h"
#include "backends/common/te.h"
#include "ir/ops/common.h"

namespace relax {
namespace {

using namespace te;

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
  ProgramBuilder pb(ctx, "reverse_sequence");
  Buffer x = pb.input(call.args[0], "x");
  Buffer lens = pb.input(call.args[1], "lengths");
  Buffer y = pb.output(call.sinfo, "y");
  if (!x || !lens || !y) return std::nullopt;
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

void register_index_extra_legalizers(LegalizerRegistry& reg) {
  reg.add("col2im", legalize_col2im);
  reg.add("reverse_sequence", legalize_reverse_sequence);
}

}  // namespace relax
