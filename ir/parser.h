// The IR parser: reads the text form of docs/ir_text.md. Errors are
// relax::Error with "FILE:LINE:COL: message".
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "ir/module.h"

namespace relax {

IRModule parse_module(std::string_view text, const std::string& filename = "<input>");
// Reads a file and parses it; an unreadable file is an Error naming it.
IRModule parse_module_file(const std::string& path);
StructInfo parse_sinfo(std::string_view text);
// A symbolic integer in the text syntax ("past + seq", "(n + 1) // 2",
// "min(n, 64)"); each name resolves through `var`. nullopt if malformed.
std::optional<SymExpr> parse_sym_expr(std::string_view text,
                                      const std::function<SymExpr(const std::string&)>& var);

}  // namespace relax
