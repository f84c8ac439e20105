// The IR parser: reads the text form of docs/ir_text.md. Errors are
// relax::Error with "FILE:LINE:COL: message".
#pragma once

#include <string>
#include <string_view>

#include "ir/module.h"

namespace relax {

IRModule parse_module(std::string_view text, const std::string& filename = "<input>");
// Reads a file and parses it; an unreadable file is an Error naming it.
IRModule parse_module_file(const std::string& path);
StructInfo parse_sinfo(std::string_view text);

}  // namespace relax
