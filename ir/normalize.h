// Struct-info deduction for graph expressions.
#pragma once

#include "ir/expr.h"
#include "ir/module.h"
#include "ir/op.h"

namespace relax {

// The struct info of `e`, deduced from its operands, whose struct info must
// already be set: op calls use the op's rule, calls to module functions
// their signature (with symbolic parameters substituted), tuples, shapes and
// literals their own. Raises an Error naming the op for a provable mismatch.
StructInfo infer_struct_info(const Expr& e, const InferContext& ctx);

// Sets the struct info of `e` and its sub-expressions where unset, bottom
// up, and returns `e`.
const Expr& ensure_struct_info(const Expr& e, const InferContext& ctx);

}  // namespace relax
