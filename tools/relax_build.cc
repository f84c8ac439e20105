// relax-build: models (ONNX or IR text) -> packages (*.rpkg) for a target.
//
//   relax-build MODEL.onnx|MODEL.relax --target cpu [-o OUT.rpkg] [-O0|-O1|-O2] [--json]
//   relax-build A.onnx B.onnx zoo/ ... --target T -o OUTDIR [--jobs N] [--report R.json] [--shard K/N]
//   relax-build --list-targets [--json]
//       [--timeout S] [--force] [--quiet] [--json]
//   relax-build --merge-reports a.json b.json ... > all.json
//
// One model: built in this process. Exit codes as relax-import: 0 built; 2
// the model uses something unsupported (every unsupported op listed at
// once, with node names); 1 any other error. The package is written
// through a temporary file, so nothing is left behind when the build fails.
// Several models, a folder, or any of the batch options: batch mode
// (tools/batch_build.h), each model in its own process.
#include <CLI/CLI.hpp>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <tuple>

#include "backends/target.h"
#include "backends/vm/lower.h"
#include "frontends/onnx/importer.h"
#include "ir/error.h"
#include "ir/explain.h"
#include "ir/printer.h"
#include "passes/analysis/memory_plan.h"
#include "runtime/error.h"
#include "runtime/file_util.h"
#include "runtime/package.h"
#include "tools/batch_build.h"
#include "tools/driver/build.h"
#include "tools/import_flags.h"
#include "tools/version.h"

namespace fs = std::filesystem;
using namespace relax;

