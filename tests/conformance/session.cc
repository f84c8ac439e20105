#include "tests/conformance/session.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>

namespace fs = std::filesystem;

namespace relax::conformance {

void Session::add_options(CLI::App& app) {
  app.add_option("--root", root,
                 "the test data (default: ../shared/onnx-backend-tests, else Debian's libonnx-testdata)");
  app.add_option("--filter", filter, "only cases whose name (e.g. node/test_abs) matches this regex");
  app.add_option("-j,--jobs", jobs, "cases run at once")->capture_default_str();
  app.add_option("--json", json_path, "write every case's status and reason to this file");
  app.add_option("--table", table_path, "write the readable report (summary and every case not passing) to this file");
  app.add_option("--baseline", baseline,
                 "fail if a case listed as passing in this file (a folder: <dataset>-<target>.txt) no longer passes");
  app.add_option("--timeout", timeout_s, "seconds per case (four times that for the light models)")
      ->capture_default_str();
  app.add_flag("-v,--verbose", verbose, "print every case as it finishes");
}

bool Session::select(const std::string& tool) {
  if (root.empty())
    default_dataset(RELAX_SOURCE_DIR, root, dataset, dataset_key);
  else
    dataset = root;
  if (!fs::is_directory(root)) {
    std::cerr << tool << ": no test data at " << root << "\n";
    return false;
  }
  std::regex re(filter);
  for (Case& c : find_cases(root))
    if (std::regex_search(c.name, re)) cases.push_back(std::move(c));
  return true;
}

void Session::run(const std::function<Result(const Case&)>& fn) {
  auto start = std::chrono::steady_clock::now();
  run_all(cases, fn, timeout_s, jobs, [&](const Case& c, const Result& r) {
    results[c.name] = r;
    if (verbose) std::cout << r.status << "  " << c.name << "  " << r.reason << std::endl;
  });
  seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int Session::report(const std::string& title, const std::vector<std::string>& statuses,
                    const std::vector<std::string>& ok, nlohmann::ordered_json header,
                    const std::string& baseline_file) const {
  auto is_ok = [&](const std::string& s) { return std::find(ok.begin(), ok.end(), s) != ok.end(); };
  std::string table = summary_table(title + ": " + dataset + ", " + std::to_string(cases.size()) + " cases, " +
                                        std::to_string(int(seconds)) + " s",
                                    cases, results, statuses);
  std::cout << "\n" << table;
  if (!table_path.empty()) {
    std::ofstream out(table_path);
    out << table << "\n";
    for (const auto& [name, r] : results)
      if (!is_ok(r.status)) out << r.status << "  " << name << "  " << r.reason << "\n";
  }
  header["dataset"] = dataset;
  header["seconds"] = seconds;
  if (!json_path.empty()) write_json(json_path, header, statuses, results);
  if (baseline.empty()) return 0;
  return check_baseline(baseline, baseline_file, results, "pass",
                        [&](const std::string& status) { return is_ok(status) ? 0 : 1; });
}

}  // namespace relax::conformance
