// The IR printer: the text form of docs/ir_text.md.
#pragma once

#include <string>

#include "ir/module.h"

namespace relax {

std::string print_module(const IRModule& mod);
std::string print_function(const std::string& name, const Function& f);
std::string print_program(const std::string& name, const tir::Program& p);
std::string print_expr(const Expr& e);        // one expression, no bindings context
std::string print_sinfo(const StructInfo& si);
std::string print_stmt(const tir::Stmt& s);
std::string print_texpr(const tir::TExpr& e);

}  // namespace relax
