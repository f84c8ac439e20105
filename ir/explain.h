// Why a rewrite rule did or did not apply, for whoever asks: relax-opt and
// relax-build --explain PASS[,PASS...] (or all), or the environment
// variable RELAX_EXPLAIN with the same list. A pass made of named rules
// (passes/fuse_library_epilogues.cc) says, per candidate, which rule
// stopped the match and why, as MLIR's rewrite patterns report their
// match failures.
#pragma once

#include <string>

namespace relax {

// Turns explaining on for the comma-separated topics (pass names, or
// "all"); replaces what RELAX_EXPLAIN said.
void set_explain(const std::string& topics);
// Whether `topic` is being explained.
bool explaining(const std::string& topic);
// Writes "[topic] line" to standard error when `topic` is being explained.
void explain(const std::string& topic, const std::string& line);

}  // namespace relax
