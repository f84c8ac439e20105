// Lowering legalised graph functions to VM bytecode (runtime/bytecode.h).
//
// The module must be legalised: what is left of the graph is call_tir,
// call_library, call_builtin, calls of graph functions, tuples, If,
// match_cast, shape values and the few shape ops the VM does itself
// (shape_of, tensor_to_shape, shape_to_tensor): the ops whose
// OpInfo::lowering is Library or VM. Anything else is an error naming the
// op and the variable it binds. Kernel calls pass their shape arguments in
// the kernel ABI's order (backends/vm/kernel_abi.h).
//
// Each function checks its parameters against their struct info on entry
// (dtype, rank, constant dims, the equalities that shared variables imply,
// the bounds of the variables) and binds its symbolic variables into the
// frame's shape heap; every later shape (an output to allocate, a
// match_cast to check) is computed from the heap by postfix code.
#pragma once

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

// The ops lower_to_vm implements itself, sorted: exactly those whose
// OpInfo::lowering is Library or VM (a unit test holds them equal).
std::vector<std::string> vm_lowered_ops();

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
