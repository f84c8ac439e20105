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
#include <filesystem>
#include <iostream>

#include "runtime/thread_pool.h"
#include "tests/conformance/cases.h"
#include "tests/conformance/check.h"
#include "tests/conformance/session.h"

namespace fs = std::filesystem;
using namespace relax;
using namespace relax::conformance;

int main(int argc, char** argv) {
  CLI::App app{"onnx-conformance-run: run packages built by onnx-conformance --keep on the ONNX backend test data."};
  Session session;
  std::string packages, target = "cuda";
  app.add_option("--packages", packages, "the folder onnx-conformance --keep wrote")->required();
  app.add_option("--target", target, "the target the packages were built for (names the baseline file)")
      ->capture_default_str();
  session.add_options(app);
  CLI11_PARSE(app, argc, argv);
  if (!fs::is_directory(packages)) {
    std::cerr << "onnx-conformance-run: no package folder " << packages << "\n";
    return 1;
  }
  if (!session.select("onnx-conformance-run")) return 1;
  rt::ThreadPool::set_global_num_threads(1);
  session.run([&](const Case& c) -> Result {
    fs::path pkg = fs::path(packages) / package_file_name(c);
    if (!fs::exists(pkg)) return {"build-error", "no package: it did not build where it was built"};
    return check_package(c, pkg.string());
  });
  int lost = session.report("ONNX conformance on " + target + ", packages from " + packages,
                            {"pass", "wrong", "build-error", "run-error", "crash"}, {"pass"},
                            {{"target", target}, {"packages", packages}}, session.dataset_key + "-" + target + ".txt");
  return lost > 0 ? 1 : 0;
}
