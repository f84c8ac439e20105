// The compile driver behind relax-build (and the conformance runner): a
// model (ONNX or IR text) -> passes -> legalised module -> VM bytecode +
// target code (a target of backends/target.h) -> one package. It sits
// above every layer: the frontend, the passes, the backends, the runtime.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "frontends/onnx/importer.h"
#include "ir/analyzer.h"
#include "ir/module.h"

namespace relax {

struct BuildOptions {
  std::string target = "cpu";  // a target of the registry (backends/target.h)
  // Options of the targets by name ("cpu", "tile", "arch", ...: each
  // target's TargetOption), any target's; absent: the default.
  std::map<std::string, std::string> target_options;
  int opt_level = 2;                       // the pass pipeline O0/O1/O2
  std::map<std::string, Interval> bounds;  // --bound n=1..4096
  onnx_fe::ImportOptions import;           // --dim, --shape (ONNX models)
  // Run weight-only computations (@transform_params) at build time and
  // store their results; off: the runtime runs them at load.
  bool fold_constants = true;
  // Check the indices of gathers and scatters at run time (an index out of
  // range fails the run); off: they are clamped or skipped unchecked, to
  // measure what the checks cost (bench/bench_index_checks.py).
  bool index_checks = true;
  // The channel layout of a CNN's activations on host targets
  // (passes/block_layout.cc): "auto" (the compiler's choice), "blocked"
  // or "plain".
  std::string channel_layout = "auto";
  bool time_passes = false;
  std::set<std::string> print_after;  // print the IR after these passes (stderr)
  bool print_after_all = false;
  // Identifies the compiler build beyond its version (relax-build: a
  // checksum of its own executable); recorded in the package, so a batch
  // rebuilds what an older compiler built.
  std::string compiler_id;
};

// The options that change what a build produces, as one canonical string
// ("target=cpu O=2 cpu=znver3 fold=1 bound:n=1..64"; the target's part from
// Target::options_key): recorded in the package and compared by why_rebuild.
std::string options_key(const BuildOptions& opts);

// relax-build's arguments that make a build with `opts` (the options that
// shape the package: target, level, the targets' options, bounds,
// folding), as batch mode passes them to each model's build.
std::vector<std::string> build_args(const BuildOptions& opts);

// What the build produced, for --json and the tests.
struct BuildReport {
  std::string package_path;
  size_t package_bytes = 0;
  size_t num_kernels = 0;
  size_t num_weights = 0;
  std::vector<std::pair<std::string, double>> phase_seconds;  // import, passes, lower, codegen, package
  nlohmann::json inputs,
      outputs;  // @main's signature as the manifest has it ({name, dtype, shape}; symbolic dims as text)
};

// Builds `model` (*.onnx, or *.relax with its safetensors file) into a
// package at `out_path`, written atomically. Throws onnx_fe::UnsupportedModel
// for unsupported ops and relax::Error / rt::Error for anything else.
BuildReport build_package(const std::string& model, const std::string& out_path, const BuildOptions& opts);

// Empty when `package` is a valid package that this compiler (version and
// compiler_id) built from `model` with the same options_key and the
// model's files (the model, its external data or weights file) still hold
// the bytes it was built from; otherwise why not ("no package", "the model
// changed", ...).
std::string why_rebuild(const std::string& model, const std::string& package, const BuildOptions& opts);

// The IR after the passes (legalised), for --emit relax.
IRModule build_module(const std::string& model, const BuildOptions& opts);

// The kernels' source as the target's code generator writes it, for --emit
// kernels: LLVM IR for cpu, one GLSL compute shader per launch for vulkan,
// PTX for cuda.
std::string kernel_source(const IRModule& mod, const BuildOptions& opts);

}  // namespace relax
