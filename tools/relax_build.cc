// relax-build: a model (ONNX or IR text) -> one package (*.rpkg) for a target.
//
//   relax-build MODEL.onnx|MODEL.relax --target cpu [-o OUT.rpkg] [-O0|-O1|-O2] [--json]
//
// Exit codes as relax-import: 0 built; 2 the model uses something
// unsupported (every unsupported op listed at once, with node names); 1 any
// other error. The package is written through a temporary file, so nothing
// is left behind when the build fails.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "backends/common/vm_lower.h"
#include "backends/driver/build.h"
#include "frontends/onnx/importer.h"
#include "ir/error.h"
#include "ir/printer.h"
#include "passes/memory_plan.h"
#include "runtime/error.h"

namespace fs = std::filesystem;
using namespace relax;

int main(int argc, char** argv) {
  CLI::App app{"relax-build: compile a model (ONNX or IR text) into a package (*.rpkg) for a target."};
  std::string model, output, target = "cpu", emit;
  BuildOptions opts;
  bool json = false;
  int level = 2;
  std::vector<std::string> bounds;
  app.add_option("model", model, "the model: *.onnx, or *.relax with its weights file")->required();
  app.add_option("--target", target, "the target: cpu or vulkan")->capture_default_str();
  app.add_option("-o,--output", output, "the package (default: MODEL.<target>.rpkg beside the model)");
  app.add_option("-O", level, "the pass pipeline: -O0 (legalise only), -O1 (graph clean-ups), -O2 (default: also fusion, constant folding, memory planning; docs/passes.md)")
      ->check(CLI::Range(0, 2))
      ->capture_default_str();
  app.add_option("--cpu", opts.cpu, "the CPU to compile for: host, x86-64, x86-64-v2, x86-64-v3, znver3, ...")
      ->capture_default_str();
  std::string tile = "4x4";
  app.add_option("--tile", tile,
                 "vulkan: the register tile of a thread for matmul-like loops, ROWSxCOLS (1x1: none); matmul and conv "
                 "are also tiled through shared memory in blocks of 16*ROWS x 16*COLS")
      ->capture_default_str();
  app.add_option("--bound", bounds, "bounds of a symbolic dim, checked at run time; -O2 plans memory for the upper bound: NAME=LO..HI (repeatable)");
  app.add_option("--emit", emit,
                 "instead of a package, print the IR after the passes (relax) or the kernels' source (kernels: LLVM "
                 "IR for cpu, GLSL for vulkan)");
  std::vector<std::string> print_after;
  app.add_option("--print-after", print_after,
                 "print the IR after this pass to standard error (repeatable, or comma-separated; all: every pass)")
      ->delimiter(',');
  app.add_flag("--time-passes", opts.time_passes, "print the time each pass took");
  bool no_fold = false;
  app.add_flag("--no-fold", no_fold,
               "keep weight-only computations (@transform_params) for the runtime to run at load instead of "
               "computing them now (they are never computed now for another --cpu)");
  app.add_flag("--json", json, "print a JSON report on standard output");
  CLI11_PARSE(app, argc, argv);

  opts.target = target;
  opts.opt_level = level;
  for (const std::string& p : print_after) {
    if (p == "all")
      opts.print_after_all = true;
    else
      opts.print_after.insert(p);
  }
  if (output.empty()) output = fs::path(model).replace_extension("." + target + ".rpkg").string();
  nlohmann::json rep{{"model", model}, {"target", target}};
  auto finish = [&](int code, const std::string& error) {
    rep["ok"] = code == 0;
    if (!error.empty()) rep["error"] = error;
    if (json) std::cout << rep.dump(2) << "\n";
    return code;
  };
  try {
    for (const std::string& b : bounds) opts.bounds.insert(parse_bound(b));
    auto tile_digit = [](char c) { return c >= '1' && c <= '8'; };
    if (tile.size() != 3 || tile[1] != 'x' || !tile_digit(tile[0]) || !tile_digit(tile[2]))
      fail("--tile: expected ROWSxCOLS, each 1 to 8, got '", tile, "'");
    opts.gpu_tile = {tile[0] - '0', tile[2] - '0'};
    opts.fold_constants = !no_fold;
    if (!emit.empty()) {
      if (emit != "relax" && emit != "kernels") fail("--emit: unknown kind '", emit, "'; known: relax, kernels");
      IRModule mod = build_module(model, opts);
      std::cout << (emit == "relax" ? print_module(mod) : kernel_source(mod, opts));
      return 0;
    }
    BuildReport r = build_package(model, output, opts);
    rep["package"] = r.package_path;
    rep["bytes"] = r.package_bytes;
    rep["kernels"] = r.num_kernels;
    rep["weights"] = r.num_weights;
    for (const auto& [name, s] : r.phase_seconds) rep["seconds"][name] = s;
    if (!json) std::cerr << "relax-build: wrote " << r.package_path << " (" << r.num_kernels << " kernels)\n";
    return finish(0, "");
  } catch (const onnx_fe::UnsupportedModel& u) {
    std::cerr << "relax-build: " << model << ": " << u.what() << "\n";
    rep["unsupported"] = nlohmann::json::array();
    for (const auto& item : u.items)
      rep["unsupported"].push_back(
          {{"domain", item.domain}, {"op", item.op_type}, {"opset", item.opset}, {"nodes", item.nodes}});
    return finish(2, u.what());
  } catch (const NotLowered& n) {
    std::cerr << "relax-build: " << model << ": " << n.what() << "\n";
    rep["unsupported"] = nlohmann::json::array();
    for (const auto& [op, vars] : n.ops)
      rep["unsupported"].push_back({{"op", op}, {"graph_op", true}, {"nodes", vars}});
    return finish(2, n.what());
  } catch (const Error& e) {
    std::cerr << "relax-build: error: " << e.what() << "\n";
    return finish(1, e.what());
  } catch (const rt::Error& e) {
    std::cerr << "relax-build: error: " << e.what() << "\n";
    return finish(1, e.what());
  } catch (const std::exception& e) {
    std::cerr << "relax-build: internal error: " << e.what() << "\n";
    return finish(1, e.what());
  }
}
