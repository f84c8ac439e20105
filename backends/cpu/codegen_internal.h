// Internals of the CPU backend shared by its files: the per-program code
// generator (statements in codegen.cc, expressions in codegen_expr.cc), the
// narrow float formats (codegen_narrow.cc) and the target / link steps
// (codegen_link.cc).
#pragma once

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Target/TargetMachine.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/common/gpu_schedule.h"
#include "backends/cpu/codegen.h"

namespace relax::cpu {

// ---- Narrow float formats (bf16, float8, f4e2m1) ------------------------------------

bool is_narrow_float(DataType t);  // computed in f32, stored in fewer bits
// Host-side conversions, used for immediates and the decode tables; the
// emitted code follows the same algorithm (emit_encode_narrow).
uint32_t encode_narrow(TypeCode code, float x);
float decode_narrow(TypeCode code, uint32_t bits);

// ---- Target, optimisation, object and link ------------------------------------------

std::unique_ptr<llvm::TargetMachine> make_target_machine(const CpuOptions& opts);
void optimize_module(llvm::Module& m, llvm::TargetMachine& tm, int opt_level);
std::string emit_object(llvm::Module& m, llvm::TargetMachine& tm);
// Links the object into a shared object with lld, in-process.
std::string link_shared_object(const std::string& object, llvm::TargetMachine& tm);

// ---- The module -----------------------------------------------------------------------

// Builds the module: one kernel per program plus the exported globals.
std::unique_ptr<llvm::Module> build_module(llvm::LLVMContext& ctx, const std::vector<tir::Program>& programs,
                                           llvm::TargetMachine& tm);

// Generates one kernel. Expressions are compiled to values of their compute
// type (compute_type): bool is i1, integers their own width (i4 is i4), f16
// half, the narrow floats f32. Memory holds the storage form.
class ProgramCodegen {
 public:
  ProgramCodegen(llvm::Module& m, const tir::ProgramNode& prog, const std::string& symbol);
  // The cpu kernel of the program (docs/runtime_abi.md section 2).
  void run();
  // The GPU form, for the cuda backend (NVPTX): one stage of the program
  // (gpu_schedule.h) as the kernel `symbol`,
  //   void symbol(ptr addrspace(1) buffer..., i64 shape_arg...)
  // with the buffers in parameter order and every shape-args slot, one
  // thread per index of the stage's vars on a 1-D grid; threads past the
  // last index return at once. Shapes are checked by the host. Loops in
  // the stage run serially in the thread; a buffer of run-time size
  // cannot be allocated (lift-workspaces runs before).
  void run_stage(const GpuStage& stage);
  // A workgroup stage (gpu_shared_tile): one block of stage.threads threads
  // per index of its vars, `thread` the index in the block; Shared buffers
  // are the block's memory (address space 3), a Barrier is bar.sync 0.
  void run_block_stage(const GpuBlockStage& stage);

 private:
  // Statements (codegen.cc).
  void emit_prologue(llvm::Value* buffers, llvm::Value* shape_args);
  void setup_alias_scopes();
  // Binds the variables of buffer dims and sym_params from their slots
  // (`slot(k)` loads slot k); returns the declared dims to check, each
  // with the value passed.
  std::vector<std::pair<SymExpr, llvm::Value*>> bind_shape_slots(const std::function<llvm::Value*(int64_t)>& slot);
  // run_stage's and run_block_stage's common part: the kernel, its
  // parameters bound; returns the flat index (thread or block) and the
  // count it must stay below, after which the stage's vars are bound.
  void begin_gpu_kernel();
  void bind_flat_index(llvm::Value* idx, llvm::Value* limit, const std::vector<SymExpr>& vars,
                       const std::vector<SymExpr>& extents);
  void end_gpu_kernel();
  void emit_stmt(const tir::Stmt& s);
  void emit_for(const tir::ForNode& f);
  void emit_parallel(const tir::ForNode& f);
  void emit_allocate(const tir::AllocateNode& a);
  // Emits `for var in [begin, end)` around `body` in rotated form, the
  // shape the loop passes expect; `loop_md` is its !llvm.loop properties.
  void emit_loop(const SymExpr& var, llvm::Value* begin, llvm::Value* end, const tir::Stmt& body,
                 std::vector<llvm::Metadata*> loop_md);
  llvm::AllocaInst* entry_alloca(llvm::Type* t, uint64_t count, uint64_t align);

