// The row rules: a stage as one workgroup per row (gpu_rows), and that
// schedule as a block stage for code generators that compile block
// stages (gpu_row_block).
#include <cmath>
#include <functional>
#include <set>

#include "backends/gpu/rule_util.h"
#include "ir/error.h"
#include "ir/tir_functor.h"

namespace relax {

using namespace gpu;

namespace {

// The identity of `op` on `t`: what a thread with no iterations contributes.
tir::TExpr reduce_identity(tir::BinOp op, DataType t) {
  switch (op) {
    case tir::BinOp::Add:
      return t.is_float() ? tir::imm(t, 0) : tir::imm_int(t, 0);
    case tir::BinOp::Mul:
      return t.is_float() ? tir::imm(t, 1) : tir::imm_int(t, 1);
    case tir::BinOp::Max:
    case tir::BinOp::Min: {
      bool mx = op == tir::BinOp::Max;
      if (t.is_float()) return tir::imm(t, mx ? -HUGE_VAL : HUGE_VAL);
      if (t.is_uint()) return tir::imm_int(t, mx ? 0 : (t.bits >= 64 ? -1 : int64_t((uint64_t(1) << t.bits) - 1)));
      int64_t lo = t.bits >= 64 ? INT64_MIN : -(int64_t(1) << (t.bits - 1));
      return tir::imm_int(t, mx ? lo : -(lo + 1));
    }
    default:
      fail("a workgroup reduction of this kind");
  }
}

// `for v in range(extent) body`, its iterations split over the threads:
// thread t runs v = t, t + T, ... below the extent.
tir::Stmt strided_loop(const std::vector<SymExpr>& vars, const std::vector<SymExpr>& extents, const tir::Stmt& body,
                       const SymExpr& thread, int64_t threads, int& fresh) {
  SymExpr total(int64_t(1));
  for (const SymExpr& e : extents) total = total * e;
  SymExpr j = SymExpr::var("j" + std::to_string(fresh++));
  SymExpr index = j * SymExpr(threads) + thread;
  SymMap<SymExpr> map;
  unflatten_into(index, vars, extents, map);
  return tir::make_for(
      j, floordiv(total + SymExpr(threads - 1), SymExpr(threads)), tir::LoopKind::Serial,
      tir::make_if(tir::binary(tir::BinOp::LT, tir::sym(index), tir::sym(total)), tir::substitute(body, map)));
}

}  // namespace

std::optional<GpuRows> gpu_rows(const GpuStage& st) {
  if (st.vars.empty()) return std::nullopt;
  GpuRows rows;
  rows.work = SymExpr(int64_t(0));
  std::vector<tir::Stmt> stmts;
  if (!row_statements(st.body, rows.locals, stmts)) return std::nullopt;
  bool any_loop = false;
  for (const tir::Stmt& s : stmts) {
    GpuRowStep step;
    step.kind = GpuRowStep::Kind::Serial;
    step.stmt = s;
    if (const auto* store = tir::as<tir::StoreNode>(s)) {
      if (store->buffer->scope == tir::Scope::Global)
        step.kind = GpuRowStep::Kind::Global;
      else if (!is_scalar_local(store->buffer))
        return std::nullopt;
    } else if (const auto* f = tir::as<tir::ForNode>(s)) {
      if (f->loop_kind >= tir::LoopKind::BlockX) return std::nullopt;
      if (reduction_nest(s, step.acc, step.op)) {
        step.kind = GpuRowStep::Kind::Reduce;
      } else if (f->loop_kind == tir::LoopKind::Parallel || f->loop_kind == tir::LoopKind::Vectorized ||
                 independent(*f)) {
        // Its stores must all be global (a thread's locals would diverge).
        bool local_store = false;
        tir::visit_stmts(f->body, [&](const tir::Stmt& x) {
          if (tir::as<tir::AllocateNode>(x)) local_store = true;  // per-iteration arrays: keep it simple
          if (const auto* t = tir::as<tir::StoreNode>(x); t && t->buffer->scope != tir::Scope::Global)
            local_store = true;
        });
        if (local_store) return std::nullopt;
        step.kind = GpuRowStep::Kind::Spread;
      } else {
        return std::nullopt;
      }
      SymExpr iterations = f->extent;  // a reduction's whole nest (split flat over the threads)
      if (step.kind == GpuRowStep::Kind::Reduce)
        for (const auto* g = tir::as<tir::ForNode>(f->body); g; g = tir::as<tir::ForNode>(g->body))
          iterations = iterations * g->extent;
      rows.work = rows.work + iterations;
      any_loop = true;
    } else {
      return std::nullopt;  // conditions, barriers
    }
    rows.steps.push_back(std::move(step));
  }
  if (!any_loop) return std::nullopt;
  // Barriers where a later step reads global memory an earlier one wrote.
  for (size_t i = 0; i < rows.steps.size(); ++i) {
    if (rows.steps[i].kind != GpuRowStep::Kind::Global && rows.steps[i].kind != GpuRowStep::Kind::Spread) continue;
    std::set<const tir::BufferNode*> stored;
    tir::visit_stmts(rows.steps[i].stmt, [&](const tir::Stmt& x) {
      if (const auto* st = tir::as<tir::StoreNode>(x)) stored.insert(st->buffer.get());
    });
    for (size_t j = i + 1; j < rows.steps.size(); ++j)
      for (const tir::BufferNode* b : stored) rows.steps[i].barrier_after |= tir::reads_buffer(rows.steps[j].stmt, b);
  }
  return rows;
}

GpuBlockStage gpu_row_block(const GpuStage& st, const GpuRows& rows, int64_t threads, int64_t warp) {
  if (threads < 1 || (threads & (threads - 1)) != 0 || (warp > 1 && (warp & (warp - 1)) != 0))
    fail("gpu_row_block: threads (", threads, ") and warp (", warp, ") must be powers of two");
  GpuBlockStage out;
  out.vars = st.vars;
  out.extents = st.extents;
  out.threads = threads;
  out.thread = SymExpr::var("tid");
  const SymExpr& t = out.thread;
  auto at0 = [] { return std::vector<tir::TExpr>{tir::sym(SymExpr(int64_t(0)))}; };
  std::vector<tir::Stmt> body;
  std::vector<tir::Buffer> scratch;  // shared arrays and the reductions' saved initial values
  int fresh = 0;
  auto barrier = [&] { body.push_back(tir::make_barrier()); };
  for (const GpuRowStep& step : rows.steps) {
    switch (step.kind) {
      case GpuRowStep::Kind::Serial:
        body.push_back(step.stmt);
        break;
      case GpuRowStep::Kind::Global:
        body.push_back(
            tir::make_if(tir::binary(tir::BinOp::EQ, tir::sym(t), tir::sym(SymExpr(int64_t(0)))), step.stmt));
        break;
      case GpuRowStep::Kind::Spread: {
        const auto* f = tir::as<tir::ForNode>(step.stmt);
        body.push_back(strided_loop({f->var}, {f->extent}, f->body, t, threads, fresh));
        break;
      }
      case GpuRowStep::Kind::Reduce: {
        // Each thread folds its share of the nest's iterations into acc,
        // from the identity; the partials meet (a warp's lanes by shuffles,
        // then the warps' partials in shared memory, or a shared tree), and
        // every thread ends with init op (all of them).
        const tir::Buffer& acc = step.acc;
        DataType dt = acc->dtype;
        auto a = [&] { return tir::load(acc, at0()); };
        auto combine = [&](tir::TExpr x, tir::TExpr y) { return tir::binary(step.op, std::move(x), std::move(y)); };
        std::string k = std::to_string(fresh++);
        tir::Buffer init = tir::make_buffer("init" + k, dt, {SymExpr(int64_t(1))}, tir::Scope::Local);
        scratch.push_back(init);
        body.push_back(tir::make_store(init, at0(), a()));
        body.push_back(tir::make_store(acc, at0(), reduce_identity(step.op, dt)));
        std::vector<SymExpr> vars, extents;
        tir::Stmt inner = step.stmt;
        for (const auto* f = tir::as<tir::ForNode>(inner); f; f = tir::as<tir::ForNode>(inner)) {
          vars.push_back(f->var);
          extents.push_back(f->extent);
          inner = f->body;
        }
        body.push_back(strided_loop(vars, extents, inner, t, threads, fresh));
        bool shuffle = warp > 1 && threads % warp == 0 && dt.bits == 32 && dt.is_scalar();
        int64_t parts = shuffle ? threads / warp : threads;
        tir::Buffer red = tir::make_buffer("red" + k, dt, {SymExpr(parts)}, tir::Scope::Shared);
        scratch.push_back(red);
        if (shuffle) {
          for (int64_t off = warp / 2; off > 0; off /= 2)
            body.push_back(tir::make_store(
                acc, at0(),
                combine(a(), tir::call(tir::Intrinsic::shfl_xor, {a(), tir::imm_int(DataType::i32(), off)}))));
          body.push_back(tir::make_if(
              tir::binary(tir::BinOp::EQ, tir::sym(floormod(t, SymExpr(warp))), tir::sym(SymExpr(int64_t(0)))),
              tir::make_store(red, {tir::sym(floordiv(t, SymExpr(warp)))}, a())));
          barrier();
          body.push_back(tir::make_store(acc, at0(), tir::load(init, at0())));
          SymExpr g = SymExpr::var("g" + k);
          body.push_back(tir::make_for(g, SymExpr(parts), tir::LoopKind::Serial,
                                       tir::make_store(acc, at0(), combine(a(), tir::load(red, {tir::sym(g)})))));
        } else {
          body.push_back(tir::make_store(red, {tir::sym(t)}, a()));
          barrier();
          for (int64_t half = threads / 2; half > 0; half /= 2) {
            body.push_back(tir::make_if(tir::binary(tir::BinOp::LT, tir::sym(t), tir::sym(SymExpr(half))),
                                        tir::make_store(red, {tir::sym(t)},
                                                        combine(tir::load(red, {tir::sym(t)}),
                                                                tir::load(red, {tir::sym(t + SymExpr(half))})))));
            barrier();
          }
          body.push_back(tir::make_store(acc, at0(), combine(tir::load(init, at0()), tir::load(red, at0()))));
        }
        barrier();  // the shared array is free again
        break;
      }
    }
    if (step.barrier_after) barrier();
  }
  tir::Stmt s = tir::make_seq(std::move(body));
  for (size_t i = scratch.size(); i-- > 0;) s = tir::make_allocate(scratch[i], s);
  for (size_t i = rows.locals.size(); i-- > 0;) s = tir::make_allocate(rows.locals[i], s);
  out.body = s;
  return out;
}

}  // namespace relax