namespace {

// This executable's checksum: the compiler's identity beyond its version,
// recorded in packages (BuildOptions::compiler_id).
std::string self_checksum() {
  try {
    std::shared_ptr<const rt::MappedFile> exe = rt::MappedFile::open("/proc/self/exe");
    return rt::checksum64_hex(exe->bytes().data(), exe->bytes().size());
  } catch (const std::exception&) {
    return "";
  }
}

const char* kExamples =
    "Examples:\n"
    "  relax-build model.onnx --target vulkan                 # -> model.vulkan.rpkg\n"
    "  relax-build gpt2.onnx --bound sequence_length=1..1024 -o gpt2.rpkg\n"
    "  relax-build silero_vad.onnx --dim sequence=576      # branches on the chunk length fold\n"
    "  relax-build zoo/ extra.onnx --target cpu -o out/ --jobs 4 --report report.json\n"
    "  relax-build zoo/ -o out/ --shard 2/8 --report part2.json   # the 2nd of 8 slices\n"
    "  relax-build --merge-reports part*.json > all.json\n\n"
    "Exit status: 0 built (every model); 2 unsupported ops (some models, none failed otherwise); 1 any other "
    "error (batch: an error, crash or timeout).";

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      std::string("relax-build: compile models (ONNX or IR text) into packages (*.rpkg) for a target; "
                  "one model, or a batch of files and folders (each model in its own process).")};
  app.footer(kExamples);
  std::vector<std::string> models;
  std::string output, target = "cpu", emit;
  BuildOptions opts;
  bool json = false;
  int level = 2;
  std::vector<std::string> bounds;
  app.add_option("models", models,
                 "the model: *.onnx, or *.relax with its weights file; several, or folders (searched for *.onnx): a "
                 "batch; with --merge-reports, the reports");
  std::string target_names;
  for (const Target* t : all_targets()) target_names += (target_names.empty() ? "" : ", ") + t->name();
  app.add_option("--target", target, "the target: " + target_names + " (docs/vulkan.md, docs/cuda.md)")
      ->capture_default_str();
  // Each target's options (backends/target.h), as flags; only those given
  // go into the build's options, the rest keep the target's defaults.
  struct TargetFlag {
    TargetOption option;
    std::string value;
    bool off = false;  // a switch given
    CLI::Option* cli = nullptr;
  };
  std::vector<std::unique_ptr<TargetFlag>> target_flags;
  for (const Target* t : all_targets())
    for (const TargetOption& o : t->options()) {
      auto f = std::make_unique<TargetFlag>(TargetFlag{o, o.default_value});
      f->cli = o.is_switch() ? app.add_flag(o.flag, f->off, o.help)
                             : app.add_option(o.flag, f->value, o.help)->capture_default_str();
      target_flags.push_back(std::move(f));
    }
  app.add_option("-o,--output", output,
                 "the package (default: MODEL.<target>.rpkg beside the model); in a batch, the folder for the packages "
                 "(a folder given as input keeps its sub-folders there)");
  app.add_option("-O", level,
                 "the pass pipeline: -O0 (legalise only), -O1 (graph clean-ups), -O2 (default: also fusion, constant "
                 "folding, memory planning; docs/passes.md)")
      ->check(CLI::Range(0, 2))
      ->capture_default_str();
  app.add_option(
      "--bound", bounds,
      "bounds of a symbolic dim, checked at run time; -O2 plans memory for the upper bound: NAME=LO..HI (repeatable)");
  ImportFlags import_flags;
  import_flags.add_to(app, "ONNX: ");
  app.add_option("--emit", emit,
                 "instead of a package, print the IR after the passes (relax) or the kernels' source (kernels: LLVM "
                 "IR for cpu, GLSL for vulkan, PTX for cuda)");
  std::vector<std::string> print_after;
  app.add_option("--print-after", print_after,
                 "print the IR after this pass to standard error (repeatable, or comma-separated; all: every pass)")
      ->delimiter(',');
  app.add_flag("--time-passes", opts.time_passes, "print the time each pass took");
  std::string explain_topics;
  app.add_option("--explain", explain_topics,
                 "say on standard error why the rules of these passes did or did not apply (comma-separated pass "
                 "names, or all; so far: block-layout, fuse-library-epilogues, legalize); also $RELAX_EXPLAIN");
  bool no_fold = false;
  app.add_flag("--no-fold", no_fold,
               "keep weight-only computations (@transform_params) for the runtime to run at load instead of "
               "computing them now (they are never computed now for another --cpu)");
  bool no_index_checks = false;
  app.add_flag("--no-index-checks", no_index_checks,
               "do not check the indices of gathers and scatters at run time (an index out of range is then clamped "
               "or skipped without an error); for measuring what the checks cost");
  app.add_option("--layout", opts.channel_layout,
                 "cpu: the channel layout of a CNN's activations: auto (the compiler chooses per model: blocked, "
                 "NCHW16c, where there are 3 or more convolutions it can block; --explain block-layout says what it "
                 "chose), blocked, plain (NCHW)")
      ->check(CLI::IsMember({"auto", "blocked", "plain"}))
      ->capture_default_str();
  app.add_flag("--json", json, "print a JSON report on standard output (a batch: the whole report)");
  batch::BatchOptions bo;
  std::string shard;
  bool merge = false;
  auto* jobs_opt = app.add_option("-j,--jobs", bo.jobs, "batch: models built at once (default: the number of cores)")
                       ->check(CLI::Range(1, 1024));
  auto* report_opt = app.add_option("--report", bo.report_path, "batch: write the JSON report to this file");
  auto* shard_opt =
      app.add_option("--shard", shard,
                     "batch: build only the K-th of N deterministic slices of the models (K/N, K from 1), "
                     "for spreading a zoo across machines");
  auto* timeout_opt = app.add_option("--timeout", bo.timeout, "batch: stop a model's build after this many seconds")
                          ->check(CLI::PositiveNumber);
  auto* force_opt = app.add_flag("--force", bo.force, "batch: rebuild models whose package is up to date");
  app.add_flag("-q,--quiet", bo.quiet, "batch: no progress and no summary on standard error");
  app.add_flag("--merge-reports", merge, "join the batch reports given as inputs into one, on standard output");
  bool list_targets = false;
  app.add_flag("--list-targets", list_targets,
               "list the targets this build has, each with its traits at its default options (with --json: as JSON), "
               "and exit");
  app.set_version_flag("--version", version_text("relax-build"));
  CLI11_PARSE(app, argc, argv);
  if (!explain_topics.empty()) relax::set_explain(explain_topics);

  if (list_targets) {
    nlohmann::json out = nlohmann::json::array();
    for (const Target* t : all_targets()) {
      std::string traits = t->traits(resolve_options(*t, level, {})).str();
      out.push_back({{"name", t->name()}, {"traits", traits}});
      if (!json) std::cout << t->name() << ": " << traits << "\n";
    }
    if (json) std::cout << out.dump(2) << "\n";
    return 0;
  }
  if (merge) {
    try {
      if (models.empty()) fail("--merge-reports: give the reports to join");
      return batch::merge_reports(models, bo.quiet);
    } catch (const std::exception& e) {
      std::cerr << "relax-build: error: " << e.what() << "\n";
      return 1;
    }
  }
  if (models.empty()) {
    std::cerr << "relax-build: error: no model given (relax-build --help)\n";
    return 1;
  }
  bool is_batch = models.size() > 1 || jobs_opt->count() || report_opt->count() || shard_opt->count() ||
                  timeout_opt->count() || force_opt->count() || bo.quiet ||
                  (!output.empty() && (output.back() == '/' || fs::is_directory(output)));
  for (const std::string& m : models) is_batch = is_batch || fs::is_directory(m);
  std::string model = models[0];

  opts.target = target;
  opts.opt_level = level;
  opts.compiler_id = self_checksum();
  for (const std::string& p : print_after) {
    if (p == "all")
      opts.print_after_all = true;
    else
      opts.print_after.insert(p);
  }
  if (output.empty() && !is_batch) output = fs::path(model).replace_extension("." + target + ".rpkg").string();
  // The report of one model: an entry of a batch's report.
  nlohmann::json rep{{"model", model}, {"target", target}, {"package", output}};
  auto t0 = std::chrono::steady_clock::now();
  auto finish = [&](int code, const std::string& error) {
    rep["ok"] = code == 0;
    rep["status"] = code == 0 ? "ok" : code == 2 ? "unsupported" : "error";
    if (!error.empty()) rep["message"] = error;
    rep["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (json && !is_batch) std::cout << rep.dump(2) << "\n";
    return code;
  };
  try {
    for (const std::string& b : bounds) opts.bounds.insert(parse_bound(b));
    opts.import = import_flags.options();
    for (const auto& f : target_flags)
      if (f->cli->count()) opts.target_options[f->option.name] = f->option.is_switch() ? "0" : f->value;
    for (const Target* t : all_targets()) t->check_options(resolve_options(*t, level, opts.target_options));
    find_target(target);  // an unknown target (or one this build left out) fails before anything is read
    opts.fold_constants = !no_fold;
    opts.index_checks = !no_index_checks;
    if (is_batch) {
      if (!emit.empty()) fail("--emit takes one model");
      if (!shard.empty()) std::tie(bo.shard_k, bo.shard_n) = batch::parse_shard(shard);
      bo.inputs = models;
      bo.out_dir = output;
      bo.json = json;
      bo.build = opts;
      // What each model's build gets: the options that shape the package.
      bo.child_args = build_args(opts);
      return batch::run_batch(bo);
    }
    if (!emit.empty()) {
      if (emit != "relax" && emit != "kernels") fail("--emit: unknown kind '", emit, "'; known: relax, kernels");
      IRModule mod = build_module(model, opts);
      std::cout << (emit == "relax" ? print_module(mod) : kernel_source(mod, opts));
      return 0;
    }
    BuildReport r = build_package(model, output, opts);
    rep["package"] = r.package_path;
    rep["package_bytes"] = r.package_bytes;
    rep["kernels"] = r.num_kernels;
    rep["weights"] = r.num_weights;
    rep["inputs"] = r.inputs;
    rep["outputs"] = r.outputs;
    for (const auto& [name, s] : r.phase_seconds) rep["phases"][name] = s;
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
