// relax-run: run a package on inputs from files.
//
//   relax-run PKG --input NAME=FILE ... [--output-dir DIR] [--threads N] [--device N] [--bench N] [--stats] [--profile]
//   [--json] relax-run PKG --test-data DIR [--rtol R] [--atol A] [--json] relax-run --list-devices [--json]
//
// Inputs are NumPy .npy files or ONNX TensorProto .pb files. With
// --output-dir each output goes to DIR/<name>.npy (characters other than
// letters, digits, '.', '_' and '-' become '_'). --test-data DIR reads
// DIR/input_K.pb, runs, and compares every output with DIR/output_K.pb;
// the exit code is 0 only when all match. This tool links the runtime
// alone: no LLVM, no protobuf.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "runtime/allocator.h"
#include "runtime/compare.h"
#include "runtime/cpu_peak.h"
#include "runtime/device.h"
#include "runtime/error.h"
#include "runtime/model.h"
#include "runtime/npy.h"
#include "runtime/tensor_proto.h"
#include "runtime/thread_pool.h"
#include "tools/version.h"

namespace fs = std::filesystem;
using namespace relax::rt;

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Tensor read_input(const std::string& path) {
  if (ends_with(path, ".npy")) return read_npy(path);
  if (ends_with(path, ".pb")) return read_tensor_proto(path).tensor;
  rt_fail(path, ": unknown input format (expected .npy or .pb)");
}

std::string safe_name(const std::string& name) {
  std::string s = name;
  for (char& c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) c = '_';
  return s.empty() ? "_" : s;
}

// The inputs in the model's order, from NAME=FILE pairs.
std::vector<Value> named_inputs(const Model& m, const std::vector<std::string>& specs) {
  std::map<std::string, std::string> files;
  for (const std::string& s : specs) {
    size_t eq = s.find('=');
    if (eq == std::string::npos) rt_fail("--input expects NAME=FILE, got '", s, "'");
    files[s.substr(0, eq)] = s.substr(eq + 1);
  }
  std::string names;
  for (const TensorDesc& d : m.inputs()) names += (names.empty() ? "'" : ", '") + d.name + "'";
  for (const auto& [name, file] : files) {
    bool known = false;
    for (const TensorDesc& d : m.inputs()) known = known || d.name == name;
    if (!known) rt_fail("--input ", name, ": the model has no input of that name (its inputs: ", names, ")");
  }
  std::vector<Value> out;
  for (const TensorDesc& d : m.inputs()) {
    auto it = files.find(d.name);
    if (it == files.end()) rt_fail("no --input for the model's input '", d.name, "' (its inputs: ", names, ")");
    if (d.sequence) rt_fail("--input ", d.name, ": a sequence input is read from --test-data (a SequenceProto) only");
    out.push_back(read_input(it->second));
  }
  return out;
}

