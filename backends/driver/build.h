// The compile driver behind relax-build (and the conformance runner): a
// model (ONNX or IR text) -> passes -> legalised module -> VM bytecode +
// target code -> one package.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "ir/analyzer.h"
#include "ir/module.h"

namespace relax {

struct BuildOptions {
  std::string target = "cpu";
  std::string cpu = "host";                // the LLVM CPU the cpu target compiles for
  int opt_level = 2;                       // the pass pipeline O0/O1/O2
  std::map<std::string, Interval> bounds;  // --bound n=1..4096
  // Run weight-only computations (@transform_params) at build time and
  // store their results; off: the runtime runs them at load.
  bool fold_constants = true;
  bool time_passes = false;
  std::set<std::string> print_after;  // print the IR after these passes (stderr)
  bool print_after_all = false;
  std::pair<int64_t, int64_t> gpu_tile = {4, 4};  // a GPU thread's register tile (--tile RxC); 1x1: none
  std::string cuda_arch = "sm_80";                 // the cuda target's GPU (--arch)
  bool cublas = true;      // cuda: matmuls big enough go to cuBLAS (--no-cublas: all generated)
  bool cuda_graph = true;  // cuda: kernel runs captured as CUDA graphs and replayed (--no-cuda-graph)
  // Identifies the compiler build beyond its version (relax-build: a
  // checksum of its own executable); recorded in the package, so a batch
  // rebuilds what an older compiler built.
  std::string compiler_id;
};

// The options that change what a build produces, as one canonical string
// ("target=cpu cpu=znver3 O=2 tile=4x4 fold=1 bound:n=1..64"): recorded in
// the package and compared by why_rebuild.
std::string options_key(const BuildOptions& opts);

// What the build produced, for --json and the tests.
struct BuildReport {
  std::string package_path;
  size_t package_bytes = 0;
  size_t num_kernels = 0;
  size_t num_weights = 0;
  std::vector<std::pair<std::string, double>> phase_seconds;  // import, passes, lower, codegen, package
  nlohmann::json inputs, outputs;  // @main's signature as the manifest has it ({name, dtype, shape}; symbolic dims as text)
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
// kernels: LLVM IR for cpu, one GLSL compute shader per launch for vulkan.
std::string kernel_source(const IRModule& mod, const BuildOptions& opts);

}  // namespace relax
