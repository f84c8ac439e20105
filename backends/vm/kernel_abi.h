// The kernel ABI's shape arguments (docs/runtime_abi.md section 2), worked
// out once for the VM lowering and every code generator.
//
// A kernel call passes, after the buffers, one i64 slot per dim of every
// parameter buffer (inputs, then outputs, each buffer's dims in order),
// then one per symbolic parameter of the program. The first slot that
// holds a plain variable binds it; every other dim slot is a value the
// kernel may check against what its declaration makes of the bound
// variables (a constant, an expression, a variable seen before).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "ir/tir.h"

namespace relax {

struct ShapeSlot {
  enum class Role {
    Bind,    // the first slot of plain variable `value`: it binds it
    Check,   // a dim slot whose value `value` gives (once its variables are bound)
    Unused,  // a symbolic parameter already bound by a dim
  };
  SymExpr value;
  Role role = Role::Bind;
};

// Every shape-args slot of `p`, in the ABI's order.
std::vector<ShapeSlot> kernel_shape_slots(const tir::ProgramNode& p);

// The slot that binds each variable of `p`'s signature (the Bind slots of
// kernel_shape_slots); `num_slots` gets the slot count.
SymMap<int64_t> shape_arg_slots(const tir::ProgramNode& p, int64_t* num_slots = nullptr);

// Appends postfix code (rt::ShapePattern) that computes `e`; `slot` gives
// the heap slot of each variable (it may throw for an unbound one).
void sym_to_code(const SymExpr& e, const std::function<int64_t(const SymExpr&)>& slot, std::vector<int64_t>& code);

}  // namespace relax
