// The pass manager. A pass is a named function IRModule -> IRModule;
// passes are registered once, in passes/registry.cc, and run by name.
// Pipelines (O0, O1, O2) are lists of names (passes/pipelines.cc).
#pragma once

#include <functional>
#include <iosfwd>
#include <set>
#include <string>
#include <vector>

#include "ir/module.h"

namespace relax {

struct Pass {
  std::string name;  // matches its file: passes/dead_code_elimination.cc -> "dead-code-elimination"
  std::string doc;   // one line
  std::function<IRModule(const IRModule&)> run;
};

const Pass* find_pass(const std::string& name);
const std::vector<Pass>& all_passes();

// The names of a named pipeline ("O0", "O1", "O2") for a target ("cpu",
// "vulkan", "cuda"); Error for an unknown one. GPU targets lift workspaces
// at every level (a shader cannot allocate).
std::vector<std::string> pipeline(const std::string& name, const std::string& target = "cpu");
std::vector<std::string> pipeline_names();

struct PassOptions {
  std::set<std::string> print_after;  // print the module after these passes
  bool print_after_all = false;
  bool time_passes = false;
  bool verify_each = false;     // run the verifier after every pass
  std::ostream* log = nullptr;  // where printing and timing go (stderr if null)
};

// Runs `names` in order. Expands pipeline names found in the list. Unknown
// names raise an Error listing the known ones; a verifier failure after a
// pass names the pass.
IRModule run_passes(const IRModule& mod, const std::vector<std::string>& names, const PassOptions& opts = {});

// Splits "a,b,c" into names, trimming spaces and dropping empty ones.
std::vector<std::string> split_pass_list(const std::string& list);

}  // namespace relax
