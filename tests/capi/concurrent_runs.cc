// One package per model loaded once through the C API, then run from many
// threads at once with a different case (batch, sequence) per thread and
// run: every output must be bitwise what the same case gave when it ran
// alone. Prints the figures (threads, runs, cases, time, VMs) and exits 1
// on the first mismatch or failed run.
//
//   relax-concurrent-runs [--threads 8] [--runs 10000] PKG=CASE_DIR[,CASE_DIR...] ...
//
// A case directory holds input_K.pb (tensors/models' test data); the
// inputs are read with the runtime's own reader, the runs go through
// librelax_runtime.so's C API as an embedding server's would.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "runtime/capi/relax_runtime.h"
#include "runtime/dtype.h"
#include "runtime/tensor.h"
#include "runtime/tensor_proto.h"

namespace {

struct Output {
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

struct Case {
  std::string label;
  std::vector<relax::rt::Tensor> inputs;  // kept alive for the views below
  std::vector<std::string> dtypes;
  std::vector<relax_tensor> views;
  std::vector<Output> want;  // the case run alone
};

struct Package {
  std::string path;
  relax_model* model = nullptr;
  std::vector<Case> cases;
};

// The outputs of one run, copied; an empty message when it succeeded.
std::string run(relax_model* model, const Case& c, std::vector<Output>& out) {
  relax_result* r = relax_model_run(model, c.views.data(), int32_t(c.views.size()));
  if (!r) return relax_last_error();
  out.clear();
  for (int32_t i = 0; i < relax_result_count(r); ++i) {
    relax_tensor t;
    if (relax_result_get(r, i, &t) != 0) {
      relax_result_free(r);
      return relax_last_error();
    }
    Output o{t.dtype, std::vector<int64_t>(t.shape, t.shape + t.ndim), {}};
    const auto dtype = relax::rt::DType::parse(o.dtype);
    if (!dtype) {
      relax_result_free(r);
      return "output " + std::to_string(i) + " has an unknown dtype '" + o.dtype + "'";
    }
    const auto* p = static_cast<const uint8_t*>(t.data);
    o.bytes.assign(p, p + dtype->storage_bytes(relax::rt::shape_numel(o.shape)));
    out.push_back(std::move(o));
  }
  relax_result_free(r);
  return "";
}

bool same(const std::vector<Output>& a, const std::vector<Output>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].dtype != b[i].dtype || a[i].shape != b[i].shape || a[i].bytes != b[i].bytes) return false;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 8;
  long runs = 10000;
  std::vector<Package> packages;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (a == "--runs" && i + 1 < argc) {
      runs = std::atol(argv[++i]);
    } else if (a.find('=') != std::string::npos) {
      Package p;
      p.path = a.substr(0, a.find('='));
      std::string dirs = a.substr(a.find('=') + 1);
      for (size_t at = 0; at <= dirs.size();) {
        size_t end = dirs.find(',', at);
        if (end == std::string::npos) end = dirs.size();
        Case c;
        c.label = dirs.substr(at, end - at);
        for (int k = 0;; ++k) {
          std::string f = c.label + "/input_" + std::to_string(k) + ".pb";
          if (!std::filesystem::exists(f)) break;
          c.inputs.push_back(relax::rt::read_tensor_proto(f).tensor);
        }
        p.cases.push_back(std::move(c));
        at = end + 1;
      }
      packages.push_back(std::move(p));
    } else {
      std::fprintf(stderr, "usage: %s [--threads N] [--runs N] PKG=CASE_DIR[,CASE_DIR...] ...\n", argv[0]);
      return 2;
    }
  }
  if (packages.empty() || threads < 1 || runs < 1) {
    std::fprintf(stderr, "%s: nothing to run\n", argv[0]);
    return 2;
  }

  // Each package once; each case alone, for the outputs to compare with.
  std::vector<std::pair<Package*, Case*>> work;
  for (Package& p : packages) {
    p.model = relax_model_load(p.path.c_str(), 0);
    if (!p.model) {
      std::fprintf(stderr, "%s: %s\n", p.path.c_str(), relax_last_error());
      return 1;
    }
    for (Case& c : p.cases) {
      for (const relax::rt::Tensor& t : c.inputs) c.dtypes.push_back(t.dtype().str());
      for (size_t k = 0; k < c.inputs.size(); ++k)
        c.views.push_back(
            {c.dtypes[k].c_str(), int32_t(c.inputs[k].ndim()), c.inputs[k].shape().data(), c.inputs[k].data()});
      std::string err = run(p.model, c, c.want);
      if (!err.empty()) {
        std::fprintf(stderr, "%s on %s alone: %s\n", p.path.c_str(), c.label.c_str(), err.c_str());
        return 1;
      }
      work.emplace_back(&p, &c);
    }
  }

  // Thread t takes runs t, t + threads, ...; run i is case (i * 7 + t) of
  // the list, so that the threads run different cases at the same time.
  std::atomic<long> done{0}, wrong{0};
  std::atomic<bool> failed{false};
  std::vector<std::string> first_error(static_cast<size_t>(threads));
  auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      std::vector<Output> got;
      for (long i = t; i < runs && !failed; i += threads) {
        auto [p, c] = work[size_t((i * 7 + t) % long(work.size()))];
        std::string err = run(p->model, *c, got);
        if (err.empty() && !same(got, c->want)) {
          ++wrong;
          err = "outputs differ from the case run alone";
        }
        if (!err.empty()) {
          first_error[size_t(t)] = p->path + " on " + c->label + ": " + err;
          failed = true;
          return;
        }
        ++done;
      }
    });
  for (std::thread& th : pool) th.join();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::printf("%d threads, %ld of %ld runs, %zu cases of %zu packages, %.2f s (%.0f runs/s)\n", threads, done.load(),
              runs, work.size(), packages.size(), secs, double(done.load()) / secs);
  for (const std::string& e : first_error)
    if (!e.empty()) std::printf("FAILED: %s\n", e.c_str());
  for (Package& p : packages) relax_model_free(p.model);
  if (failed || done != runs) return 1;
  std::printf("every output equal to its case run alone\n");
  return 0;
}
