// The well-formedness checker. It reports, with the function and binding
// where each happens:
//  - a variable used before its definition or outside its scope;
//  - a dataflow variable used after its block, or bound outside one;
//  - a variable bound twice;
//  - a symbolic variable used before a parameter or match_cast defines it;
//  - a binding whose annotation is provably incompatible with the struct
//    info deduced for its value, or a return value incompatible with the
//    declared return;
//  - calls to globals that do not exist or are of the wrong kind, impure
//    calls in dataflow blocks;
//  - in tensor programs: undeclared buffers, unbound symbolic variables,
//    wrong index counts, loop variables reused, dtype mismatches on stores.
#pragma once

#include <string>
#include <vector>

#include "ir/module.h"

namespace relax {

// Every problem found, each one line: "in @main, binding lv1: ...".
std::vector<std::string> verify(const IRModule& mod);
// Raises an Error holding all problems when there is any.
void verify_or_throw(const IRModule& mod);

}  // namespace relax
