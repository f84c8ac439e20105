// relax-build's batch mode: many models, each built in its own process.
//
//   relax-build A.onnx zoo/ ... --target T -o OUTDIR [--jobs N] [--report R.json]
//       [--shard K/N] [--timeout S] [--force] [--quiet] [--json]
//   relax-build --merge-reports a.json b.json ... > all.json
//
// Folders are searched (recursively, in name order) for *.onnx. Each model
// is built by a child relax-build (the same executable, single-model mode
// with --json), so a crash or a hang in one never takes the batch down:
// the child is killed at --timeout, and whatever temporary file it left is
// removed; packages are written atomically, so a killed build leaves
// nothing. A model whose package is up to date (same input bytes, same
// compiler, same options: why_rebuild) is not rebuilt unless --force.
//
// The report (JSON): {"relax_build": {compiler, target, options, shard,
// jobs}, "summary": {total, ok, up_to_date, unsupported, error, crash,
// timeout, seconds, build_seconds, exit_code}, "models": [entry...]}, one
// entry per model as single-model --json prints it, plus "status" crash or
// timeout when the child did not report, and "up_to_date".
//
// Exit codes: 0 every model built (or was up to date); 2 some were
// unsupported and none failed otherwise; 1 any error, crash or timeout (or
// bad arguments: nothing built).
#pragma once

#include <string>
#include <vector>

#include "tools/driver/build.h"

namespace relax::batch {

struct BatchOptions {
  std::vector<std::string> inputs;  // model files and folders
  std::string out_dir;              // empty: each package beside its model
  int jobs = 0;                     // 0: the number of cores
  std::string report_path;          // --report
  bool force = false, quiet = false, json = false;
  double timeout = 0;                   // seconds per model; 0: none
  int shard_k = 1, shard_n = 1;         // --shard K/N (K from 1)
  BuildOptions build;                   // what each model is built with
  std::vector<std::string> child_args;  // the same, as relax-build options
};

// Runs the batch; returns the exit code. Throws relax::Error for bad
// arguments (a missing input, two models mapping to one package).
int run_batch(const BatchOptions& opts);

// Joins reports (of shards) into one on standard output; returns the
// joined batch's exit code.
int merge_reports(const std::vector<std::string>& paths, bool quiet);

// "K/N" -> {K, N}, 1 <= K <= N; throws relax::Error otherwise.
std::pair<int, int> parse_shard(const std::string& s);

}  // namespace relax::batch
