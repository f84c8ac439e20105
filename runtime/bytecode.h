// The VM program: what the compiler's VM lowering writes into a package's
// `bytecode` section and the runtime's VM executes.
//
// As in Relax, the instruction set is tiny and builtins do the rest:
//
//   Call dst, callee, args...   callee is a VM function, a compiled kernel or
//                               a runtime builtin; dst may be -1 (no result)
//   Ret  reg
//   Goto offset                 pc += offset
//   If   reg, offset            if the value in reg is false: pc += offset
//
// An argument is a register, a constant of the pool or a small immediate.
// Each function frame has registers and a *shape heap*: the int64 slots that
// hold the function's symbolic variables once they are bound. Builtins that
// bind or evaluate symbolic shapes (`relax.match_shape`, `relax.make_shape`)
// read a constant *shape pattern* (an int list) that says, dim by dim, what to
// check, bind or compute; see ShapePattern below.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/error.h"

namespace relax::rt {

// The limits the package reader enforces (Executable::deserialize, the
// manifest). The compiler checks every package it writes against the same
// code (lower_to_vm reads its own bytecode back), so a limit a real model
// reaches is a build error naming the node, never a package its runtime
// refuses.
constexpr int64_t kMaxRank = 64;                // a tensor's rank (kernel buffers, manifest tensors)
constexpr int64_t kMaxShapeLength = 1 << 16;    // the values of a shape (make_shape, match_shape)
constexpr int kMaxShapeCodeDepth = 32;          // the stack of one dim's postfix code

// A malformed instruction: the function and the instruction it is at.
class BytecodeError : public Error {
 public:
  BytecodeError(std::string function, size_t pc, std::string what)
      : Error("bytecode: " + function + " @" + std::to_string(pc) + ": " + what),
        function(std::move(function)),
        pc(pc),
        what_alone(std::move(what)) {}
  std::string function;
  size_t pc;
  std::string what_alone;  // what is wrong, without the place
};

enum class Opcode : uint8_t { Call = 1, Ret = 2, Goto = 3, If = 4 };
enum class CalleeKind : uint8_t { Function = 0, Kernel = 1, Builtin = 2 };
enum class ArgKind : uint8_t { Register = 0, Const = 1, Imm = 2 };

struct Arg {
  ArgKind kind = ArgKind::Register;
  int64_t value = 0;  // register index, constant index, or the immediate
  static Arg reg(int64_t r) { return {ArgKind::Register, r}; }
  static Arg constant(int64_t c) { return {ArgKind::Const, c}; }
  static Arg imm(int64_t v) { return {ArgKind::Imm, v}; }
};

struct Instr {
  Opcode op = Opcode::Ret;
  int32_t dst = -1;                               // Call: the result register or -1; Ret/If: the register read
  CalleeKind callee_kind = CalleeKind::Function;  // Call
  int32_t callee = 0;                             // Call: index into functions / kernels / builtins
  int64_t offset = 0;                             // Goto, If
  std::vector<Arg> args;                          // Call
};

// A constant of the pool.
struct Constant {
  enum class Kind : uint8_t { Int = 0, Float = 1, String = 2, IntList = 3, Weight = 4, DType = 5 };
  Kind kind = Kind::Int;
  int64_t i = 0;              // Int; DType: code | bits << 8 | lanes << 16
  double f = 0;               // Float
  std::string s;              // String; Weight: the weight's name
  std::vector<int64_t> list;  // IntList (shapes, shape patterns)
};

struct Function {
  std::string name;
  std::vector<std::string> params;  // names, for messages
  int32_t num_registers = 0;
  int32_t heap_size = 0;  // shape-heap slots
  std::vector<Instr> code;
};

// What a compiled kernel takes. A kernel trusts the count, dtypes and ranks
// of its buffers and the count of its shape arguments (its prologue checks
// how their dims relate: docs/runtime_abi.md section 2), so the VM checks
// those at every call against this.
struct KernelSignature {
  std::vector<int64_t> dtypes;  // each buffer parameter's (inputs, then outputs), packed as DType::pack
  std::vector<int64_t> ranks;   // each buffer parameter's rank
  int64_t num_shape_args = 0;   // i64 slots: every buffer dim, then the symbolic parameters
  // The symbolic parameters come as a shape after the buffers.
  bool takes_syms() const;
};

struct Executable {
  std::vector<Function> functions;
  std::vector<std::string> kernels;   // kernel symbols in the target's code object
  std::vector<KernelSignature> kernel_signatures;  // one per kernel
  std::vector<std::string> builtins;  // runtime builtin names, resolved at load
  std::vector<Constant> constants;

  int find_function(std::string_view name) const;  // -1 when absent
  std::string serialize() const;
  // Throws rt::Error on malformed bytes (never reads out of bounds).
  static Executable deserialize(std::string_view bytes);
  // A readable listing, for relax-inspect and tests.
  std::string dump() const;
};

// Shape patterns (IntList constants), read by the shape builtins:
//   [ndim, dim_0, dim_1, ...], each dim one of
//     kAny                           accept any value (match only)
//     kBind slot lo hi               store the value in heap[slot]; lo <= v <= hi
//     kExpr len code[len]            the value must equal (match) / is (make) the expression
// An expression is postfix code over int64: kPushConst c, kPushSlot s, and
// the binary ops below, each popping two values and pushing one.
namespace ShapePattern {
enum : int64_t { kAny = 0, kBind = 1, kExpr = 2 };
enum : int64_t {
  kPushConst = 0,
  kPushSlot = 1,
  kAdd = 2,
  kSub = 3,
  kMul = 4,
  kFloorDiv = 5,
  kFloorMod = 6,
  kMin = 7,
  kMax = 8,
};
}  // namespace ShapePattern

// Evaluates postfix code on the heap. Throws rt::Error on a stack error or
// a division by zero.
int64_t eval_shape_code(const int64_t* code, int64_t len, const int64_t* heap, int64_t heap_size);

}  // namespace relax::rt
