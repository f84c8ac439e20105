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

void ProgramCodegen::emit_stmt(const tir::Stmt& s) {
  switch (s->kind) {
    case tir::SKind::For:
      return emit_for(*tir::as<tir::ForNode>(s));
    case tir::SKind::Store: {
      auto* st = tir::as<tir::StoreNode>(s);
      return emit_store(st->buffer, st->indices, emit_expr(st->value));
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

// A loop whose body is only `acc[...] = acc[...] + v` on one element of a
// float buffer, the same indices on both sides and free of the loop
// variable: a sum reduction (softmax's denominator, a mean, a norm's
// variance).
bool float_sum_loop(const tir::ForNode& f) {
  const auto* st = tir::as<tir::StoreNode>(f.body);
  if (!st || !st->buffer->dtype.is_float() || st->value->kind != tir::TKind::Binary) return false;
  const auto* add = tir::as<tir::BinaryNode>(st->value);
  if (add->op != tir::BinOp::Add) return false;
  auto is_acc = [&](const tir::TExpr& e) {
    if (e->kind != tir::TKind::Load) return false;
    const auto* l = tir::as<tir::LoadNode>(e);
    if (l->buffer != st->buffer || l->indices.size() != st->indices.size()) return false;
    // Constant indices (an immediate, or a constant symbolic one), equal on both sides.
    auto constant = [](const tir::TExpr& i) -> std::optional<int64_t> {
      if (const auto* imm = tir::as<tir::ImmNode>(i)) return imm->int_value;
      if (const auto* sym = tir::as<tir::SymNodeT>(i); sym && sym->value.is_const()) return sym->value.const_value();
      return std::nullopt;
    };
    for (size_t i = 0; i < l->indices.size(); ++i) {
      std::optional<int64_t> a = constant(l->indices[i]), b = constant(st->indices[i]);
      if (!a || !b || *a != *b) return false;
    }
    return true;
  };
  return is_acc(add->a) || is_acc(add->b);
}

}  // namespace

void ProgramCodegen::emit_for(const tir::ForNode& f) {
  using tir::LoopKind;
  switch (f.loop_kind) {
    case LoopKind::Serial:
      // A float sum into one accumulator vectorises when LLVM may reorder
      // it (forcing the vectoriser allows that): partial sums per lane,
      // added at the end, the same order for every row. Not unrolled first:
      // a short constant extent (a layer norm's 32) was unrolled whole into
      // a serial chain of additions, which nothing may then reorder.
      if (vector_unit() && float_sum_loop(f))
        return emit_loop(f.var, i64c(0), emit_sym(f.extent), f.body,
                         {loop_bool(ctx_, "llvm.loop.vectorize.enable", true),
                          loop_flag(ctx_, "llvm.loop.mustprogress"), loop_flag(ctx_, "llvm.loop.unroll.disable")});
      return emit_loop(f.var, i64c(0), emit_sym(f.extent), f.body, {});
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
      emit_loop(f.var, i64c(0), emit_sym(f.extent), f.body, md);
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
