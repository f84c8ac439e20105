// Legaliser of matmul (ir/ops/matmul.cc). On the cpu target, f32 and f64
// products go to the BLAS library (call_library("blas.matmul"), OpenBLAS in
// the runtime), which does them better than a generated loop nest. On the
// cuda target, float products big enough to pay for a library call that
// fusion cannot join go to cuBLAS (call_library("cublas.matmul"),
// runtime/cuda.cc) with its workspace as a second output, so the graph
// allocates it, memory planning shares it, and a captured CUDA graph sees
// the same workspace on every replay. Everything else becomes a plain loop
// nest with an accumulator (f32 for narrow floats, else the result's
// dtype), numpy batch broadcasting, 1-D operands as a row (left) or column
// (right) vector.
#include <cstdlib>

#include "ir/ops/common.h"
#include "passes/legalize/legalize.h"
#include "passes/legalize/te.h"

namespace relax {
namespace {

using namespace te;

constexpr const char* kBlasMatmul = "blas.matmul";

// The library call, when both operands and the result are f32 (or f64)
// tensors of known shape (the VM allocates the result).
std::optional<Expr> blas_matmul(LegalizeContext& ctx, const CallNode& call) {
  if (!ctx.libraries()) return std::nullopt;
  const auto* out = as<TensorSI>(call.sinfo);
  if (!out || !out->shape || !(out->dtype == DataType::f32() || out->dtype == DataType::f(64))) return std::nullopt;
  for (const Expr& a : call.args) {
    const auto* t = as<TensorSI>(a->sinfo);
    if (!t || !t->shape || t->dtype != out->dtype || t->shape->empty()) return std::nullopt;
  }
  if (!ctx.module().extern_decl(kBlasMatmul)) ctx.module().add_extern(kBlasMatmul);
  Expr r = make_op_call("call_library", {make_string(kBlasMatmul), make_tuple({call.args[0], call.args[1]})}, {},
                        {call.sinfo});
  r->sinfo = call.sinfo;
  return r;
}

constexpr const char* kCublasMatmul = "cublas.matmul";
// cuBLAS's recommended workspace: 32 MiB on Hopper and later, 4 MiB before.
constexpr int64_t kCublasWorkspaceHopper = int64_t(32) << 20;
constexpr int64_t kCublasWorkspace = int64_t(4) << 20;
// The product size (batch * M * N * K multiply-adds) from which cuBLAS wins
// over a generated kernel fused with its neighbours: 64^3. Symbolic dims
// count at their declared upper bound, or kTypicalDim when unbounded.
constexpr double kCublasMinProduct = 64.0 * 64.0 * 64.0;
constexpr double kTypicalDim = 128;

std::optional<Expr> cublas_matmul(LegalizeContext& ctx, const CallNode& call) {
  if (!ctx.cublas()) return std::nullopt;
  const auto* out = as<TensorSI>(call.sinfo);
  if (!out || !out->shape) return std::nullopt;
  DataType d = out->dtype;
  if (!(d == DataType::f32() || d == DataType::f(64) || d == DataType::f16() || d == DataType::bf16()))
    return std::nullopt;
  const auto* a = as<TensorSI>(call.args[0]->sinfo);
  const auto* b = as<TensorSI>(call.args[1]->sinfo);
  for (const TensorSI* t : {a, b})
    if (!t || !t->shape || t->dtype != d || t->shape->empty()) return std::nullopt;
  auto size = [&](const SymExpr& e) {
    Interval r = ctx.analyzer().bound(e);
    return r.hi == Interval::kPosInf ? kTypicalDim : double(r.hi);
  };
  double product = size(a->shape->back());  // K
  for (const SymExpr& e : *out->shape) product *= size(e);
  if (product < kCublasMinProduct) return std::nullopt;
  std::string arch = ctx.module().attrs.get_string("arch", "sm_80");
  int sm = arch.size() > 3 ? std::atoi(arch.c_str() + 3) : 80;
  int64_t ws = sm >= 90 ? kCublasWorkspaceHopper : kCublasWorkspace;
  if (!ctx.module().extern_decl(kCublasMatmul)) ctx.module().add_extern(kCublasMatmul);
  StructInfo all = tuple_si({call.sinfo, tensor_si(DataType::u(8), {SymExpr(ws)})});
  Expr r =
      make_op_call("call_library", {make_string(kCublasMatmul), make_tuple({call.args[0], call.args[1]})}, {}, {all});
  r->sinfo = all;
  Expr item = make_tuple_get_item(ctx.emit(r, "matmul_all"), 0);
  item->sinfo = call.sinfo;
  return item;
}

std::optional<Expr> legalize_matmul(LegalizeContext& ctx, const CallNode& call) {
  if (std::optional<Expr> lib = blas_matmul(ctx, call)) return lib;
  if (std::optional<Expr> lib = cublas_matmul(ctx, call)) return lib;
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
