// A compilation target: what the driver (tools/driver/) asks of a backend.
//
// A target turns the tensor programs a package's bytecode calls into the
// package sections its runtime device loads ("kernels.cpu", "kernels.vulkan"
// and "kernels.vulkan.spv", ...), and prints their source for --emit
// kernels. It names the options it reads (relax-build's --cpu, --arch,
// --tile, ...): the driver keeps their values as strings, relax-build adds
// a flag for each, and the package records them.
//
// Targets are listed once, in backends/CMakeLists.txt (relax_target(NAME
// OPTION)): each lives in backends/NAME/ and defines
//   std::unique_ptr<relax::Target> relax::make_NAME_target();
// The registry (backends/target.cc) knows every target that is built, and
// the names of those that were left out (RELAX_ENABLE_<NAME>=OFF), so a
// request for one says how it was configured.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ir/module.h"
#include "ir/target_traits.h"
#include "ir/tir.h"
#include "passes/pass.h"

namespace relax {

// One option of a target, as relax-build takes it.
struct TargetOption {
  std::string name;           // its key in TargetOptions::values ("arch")
  std::string flag;           // relax-build's flag: "--arch" (takes a value) or "--no-cublas" (a switch)
  std::string default_value;  // "sm_80"; a switch's option is "1", "0" with the flag
  std::string help;
  bool is_switch() const { return flag.rfind("--no-", 0) == 0; }
};

struct TargetOptions {
  int opt_level = 2;                          // the build's level, 0..2
  std::map<std::string, std::string> values;  // option name -> value (defaults filled in)
  // The value of `name`; an Error when the target has no such option.
  const std::string& at(const std::string& name) const;
};

// What compiling the programs gives: the package sections, and the name
// the runtime knows each program's kernel by (empty: the program's name).
struct TargetArtifact {
  std::vector<std::pair<std::string, std::string>> sections;  // name -> bytes, in order
  std::map<std::string, std::string> kernel_names;            // program -> kernel name
};

class Target {
 public:
  virtual ~Target() = default;
  virtual std::string name() const = 0;
  // The options it reads, with their defaults.
  virtual std::vector<TargetOption> options() const { return {}; }
  // Checks the values of its options; an Error naming the flag otherwise.
  virtual void check_options(const TargetOptions& opts) const {}
  // What the passes know of it, for these options (ir/target_traits.h):
  // the pipelines are built from them, the passes read them.
  virtual TargetTraits traits(const TargetOptions& opts) const = 0;
  // Passes of its own, inserted into the pipelines (passes/pass.h).
  virtual std::vector<TargetPass> passes() const { return {}; }
  // Records on the module what its passes must know of the target: the
  // attribute `target` (its name) and `traits`, with the words of the
  // module's attribute `add_traits` after the target's own.
  virtual void configure(IRModule& mod, const TargetOptions& opts) const;
  // The options that change what it produces, canonical
  // ("cpu=host:znver3:1f2e..."): recorded in packages, compared before
  // rebuilding. By default each option as name=value.
  virtual std::string options_key(const TargetOptions& opts) const;
  // Whether weight-only work may be computed on this machine at build time
  // for a package built with `opts` (constant folding): not when its
  // kernels are for another machine, whose kernels may lay out what they
  // compute otherwise. By default yes.
  virtual bool folds_here(const TargetOptions& opts) const { return true; }
  // Compiles `programs` (those the bytecode calls, in its order).
  virtual TargetArtifact compile(const std::vector<tir::Program>& programs, const TargetOptions& opts) const = 0;
  // The kernels' source as its code generator writes it (--emit kernels).
  virtual std::string emit_source(const std::vector<tir::Program>& programs, const TargetOptions& opts) const = 0;
};

// The first target built whose traits say host and whose kernels run on
// this machine at its default options (constant folding runs it); null
// when the build has none.
const Target* host_target();
// The target named `name`; an Error for an unknown one (listing those
// known) or one this build left out.
const Target& find_target(const std::string& name);
// Every target built, in registry order.
std::vector<const Target*> all_targets();
// `opts` with every option of `target` that `given` lacks set to its
// default; options of other targets in `given` are ignored.
TargetOptions resolve_options(const Target& target, int opt_level, const std::map<std::string, std::string>& given);

}  // namespace relax
