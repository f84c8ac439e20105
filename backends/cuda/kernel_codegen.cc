// The cuda backend's kernel entry: a GPU stage (backends/gpu/schedule.h)
// as an NVPTX kernel through the LLVM code generator, its thread and block
// indices from PTX's special registers, shared memory in address space 3,
// barriers as bar.sync and warp shuffles as shfl.sync.bfly.
#include "backends/cuda/kernel_codegen.h"

#include <llvm/IR/IntrinsicsNVPTX.h>

#include "ir/error.h"

namespace relax::cuda {

using llvm::Value;

void KernelCodegen::begin_kernel() {
  in_parallel_ = true;  // the stage's own loops run in the thread
  std::vector<tir::Buffer> params(prog_.inputs);
  params.insert(params.end(), prog_.outputs.begin(), prog_.outputs.end());
  int64_t slots = int64_t(prog_.sym_params.size());
  for (const tir::Buffer& buf : params) slots += int64_t(buf->shape.size());
  std::vector<llvm::Type*> types(params.size(), llvm::PointerType::get(ctx_, 1));
  types.insert(types.end(), size_t(slots), b_.getInt64Ty());
  fn_ = llvm::Function::Create(llvm::FunctionType::get(b_.getVoidTy(), types, false),
                               llvm::GlobalValue::ExternalLinkage, symbol_, mod_);
  for (size_t k = 0; k < params.size(); ++k) {
    fn_->getArg(unsigned(k))->setName(params[k]->name);
    fn_->addParamAttr(unsigned(k), llvm::Attribute::NoAlias);
  }
  entry_ = llvm::BasicBlock::Create(ctx_, "entry", fn_);
  b_.SetInsertPoint(entry_);
  setup_alias_scopes();
  for (size_t k = 0; k < params.size(); ++k) {
    check_storable(params[k]);
    // Generic pointers, as the cpu code uses; NVPTX infers the global space back.
    buffers_.push_back({params[k].get(), b_.CreateAddrSpaceCast(fn_->getArg(unsigned(k)), b_.getPtrTy())});
  }
  size_t first_slot = params.size();
  bind_shape_slots([&](int64_t k) { return fn_->getArg(unsigned(first_slot + size_t(k))); });
}

void KernelCodegen::bind_flat_index(Value* idx, Value* limit, const std::vector<SymExpr>& vars,
                                    const std::vector<SymExpr>& extents) {
  auto* body_bb = llvm::BasicBlock::Create(ctx_, "body", fn_);
  auto* done_bb = llvm::BasicBlock::Create(ctx_, "done", fn_);
  b_.CreateCondBr(b_.CreateICmpULT(idx, limit), body_bb, done_bb);
  b_.SetInsertPoint(done_bb);
  b_.CreateRetVoid();
  b_.SetInsertPoint(body_bb);
  // The vars from idx, the last varying fastest.
  for (size_t k = vars.size(); k-- > 0;) {
    Value* ext = emit_sym(extents[k]);
    Value* v = k == 0 ? idx : b_.CreateURem(idx, ext);
    v->setName(vars[k].name());
    vars_.push_back({vars[k], v});
    if (k > 0) idx = b_.CreateUDiv(idx, ext);
  }
}

void KernelCodegen::end_kernel() {
  b_.CreateRetVoid();
  // A kernel entry point (NVVM's annotation).
  llvm::NamedMDNode* ann = mod_.getOrInsertNamedMetadata("nvvm.annotations");
  ann->addOperand(llvm::MDNode::get(ctx_, {llvm::ValueAsMetadata::get(fn_), llvm::MDString::get(ctx_, "kernel"),
                                           llvm::ValueAsMetadata::get(b_.getInt32(1))}));
}

namespace {
Value* special_register(llvm::IRBuilder<>& b, llvm::Intrinsic::ID id) {
  return b.CreateZExt(b.CreateIntrinsic(id, {}, {}), b.getInt64Ty());
}
}  // namespace

void KernelCodegen::run_stage(const GpuStage& stage) {
  begin_kernel();
  // idx = ctaid.x * ntid.x + tid.x; past the stage's extent: nothing to do.
  Value* idx = b_.CreateAdd(b_.CreateMul(special_register(b_, llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x),
                                         special_register(b_, llvm::Intrinsic::nvvm_read_ptx_sreg_ntid_x)),
                            special_register(b_, llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x), "idx");
  Value* total = i64c(1);
  for (const SymExpr& e : stage.extents) total = b_.CreateMul(total, emit_sym(e));
  bind_flat_index(idx, total, stage.vars, stage.extents);
  emit_stmt(stage.body);
  end_kernel();
}

void KernelCodegen::run_block_stage(const GpuBlockStage& stage) {
  begin_kernel();
  Value* thread = special_register(b_, llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x);
  thread->setName(stage.thread.name());
  vars_.push_back({stage.thread, thread});
  // One block per index of the vars; a block past them (none, when the
  // grid is sized right) leaves as a whole, so its barriers stay matched.
  Value* groups = i64c(1);
  for (const SymExpr& e : stage.extents) groups = b_.CreateMul(groups, emit_sym(e));
  bind_flat_index(special_register(b_, llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x), groups, stage.vars, stage.extents);
  emit_stmt(stage.body);
  end_kernel();
}

void KernelCodegen::emit_parallel(const tir::ForNode& f) {
  emit_loop(f.var, i64c(0), emit_sym(f.extent), f.body, {});  // the stage's own loops run in the thread
}

void KernelCodegen::emit_barrier() { b_.CreateIntrinsic(llvm::Intrinsic::nvvm_barrier0, {}, {}); }

Value* KernelCodegen::shared_memory(const tir::Buffer& buf, std::optional<uint64_t> bytes) {
  // The block's memory: a module global in address space 3.
  if (!bytes) error(cat("shared buffer '", buf->name, "' has a size known only at run time"));
  auto* type = llvm::ArrayType::get(b_.getInt8Ty(), *bytes);
  auto* g = new llvm::GlobalVariable(mod_, type, false, llvm::GlobalValue::InternalLinkage, llvm::UndefValue::get(type),
                                     symbol_ + "_" + buf->name, nullptr, llvm::GlobalValue::NotThreadLocal, 3);
  g->setAlignment(llvm::Align(16));
  return b_.CreateAddrSpaceCast(g, b_.getPtrTy());
}

Value* KernelCodegen::emit_shfl_xor(Value* x, Value* mask) {
  // A butterfly exchange among a full warp's 32 lanes.
  Value* v = x;
  bool is_float = v->getType()->isFloatTy();
  if (!is_float) v = b_.CreateBitCast(v, b_.getInt32Ty());
  Value* r =
      b_.CreateIntrinsic(is_float ? llvm::Intrinsic::nvvm_shfl_sync_bfly_f32 : llvm::Intrinsic::nvvm_shfl_sync_bfly_i32,
                         {}, {b_.getInt32(0xffffffffu), v, mask, b_.getInt32(0x1f)});
  return is_float ? r : b_.CreateBitCast(r, x->getType());
}

}  // namespace relax::cuda
