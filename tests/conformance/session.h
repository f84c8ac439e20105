// What onnx-conformance and onnx-conformance-run share around their own
// per-case step: the options that choose the data and run the cases, the
// selection, the timed run and the report (table, --table, --json, the
// --baseline ratchet).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/conformance/cases.h"

namespace relax::conformance {

struct Session {
  // Options (add_options).
  std::string root, filter = ".*", json_path, table_path, baseline;
  int jobs = 2, timeout_s = 120;
  bool verbose = false;
  // After select(): the data set, its baseline key, the chosen cases.
  std::string dataset, dataset_key = "custom";
  std::vector<Case> cases;
  // After run().
  std::map<std::string, Result> results;
  double seconds = 0;

  // --root, --filter, -j, --json, --table, --baseline, --timeout, -v.
  void add_options(CLI::App& app);
  // The data set (--root, else the default one) and its cases matching
  // --filter; false, after saying so on stderr as `tool`, without data.
  bool select(const std::string& tool);
  // Every case through `fn` in its own process, timed.
  void run(const std::function<Result(const Case&)>& fn);
  // The summary under `title` on stdout and in --table (with every case
  // whose status is not in `ok`), --json with `header`, then the ratchet
  // against --baseline's `baseline_file`: the count of cases it lost.
  int report(const std::string& title, const std::vector<std::string>& statuses, const std::vector<std::string>& ok,
             nlohmann::ordered_json header, const std::string& baseline_file) const;
};

}  // namespace relax::conformance
