// The cpu backend's kernels: the host ABI (docs/runtime_abi.md section 2:
// the prologue that binds shapes, the exported globals, parallel loops
// through the runtime's hooks) around the LLVM code generator
// (backends/llvm/), and the module of all kernels. The target machine and
// the link are in link.cc.
#include "backends/cpu/codegen.h"

#include <algorithm>
#include <exception>
#include <thread>

#include <llvm/IR/DiagnosticInfo.h>
#include <llvm/IR/DiagnosticPrinter.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/Support/raw_ostream.h>

#include "backends/cpu/cpu_codegen.h"
#include "ir/error.h"

namespace relax::cpu {

using llvm::Value;
using llvmgen::kernel_symbols;
using llvmgen::LlvmTask;
using llvmgen::optimize_module;

namespace {

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

// `define`: the module that owns the globals; the others (the rest of a
// build split over threads) declare the hooks they read, resolved in the
// same shared object.
void add_abi_globals(llvm::Module& m, bool define) {
  auto& ctx = m.getContext();
  auto* i32 = llvm::Type::getInt32Ty(ctx);
  auto* ht = hooks_type(ctx);
  if (!define) {
    auto* hooks = new llvm::GlobalVariable(m, ht, false, llvm::GlobalValue::ExternalLinkage, nullptr,
                                           "relax_runtime_hooks");
    hooks->setAlignment(llvm::Align(8));
    hooks->setVisibility(llvm::GlobalValue::ProtectedVisibility);
    hooks->setDSOLocal(true);
    return;
  }
  auto* version = new llvm::GlobalVariable(m, i32, true, llvm::GlobalValue::ExternalLinkage,
                                           llvm::ConstantInt::get(i32, 1), "relax_abi_version");
  export_symbol(version);
  auto* hooks = new llvm::GlobalVariable(m, ht, false, llvm::GlobalValue::ExternalLinkage,
                                         llvm::ConstantAggregateZero::get(ht), "relax_runtime_hooks");
  hooks->setAlignment(llvm::Align(8));
  export_symbol(hooks);
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

namespace {

// The kernels `programs` (named `symbols`) in one module; `define_globals`
// as add_abi_globals takes it.
std::unique_ptr<llvm::Module> build_part(llvm::LLVMContext& ctx, const std::vector<tir::Program>& programs,
                                         const std::vector<std::string>& symbols, llvm::TargetMachine& tm,
                                         bool define_globals) {
  auto m = std::make_unique<llvm::Module>("relax_kernels", ctx);
  m->setTargetTriple(tm.getTargetTriple().str());
  m->setDataLayout(tm.createDataLayout());
  add_abi_globals(*m, define_globals);
  // With AVX-512: 16-lane vectors (LLVM's default for these CPUs is 8, to
  // spare the clock) and masked remainders. Measured on the corpus's small
  // CNNs and the quantize loops, the generated kernels' time fell 5-25%.
  const bool avx512 = tm.getMCSubtargetInfo()->checkFeatures("+avx512f");
  for (size_t i = 0; i < programs.size(); ++i) {
    if (!programs[i]) fail("cpu codegen: a null program");
    CpuCodegen cg(*m, *programs[i], symbols[i]);
    cg.masked_vectors = avx512;
    cg.run();
  }
  // Every function carries the target so the vectoriser's cost model and
  // the backend agree on the CPU.
  std::string cpu = tm.getTargetCPU().str(), features = tm.getTargetFeatureString().str();
  for (llvm::Function& f : *m) {
    if (f.isDeclaration()) continue;
    f.addFnAttr("target-cpu", cpu);
    if (!features.empty()) f.addFnAttr("target-features", features);
    f.addFnAttr(llvm::Attribute::NoUnwind);
    if (avx512) f.addFnAttr("prefer-vector-width", "512");
  }
  std::string err;
  llvm::raw_string_ostream os(err);
  if (llvm::verifyModule(*m, &os)) fail("cpu codegen: internal error, invalid LLVM IR: ", os.str());
  return m;
}

}  // namespace

std::string emit_llvm_ir(const std::vector<tir::Program>& programs, const CpuOptions& opts) {
  auto tm = make_target_machine(opts);
  llvm::LLVMContext ctx;
  Diagnostics diags(ctx);
  auto m = build_part(ctx, programs, kernel_symbols(programs), *tm, /*define_globals=*/true);
  optimize_module(*m, *tm, opts.opt_level);
  diags.check();
  std::string text;
  llvm::raw_string_ostream os(text);
  m->print(os, nullptr);
  return os.str();
}

// The kernels are split over the machine's cores: each part its own LLVM
// context, module, optimisation and object (LLVM took 84% of a ResNet-50
// build on one thread), linked into one shared object. Part k takes
// kernels k, k + parts, ...; the split depends on the kernel count and the
// machine's core count only, and part 0 owns the ABI globals.
CpuArtifact compile_programs(const std::vector<tir::Program>& programs, const CpuOptions& opts) {
  for (const tir::Program& p : programs)
    if (!p) fail("cpu codegen: a null program");
  std::vector<std::string> symbols = kernel_symbols(programs);
  const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  const size_t parts = std::max<size_t>(1, std::min(cores, programs.size() / 4));
  std::vector<std::string> objects(parts);
  std::vector<std::exception_ptr> errors(parts);
  auto compile_part = [&](size_t k) {
    try {
      std::vector<tir::Program> sub;
      std::vector<std::string> names;
      for (size_t i = k; i < programs.size(); i += parts) sub.push_back(programs[i]), names.push_back(symbols[i]);
      LlvmTask task("compiling " + std::to_string(programs.size()) + " kernels for the cpu (" + opts.cpu + ")");
      auto tm = make_target_machine(opts);
      llvm::LLVMContext ctx;
      Diagnostics diags(ctx);
      auto m = build_part(ctx, sub, names, *tm, /*define_globals=*/k == 0);
      optimize_module(*m, *tm, opts.opt_level);
      objects[k] = emit_object(*m, *tm);
      diags.check();
    } catch (...) {
      errors[k] = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  for (size_t k = 1; k < parts; ++k) threads.emplace_back(compile_part, k);
  compile_part(0);
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  CpuArtifact out;
  out.shared_object = link_shared_object(objects, *make_target_machine(opts));
  for (size_t i = 0; i < programs.size(); ++i) out.kernels.push_back({programs[i]->name, symbols[i]});
  return out;
}

// ---- One kernel --------------------------------------------------------------------------

void CpuCodegen::run() {
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

// Binds variables from buffer dims, then sym_params (docs/runtime_abi.md
// section 2). A dim that does not bind a variable must equal its declared
// value; the kernel returns 2 otherwise, before touching memory.
void CpuCodegen::emit_prologue(Value* buffers, Value* shape_args) {
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

namespace {

// Scalar operations in an expression: a load, arithmetic or a select 1,
// a math intrinsic (a polynomial or a library call) 16.
int64_t expr_work(const tir::TExpr& e) {
  if (!e) return 0;
  switch (e->kind) {
    case tir::TKind::Sym:
    case tir::TKind::Imm:
      return 0;
    case tir::TKind::Load: {
      int64_t w = 1;
      for (const tir::TExpr& i : tir::as<tir::LoadNode>(e)->indices) w += expr_work(i);
      return w;
    }
    case tir::TKind::Binary: {
      const auto* b = tir::as<tir::BinaryNode>(e);
      return 1 + expr_work(b->a) + expr_work(b->b);
    }
    case tir::TKind::Unary:
      return 1 + expr_work(tir::as<tir::UnaryNode>(e)->a);
    case tir::TKind::Cast:
      return 1 + expr_work(tir::as<tir::CastNode>(e)->a);
    case tir::TKind::Select: {
      const auto* s = tir::as<tir::SelectNode>(e);
      return 1 + expr_work(s->cond) + expr_work(s->a) + expr_work(s->b);
    }
    case tir::TKind::Call: {
      int64_t w = 16;
      for (const tir::TExpr& a : tir::as<tir::CallNodeT>(e)->args) w += expr_work(a);
      return w;
    }
  }
  return 1;
}

}  // namespace

// Loops multiply their body's work by their extent: evaluated here where
// it names only variables bound outside the parallel loop, else taken as
// 8 (an extent that depends on an enclosing loop's variable).
llvm::Value* CpuCodegen::emit_work(const tir::Stmt& s) {
  if (!s) return i64c(0);
  switch (s->kind) {
    case tir::SKind::For: {
      const auto* f = tir::as<tir::ForNode>(s);
      bool bound = true;
      for (const SymExpr& v : free_vars(f->extent))
        bound = bound && std::any_of(vars_.begin(), vars_.end(), [&](const auto& p) { return p.first == v; });
      llvm::Value* extent = bound ? b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, emit_sym(f->extent), i64c(0))
                                  : static_cast<llvm::Value*>(i64c(8));
      return b_.CreateMul(extent, emit_work(f->body));
    }
    case tir::SKind::Store: {
      const auto* st = tir::as<tir::StoreNode>(s);
      int64_t w = 1 + expr_work(st->value);
      for (const tir::TExpr& i : st->indices) w += expr_work(i);
      return i64c(w);
    }
    case tir::SKind::Seq: {
      llvm::Value* w = i64c(0);
      for (const tir::Stmt& c : tir::as<tir::SeqNode>(s)->stmts) w = b_.CreateAdd(w, emit_work(c));
      return w;
    }
    case tir::SKind::IfThenElse: {
      const auto* i = tir::as<tir::IfThenElseNode>(s);
      return b_.CreateAdd(i64c(1 + expr_work(i->cond)), b_.CreateAdd(emit_work(i->then_case), emit_work(i->else_case)));
    }
    case tir::SKind::Allocate:
      return emit_work(tir::as<tir::AllocateNode>(s)->body);
    case tir::SKind::Barrier:
      return i64c(0);
  }
  return i64c(1);
}

// The loop body becomes `void body(i64 begin, i64 end, ptr ctx)`; ctx points
// to a struct holding every bound variable and buffer pointer. The kernel
// hands it to relax_runtime_hooks.parallel_for, or calls it once over the
// whole range when the runtime installed none or the loop's estimated work
// is below kParallelMinWork.
void CpuCodegen::emit_parallel(const tir::ForNode& f) {
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
  // The pool where there is one and the loop has the work for it.
  Value* work = b_.CreateMul(extent, emit_work(f.body));
  b_.CreateCondBr(b_.CreateAnd(b_.CreateIsNotNull(pf), b_.CreateICmpSGE(work, i64c(kParallelMinWork))), pool_bb,
                  serial_bb);
  b_.SetInsertPoint(pool_bb);
  auto* pf_type = llvm::FunctionType::get(b_.getVoidTy(), {i64, b_.getPtrTy(), b_.getPtrTy()}, false);
  b_.CreateCall(pf_type, pf, {extent, body, ctx});
  b_.CreateBr(done_bb);
  b_.SetInsertPoint(serial_bb);
  b_.CreateCall(body_type, body, {i64c(0), extent, ctx});
  b_.CreateBr(done_bb);
  b_.SetInsertPoint(done_bb);
}

}  // namespace relax::cpu
