// onnx-conformance: builds every case of the ONNX backend test data into a
// package for a target, runs it on the case's inputs and compares each
// output with the expected one.
//
//   onnx-conformance [--target cpu] [-O 0|1|2] [--root DIR] [--filter REGEX] [-j N]
//                    [--json FILE] [--table FILE] [--baseline DIR] [--write-baseline FILE]
//                    [--keep DIR]
//
// Statuses, one per case, with the reason:
//   pass         every output matches (rtol 1e-3, atol 1e-7 unless the case
//                says otherwise in check.cc)
//   wrong        an output differs (the first difference is the reason)
//   unsupported  the importer reports something unsupported
//   build-error  importing, legalising, lowering or code generation failed
//   run-error    the package refused the inputs or a kernel failed
//   crash        the case crashed or timed out
//   built        --build-only (and the cuda target without a CUDA driver):
//                the package was built (for cuda, ptxas accepted its PTX
//                where installed); nothing ran
// With --baseline, every case listed as passing must still pass: the
// ratchet CI runs. With --build-only the list is the cpu target's: every
// case that passes on cpu must build. Each case runs in its own process.
#include <dlfcn.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "backends/vm/lower.h"
#include "runtime/cuda.h"
#include "tools/driver/build.h"
#if RELAX_HAVE_CUDA
#include "backends/cuda/codegen.h"
#include "backends/cuda/ptxas.h"
#endif
#if RELAX_HAVE_VULKAN
#include "backends/vulkan/spirv.h"
#endif
#include "frontends/onnx/importer.h"
#include "ir/error.h"
#include "runtime/file_util.h"
#include "runtime/thread_pool.h"
#include "tests/conformance/cases.h"
#include "tests/conformance/check.h"
#include "tests/conformance/session.h"

namespace fs = std::filesystem;
using namespace relax;
using namespace relax::conformance;

