// Legaliser of matmul (ir/ops/matmul.cc): a plain loop nest with an
// accumulator (f32 for narrow floats, else the result's dtype), numpy batch
// broadcasting, 1-D operands as a row (left) or column (right) vector.
#include "backends/common/legalize.h"
#include "backends/common/te.h"
#include "ir/ops/common.h"

namespace relax {
namespace {

using namespace te;

std::optional<Expr> legalize_matmul(LegalizeContext& ctx, const CallNode& call) {
  ProgramBuilder pb(ctx, "matmul");
  Buffer a = pb.input(call.args[0], "a");
  Buffer b = pb.input(call.args[1], "b");
  Buffer y = pb.output(call.sinfo, "out");
  if (!a || !b || !y) return std::nullopt;
  size_t ra = a->shape.size(), rb = b->shape.size(), ry = y->shape.size();
  bool a_vec = ra == 1, b_vec = rb == 1;
  size_t batch = ry - (a_vec ? 0 : 1) - (b_vec ? 0 : 1);
  std::vector<SymExpr> out_batch(y->shape.begin(), y->shape.begin() + long(batch));
  std::vector<SymExpr> a_batch(a->shape.begin(), a->shape.end() - (a_vec ? 1 : 2));
  std::vector<SymExpr> b_batch(b->shape.begin(), b->shape.end() - (b_vec ? 1 : 2));
  SymExpr k = a->shape.back();
  DataType acc = compute_dtype(y->dtype);
  if (acc.is_bool()) return std::nullopt;
  return pb.finish(compute_reduce(
      y, {k}, sum_reducer(acc),
      [&](const Index& i, const Index& r) {
        Index bi(i.begin(), i.begin() + long(batch));
        Index ai = broadcast_index(a_batch, bi, out_batch);
        if (!a_vec) ai.push_back(i[batch]);
        ai.push_back(r[0]);
        Index bj = broadcast_index(b_batch, bi, out_batch);
        bj.push_back(r[0]);
        if (!b_vec) bj.push_back(i.back());
        return cast(acc, load(a, ai)) * cast(acc, load(b, bj));
      },
      [&](const Index&, const TExpr& v) { return cast(y->dtype, v); }));
}

}  // namespace

void register_matmul_legalizers(LegalizerRegistry& reg) { reg.add("matmul", legalize_matmul); }

}  // namespace relax