  // Expressions (codegen_expr.cc).
  llvm::Value* emit_expr(const tir::TExpr& e);
  llvm::Value* emit_sym(const SymExpr& e);
  llvm::Value* emit_imm(const tir::ImmNode& imm);
  llvm::Value* emit_binary(const tir::BinaryNode& b);
  llvm::Value* emit_unary(const tir::UnaryNode& u);
  llvm::Value* emit_call(const tir::CallNodeT& c);
  llvm::Value* emit_cast(DataType to, DataType from, llvm::Value* v);
  llvm::Value* emit_int_div(tir::BinOp op, llvm::Value* a, llvm::Value* b, bool is_signed);
  llvm::Value* emit_libm(const char* f32_name, DataType t, std::vector<llvm::Value*> args);
  llvm::Value* emit_load(const tir::Buffer& buf, const std::vector<tir::TExpr>& indices);
  void emit_store(const tir::Buffer& buf, const std::vector<tir::TExpr>& indices, llvm::Value* value);
  llvm::Value* element_offset(const tir::Buffer& buf, const std::vector<tir::TExpr>& indices);
  llvm::Value* buffer_base(const tir::Buffer& buf);
  llvm::Value* to_index(const tir::TExpr& e);
  // Rounds a value of a narrow float type computed in f32 back to its
  // format (bf16 after each operation; the float8 kinds only on casts).
  llvm::Value* round_result(DataType t, llvm::Value* v);
  llvm::Value* to_math(DataType t, llvm::Value* v);    // f16 -> f32; others unchanged
  llvm::Value* from_math(DataType t, llvm::Value* v);  // back, rounded
  llvm::Value* emit_encode_narrow(TypeCode code, llvm::Value* f32);
  llvm::Value* emit_decode_narrow(TypeCode code, llvm::Value* bits);
  llvm::Value* bf16_bits(llvm::Value* f32);  // -> i16, round to nearest even
  llvm::Value* f64_to_f32_odd(llvm::Value* f64);
  llvm::Type* compute_type(DataType t);
  llvm::Type* storage_type(DataType t);  // of one element; sub-byte types: nullptr
  // Tags an access to a parameter buffer with its alias scope.
  void annotate_access(llvm::Instruction* access, const tir::Buffer& buf);
  llvm::Constant* i64c(int64_t v) { return b_.getInt64(uint64_t(v)); }
  [[noreturn]] void error(const std::string& what) const;
  // An error naming `buf` unless its dtype has storage (not a handle or void).
  void check_storable(const tir::Buffer& buf) const;

  llvm::Module& mod_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> b_;
  const tir::ProgramNode& prog_;
  std::string symbol_;

  // The environment: bound variables and buffer base pointers, in binding
  // order so that a parallel body captures them deterministically.
  std::vector<std::pair<SymExpr, llvm::Value*>> vars_;
  std::vector<std::pair<const tir::BufferNode*, llvm::Value*>> buffers_;
  llvm::Function* fn_ = nullptr;
  llvm::BasicBlock* entry_ = nullptr;  // where the current function's allocas go
  // One alias scope per parameter buffer: the buffers of one call do not
  // overlap, which lets the vectoriser keep loop-invariant loads out of
  // vectorised loops (a gather's index) without runtime checks.
  std::unordered_map<const tir::BufferNode*, std::pair<llvm::MDNode*, llvm::MDNode*>> scopes_;  // scope, noalias
  bool in_parallel_ = false;  // nested parallel loops run serially
  bool gpu_ = false;          // run_stage: NVPTX, no heap, no runtime hooks
  int parallel_bodies_ = 0;
};

}  // namespace relax::cpu
