// onnx-import-report: imports every case of the ONNX backend test data and
// checks that the struct info of each graph output agrees with the dtype and
// shape of the expected output once the concrete input shapes are bound.
//
//   onnx-import-report [--root DIR] [--filter REGEX] [--json FILE]
//                      [--baseline FILE] [--write-baseline FILE] [--verbose]
//
// Each case runs in a child process, so a crash or a hang is reported as
// such and the run goes on. Statuses:
//   match        imported; every output's dtype and dims agree
//   dynamic      imported; dtype and rank agree, and every dim is either
//                equal or bound at run time from tensor data by a match_cast
//                (a shape operand that the case feeds as a graph input)
//   coarse       imported, but some output's dtype, rank or dims are unknown
//   mismatch     imported, but an output's struct info contradicts the data
//   unsupported  the importer reports something unsupported (exit code 2)
//   error        the importer raises an error (exit code 1)
//   crash        the importer crashed or timed out
// With --baseline, every case listed in FILE ("name status" lines) must keep
// its status or a better one (match > dynamic > the rest): the ratchet CI
// runs. Cases absent from the data set in use are skipped.
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "frontends/onnx/importer.h"
#include "frontends/onnx/onnx_proto.h"
#include "tests/conformance/cases.h"

namespace fs = std::filesystem;
using namespace relax;
using namespace relax::conformance;

namespace {

std::string dims_text(const std::vector<int64_t>& d) {
  std::string s = "(";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + (d.size() == 1 ? ",)" : ")");
}

// Binds the symbolic dims of `si` to `dims`; false (with a reason) on a clash.
bool bind_input(const StructInfo& si, const std::vector<int64_t>& dims, SymMap<int64_t>& env, std::string& why) {
  auto* t = as<TensorSI>(si);
  if (!t || t->unknown_rank()) return true;
  if (size_t(t->ndim) != dims.size()) {
    why = cat("rank ", t->ndim, " but the data has ", dims_text(dims));
    return false;
  }
  if (!t->shape) return true;
  for (size_t i = 0; i < dims.size(); ++i) {
    const SymExpr& d = (*t->shape)[i];
    if (d.is_var() && !env.count(d)) {
      env[d] = dims[i];
      continue;
    }
    auto v = evaluate(d, env);
    if (v && *v != dims[i]) {
      why = cat("dim ", i, " is ", d, " = ", *v, " but the data has ", dims[i]);
      return false;
    }
  }
  return true;
}

Result check_output(const std::string& name, const StructInfo& si, const onnx::TensorProto& expected,
                    const SymMap<int64_t>& env) {
  auto* t = as<TensorSI>(si);
  std::vector<int64_t> dims(expected.dims().begin(), expected.dims().end());
  auto dtype = onnx_fe::dtype_of(expected.data_type());
  if (!t) return {"mismatch", cat("output '", name, "' is not a tensor in the IR")};
  if (t->dtype.is_void()) return {"coarse", cat("output '", name, "' has an unknown dtype")};
  if (dtype && t->dtype != *dtype)
    return {"mismatch", cat("output '", name, "' is ", t->dtype.str(), " but the data is ", dtype->str())};
  if (t->unknown_rank()) return {"coarse", cat("output '", name, "' has an unknown rank")};
  if (size_t(t->ndim) != dims.size())
    return {"mismatch", cat("output '", name, "' has rank ", t->ndim, " but the data has ", dims_text(dims))};
  if (!t->shape) return {"coarse", cat("output '", name, "' has rank ", t->ndim, " but unknown dims")};
  std::string dynamic;
  for (size_t i = 0; i < dims.size(); ++i) {
    const SymExpr& d = (*t->shape)[i];
    auto v = evaluate(d, env);
    if (!v) {  // a dim bound from tensor data at run time
      if (dynamic.empty()) dynamic = cat("output '", name, "' dim ", i, " is ", d, ", bound at run time");
      continue;
    }
    if (*v != dims[i])
      return {"mismatch", cat("output '", name, "' dim ", i, " is ", d, " = ", *v, " but the data has ", dims[i],
                              " (expected ", dims_text(dims), ")")};
  }
  if (!dynamic.empty()) return {"dynamic", dynamic};
  return {"match", ""};
}

// Runs in the child process.
Result run_case(const Case& c) {
  onnx_fe::ImportedModel m;
  try {
    m = onnx_fe::import_onnx(c.model);
  } catch (const onnx_fe::UnsupportedModel& u) {
    std::string what;
    for (const auto& x : u.items)
      what += (what.empty() ? "" : ", ") + x.op_type + (x.detail.empty() ? "" : " (" + x.detail + ")");
    return {"unsupported", what};
  } catch (const Error& e) {
    return {"error", first_line(e.what())};
  }
  try {
    SymMap<int64_t> env;
    if (c.inputs.empty()) {
      // Light models: inputs are built from the declared (static) shapes.
      for (const auto& in : m.inputs) {
        auto* t = as<TensorSI>(in.sinfo);
        if (!t || !t->shape) continue;
        std::vector<int64_t> dims;
        for (const SymExpr& d : *t->shape) dims.push_back(d.is_const() ? d.const_value() : 1);
        std::string why;
        bind_input(in.sinfo, dims, env, why);
      }
    }
    for (size_t k = 0; k < c.inputs.size() && k < m.inputs.size(); ++k) {
      onnx::TensorProto t = onnx_fe::load_tensor_file(c.inputs[k]);
      std::string why;
      if (!bind_input(m.inputs[k].sinfo, {t.dims().begin(), t.dims().end()}, env, why))
        return {"mismatch", cat("input '", m.inputs[k].name, "': ", why)};
    }
    if (c.outputs.size() != m.outputs.size())
      return {"mismatch", cat("the IR has ", m.outputs.size(), " outputs but the data has ", c.outputs.size())};
    Result worst{"match", ""};
    for (size_t k = 0; k < c.outputs.size(); ++k) {
      onnx::TensorProto t = onnx_fe::load_tensor_file(c.outputs[k]);
      Result r = check_output(m.outputs[k].name, m.outputs[k].sinfo, t, env);
      if (r.status == "mismatch") return r;
      if (r.status == "coarse" || (r.status == "dynamic" && worst.status == "match")) worst = r;
    }
    return worst;
  } catch (const Error& e) {
    return {"error", "reading the test data: " + first_line(e.what())};
  }
}

// Lower is better; a case may not move to a higher rank than its baseline.
int rank_of(const std::string& status) {
  if (status == "match") return 0;
  if (status == "dynamic") return 1;
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"onnx-import-report: import every ONNX backend test case and check the output struct info."};
  std::string root, filter = ".*", json_path, baseline, write_baseline;
  bool verbose = false;
  int timeout_s = 60;
  app.add_option("--root", root,
                 "the test data (default: ../shared/onnx-backend-tests, else Debian's libonnx-testdata)");
  app.add_option("--filter", filter, "only cases whose name (e.g. node/test_abs) matches this regex");
  app.add_option("--json", json_path, "write every case's status and reason to this file");
  app.add_option("--baseline", baseline,
                 "fail if a case listed in this file falls below its status there; a folder holds one file per "
                 "data set (onnx-backend-tests.txt, libonnx-testdata.txt)");
  app.add_option("--write-baseline", write_baseline, "write the matching and dynamic cases to this file");
  app.add_option("--timeout", timeout_s, "seconds per case");
  app.add_flag("-v,--verbose", verbose, "print every case, matching ones too");
  CLI11_PARSE(app, argc, argv);

