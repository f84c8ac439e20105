// Lowering legalised graph functions to VM bytecode (runtime/bytecode.h).
//
// The module must be legalised: what is left of the graph is call_tir,
// call_library, call_builtin, calls of graph functions, tuples, If,
// match_cast, shape values and the few shape ops the VM does itself
// (shape_of, tensor_to_shape, shape_to_tensor). Anything else is an error
// naming the op and the variable it binds.
//
// Each function checks its parameters against their struct info on entry
// (dtype, rank, constant dims, the equalities that shared variables imply,
// the bounds of the variables) and binds its symbolic variables into the
// frame's shape heap; every later shape (an output to allocate, a
// match_cast to check) is computed from the heap by postfix code.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ir/analyzer.h"
#include "ir/error.h"
#include "ir/module.h"
#include "runtime/bytecode.h"

namespace relax {

struct VMLowered {
  rt::Executable exe;
  std::vector<std::string> programs;  // tensor programs called, by name: exe.kernels[i] calls programs[i]
  std::vector<std::string> weights;   // weight names the bytecode loads
};

// The shape-args slot of each variable of a tensor program's signature, in
// the kernel ABI's order (docs/runtime_abi.md section 2: every parameter's
// dims, inputs then outputs, then the symbolic parameters): the first
// plain dim that binds it, else its symbolic parameter. `num_slots` gets
// the slot count.
SymMap<int64_t> shape_arg_slots(const tir::ProgramNode& p, int64_t* num_slots = nullptr);

// Appends postfix code (rt::ShapePattern) that computes `e`; `slot` gives
// the heap slot of each variable (it may throw for an unbound one).
void sym_to_code(const SymExpr& e, const std::function<int64_t(const SymExpr&)>& slot, std::vector<int64_t>& code);

// The ops the VM lowering handles itself (the cross-level calls, shape
// values, loop and scan): legalisation leaves them alone.
bool handled_by_vm(const std::string& op);

// The module still calls ops that nothing lowers; every one is listed with
// the variables it binds (the ONNX node outputs), as relax-import lists
// unsupported ONNX ops.
struct NotLowered : Error {
  NotLowered(std::string msg, std::map<std::string, std::vector<std::string>> o)
      : Error(std::move(msg)), ops(std::move(o)) {}
  std::map<std::string, std::vector<std::string>> ops;  // op -> variables
};

// Throws NotLowered before anything else when ops are left.
// Bounds of symbolic variables come from each function's attribute
// sym_bounds (relax-build --bound) and are checked when a variable is bound.
VMLowered lower_to_vm(const IRModule& mod);

}  // namespace relax
