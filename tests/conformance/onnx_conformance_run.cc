// onnx-conformance-run: runs packages that onnx-conformance --keep built
// elsewhere on the ONNX backend test data and checks them as onnx-conformance
// does. It links the runtime alone (no LLVM, no importer), so it can be
// carried to a machine that has a GPU but not the compiler:
//
//   here:   onnx-conformance --target cuda --arch sm_90 --build-only --keep pkgs/
//   there:  onnx-conformance-run --packages pkgs/ --target cuda [--baseline DIR]
//
// A case without a package in the folder is "build-error" (its build failed
// or was unsupported where it was built; that run's report says which).
#include <CLI/CLI.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>

#include "runtime/thread_pool.h"
#include "tests/conformance/cases.h"
#include "tests/conformance/check.h"

namespace fs = std::filesystem;
using namespace relax;
using namespace relax::conformance;

int main(int argc, char** argv) {
  CLI::App app{"onnx-conformance-run: run packages built by onnx-conformance --keep on the ONNX backend test data."};
  std::string packages, root, filter = ".*", json_path, table_path, baseline, target = "cuda";
  int jobs = 2, timeout_s = 120;
  bool verbose = false;
  app.add_option("--packages", packages, "the folder onnx-conformance --keep wrote")->required();
  app.add_option("--target", target, "the target the packages were built for (names the baseline file)")
      ->capture_default_str();
  app.add_option("--root", root,
                 "the test data (default: ../shared/onnx-backend-tests, else Debian's libonnx-testdata)");
  app.add_option("--filter", filter, "only cases whose name (e.g. node/test_abs) matches this regex");
  app.add_option("-j,--jobs", jobs, "cases run at once")->capture_default_str();
  app.add_option("--json", json_path, "write every case's status and reason to this file");
  app.add_option("--table", table_path, "write the readable report (summary and every case not passing) to this file");
  app.add_option("--baseline", baseline,
                 "fail if a case listed as passing in this file (a folder: <dataset>-<target>.txt) no longer passes");
  app.add_option("--timeout", timeout_s, "seconds per case (four times that for the light models)")->capture_default_str();
  app.add_flag("-v,--verbose", verbose, "print every case as it finishes");
  CLI11_PARSE(app, argc, argv);

  std::string dataset, dataset_key = "custom";
  if (root.empty())
    default_dataset(RELAX_SOURCE_DIR, root, dataset, dataset_key);
  else
    dataset = root;
  if (!fs::is_directory(root) || !fs::is_directory(packages)) {
    std::cerr << "onnx-conformance-run: no " << (fs::is_directory(packages) ? "test data at " + root
                                                                          : "package folder " + packages)
              << "\n";
    return 1;
  }
  std::regex re(filter);
  std::vector<Case> cases;
  for (Case& c : find_cases(root))
    if (std::regex_search(c.name, re)) cases.push_back(std::move(c));
  rt::ThreadPool::set_global_num_threads(1);

  auto start = std::chrono::steady_clock::now();
  std::map<std::string, Result> results;
  run_all(
      cases,
      [&](const Case& c) -> Result {
        fs::path pkg = fs::path(packages) / package_file_name(c);
        if (!fs::exists(pkg)) return {"build-error", "no package: it did not build where it was built"};
        return check_package(c, pkg.string());
      },
      timeout_s, jobs,
      [&](const Case& c, const Result& r) {
        results[c.name] = r;
        if (verbose) std::cout << r.status << "  " << c.name << "  " << r.reason << std::endl;
      });
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::vector<std::string> statuses = {"pass", "wrong", "build-error", "run-error", "crash"};
  std::string table = summary_table("ONNX conformance on " + target + ", packages from " + packages + ": " + dataset +
                                        ", " + std::to_string(cases.size()) + " cases, " +
                                        std::to_string(int(secs)) + " s",
                                    cases, results, statuses);
  std::cout << "\n" << table;
  if (!table_path.empty()) {
    std::ofstream out(table_path);
    out << table << "\n";
    for (const auto& [name, r] : results)
      if (r.status != "pass") out << r.status << "  " << name << "  " << r.reason << "\n";
  }
  if (!json_path.empty())
    write_json(json_path, {{"dataset", dataset}, {"target", target}, {"packages", packages}, {"seconds", secs}},
               statuses, results);
  auto rank = [](const std::string& status) { return status == "pass" ? 0 : 1; };
  if (!baseline.empty() && check_baseline(baseline, dataset_key + "-" + target + ".txt", results, "pass", rank) > 0)
    return 1;
  return 0;
}