  std::string dataset, dataset_key = "custom";
  if (root.empty()) {
    default_dataset(RELAX_SOURCE_DIR, root, dataset, dataset_key);
  } else {
    dataset = root;
  }
  if (!fs::is_directory(root)) {
    std::cerr << "onnx-import-report: no test data at " << root << "\n";
    return 1;
  }
  std::regex re(filter);
  std::vector<Case> cases;
  for (Case& c : find_cases(root))
    if (std::regex_search(c.name, re)) cases.push_back(std::move(c));

  auto start = std::chrono::steady_clock::now();
  std::map<std::string, Result> results;
  for (const Case& c : cases) {
    Result r = run_isolated([&] { return run_case(c); }, timeout_s);
    results[c.name] = r;
    if (verbose || rank_of(r.status) > 0) std::cout << r.status << "  " << c.name << "  " << r.reason << "\n";
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const std::vector<std::string> statuses = {"match", "dynamic", "coarse", "mismatch", "unsupported", "error", "crash"};
  std::cout << "\n"
            << summary_table("ONNX import report: " + dataset + ", " + std::to_string(cases.size()) + " cases, " +
                                 std::to_string(int(secs)) + " s",
                             cases, results, statuses);
  if (!json_path.empty()) write_json(json_path, {{"dataset", dataset}, {"seconds", secs}}, statuses, results);
  if (!write_baseline.empty()) {
    std::ofstream out(write_baseline);
    out << "# Cases of the ONNX backend test data whose import agrees with the expected output shapes,\n"
        << "# with their status (match, or dynamic: dims bound at run time). Written by\n"
        << "# onnx-import-report --write-baseline; CI fails if a case falls below its status here.\n";
    for (const auto& [name, r] : results)
      if (rank_of(r.status) < 2) out << name << " " << r.status << "\n";
  }
  if (!baseline.empty() && check_baseline(baseline, dataset_key + ".txt", results, "match", rank_of) > 0) return 1;
  return 0;
}
