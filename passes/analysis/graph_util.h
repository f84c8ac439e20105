// Small analyses of graph IR shared by passes.
#pragma once

#include <functional>
#include <string_view>
#include <unordered_set>

#include "ir/module.h"
#include "ir/tir.h"
#include "ir/visitor.h"  // visit_exprs

namespace relax {

// `e` as a call of the op named `op`; null for anything else.
const CallNode* as_op_call(const Expr& e, std::string_view op);

// Whether evaluating `e` may have a side effect: an impure op, a call to an
// impure or unknown function, or any such call nested in it.
bool has_side_effect(const Expr& e, const IRModule& mod);

// The variables `e` uses.
void collect_used_vars(const Expr& e, std::unordered_set<const VarNode*>& out);

// Records var -> value for each plain variable dim of `pattern` matched
// against `actual`; the first match of a variable wins.
void match_dims(const std::vector<SymExpr>& pattern, const std::vector<SymExpr>& actual, SymMap<SymExpr>& map);

// The variables of tensor program `prog` in the terms of `call`, a call_tir
// of it: plain variable dims of its buffers matched against the shapes of
// the call's inputs and declared outputs, its symbolic parameters against
// the call's shape argument. Variables the call does not determine are
// absent.
SymMap<SymExpr> program_vars_at(const tir::Program& prog, const CallNode& call);

// Binds `var` to the first `kept` outputs of `call`, a kernel call whose
// struct info is a tuple of more outputs than `var` holds (the rest are
// scratch: internal results of a fused kernel, workspaces):
//   var_all = call
//   var = var_all.0                    (`var` a tensor)
//   var_k = var_all.k; var = (var_0, ...)   (`var` a tuple)
// The dropped outputs are never read again, so they die at the call.
std::vector<Binding> bind_leading_outputs(const Var& var, const Expr& call, size_t kept);

}  // namespace relax
