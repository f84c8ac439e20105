// The CPU code generator: the kernel ABI (prologue, exported globals),
// statements and loops. Expressions are in codegen_expr.cc, the target and
// linking in codegen_link.cc.
#include "backends/cpu/codegen.h"

#include <llvm/IR/DiagnosticInfo.h>
#include <llvm/IR/DiagnosticPrinter.h>
#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include <set>

#include "backends/cpu/codegen_internal.h"
#include "ir/error.h"

namespace relax::cpu {

using llvm::Value;

namespace {

// Larger constant-size local buffers go to the heap: pool threads may run
// with small stacks.
constexpr uint64_t kMaxStackBytes = 64 * 1024;

llvm::StructType* hooks_type(llvm::LLVMContext& ctx) {
  if (auto* t = llvm::StructType::getTypeByName(ctx, "RelaxRuntimeHooks")) return t;
  auto* i32 = llvm::Type::getInt32Ty(ctx);
  return llvm::StructType::create(ctx, {i32, i32, llvm::PointerType::getUnqual(ctx)}, "RelaxRuntimeHooks");
}

// Protected visibility: exported, yet not preemptible, so the kernels reach
// the globals PC-relative instead of through the GOT.
void export_symbol(llvm::GlobalValue* g) {
  g->setLinkage(llvm::GlobalValue::ExternalLinkage);
  g->setVisibility(llvm::GlobalValue::ProtectedVisibility);
  g->setDSOLocal(true);
}

void add_abi_globals(llvm::Module& m) {
  auto& ctx = m.getContext();
  auto* i32 = llvm::Type::getInt32Ty(ctx);
  auto* version = new llvm::GlobalVariable(m, i32, true, llvm::GlobalValue::ExternalLinkage,
                                           llvm::ConstantInt::get(i32, 1), "relax_abi_version");
  export_symbol(version);
  auto* ht = hooks_type(ctx);
  auto* hooks = new llvm::GlobalVariable(m, ht, false, llvm::GlobalValue::ExternalLinkage,
                                         llvm::ConstantAggregateZero::get(ht), "relax_runtime_hooks");
  hooks->setAlignment(llvm::Align(8));
  export_symbol(hooks);
}

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

// LLVM reports loops it could not vectorise as warnings on stderr. A library
// must not print, and such a loop is still correct, so only errors are kept.
struct Diagnostics {
  std::string errors;
  explicit Diagnostics(llvm::LLVMContext& ctx) {
    ctx.setDiagnosticHandlerCallBack(
        [](const llvm::DiagnosticInfo& di, void* self) {
          if (di.getSeverity() != llvm::DS_Error) return;
          llvm::raw_string_ostream os(static_cast<Diagnostics*>(self)->errors);
          llvm::DiagnosticPrinterRawOStream printer(os);
          di.print(printer);
          os << "\n";
        },
        this);
  }
  void check() const {
    if (!errors.empty()) fail("cpu codegen: LLVM failed: ", errors);
  }
};

}  // namespace

std::vector<std::string> kernel_symbols(const std::vector<tir::Program>& programs) {
  std::vector<std::string> out;
  std::set<std::string> used;
  for (const tir::Program& p : programs) {
    std::string base = "relax_k_";
    for (char c : p->name) base += std::isalnum(static_cast<unsigned char>(c)) || c == '_' ? c : '_';
    std::string s = base;
    for (int n = 1; used.count(s); ++n) s = base + "_" + std::to_string(n);
    used.insert(s);
    out.push_back(s);
  }
  return out;
}

std::unique_ptr<llvm::Module> build_module(llvm::LLVMContext& ctx, const std::vector<tir::Program>& programs,
                                           llvm::TargetMachine& tm) {
  auto m = std::make_unique<llvm::Module>("relax_kernels", ctx);
  m->setTargetTriple(tm.getTargetTriple().str());
  m->setDataLayout(tm.createDataLayout());
  add_abi_globals(*m);
  std::vector<std::string> symbols = kernel_symbols(programs);
  for (size_t i = 0; i < programs.size(); ++i) {
    if (!programs[i]) fail("cpu codegen: a null program");
    ProgramCodegen(*m, *programs[i], symbols[i]).run();
  }
  // Every function carries the target so the vectoriser's cost model and
  // the backend agree on the CPU.
  std::string cpu = tm.getTargetCPU().str(), features = tm.getTargetFeatureString().str();
  for (llvm::Function& f : *m) {
    if (f.isDeclaration()) continue;
    f.addFnAttr("target-cpu", cpu);
    if (!features.empty()) f.addFnAttr("target-features", features);
    f.addFnAttr(llvm::Attribute::NoUnwind);
  }
  std::string err;
  llvm::raw_string_ostream os(err);
  if (llvm::verifyModule(*m, &os)) fail("cpu codegen: internal error, invalid LLVM IR: ", os.str());
  return m;
}

std::string emit_llvm_ir(const std::vector<tir::Program>& programs, const CpuOptions& opts) {
  auto tm = make_target_machine(opts);
  llvm::LLVMContext ctx;
  Diagnostics diags(ctx);
  auto m = build_module(ctx, programs, *tm);
  optimize_module(*m, *tm, opts.opt_level);
  diags.check();
  std::string text;
  llvm::raw_string_ostream os(text);
  m->print(os, nullptr);
  return os.str();
}

CpuArtifact compile_programs(const std::vector<tir::Program>& programs, const CpuOptions& opts) {
  LlvmTask task("compiling " + std::to_string(programs.size()) + " kernels for the cpu (" + opts.cpu + ")");
  auto tm = make_target_machine(opts);
  llvm::LLVMContext ctx;
  Diagnostics diags(ctx);
  auto m = build_module(ctx, programs, *tm);
  optimize_module(*m, *tm, opts.opt_level);
  std::string object = emit_object(*m, *tm);
  diags.check();
  CpuArtifact out;
  out.shared_object = link_shared_object(object, *tm);
  std::vector<std::string> symbols = kernel_symbols(programs);
  for (size_t i = 0; i < programs.size(); ++i) out.kernels.push_back({programs[i]->name, symbols[i]});
  return out;
}

// ---- One program -------------------------------------------------------------------------

ProgramCodegen::ProgramCodegen(llvm::Module& m, const tir::ProgramNode& prog, const std::string& symbol)
    : mod_(m), ctx_(m.getContext()), b_(m.getContext()), prog_(prog), symbol_(symbol) {}

void ProgramCodegen::error(const std::string& what) const {
  fail(gpu_ ? "cuda codegen: prog @" : "cpu codegen: prog @", prog_.name, ": ", what);
}

void ProgramCodegen::check_storable(const tir::Buffer& buf) const {
  if (buf->dtype.code == TypeCode::Handle || buf->dtype.is_void())
    error(cat("buffer '", buf->name, "' has dtype ", buf->dtype, ", which has no storage on ", gpu_ ? "a GPU" : "cpu"));
}

void ProgramCodegen::run() {
  auto* ptr = b_.getPtrTy();
  auto* type = llvm::FunctionType::get(b_.getInt32Ty(), {ptr, ptr}, false);
  fn_ = llvm::Function::Create(type, llvm::GlobalValue::ExternalLinkage, symbol_, mod_);
  export_symbol(fn_);
  Value* buffers = fn_->getArg(0);
  Value* shape_args = fn_->getArg(1);
  buffers->setName("buffers");
  shape_args->setName("shape_args");
  fn_->addParamAttr(0, llvm::Attribute::NoCapture);
  fn_->addParamAttr(0, llvm::Attribute::ReadOnly);
  fn_->addParamAttr(1, llvm::Attribute::NoCapture);
  fn_->addParamAttr(1, llvm::Attribute::ReadOnly);
  entry_ = llvm::BasicBlock::Create(ctx_, "entry", fn_);
  b_.SetInsertPoint(entry_);
  setup_alias_scopes();
  emit_prologue(buffers, shape_args);
  emit_stmt(prog_.body);
  b_.CreateRet(b_.getInt32(0));
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

void ProgramCodegen::begin_gpu_kernel() {
  gpu_ = true;
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

void ProgramCodegen::bind_flat_index(Value* idx, Value* limit, const std::vector<SymExpr>& vars,
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

void ProgramCodegen::end_gpu_kernel() {
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

void ProgramCodegen::run_stage(const GpuStage& stage) {
  begin_gpu_kernel();
  // idx = ctaid.x * ntid.x + tid.x; past the stage's extent: nothing to do.
  Value* idx = b_.CreateAdd(b_.CreateMul(special_register(b_, llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x),
                                         special_register(b_, llvm::Intrinsic::nvvm_read_ptx_sreg_ntid_x)),
                            special_register(b_, llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x), "idx");
  Value* total = i64c(1);
  for (const SymExpr& e : stage.extents) total = b_.CreateMul(total, emit_sym(e));
  bind_flat_index(idx, total, stage.vars, stage.extents);
  emit_stmt(stage.body);
  end_gpu_kernel();
}

void ProgramCodegen::run_block_stage(const GpuBlockStage& stage) {
  begin_gpu_kernel();
  Value* thread = special_register(b_, llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x);
  thread->setName(stage.thread.name());
  vars_.push_back({stage.thread, thread});
  // One block per index of the vars; a block past them (none, when the
  // grid is sized right) leaves as a whole, so its barriers stay matched.
  Value* groups = i64c(1);
  for (const SymExpr& e : stage.extents) groups = b_.CreateMul(groups, emit_sym(e));
  bind_flat_index(special_register(b_, llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x), groups, stage.vars, stage.extents);
  emit_stmt(stage.body);
  end_gpu_kernel();
}

// Binds variables from buffer dims, then sym_params (docs/runtime_abi.md
// section 2). A dim that does not bind a variable must equal its declared
// value; the kernel returns 2 otherwise, before touching memory.
void ProgramCodegen::emit_prologue(Value* buffers, Value* shape_args) {
  std::vector<tir::Buffer> params(prog_.inputs);
  params.insert(params.end(), prog_.outputs.begin(), prog_.outputs.end());
  for (size_t k = 0; k < params.size(); ++k) {
    const tir::Buffer& buf = params[k];
    check_storable(buf);
    Value* base =
        b_.CreateLoad(b_.getPtrTy(), b_.CreateConstInBoundsGEP1_64(b_.getPtrTy(), buffers, k), buf->name + ".data");
    buffers_.push_back({buf.get(), base});
  }
  std::vector<std::pair<SymExpr, Value*>> checks = bind_shape_slots([&](int64_t k) -> Value* {
    return b_.CreateLoad(b_.getInt64Ty(), b_.CreateConstInBoundsGEP1_64(b_.getInt64Ty(), shape_args, uint64_t(k)));
  });
  if (checks.empty()) return;
  Value* bad = b_.getFalse();
  for (auto& [dim, passed] : checks) bad = b_.CreateOr(bad, b_.CreateICmpNE(emit_sym(dim), passed));
  auto* fail_bb = llvm::BasicBlock::Create(ctx_, "bad_shape", fn_);
  auto* ok_bb = llvm::BasicBlock::Create(ctx_, "body", fn_);
  b_.CreateCondBr(bad, fail_bb, ok_bb);
  b_.SetInsertPoint(fail_bb);
  b_.CreateRet(b_.getInt32(2));
  b_.SetInsertPoint(ok_bb);
}

std::vector<std::pair<SymExpr, Value*>> ProgramCodegen::bind_shape_slots(const std::function<Value*(int64_t)>& slot) {
  auto is_bound = [&](const SymExpr& v) {
    for (auto& [var, val] : vars_)
      if (var == v) return true;
    return false;
  };
  int64_t next = 0;
  std::vector<std::pair<SymExpr, Value*>> checks;  // declared dim, passed value
  for (const auto* list : {&prog_.inputs, &prog_.outputs})
    for (const tir::Buffer& buf : *list)
      for (const SymExpr& d : buf->shape) {
        Value* v = slot(next++);
        if (d.is_var() && !is_bound(d)) {
          v->setName(d.name());
          vars_.push_back({d, v});
        } else {
          checks.push_back({d, v});
        }
      }
  for (const SymExpr& p : prog_.sym_params) {
    Value* v = slot(next++);
    if (!is_bound(p)) {
      v->setName(p.name());
      vars_.push_back({p, v});
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
      if (gpu_) b_.CreateIntrinsic(llvm::Intrinsic::nvvm_barrier0, {}, {});
      return;  // on cpu one thread runs a whole workgroup's iterations in order
  }
}

void ProgramCodegen::emit_for(const tir::ForNode& f) {
  using tir::LoopKind;
  switch (f.loop_kind) {
    case LoopKind::Serial:
      return emit_loop(f.var, i64c(0), emit_sym(f.extent), f.body, {});
    case LoopKind::Parallel:
      if (in_parallel_) return emit_loop(f.var, i64c(0), emit_sym(f.extent), f.body, {});
      return emit_parallel(f);
    case LoopKind::Vectorized:
      if (gpu_) return emit_loop(f.var, i64c(0), emit_sym(f.extent), f.body, {});  // no vector unit to use
      return emit_loop(
          f.var, i64c(0), emit_sym(f.extent), f.body,
          {loop_bool(ctx_, "llvm.loop.vectorize.enable", true), loop_flag(ctx_, "llvm.loop.mustprogress")});
    case LoopKind::Unrolled:
      return emit_loop(f.var, i64c(0), emit_sym(f.extent), f.body,
                       {loop_flag(ctx_, f.extent.is_const() ? "llvm.loop.unroll.full" : "llvm.loop.unroll.enable")});
    default:
      error(cat("loop '", f.var.name(), "' is bound to ", tir::loop_kind_text(f.loop_kind),
                ", a GPU axis, which the cpu backend cannot run"));
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

// The loop body becomes `void body(i64 begin, i64 end, ptr ctx)`; ctx points
// to a struct holding every bound variable and buffer pointer. The kernel
// hands it to relax_runtime_hooks.parallel_for, or calls it once over the
// whole range when the runtime installed none.
void ProgramCodegen::emit_parallel(const tir::ForNode& f) {
  Value* extent = emit_sym(f.extent);
  std::vector<llvm::Type*> fields;
  for (auto& v : vars_) fields.push_back(v.second->getType());
  for (auto& bp : buffers_) fields.push_back(bp.second->getType());
  auto* ctx_type = llvm::StructType::get(ctx_, fields);
  llvm::AllocaInst* ctx = entry_alloca(ctx_type, 1, 8);
  unsigned field = 0;
  for (auto& v : vars_) b_.CreateStore(v.second, b_.CreateStructGEP(ctx_type, ctx, field++));
  for (auto& bp : buffers_) b_.CreateStore(bp.second, b_.CreateStructGEP(ctx_type, ctx, field++));

  auto* i64 = b_.getInt64Ty();
  auto* body_type = llvm::FunctionType::get(b_.getVoidTy(), {i64, i64, b_.getPtrTy()}, false);
  auto* body = llvm::Function::Create(body_type, llvm::GlobalValue::InternalLinkage,
                                      cat(symbol_, ".parallel", parallel_bodies_++), mod_);
  body->addParamAttr(2, llvm::Attribute::NoCapture);
  {
    // Generate the body with the environment rebound to the loaded copies.
    auto saved_vars = vars_;
    auto saved_buffers = buffers_;
    llvm::Function* saved_fn = fn_;
    llvm::BasicBlock* saved_entry = entry_;
    llvm::IRBuilderBase::InsertPoint saved_ip = b_.saveIP();
    fn_ = body;
    entry_ = llvm::BasicBlock::Create(ctx_, "entry", body);
    b_.SetInsertPoint(entry_);
    field = 0;
    for (auto& v : vars_) {
      v.second = b_.CreateLoad(v.second->getType(), b_.CreateStructGEP(ctx_type, body->getArg(2), field++));
      v.second->setName(v.first.name());
    }
    for (auto& bp : buffers_)
      bp.second = b_.CreateLoad(bp.second->getType(), b_.CreateStructGEP(ctx_type, body->getArg(2), field++),
                                bp.first->name + ".data");
    in_parallel_ = true;
    emit_loop(f.var, body->getArg(0), body->getArg(1), f.body, {});
    in_parallel_ = false;
    b_.CreateRetVoid();
    vars_ = saved_vars;
    buffers_ = saved_buffers;
    fn_ = saved_fn;
    entry_ = saved_entry;
    b_.restoreIP(saved_ip);
  }

  auto* run_bb = llvm::BasicBlock::Create(ctx_, "parallel", fn_);
  auto* pool_bb = llvm::BasicBlock::Create(ctx_, "parallel.pool", fn_);
  auto* serial_bb = llvm::BasicBlock::Create(ctx_, "parallel.serial", fn_);
  auto* done_bb = llvm::BasicBlock::Create(ctx_, "parallel.done", fn_);
  b_.CreateCondBr(b_.CreateICmpSGT(extent, i64c(0)), run_bb, done_bb);
  b_.SetInsertPoint(run_bb);
  auto* hooks = mod_.getNamedGlobal("relax_runtime_hooks");
  Value* pf = b_.CreateLoad(b_.getPtrTy(), b_.CreateStructGEP(hooks_type(ctx_), hooks, 2), "parallel_for");
  b_.CreateCondBr(b_.CreateIsNotNull(pf), pool_bb, serial_bb);
  b_.SetInsertPoint(pool_bb);
  auto* pf_type = llvm::FunctionType::get(b_.getVoidTy(), {i64, b_.getPtrTy(), b_.getPtrTy()}, false);
  b_.CreateCall(pf_type, pf, {extent, body, ctx});
  b_.CreateBr(done_bb);
  b_.SetInsertPoint(serial_bb);
  b_.CreateCall(body_type, body, {i64c(0), extent, ctx});
  b_.CreateBr(done_bb);
  b_.SetInsertPoint(done_bb);
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
  if (gpu_ && buf->scope == tir::Scope::Shared) {
    // The block's memory: a module global in address space 3.
    if (!constant) error(cat("shared buffer '", buf->name, "' has a size known only at run time"));
    auto* type = llvm::ArrayType::get(b_.getInt8Ty(), uint64_t(std::max<int64_t>((count * bits + 7) / 8, 1)));
    auto* g =
        new llvm::GlobalVariable(mod_, type, false, llvm::GlobalValue::InternalLinkage, llvm::UndefValue::get(type),
                                 symbol_ + "_" + buf->name, nullptr, llvm::GlobalValue::NotThreadLocal, 3);
    g->setAlignment(llvm::Align(16));
    base = b_.CreateAddrSpaceCast(g, b_.getPtrTy());
  } else if (constant && uint64_t((count * bits + 7) / 8) <= kMaxStackBytes) {
    base = entry_alloca(b_.getInt8Ty(), std::max<int64_t>((count * bits + 7) / 8, 1), 64);
  } else {
    if (gpu_)
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

}  // namespace relax::cpu
