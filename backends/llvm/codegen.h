// The LLVM code generator shared by the cpu and cuda backends: a tensor
// program's statements (stmt.cc) and expressions (expr.cc), the narrow
// float formats (narrow.cc), LLVM's optimisation pipeline (support.cc).
// A backend derives a ProgramCodegen for its kernel entry and answers its
// hooks: how a parallel loop runs, what a barrier is, where shared memory
// lives, whether loops vectorise (backends/cpu/cpu_codegen.h: the host
// ABI; backends/cuda/kernel_codegen.h: NVPTX kernels).
#pragma once

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Target/TargetMachine.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/llvm/support.h"
#include "ir/tir.h"

namespace relax::llvmgen {

// ---- Narrow float formats (bf16, float8, f4e2m1) ------------------------------------

bool is_narrow_float(DataType t);  // computed in f32, stored in fewer bits
// Host-side conversions, used for immediates and the decode tables; the
// emitted code follows the same algorithm (emit_encode_narrow).
uint32_t encode_narrow(TypeCode code, float x);
float decode_narrow(TypeCode code, uint32_t bits);

// ---- Optimisation ---------------------------------------------------------------------

// LLVM's default pipeline at `opt_level` (0..3) for the machine `tm`.
void optimize_module(llvm::Module& m, llvm::TargetMachine& tm, int opt_level);

// ---- One program ----------------------------------------------------------------------

// Generates one kernel. Expressions are compiled to values of their compute
// type (compute_type): bool is i1, integers their own width (i4 is i4), f16
// half, the narrow floats f32. Memory holds the storage form.
class ProgramCodegen {
 public:
  ProgramCodegen(llvm::Module& m, const tir::ProgramNode& prog, const std::string& symbol);
  virtual ~ProgramCodegen() = default;

  // For targets whose masked vector loads and stores are cheap at every
  // element width (AVX-512):
  // - vectorized loops of symbolic extent fold their remainder into masked
  //   iterations (llvm.loop.vectorize.predicate.enable) instead of a
  //   scalar epilogue: rows of 20 to 48, common in small CNNs, spent up to
  //   half their time in the remainder;
  // - a padded read, select(0 <= e < n, x[.., max(min(e, n - 1), 0)], pad),
  //   reads x[.., e] under a branch instead of at the clamped index, where
  //   e steps by 1 with a vectorized loop: LLVM's vectoriser turns it into
  //   a masked contiguous load where the clamp made it a gather (stride-1
  //   depthwise convolutions fused with their padding). Elsewhere (a
  //   stride-2 pooling window, serial loops) the branch would only stop
  //   vectorisation, and the clamp stays.
  bool masked_vectors = false;

 protected:
  // ---- The backend's hooks ----
  // The backend's name in errors ("cpu", "cuda") and where a buffer lives
  // ("cpu", "a GPU").
  virtual const char* backend_name() const = 0;
  virtual const char* device_name() const = 0;
  // A parallel loop outside any other (nested ones run serially).
  virtual void emit_parallel(const tir::ForNode& f) = 0;
  // Whether vectorized loops ask LLVM's vectoriser (no vector unit: serial).
  virtual bool vector_unit() const { return true; }
  // A Barrier: nothing where one thread runs a whole workgroup's iterations
  // in order.
  virtual void emit_barrier() {}
  // The base of a Shared buffer of `bytes` bytes (nullopt: a size known
  // only at run time); nullptr: allocated as a local buffer.
  virtual llvm::Value* shared_memory(const tir::Buffer& buf, std::optional<uint64_t> bytes) { return nullptr; }
  // Whether a buffer of run-time size may be allocated (malloc / free).
  virtual bool can_allocate_heap() const { return true; }
  // shfl_xor(x, mask): a butterfly exchange among a warp's lanes.
  virtual llvm::Value* emit_shfl_xor(llvm::Value* x, llvm::Value* mask);

  // Binds the variables of buffer dims and sym_params from their slots in
  // the kernel ABI's order (backends/vm/kernel_abi.h; `slot(k)` loads slot
  // k); returns the declared dims to check, each with the value passed.
  std::vector<std::pair<SymExpr, llvm::Value*>> bind_shape_slots(const std::function<llvm::Value*(int64_t)>& slot);
  void setup_alias_scopes();
  [[noreturn]] void error(const std::string& what) const;
  // An error naming `buf` unless its dtype has storage (not a handle or void).
  void check_storable(const tir::Buffer& buf) const;

  // Statements (stmt.cc).
  void emit_stmt(const tir::Stmt& s);
  void emit_for(const tir::ForNode& f);
  bool emit_lane_fold(const tir::ForNode& f);
  void emit_allocate(const tir::AllocateNode& a);
  // Emits `for var in [begin, end)` around `body` in rotated form, the
  // shape the loop passes expect; `loop_md` is its !llvm.loop properties.
  void emit_loop(const SymExpr& var, llvm::Value* begin, llvm::Value* end, const tir::Stmt& body,
                 std::vector<llvm::Metadata*> loop_md);
  llvm::AllocaInst* entry_alloca(llvm::Type* t, uint64_t count, uint64_t align);

  // Expressions (expr.cc).
  llvm::Value* emit_expr(const tir::TExpr& e);
  llvm::Value* emit_sym(const SymExpr& e);
  llvm::Value* emit_imm(const tir::ImmNode& imm);
  llvm::Value* emit_binary(const tir::BinaryNode& b);
  llvm::Value* emit_unary(const tir::UnaryNode& u);
  llvm::Value* emit_call(const tir::CallNodeT& c);
  llvm::Value* emit_cast(DataType to, DataType from, llvm::Value* v);
  llvm::Value* emit_int_div(tir::BinOp op, llvm::Value* a, llvm::Value* b, bool is_signed);
  llvm::Value* emit_libm(const char* f32_name, DataType t, std::vector<llvm::Value*> args);
  // e^x, tanh(x) and erf(x) of f32 values (scalar or vector) inline in fused
  // multiply-adds, so loops of them vectorise instead of calling libm per
  // lane; on targets with a vector unit (GPU targets keep their library's).
  llvm::Value* emit_exp_f32(llvm::Value* x);
  llvm::Value* emit_tanh_f32(llvm::Value* x);
  llvm::Value* emit_erf_f32(llvm::Value* x);
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
  llvm::Value* fp_to_int_sat(llvm::Value* x, bool is_signed, llvm::Type* dst);
  llvm::Value* emit_guarded_select(const tir::SelectNode& s);
  SymExpr vector_var_;  // the innermost vectorized loop's variable while its body is emitted
  // While a loop the vectoriser is forced on is emitted (it may reorder a
  // float sum in it): its float accumulations are marked reassociable.
  bool reorder_sums_ = false;
  llvm::Type* compute_type(DataType t);
  llvm::Type* storage_type(DataType t);  // of one element; sub-byte types: nullptr
  // Tags an access to a parameter buffer with its alias scope.
  void annotate_access(llvm::Instruction* access, const tir::Buffer& buf);
  llvm::Constant* i64c(int64_t v) { return b_.getInt64(uint64_t(v)); }

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
  int parallel_bodies_ = 0;
};

}  // namespace relax::llvmgen
