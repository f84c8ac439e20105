// Legaliser of matmul (ir/ops/matmul.cc). On a target with host kernels
// (the cpu), f32 and f64 products go to the BLAS library
// (call_library("blas.matmul"), OpenBLAS in the runtime), which does them
// better than a generated loop nest. On a target with a matmul library
// (the trait matmul=cublas:BYTES of the cuda target), float products big
// enough to pay for a library call that fusion cannot join go to it
// (call_library("cublas.matmul"), runtime/cuda.cc) with its workspace as a
// second output, so the graph
// allocates it, memory planning shares it, and a captured CUDA graph sees
// the same workspace on every replay. Everything else becomes a plain loop
// nest with an accumulator (f32 for narrow floats, else the result's
// dtype), numpy batch broadcasting, 1-D operands as a row (left) or column
// (right) vector.
#include <algorithm>
#include <cstdlib>

#include "ir/ops/common.h"
#include "passes/legalize/legalize.h"
#include "passes/legalize/te.h"

namespace relax {
namespace {

using namespace te;

constexpr const char* kBlasMatmul = "blas.matmul";
constexpr const char* kMatmulPack = "gemm.matmul_pack";
constexpr const char* kMatmulPacked = "gemm.matmul_packed";

// An f32 product by a constant 2-D b of at least 16 columns: b packed once
// as the runtime's product reads it (gemm.matmul_pack, which O2 lifts
// into @transform_params and a build folds into the package), and
// gemm.matmul_packed, which takes all of a's rows as one product. A call
// packing a weight on every run spent a quarter of BERT-base's time
// copying weights (the copy does not overlap the arithmetic).
std::optional<Expr> packed_matmul(LegalizeContext& ctx, const CallNode& call) {
  const auto* out = as<TensorSI>(call.sinfo);
  const auto* b = as<TensorSI>(call.args[1]->sinfo);
  if (out->dtype != DataType::f32() || call.args[1]->kind != ExprKind::Constant || b->shape->size() != 2 ||
      !(*b->shape)[0].is_const() || !(*b->shape)[1].is_const() || (*b->shape)[1].const_value() < 16)
    return std::nullopt;
  const int64_t K = (*b->shape)[0].const_value(), N = (*b->shape)[1].const_value();
  for (const char* name : {kMatmulPack, kMatmulPacked})
    if (!ctx.module().extern_decl(name)) ctx.module().add_extern(name);
  StructInfo packed_si = tensor_si(DataType::f32(), {SymExpr(gemm_packed_b_floats(K, N))});
  Expr pack = make_op_call("call_library", {make_string(kMatmulPack), make_tuple({call.args[1]})}, {}, {packed_si});
  pack->sinfo = packed_si;
  Expr packed = ctx.emit(pack, "matmul_weights");
  Expr r = make_op_call("call_library",
                        {make_string(kMatmulPacked), make_tuple({call.args[0], packed, make_shape({SymExpr(K), SymExpr(N)})})},
                        {}, {call.sinfo});
  r->sinfo = call.sinfo;
  return r;
}

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
  if (std::optional<Expr> packed = packed_matmul(ctx, call)) return packed;
  if (!ctx.module().extern_decl(kBlasMatmul)) ctx.module().add_extern(kBlasMatmul);
  Expr r = make_op_call("call_library", {make_string(kBlasMatmul), make_tuple({call.args[0], call.args[1]})}, {},
                        {call.sinfo});
  r->sinfo = call.sinfo;
  return r;
}

// The product size (batch * M * N * K multiply-adds) from which a device library wins
// over a generated kernel fused with its neighbours: 64^3. Symbolic dims
// count at their declared upper bound, or kTypicalDim when unbounded.
constexpr double kLibraryMinProduct = 64.0 * 64.0 * 64.0;
constexpr double kTypicalDim = 128;

// The target's matmul library (its trait matmul=LIB:WORKSPACE, "cublas"):
// call_library("LIB.matmul"), its result and a workspace of the bytes the
// target asks for.
std::optional<Expr> library_matmul(LegalizeContext& ctx, const CallNode& call) {
  if (ctx.matmul_library().empty()) return std::nullopt;
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
  if (product < kLibraryMinProduct) return std::nullopt;
  const std::string name = ctx.matmul_library() + ".matmul";
  const int64_t ws = std::max<int64_t>(ctx.traits().matmul_workspace, 1);
  if (!ctx.module().extern_decl(name)) ctx.module().add_extern(name);
  StructInfo all = tuple_si({call.sinfo, tensor_si(DataType::u(8), {SymExpr(ws)})});
  Expr r = make_op_call("call_library", {make_string(name), make_tuple({call.args[0], call.args[1]})}, {}, {all});
  r->sinfo = all;
  Expr item = make_tuple_get_item(ctx.emit(r, "matmul_all"), 0);
  item->sinfo = call.sinfo;
  return item;
}

std::optional<Expr> legalize_matmul(LegalizeContext& ctx, const CallNode& call) {
  if (std::optional<Expr> lib = blas_matmul(ctx, call)) return lib;
  if (std::optional<Expr> lib = library_matmul(ctx, call)) return lib;
  ProgramBuilder pb(ctx, call, "matmul");
  Buffer a = pb.arg(0, "a"), b = pb.arg(1, "b"), y = pb.result("out");
  if (!pb.known()) return pb.unknown();
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

// ---- matmul_integer ----------------------------------------------------------------------

constexpr const char* kQmatmul = "gemm.qmatmul";
constexpr const char* kQmatmulPack = "gemm.qmatmul_pack";
constexpr const char* kQmatmulPacked = "gemm.qmatmul_packed";

// Whether every dim is provably 1.
bool all_ones(const std::vector<SymExpr>& s) {
  return std::all_of(s.begin(), s.end(), [](const SymExpr& d) { return d.is_const(1); });
}

// The runtime's integer product (runtime/qgemm.h: integer dot products,
// VNNI where the CPU has it) when the zero points are ones it takes: a_zp
// one value or one per row of a (a's shape with a last dim of 1), b_zp
// one value or one per column (a vector of N, or (1, N)). A constant 2-D b
// with a constant zero point is packed once (gemm.qmatmul_pack, folded
// into the package at O2) for gemm.qmatmul_packed, which also folds a's
// batch dims into its rows; otherwise gemm.qmatmul packs b per call.
std::optional<Expr> library_matmul_integer(LegalizeContext& ctx, const CallNode& call) {
  if (!ctx.libraries()) return std::nullopt;
  const auto* y = as<TensorSI>(call.sinfo);
  const auto* a = as<TensorSI>(call.args[0]->sinfo);
  const auto* b = as<TensorSI>(call.args[1]->sinfo);
  const auto* za = as<TensorSI>(call.args[2]->sinfo);
  const auto* zb = as<TensorSI>(call.args[3]->sinfo);
  for (const TensorSI* t : {y, a, b, za, zb})
    if (!t || !t->shape) return std::nullopt;
  const std::vector<SymExpr>&as_ = *a->shape, &bs = *b->shape, &zas = *za->shape, &zbs = *zb->shape;
  if (as_.size() < 2 || bs.size() < 2) return std::nullopt;
  Analyzer& ana = ctx.analyzer();
  bool row_zp = zas.size() == as_.size() && zas.back().is_const(1);
  for (size_t i = 0; row_zp && i + 1 < zas.size(); ++i) row_zp = ana.can_prove_equal(zas[i], as_[i]);
  if (!all_ones(zas) && !row_zp) return std::nullopt;
  const SymExpr& n = bs.back();
  const bool column_zp = (zbs.size() == 1 && ana.can_prove_equal(zbs[0], n)) ||
                         (zbs.size() == 2 && zbs[0].is_const(1) && ana.can_prove_equal(zbs[1], n));
  if (!all_ones(zbs) && !column_zp) return std::nullopt;
  Expr out;
  if (bs.size() == 2 && bs[0].is_const() && bs[1].is_const() && call.args[1]->kind == ExprKind::Constant &&
      call.args[3]->kind == ExprKind::Constant) {
    for (const char* name : {kQmatmulPack, kQmatmulPacked})
      if (!ctx.module().extern_decl(name)) ctx.module().add_extern(name);
    const int64_t K = bs[0].const_value(), N = bs[1].const_value();
    StructInfo packed_si = tensor_si(DataType::u(8), {SymExpr(qgemm_packed_b_bytes(K, N))});
    Expr pack = make_op_call("call_library", {make_string(kQmatmulPack), make_tuple({call.args[1], call.args[3]})}, {},
                             {packed_si});
    pack->sinfo = packed_si;
    Expr packed = ctx.emit(pack, "qmatmul_weights");
    out = make_op_call("call_library",
                       {make_string(kQmatmulPacked),
                        make_tuple({call.args[0], packed, call.args[2], make_shape({SymExpr(K), SymExpr(N)})})},
                       {}, {call.sinfo});
  } else {
    if (!ctx.module().extern_decl(kQmatmul)) ctx.module().add_extern(kQmatmul);
    out = make_op_call("call_library", {make_string(kQmatmul), make_tuple(call.args)}, {}, {call.sinfo});
  }
  out->sinfo = call.sinfo;
  return out;
}

// (a - a_zp) @ (b - b_zp) in i32 as a loop nest: the zero points broadcast
// against their operands.
std::optional<Expr> legalize_matmul_integer(LegalizeContext& ctx, const CallNode& call) {
  if (std::optional<Expr> lib = library_matmul_integer(ctx, call)) return lib;
  ProgramBuilder pb(ctx, call, "matmul_integer");
  Buffer a = pb.arg(0, "a"), b = pb.arg(1, "b"), za = pb.arg(2, "a_zp"), zb = pb.arg(3, "b_zp"), y = pb.result("out");
  if (!pb.known()) return pb.unknown();
  const size_t batch = y->shape.size() - 2;
  std::vector<SymExpr> out_batch(y->shape.begin(), y->shape.begin() + long(batch));
  std::vector<SymExpr> a_batch(a->shape.begin(), a->shape.end() - 2);
  std::vector<SymExpr> b_batch(b->shape.begin(), b->shape.end() - 2);
  const DataType i32 = DataType::i32();
  return pb.finish(compute_reduce(
      y, {a->shape.back()}, sum_reducer(i32),
      [&](const Index& i, const Index& r) {
        Index bi(i.begin(), i.begin() + long(batch));
        Index ai = broadcast_index(a_batch, bi, out_batch);
        ai.push_back(i[batch]);
        ai.push_back(r[0]);
        Index bj = broadcast_index(b_batch, bi, out_batch);
        bj.push_back(r[0]);
        bj.push_back(i.back());
        TExpr av = cast(i32, load(a, ai)) - cast(i32, load_bcast(za, ai, a->shape));
        TExpr bv = cast(i32, load(b, bj)) - cast(i32, load_bcast(zb, bj, b->shape));
        return av * bv;
      },
      [&](const Index&, const TExpr& v) { return v; }));
}

}  // namespace

void register_matmul_legalizers(LegalizerRegistry& reg) {
  reg.add("matmul", legalize_matmul);
  reg.add("matmul_integer", legalize_matmul_integer);
}

}  // namespace relax
