// The printer of one GLSL compute shader, shared by codegen_glsl.cc (a
// stage's shape: a thread per row, a workgroup per row, whole-workgroup
// blocks; and the file around the body) and glsl_printer.cc (types,
// expressions, statements, the narrow formats). Internal to the backend.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/gpu/schedule.h"
#include "backends/vulkan/codegen_glsl.h"
#include "backends/vulkan/glsl_lib.h"

namespace relax::vulkan {

class StagePrinter {
 public:
  StagePrinter(const tir::ProgramNode& p, const GlslFeatures& f, const GlslProgram& program)
      : prog_(p),
        feat_(f),
        push_vars_(program.push_vars),
        push_buffer_(program.push_in_buffer),
        chunks_(program.chunks),
        block_(program.block) {}

  std::string print(const GpuStage& st);

  // One row per workgroup (gpu_rows): the row's loops split over the
  // workgroup's threads; reductions combine through shared memory.
  std::string print_rows(const GpuStage& st, const GpuRows& rows);

  // Whole workgroups (gpu_shared_tile): one per index of the stage's vars,
  // its threads running the body with shared memory and barriers.
  std::string print_block(const GpuBlockStage& st);

  std::set<std::string> needs_;  // the device features the stage uses
  bool use_subgroups_ = false;   // reductions in a workgroup may use subgroup arithmetic
  bool subgroup_ = false;        // ... and one did

 private:
  // Declares `vars` (row-major over `extents`, the last fastest) from the
  // flat index `flat`.
  std::string unflatten(const std::string& flat, const std::vector<SymExpr>& vars, const std::vector<SymExpr>& extents);

  // A loop whose iterations are split over the workgroup's threads.
  std::string strided(const tir::ForNode& f);

  // A perfect nest of loops flattened into one index space split over the
  // workgroup's threads (a reduction over several axes).
  std::string strided_nest(const tir::ForNode& f);

  // acc = op(acc, reduction over the nest), every thread getting the result.
  std::string reduce(const GpuRowStep& step);

  std::string finish(const std::string& body);

  [[noreturn]] void unsupported(const std::string& what) const;

  // ---- types ----
  std::string value_type(DataType t);
  std::string storage_type(DataType t);
  void need(bool ok, const char* key, const std::string& what);

  // ---- names ----
  std::string name_of(const SymExpr& v);
  std::string buffer_name(const tir::Buffer& b);
  static std::string paren(const std::string& s) { return "(" + s + ")"; }

  // ---- integer helpers (floor division and modulo, Python's) ----
  std::string floor_helper(const std::string& type, bool mod);

  // ---- symbolic integers, as 32-bit ints ----
  std::string sym(const SymExpr& e);
  std::string int_literal(int64_t v);

  // The expression as a 32-bit index when it is made of symbolic values
  // and integer immediates only.
  std::optional<std::string> index(const tir::TExpr& e);
  std::string as_index(const tir::TExpr& e);
  std::string flat_index(const tir::Buffer& b, const std::vector<tir::TExpr>& idx);
  std::string access(const tir::Buffer& b, const std::vector<tir::TExpr>& idx);
  // The parameter's bindings (1, or its chunks: GlslProgram::chunks).
  int64_t chunks_of(const tir::Buffer& b) const;

  // ---- scalar expressions, each of its dtype's value type ----
  std::string imm(const tir::ImmNode& i);

  std::string expr(const tir::TExpr& e);

  std::string binary(const tir::BinaryNode& b);

  std::string call(const tir::CallNodeT& c);

  // A loop body of stores only (a register tile's jammed copies) reads
  // the same input element many times: each such load is read once into a
  // variable at the top of the body. Only loads of inputs (read-only) that
  // every iteration makes qualify (a select evaluates both branches).
  std::string hoist_loads(const tir::Stmt& body);

  // ---- narrow types: the float8 kinds, f4e2m1 and bf16 computed in f32;
  // 2- and 4-bit integers in 32-bit ints. All stored as the cpu backend
  // stores them (backends/llvm/narrow.cc, same algorithms). ----
  static bool narrow_float(DataType t) { return t.is_float() && t.code != TypeCode::Float; }
  static bool sub_byte(DataType t) { return t.bits < 8 && !t.is_bool(); }

  // Word and bit of element `flat` of a packed buffer.
  std::string packed_bit(const tir::Buffer& b, const std::vector<tir::TExpr>& idx);
  std::string packed_load(const tir::Buffer& b, const std::vector<tir::TExpr>& idx);
  // Two threads may own fields of one word: each clears and sets its own
  // bits atomically. The last element also clears the rest of its byte
  // (ONNX packs the padding as zero).
  std::string packed_store(const tir::Buffer& b, const std::vector<tir::TExpr>& idx, const std::string& value);

  // Storage bits (a uint expression) to the value type, and back.
  std::string decode(DataType t, const std::string& bits);
  std::string encode(DataType t, const std::string& value);
  std::string round_narrow(DataType t, const std::string& value);
  std::string round_bf16(DataType t, const std::string& value);

  // A library function (glsl_lib.h), defined once per shader.
  std::string use(const GlslFunction& f);

  // ---- statements ----
  std::string pad() const { return std::string(size_t(ind_) * 2, ' '); }
  // Push constant k: a member of the push-constant block, or an element of
  // the parameter buffer that stands for it (GlslProgram::push_in_buffer).
  std::string push_ref(size_t k) const;
  std::string stmt(const tir::Stmt& s);

  const tir::ProgramNode& prog_;
  const GlslFeatures& feat_;
  const std::vector<SymExpr>& push_vars_;
  bool push_buffer_;
  const std::vector<int64_t>& chunks_;
  uint32_t block_;
  int ind_ = 1;
  bool arith_ext_ = false, storage8_ = false, storage16_ = false;
  std::unordered_map<const SymNode*, std::string> names_;
  std::unordered_map<const tir::BufferNode*, std::string> buffers_;
  std::set<const tir::BufferNode*> scalars_;
  std::map<std::string, std::string> reductions_;  // value type -> its shared array
  std::map<std::string, std::string> hoisted_;     // a load's text -> the variable holding it
  int loads_ = 0;
  std::vector<tir::Buffer> keep_;  // buffers made while printing
  std::set<std::string> helper_names_;
  std::ostringstream helpers_;
  std::ostringstream shared_;  // the workgroup's shared arrays
  bool in_block_ = false;      // printing a whole-workgroup stage: barriers and shared memory allowed
};

}  // namespace relax::vulkan
