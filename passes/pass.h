// The pass manager. A pass is a named function IRModule -> IRModule;
// passes are registered once, in passes/registry.cc, and run by name.
// Pipelines (O0, O1, O2) are lists of names, built from the target's
// traits (ir/target_traits.h); a target may add passes of its own
// (TargetPass), which the pass manager finds by name beside the registry.
#pragma once

#include <functional>
#include <iosfwd>
#include <set>
#include <string>
#include <vector>

#include "ir/module.h"
#include "ir/target_traits.h"

namespace relax {

struct Pass {
  std::string name;  // matches its file: passes/dead_code_elimination.cc -> "dead-code-elimination"
  std::string doc;   // one line
  std::function<IRModule(const IRModule&)> run;
};

const Pass* find_pass(const std::string& name);
const std::vector<Pass>& all_passes();

// A pass of a target's own (backends/target.h Target::passes), run after
// the pipeline's pass `after` (each time it runs) at levels from
// `min_level` on.
struct TargetPass {
  Pass pass;
  std::string after;
  int min_level = 0;
};

// The names of a named pipeline ("O0", "O1", "O2") for a target with
// `traits`; Error for an unknown one. GPU targets lift workspaces at every
// level (a shader cannot allocate).
std::vector<std::string> pipeline(const std::string& name, const TargetTraits& traits = {});
// The pipeline with a target's own passes inserted (`level` is the
// pipeline's, 0..2).
std::vector<std::string> pipeline(const std::string& name, const TargetTraits& traits,
                                  const std::vector<TargetPass>& own, int level);
std::vector<std::string> pipeline_names();

struct PassOptions {
  std::set<std::string> print_after;  // print the module after these passes
  bool print_after_all = false;
  bool time_passes = false;
  bool verify_each = false;     // run the verifier after every pass
  std::ostream* log = nullptr;  // where printing and timing go (stderr if null)
  // Passes beyond the registry (a target's own), found by name before it.
  std::vector<Pass> extra;
};

// Runs `names` in order. Expands pipeline names found in the list (for the
// module's traits, TargetTraits::of). Unknown
// names raise an Error listing the known ones; a verifier failure after a
// pass names the pass.
IRModule run_passes(const IRModule& mod, const std::vector<std::string>& names, const PassOptions& opts = {});

// Splits "a,b,c" into names, trimming spaces and dropping empty ones.
std::vector<std::string> split_pass_list(const std::string& list);

}  // namespace relax