namespace {

Result run_case(const Case& c, const BuildOptions& opts, bool build_only, const std::string& keep, bool abort_after_build) {
  // In the child's own $TMPDIR (run_all), which the parent removes once
  // the child is reaped, whether it returned, crashed or timed out.
  rt::TempDir dir("case");
  std::string pkg = dir.file("model.rpkg");
  try {
    build_package(c.model, pkg, opts);
  } catch (const onnx_fe::UnsupportedModel& u) {
    return {"unsupported", first_line(u.what())};
  } catch (const NotLowered& n) {
    std::string ops;
    for (const auto& [op, vars] : n.ops) ops += (ops.empty() ? "" : ", ") + op;
    return {"build-error", "not legalised: " + ops};
  } catch (const std::exception& e) {
    return {"build-error", first_line(e.what())};
  }
  if (abort_after_build) std::abort();  // a crash with the case's files on disk (tests/conformance/temp_folders.sh)
  if (!keep.empty()) {
    std::error_code ec;
    fs::copy_file(pkg, fs::path(keep) / package_file_name(c), fs::copy_options::overwrite_existing, ec);
    if (ec) return {"crash", "cannot keep the package in " + keep + ": " + ec.message()};
  }
  if (build_only) return {"built", ""};
  return check_package(c, pkg);
}

#if RELAX_HAVE_VULKAN
// Loads the Vulkan drivers the loader would (the manifests VK_DRIVER_FILES
// or VK_ICD_FILENAMES name, else those in the standard folders) into this
// process, and keeps them: each case's child is a fork, whose loader then
// finds them loaded and relocated instead of loading each again (lavapipe,
// and the LLVM it links, is most of a small case's start-up).
void preload_vulkan_drivers() {
  std::vector<fs::path> manifests;
  const char* env = std::getenv("VK_DRIVER_FILES");
  if (!env || !*env) env = std::getenv("VK_ICD_FILENAMES");
  if (env && *env) {
    std::stringstream ss(env);
    for (std::string f; std::getline(ss, f, ':');)
      if (!f.empty()) manifests.push_back(f);
  } else {
    for (const char* dir : {"/etc/vulkan/icd.d", "/usr/local/share/vulkan/icd.d", "/usr/share/vulkan/icd.d"}) {
      std::error_code ec;
      for (const auto& e : fs::directory_iterator(dir, ec))
        if (e.path().extension() == ".json") manifests.push_back(e.path());
    }
  }
  for (const fs::path& m : manifests) {
    try {
      nlohmann::json j = nlohmann::json::parse(rt::read_file(m.string()));
      std::string lib = j.at("ICD").at("library_path");
      if (!fs::path(lib).is_absolute()) lib = (m.parent_path() / lib).string();
      dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);  // a driver that does not load is the loader's business
    } catch (const std::exception&) {
    }
  }
}
#endif

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"onnx-conformance: build, run and check every ONNX backend test case on a target."};
  Session session;
  session.jobs = int(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  BuildOptions opts;
  std::string write_baseline, keep, arch = "sm_80";
  bool build_only = false, abort_after_build = false;
  app.add_option("--target", opts.target, "the target")->capture_default_str();
  app.add_option("-O", opts.opt_level, "the pass pipeline the cases build with: 0, 1 or 2")
      ->check(CLI::Range(0, 2))
      ->capture_default_str();
  session.add_options(app);
  app.add_option("--write-baseline", write_baseline, "write the passing cases to this file");
  app.add_flag("--build-only", build_only,
               "build each case's package and stop (the cuda target without a CUDA driver too); --baseline then "
               "checks that every case passing on cpu builds");
  app.add_option("--keep", keep,
                 "copy each built package into this folder (as node__test_abs.rpkg), for onnx-conformance-run to run "
                 "on another machine");
  app.add_flag("--abort-after-build", abort_after_build,
               "for tests: each case's process aborts once its package is built, as a crash would")
      ->group("");
  app.add_option("--arch", arch, "cuda: the GPU to compile for")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  opts.target_options["arch"] = arch;
  if (!session.select("onnx-conformance")) return 1;
  // Each child compiles with one thread; kernels run on one thread too, so
  // parallel cases do not fight over the cores.
  rt::ThreadPool::set_global_num_threads(1);
#if RELAX_HAVE_CUDA
  // Kernels with math need CUDA's libdevice: without the toolkit (a plain
  // Debian machine) the cuda cases cannot be checked; say so and skip.
  if (opts.target == "cuda" && cuda::find_libdevice().empty()) {
    std::cout << "onnx-conformance: skipped: the cuda target needs the CUDA toolkit's libdevice for math "
                 "functions, and none is installed (CUDA_HOME, /usr/local/cuda)\n";
    return 77;
  }
#endif
  if (opts.target == "cuda") {
    if (rt::CudaDriverStatus driver = rt::cuda_driver_status(); !driver.present) {
      build_only = true;  // no GPU here: build, and let ptxas check
      std::cout << "cuda: " << driver.detail << ": building only\n";
    }
  }

  // The children are forks: they inherit what is looked up here once (ptxas's
  // version; glslang's built-in tables).
#if RELAX_HAVE_CUDA
  if (opts.target == "cuda")
    if (std::optional<std::string> ptxas = cuda::find_ptxas()) cuda::ptxas_version(*ptxas);
#endif
#if RELAX_HAVE_VULKAN
  if (opts.target == "vulkan") {
    vulkan::warm_up_glslang();
    preload_vulkan_drivers();
  }
#endif
  if (!keep.empty()) fs::create_directories(keep);
  session.run([&](const Case& c) { return run_case(c, opts, build_only, keep, abort_after_build); });
  if (!write_baseline.empty()) {
    std::ofstream out(write_baseline);
    out << "# Cases of the ONNX backend test data that pass on " << opts.target << " (" << session.dataset << ").\n"
        << "# Written by onnx-conformance --write-baseline; CI fails if one of them stops passing.\n";
    for (const auto& [name, r] : session.results)
      if (r.status == "pass") out << name << "\n";
  }
  std::vector<std::string> statuses = {"pass", "wrong", "unsupported", "build-error", "run-error", "crash"};
  if (build_only) statuses = {"built", "unsupported", "build-error", "crash"};
  int lost = session.report(
      "ONNX conformance on " + opts.target + " at -O" + std::to_string(opts.opt_level), statuses, {"pass", "built"},
      {{"target", opts.target}, {"opt_level", opts.opt_level}},
      session.dataset_key + "-" + (build_only ? std::string("cpu") : opts.target) + ".txt");
  return lost > 0 ? 1 : 0;
}
