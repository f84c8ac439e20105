// The LLVM code generator's statements: loops, conditions, allocations and
// the binding of shape arguments, shared by the cpu and cuda backends.
// Expressions are in expr.cc.
#include <llvm/IR/MDBuilder.h>

#include <optional>

#include "backends/llvm/codegen.h"
#include "backends/vm/kernel_abi.h"
#include "ir/error.h"

namespace relax::llvmgen {

using llvm::Value;

namespace {

// Larger constant-size local buffers go to the heap: pool threads may run
// with small stacks.
constexpr uint64_t kMaxStackBytes = 64 * 1024;

llvm::MDNode* loop_id(llvm::LLVMContext& ctx, const std::vector<llvm::Metadata*>& props) {
  std::vector<llvm::Metadata*> ops{nullptr};
  ops.insert(ops.end(), props.begin(), props.end());
  llvm::MDNode* id = llvm::MDNode::getDistinct(ctx, ops);
  id->replaceOperandWith(0, id);
  return id;
}

llvm::Metadata* loop_flag(llvm::LLVMContext& ctx, const char* name) {
  return llvm::MDNode::get(ctx, {llvm::MDString::get(ctx, name)});
}

llvm::Metadata* loop_bool(llvm::LLVMContext& ctx, const char* name, bool v) {
  auto* i1 = llvm::Type::getInt1Ty(ctx);
  return llvm::MDNode::get(
      ctx, {llvm::MDString::get(ctx, name), llvm::ConstantAsMetadata::get(llvm::ConstantInt::get(i1, v ? 1 : 0))});
}

}  // namespace

ProgramCodegen::ProgramCodegen(llvm::Module& m, const tir::ProgramNode& prog, const std::string& symbol)
    : mod_(m), ctx_(m.getContext()), b_(m.getContext()), prog_(prog), symbol_(symbol) {}

void ProgramCodegen::error(const std::string& what) const {
  fail(backend_name(), " codegen: prog @", prog_.name, ": ", what);
}

void ProgramCodegen::check_storable(const tir::Buffer& buf) const {
  if (buf->dtype.code == TypeCode::Handle || buf->dtype.is_void())
    error(cat("buffer '", buf->name, "' has dtype ", buf->dtype, ", which has no storage on ", device_name()));
}

void ProgramCodegen::setup_alias_scopes() {
  llvm::MDBuilder mdb(ctx_);
  llvm::MDNode* domain = mdb.createAnonymousAliasScopeDomain(symbol_);
  std::vector<std::pair<const tir::BufferNode*, llvm::MDNode*>> scopes;
  for (const auto* list : {&prog_.inputs, &prog_.outputs})
    for (const tir::Buffer& buf : *list)
      scopes.push_back({buf.get(), mdb.createAnonymousAliasScope(domain, buf->name)});
  for (auto& [buf, scope] : scopes) {
    std::vector<llvm::Metadata*> others;
    for (auto& [other, other_scope] : scopes)
      if (other != buf) others.push_back(other_scope);
    scopes_[buf] = {llvm::MDNode::get(ctx_, {scope}), llvm::MDNode::get(ctx_, others)};
  }
}

std::vector<std::pair<SymExpr, Value*>> ProgramCodegen::bind_shape_slots(const std::function<Value*(int64_t)>& slot) {
  std::vector<ShapeSlot> slots = kernel_shape_slots(prog_);
  std::vector<std::pair<SymExpr, Value*>> checks;  // declared dim, passed value
  for (size_t k = 0; k < slots.size(); ++k) {
    const ShapeSlot& s = slots[k];
    Value* v = slot(int64_t(k));
    if (s.role == ShapeSlot::Role::Bind) {
      v->setName(s.value.name());
      vars_.push_back({s.value, v});
    } else if (s.role == ShapeSlot::Role::Check) {
      checks.push_back({s.value, v});
    }
  }
  return checks;
}

namespace {
bool float_accumulation(const tir::StoreNode& st);
}  // namespace

void ProgramCodegen::emit_stmt(const tir::Stmt& s) {
  switch (s->kind) {
    case tir::SKind::For:
      return emit_for(*tir::as<tir::ForNode>(s));
    case tir::SKind::Store: {
      auto* st = tir::as<tir::StoreNode>(s);
      Value* v = emit_expr(st->value);
      // A sum the vectoriser may reorder (its loop is forced) may reorder
      // its last steps too: the partial sums of the lanes are then added
      // as a tree, not one after another (16 dependent additions a row).
      if (reorder_sums_ && float_accumulation(*st))
        if (auto* add = llvm::dyn_cast<llvm::Instruction>(v); add && add->getOpcode() == llvm::Instruction::FAdd)
          add->setHasAllowReassoc(true);
      return emit_store(st->buffer, st->indices, v);
    }
    case tir::SKind::Seq:
      for (const tir::Stmt& x : tir::as<tir::SeqNode>(s)->stmts) emit_stmt(x);
      return;
    case tir::SKind::IfThenElse: {
      auto* node = tir::as<tir::IfThenElseNode>(s);
      Value* cond = emit_expr(node->cond);
      auto* then_bb = llvm::BasicBlock::Create(ctx_, "then", fn_);
      auto* merge_bb = llvm::BasicBlock::Create(ctx_, "endif");
      auto* else_bb = node->else_case ? llvm::BasicBlock::Create(ctx_, "else") : merge_bb;
      b_.CreateCondBr(cond, then_bb, else_bb);
      b_.SetInsertPoint(then_bb);
      emit_stmt(node->then_case);
      b_.CreateBr(merge_bb);
      if (node->else_case) {
        else_bb->insertInto(fn_);
        b_.SetInsertPoint(else_bb);
        emit_stmt(node->else_case);
        b_.CreateBr(merge_bb);
      }
      merge_bb->insertInto(fn_);
      b_.SetInsertPoint(merge_bb);
      return;
    }
    case tir::SKind::Allocate:
      return emit_allocate(*tir::as<tir::AllocateNode>(s));
    case tir::SKind::Barrier:
      return emit_barrier();
  }
}

namespace {

// `acc[...] = acc[...] + v` on one element of a float buffer (constant
// indices, equal on both sides).
bool float_accumulation(const tir::StoreNode& st) {
  if (!st.buffer->dtype.is_float() || st.value->kind != tir::TKind::Binary) return false;
  const auto* add = tir::as<tir::BinaryNode>(st.value);
  if (add->op != tir::BinOp::Add) return false;
  auto is_acc = [&](const tir::TExpr& e) {
    if (e->kind != tir::TKind::Load) return false;
    const auto* l = tir::as<tir::LoadNode>(e);
    if (l->buffer != st.buffer || l->indices.size() != st.indices.size()) return false;
    // Constant indices (an immediate, or a constant symbolic one), equal on both sides.
    auto constant = [](const tir::TExpr& i) -> std::optional<int64_t> {
      if (const auto* imm = tir::as<tir::ImmNode>(i)) return imm->int_value;
      if (const auto* sym = tir::as<tir::SymNodeT>(i); sym && sym->value.is_const()) return sym->value.const_value();
      return std::nullopt;
    };
    for (size_t i = 0; i < l->indices.size(); ++i) {
      std::optional<int64_t> a = constant(l->indices[i]), b = constant(st.indices[i]);
      if (!a || !b || *a != *b) return false;
    }
    return true;
  };
  return is_acc(add->a) || is_acc(add->b);
}

// A loop whose body is only an accumulation into one float element: a sum
// reduction (softmax's denominator, a mean, a norm's variance).
bool float_sum_loop(const tir::ForNode& f) {
  const auto* st = tir::as<tir::StoreNode>(f.body);
  return st && float_accumulation(*st);
}

}  // namespace

// `for l in range(C): a[...] = max(a[...], part[l])` (or min) over a
// local f32 buffer of exactly C lanes, C a power of two from 4 to 64: the
// lanes of a lane-wise reduction (passes/legalize/reduce.cc), folded as
// a tree of vector steps on one load of `part` instead of C dependent
// scalar ones (softmax over short rows: two such folds a row), then
// into a. Each step is the scalar op's, NaN-propagating, so only the
// sign of a zero that ties may differ. False where the loop is not one.
bool ProgramCodegen::emit_lane_fold(const tir::ForNode& f) {
  if (!f.extent.is_const()) return false;
  const int64_t lanes = f.extent.const_value();
  const auto* st = tir::as<tir::StoreNode>(f.body);
  if (lanes < 4 || lanes > 64 || (lanes & (lanes - 1)) || !st || st->buffer->dtype != DataType::f32() ||
      st->value->kind != tir::TKind::Binary)
    return false;
  const auto* op = tir::as<tir::BinaryNode>(st->value);
  if ((op->op != tir::BinOp::Max && op->op != tir::BinOp::Min) || op->a->kind != tir::TKind::Load ||
      op->b->kind != tir::TKind::Load)
    return false;
  const auto* acc = tir::as<tir::LoadNode>(op->a);
  const auto* lane = tir::as<tir::LoadNode>(op->b);
  auto same_const_index = [&](const tir::TExpr& x, const tir::TExpr& y) {
    const auto *ix = tir::as<tir::ImmNode>(x), *iy = tir::as<tir::ImmNode>(y);
    if (ix && iy) return ix->int_value == iy->int_value;
    const auto *sx = tir::as<tir::SymNodeT>(x), *sy = tir::as<tir::SymNodeT>(y);
    return sx && sy && sx->value.is_const() && sy->value.is_const() &&
           sx->value.const_value() == sy->value.const_value();
  };
  if (acc->buffer != st->buffer || acc->indices.size() != st->indices.size()) return false;
  for (size_t i = 0; i < st->indices.size(); ++i)
    if (!same_const_index(acc->indices[i], st->indices[i])) return false;
  const tir::Buffer& part = lane->buffer;
  const auto* lv = lane->indices.size() == 1 ? tir::as<tir::SymNodeT>(lane->indices[0]) : nullptr;
  if (part->scope != tir::Scope::Local || part->dtype != DataType::f32() || part->shape.size() != 1 ||
      !part->shape[0].is_const() || part->shape[0].const_value() != lanes || !lv || !(lv->value == f.var))
    return false;
  const bool is_max = op->op == tir::BinOp::Max;
  auto combine = [&](Value* a, Value* b) {  // the scalar op's semantics, lane by lane
    Value* pick = is_max ? b_.CreateFCmpOGT(a, b) : b_.CreateFCmpOLT(a, b);
    return b_.CreateSelect(b_.CreateFCmpUNO(a, a), a, b_.CreateSelect(pick, a, b));
  };
  Value* v = b_.CreateAlignedLoad(llvm::FixedVectorType::get(b_.getFloatTy(), unsigned(lanes)), buffer_base(part),
                                  llvm::Align(4));
  for (int64_t w = lanes / 2; w >= 1; w /= 2) {
    std::vector<int> lo(static_cast<size_t>(w)), hi(static_cast<size_t>(w));
    for (int64_t i = 0; i < w; ++i) lo[size_t(i)] = int(i), hi[size_t(i)] = int(i + w);
    v = combine(b_.CreateShuffleVector(v, lo), b_.CreateShuffleVector(v, hi));
  }
  emit_store(st->buffer, st->indices, combine(emit_expr(op->a), b_.CreateExtractElement(v, uint64_t(0))));
  return true;
}

void ProgramCodegen::emit_for(const tir::ForNode& f) {
  using tir::LoopKind;
  switch (f.loop_kind) {
    case LoopKind::Serial:
      if (vector_unit() && emit_lane_fold(f)) return;
      // A float sum into one accumulator vectorises when LLVM may reorder
      // it (forcing the vectoriser allows that): partial sums per lane,
      // added at the end, the same order for every row. Not unrolled first:
      // a short constant extent (a layer norm's 32) was unrolled whole into
      // a serial chain of additions, which nothing may then reorder.
      if (vector_unit() && float_sum_loop(f)) {
        const bool outer = std::exchange(reorder_sums_, true);
        emit_loop(f.var, i64c(0), emit_sym(f.extent), f.body,
                  {loop_bool(ctx_, "llvm.loop.vectorize.enable", true), loop_flag(ctx_, "llvm.loop.mustprogress"),
                   loop_flag(ctx_, "llvm.loop.unroll.disable")});
        reorder_sums_ = outer;
        return;
      }
      {  // a serial loop inside a vectorised one keeps its sums in order
        const bool outer = std::exchange(reorder_sums_, false);
        emit_loop(f.var, i64c(0), emit_sym(f.extent), f.body, {});
        reorder_sums_ = outer;
        return;
      }
    case LoopKind::Parallel:
      if (in_parallel_) return emit_loop(f.var, i64c(0), emit_sym(f.extent), f.body, {});
      return emit_parallel(f);
    case LoopKind::Vectorized: {
      if (!vector_unit()) return emit_loop(f.var, i64c(0), emit_sym(f.extent), f.body, {});
      // Not unrolled first: a short constant extent (28) was unrolled
      // whole, and the loop around it vectorised across rows with strided
      // scalar loads instead.
      std::vector<llvm::Metadata*> md{loop_bool(ctx_, "llvm.loop.vectorize.enable", true),
                                      loop_flag(ctx_, "llvm.loop.mustprogress"),
                                      loop_flag(ctx_, "llvm.loop.unroll.disable")};
      if (masked_vectors && !f.extent.is_const())
        md.push_back(loop_bool(ctx_, "llvm.loop.vectorize.predicate.enable", true));
      SymExpr outer = vector_var_;
      vector_var_ = f.var;
      const bool outer_sums = std::exchange(reorder_sums_, true);
      emit_loop(f.var, i64c(0), emit_sym(f.extent), f.body, md);
      reorder_sums_ = outer_sums;
      vector_var_ = outer;
      return;
    }
    case LoopKind::Unrolled:
      return emit_loop(f.var, i64c(0), emit_sym(f.extent), f.body,
                       {loop_flag(ctx_, f.extent.is_const() ? "llvm.loop.unroll.full" : "llvm.loop.unroll.enable")});
    default:
      error(cat("loop '", f.var.name(), "' is bound to ", tir::loop_kind_text(f.loop_kind), ", a GPU axis, which the ",
                backend_name(), " backend cannot run"));
  }
}

void ProgramCodegen::emit_loop(const SymExpr& var, Value* begin, Value* end, const tir::Stmt& body,
                               std::vector<llvm::Metadata*> loop_md) {
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  auto* header = llvm::BasicBlock::Create(ctx_, var.name() + ".loop", fn_);
  auto* exit = llvm::BasicBlock::Create(ctx_, var.name() + ".exit");
  b_.CreateCondBr(b_.CreateICmpSLT(begin, end), header, exit);
  b_.SetInsertPoint(header);
  llvm::PHINode* iv = b_.CreatePHI(b_.getInt64Ty(), 2, var.name());
  iv->addIncoming(begin, pre);
  vars_.push_back({var, iv});
  emit_stmt(body);
  vars_.pop_back();
  Value* next = b_.CreateAdd(iv, i64c(1), var.name() + ".next", /*HasNUW=*/true, /*HasNSW=*/true);
  iv->addIncoming(next, b_.GetInsertBlock());
  llvm::BranchInst* back = b_.CreateCondBr(b_.CreateICmpSLT(next, end), header, exit);
  if (!loop_md.empty()) back->setMetadata(llvm::LLVMContext::MD_loop, loop_id(ctx_, loop_md));
  exit->insertInto(fn_);
  b_.SetInsertPoint(exit);
}

llvm::AllocaInst* ProgramCodegen::entry_alloca(llvm::Type* t, uint64_t count, uint64_t align) {
  llvm::IRBuilder<> eb(entry_, entry_->getFirstInsertionPt());
  llvm::AllocaInst* a = eb.CreateAlloca(t, count == 1 ? nullptr : eb.getInt64(count));
  a->setAlignment(llvm::Align(align));
  return a;
}

void ProgramCodegen::emit_allocate(const tir::AllocateNode& a) {
  const tir::Buffer& buf = a.buffer;
  check_storable(buf);
  int64_t bits = buf->dtype.storage_bits();
  bool constant = true;
  int64_t count = 1;
  for (const SymExpr& d : buf->shape) {
    if (!d.is_const()) {
      constant = false;
      break;
    }
    count *= std::max<int64_t>(d.const_value(), 0);
  }
  Value* base = nullptr;
  Value* heap = nullptr;
  int64_t const_bytes = std::max<int64_t>((count * bits + 7) / 8, 1);
  // A Shared buffer is the workgroup's memory where the backend has one.
  if (buf->scope == tir::Scope::Shared)
    base = shared_memory(buf, constant ? std::optional<uint64_t>(uint64_t(const_bytes)) : std::nullopt);
  if (!base && constant && uint64_t(const_bytes) <= kMaxStackBytes) {
    base = entry_alloca(b_.getInt8Ty(), uint64_t(const_bytes), 64);
  } else if (!base) {
    if (!can_allocate_heap())
      error(cat("buffer '", buf->name, "' is allocated with a size known only at run time, which a GPU thread cannot"));
    Value* n = i64c(1);
    for (const SymExpr& d : buf->shape)
      n = b_.CreateMul(n, b_.CreateSelect(b_.CreateICmpSGT(emit_sym(d), i64c(0)), emit_sym(d), i64c(0)));
    Value* bytes = b_.CreateUDiv(b_.CreateAdd(b_.CreateMul(n, i64c(bits)), i64c(7)), i64c(8));
    auto malloc_fn = mod_.getOrInsertFunction("malloc", b_.getPtrTy(), b_.getInt64Ty());
    // malloc(0) may return null; no element is accessed then.
    heap = b_.CreateCall(malloc_fn, {b_.CreateSelect(b_.CreateICmpEQ(bytes, i64c(0)), i64c(1), bytes)}, buf->name);
    base = heap;
  }
  buffers_.push_back({buf.get(), base});
  emit_stmt(a.body);
  buffers_.pop_back();
  if (heap) b_.CreateCall(mod_.getOrInsertFunction("free", b_.getVoidTy(), b_.getPtrTy()), {heap});
}

}  // namespace relax::llvmgen
