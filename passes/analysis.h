// Small analyses shared by passes.
#pragma once

#include <functional>
#include <string_view>
#include <unordered_set>

#include "ir/module.h"

namespace relax {

// Calls `f` on every expression reachable from `e` (pre-order), descending
// into tuples, calls, ifs, sequences (bindings and body) and local functions.
void visit_exprs(const Expr& e, const std::function<void(const Expr&)>& f);

// `e` as a call of the op named `op`; null for anything else.
const CallNode* as_op_call(const Expr& e, std::string_view op);

// Whether evaluating `e` may have a side effect: an impure op, a call to an
// impure or unknown function, or any such call nested in it.
bool has_side_effect(const Expr& e, const IRModule& mod);

// The variables `e` uses.
void collect_used_vars(const Expr& e, std::unordered_set<const VarNode*>& out);

}  // namespace relax