// The files PREFIX0.pb, PREFIX1.pb, ... of `dir`: TensorProtos, or
// SequenceProtos where `descs` says the value is a sequence.
std::vector<Value> files_in(const std::string& dir, const std::string& prefix, const std::vector<TensorDesc>& descs) {
  std::vector<Value> out;
  for (size_t k = 0;; ++k) {
    fs::path p = fs::path(dir) / (prefix + std::to_string(k) + ".pb");
    if (!fs::exists(p)) break;
    out.push_back(read_test_value(p.string(), k < descs.size() ? descs[k] : TensorDesc{}));
  }
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// --list-devices: each kind's devices (--device numbers them) and what each
// offers, or why there are none. Exit 0 when there is at least one.
int list_devices(bool json) {
  nlohmann::json rep = nlohmann::json::object();
  int found = 0;
  for (const Device& d : devices())
    if (d.list) found += d.list(rep, json ? nullptr : &std::cout);
  if (json) std::cout << rep.dump(2) << "\n";
  return found == 0 ? 1 : 0;
}

// --profile's report: a JSON row per kernel, and (`print`) the 20 slowest
// as text, with the bandwidth of their bytes (and its share of
// `peak_bytes_per_s` when known).
nlohmann::json print_profile(const std::vector<KernelProfile>& kernels, double peak_bytes_per_s, bool print,
                             double peak_gflops = 0, const std::string& runs = "all runs") {
  nlohmann::json out = nlohmann::json::array();
  double total = 0;
  for (const auto& k : kernels) total += k.ms;
  if (print) {
    std::cout << "kernel time by kernel (" << runs << ", " << total << " ms";
    if (peak_bytes_per_s > 0) std::cout << "; peak memory bandwidth " << int64_t(peak_bytes_per_s / 1e9) << " GB/s";
    if (peak_gflops > 0) std::cout << "; FMA peak " << int64_t(peak_gflops) << " GFLOP/s";
    std::cout << "):\n";
  }
  int shown = 0;
  for (const auto& k : kernels) {
    nlohmann::json j{{"kernel", k.name}, {"calls", k.calls}, {"ms", k.ms}};
    double gbps = k.bytes >= 0 && k.ms > 0 ? k.bytes / (k.ms * 1e-3) / 1e9 : -1;
    if (gbps >= 0) j["bytes"] = k.bytes, j["gbps"] = gbps;
    if (gbps >= 0 && peak_bytes_per_s > 0) j["peak_share"] = gbps * 1e9 / peak_bytes_per_s;
    double gflops = k.flops > 0 && k.ms > 0 ? k.flops / (k.ms * 1e-3) / 1e9 : -1;
    if (gflops >= 0) j["flops"] = k.flops, j["gflops"] = gflops;
    if (gflops >= 0 && k.integer_ops) j["integer_ops"] = true;
    if (gflops >= 0 && peak_gflops > 0 && !k.integer_ops) j["flops_share"] = gflops / peak_gflops;
    out.push_back(j);
    if (!print || shown++ >= 20) continue;
    std::ostringstream line;
    line << "  " << std::fixed << std::setprecision(3) << std::setw(10) << k.ms << " ms  " << std::setw(5)
         << std::setprecision(1) << 100 * k.ms / std::max(total, 1e-9) << "%  " << std::setw(5) << k.calls;
    if (gbps >= 0) line << "  " << std::setw(8) << gbps << " GB/s";
    if (j.contains("peak_share")) line << " (" << std::setw(4) << 100 * j["peak_share"].get<double>() << "%)";
    if (gflops >= 0) line << "  " << std::setw(7) << gflops << (k.integer_ops ? " GOP/s  " : " GFLOP/s");
    if (j.contains("flops_share")) line << " (" << std::setw(4) << 100 * j["flops_share"].get<double>() << "%)";
    line << "  " << k.name << "\n";
    std::cout << line.str();
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"relax-run: run a package (*.rpkg) on inputs from .npy or .pb files."};
  std::string pkg, output_dir, test_data, max_memory;
  std::vector<std::string> inputs;
  int threads = 0, bench = 0, device = 0;
  bool json = false, list = false;
  Tolerance tol;
  app.add_option("package", pkg, "the package");
  app.add_flag("--list-devices", list,
               "list the GPU devices of each kind (Vulkan; with --json: as JSON) and exit; 1 when there is none");
  app.add_option("--input", inputs, "an input tensor: NAME=FILE (.npy or .pb); repeat for each input");
  app.add_option("--output-dir", output_dir,
                 "write each output to DIR/<name>.npy (a sequence's tensors to <name>_K_.npy)");
  app.add_option("--test-data", test_data,
                 "a directory with input_K.pb and output_K.pb (TensorProto, or SequenceProto for a sequence): run "
                 "and compare (exit 1 when any output differs)");
  app.add_option("--rtol", tol.rtol, "relative tolerance for --test-data")->capture_default_str();
  app.add_option("--atol", tol.atol, "absolute tolerance for --test-data")->capture_default_str();
  app.add_option("--threads", threads, "threads for kernels (default: the number of cores)");
  app.add_option("--device", device, "the device a GPU package runs on, by its index among its kind's (see --list-devices)")
      ->capture_default_str();
  app.add_option("--bench", bench, "run N more times and print the median latency");
  app.add_option("--max-memory", max_memory,
                 "the most memory the run's tensors may hold, in bytes or with K, M, G or T (e.g. 8G): a tensor "
                 "past it fails the run with an error naming it (default: $RELAX_MAX_MEMORY, else this machine's "
                 "memory)");
  app.add_flag("--json", json, "print the result as JSON on standard output");
  bool stats = false, profile = false;
  app.add_flag("--profile", profile,
               "time each kernel call and print the kernels by total time (cpu: also the library calls and other "
               "builtins on tensor data, with the bandwidth of the bytes they read and wrote and, for the GEMM and "
               "convolution calls, GFLOP/s, each as a share of this machine's measured peak: FMA throughput of the "
               "threads used, a large copy's bandwidth; the 8-bit products in GOP/s, with no FMA share; vulkan: each "
               "call run "
               "on its own; cuda: with its buffers' bandwidth and its share of the device's peak, CUDA graphs off) "
               "(in --json: \"profile\"); with --bench N on cpu, of the N warm runs only");
  app.add_flag("--stats", stats,
               "print what a vulkan package did on the device per run: kernel calls, dispatches, barriers, "
               "submits, bytes copied in and out; for a cuda package, its CUDA graphs: captures, replays, regions "
               "run directly (in --json: always)");
  app.footer(
      "Examples:\n"
      "  relax-run model.cpu.rpkg --input x=x.npy --output-dir out/\n"
      "  relax-run model.vulkan.rpkg --test-data case/test_data_set_0 --json\n"
      "  relax-run gpt2.cpu.rpkg --input input_ids=ids.npy --bench 50\n"
      "  relax-run --list-devices\n\n"
      "Exit status: 0 ran (and, with --test-data, every output matched); 1 an error or a mismatch.");
  app.set_version_flag("--version", relax::version_text("relax-run"));
  CLI11_PARSE(app, argc, argv);
  if (list) return list_devices(json);
  if (pkg.empty()) {
    std::cerr << "relax-run: a package is required (or --list-devices)\n" << app.help();
    return 2;
  }

  if (!max_memory.empty()) {
    auto bytes = relax::rt::parse_bytes(max_memory);
    if (!bytes) {
      std::cerr << "relax-run: --max-memory: '" << max_memory << "' is not a size (bytes, or with K, M, G or T)\n";
      return 2;
    }
    relax::rt::set_memory_cap(*bytes);
  }

  nlohmann::json rep{{"package", pkg}};
  try {
    if (threads > 0) ThreadPool::set_global_num_threads(threads);
    auto model = Model::load(pkg, device);
    const Kernels* kernels = model->kernels();
    // The device times its own calls, or (a host device) the VM does.
    const bool device_times = profile && kernels && kernels->time_calls(true);
    if (profile && !device_times) model->vm().set_profiling(true);
    std::vector<Value> in =
        test_data.empty() ? named_inputs(*model, inputs) : files_in(test_data, "input_", model->inputs());
    auto t0 = std::chrono::steady_clock::now();
    std::vector<Value> out = model->run_values(in);
    rep["first_run_ms"] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (bench > 0) {
      // The profile of the warm runs only: the first one's figures carry
      // first-touch page faults of the planned storage (a softmax over
      // Whisper's (8, 1500, 1500) scores read 60 ms cold, 11 warm).
      if (profile && !device_times) model->vm().set_profiling(true);
      std::vector<double> ms;
      for (int i = 0; i < bench; ++i) {
        auto t = std::chrono::steady_clock::now();
        model->run_values(in);
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count());
      }
      const double lo = *std::min_element(ms.begin(), ms.end()), hi = *std::max_element(ms.begin(), ms.end());
      rep["bench"] = {{"runs", bench}, {"median_ms", median(ms)}, {"min_ms", lo}, {"max_ms", hi}, {"runs_ms", ms}};
      if (!json)
        std::cout << "median latency: " << median(ms) << " ms over " << bench << " runs (min " << lo << ", max " << hi
                  << ")\n";
    }
    if (profile) {
      // Kernels by total time; for cuda also the bandwidth their buffers'
      // bytes took, and its share of the device's peak (memory clock and
      // bus width).
      std::vector<KernelProfile> rows;
      double peak_bytes = 0, peak_gflops = 0;
      if (device_times) {
        rows = kernels->call_times();
        peak_bytes = kernels->peak_bytes_per_s();
      } else {  // the kernels and the library calls (GEMM, ...) and other builtins on tensor data
        for (const auto& t : model->vm().profile())
          rows.push_back({t.kernel ? t.name : t.name + " (builtin)", t.calls, t.ms, t.bytes, t.flops, t.integer_ops});
        // Against this machine's measured peaks: the FMA peak of the threads used, a large copy's bandwidth.
        const CpuPeak& cpu = measured_cpu_peak();
        int used = ThreadPool::global()->num_threads();
        peak_gflops = cpu.fma_gflops * used, peak_bytes = cpu.copy_bytes_per_s;
        rep["cpu_peak"] = {{"isa", cpu.isa},
                           {"fma_gflops_per_core", cpu.fma_gflops},
                           {"threads", used},
                           {"copy_gbps", cpu.copy_bytes_per_s / 1e9}};
        if (!json) {
          std::ostringstream line;
          line << "cpu: " << cpu.isa << ", FMA peak " << std::fixed << std::setprecision(1) << cpu.fma_gflops
               << " GFLOP/s per core x " << used << (used == 1 ? " thread" : " threads") << ", copy "
               << cpu.copy_bytes_per_s / 1e9 << " GB/s (measured)\n";
          std::cout << line.str();
        }
      }
      std::string runs = device_times ? "all runs"
                         : bench > 0 ? "the " + std::to_string(bench) + " warm runs"
                                     : "the first run, cold: --bench N profiles N warm runs";
      rep["profile"] = print_profile(rows, peak_bytes, !json, peak_gflops, runs);
    }
    // What the device did (its own key in --json; a line with --stats).
    if (kernels) kernels->report(rep, 1 + std::max(bench, 0), stats && !json ? &std::cout : nullptr);
    const auto& descs = model->outputs();
    rep["outputs"] = nlohmann::json::array();
    bool all_ok = true;
    std::vector<Value> expected;
    if (!test_data.empty()) {
      expected = files_in(test_data, "output_", descs);
      if (expected.size() != out.size())
        rt_fail(test_data, ": has ", expected.size(), " expected outputs, the model produces ", out.size());
    }
    for (size_t i = 0; i < out.size(); ++i) {
      std::string name = i < descs.size() ? descs[i].name : "output_" + std::to_string(i);
      // A sequence output: each of its tensors, as name[k].
      std::vector<std::pair<std::string, Tensor>> parts;
      std::vector<Tensor> want;
      if (out[i].is_tuple()) {
        const std::vector<Value>& items = out[i].tuple();
        for (size_t k = 0; k < items.size(); ++k)
          parts.emplace_back(name + "[" + std::to_string(k) + "]", items[k].tensor("a sequence's element"));
        if (!expected.empty()) {
          if (!expected[i].is_tuple() || expected[i].tuple().size() != items.size())
            rt_fail(test_data, ": output ", name, " is a sequence of ", items.size(), " tensors; the expected file ",
                    expected[i].is_tuple() ? "has " + std::to_string(expected[i].tuple().size()) : "is a tensor");
          for (const Value& v : expected[i].tuple()) want.push_back(v.tensor());
        }
        if (!json) std::cout << name << ": a sequence of " << items.size() << " tensors\n";
      } else {
        parts.emplace_back(name, out[i].tensor("an output"));
        if (!expected.empty()) want.push_back(expected[i].tensor("an expected output"));
      }
      for (size_t k = 0; k < parts.size(); ++k) {
        const auto& [part, t] = parts[k];
        nlohmann::json o{{"name", part}, {"dtype", t.dtype().str()}, {"shape", t.shape()}};
        if (!output_dir.empty()) {
          fs::create_directories(output_dir);
          fs::path p = fs::path(output_dir) / (safe_name(part) + ".npy");
          write_npy(p.string(), t);
          o["file"] = p.string();
        }
        if (!want.empty()) {
          Comparison c = compare_tensors(t, want[k], tol);
          all_ok = all_ok && c.ok;
          o["match"] = c.ok;
          o["max_abs_error"] = c.max_abs_error;
          o["max_rel_error"] = c.max_rel_error;
          if (!c.ok) o["detail"] = c.detail;
          if (!json)
            std::cout << part << ": " << (c.ok ? "match" : "MISMATCH") << "  max abs error " << c.max_abs_error
                      << "  max rel error " << c.max_rel_error << (c.ok ? "" : "  (" + c.detail + ")") << "\n";
        } else if (!json) {
          std::cout << part << ": " << t.type_str() << (o.contains("file") ? " -> " + o["file"].get<std::string>() : "")
                    << "\n";
        }
        rep["outputs"].push_back(o);
      }
    }
    rep["ok"] = all_ok;
    if (json) std::cout << rep.dump(2) << "\n";
    return all_ok ? 0 : 1;
  } catch (const std::exception& e) {
    rep["ok"] = false;
    rep["error"] = e.what();
    if (json) std::cout << rep.dump(2) << "\n";
    std::cerr << "relax-run: error: " << e.what() << "\n";
    return 1;
  }
}
