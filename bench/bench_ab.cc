// Two packages of one model, A and B, timed side by side in one process on
// the same inputs: what a change to the compiler costs or saves, measured
// on a shared machine whose speed drifts by more than the change.
//
//   build/bin/relax-bench-ab A.rpkg B.rpkg --test-data DIR [--rounds 400] [--runs 20] [--copies 4]
//       [--threads 2]
//
// Each round runs A `runs` times and B `runs` times back to back (A first
// in even rounds, B first in odd ones) and keeps each side's median; the
// drift between rounds hits both sides alike. Where a package's weights
// and pool land in memory moves its time by a percent or so (the same
// package loaded twice reads 1.01 here), so each side is loaded `copies`
// times and the rounds take the copies in turn. Prints each side's median
// over the rounds, the median of the rounds' ratios B / A, and the
// quartiles of those ratios: a difference smaller than their spread is
// not one. The inputs are DIR's input_K.pb (tensors), as relax-run
// --test-data reads them; the outputs are not compared.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "runtime/error.h"
#include "runtime/model.h"
#include "runtime/tensor_proto.h"
#include "runtime/thread_pool.h"

using namespace relax::rt;

namespace {

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, size_t(q * double(v.size() - 1) + 0.5))];
}

double run_ms(Model& m, const std::vector<Value>& in) {
  auto t = std::chrono::steady_clock::now();
  m.run_values(in);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "relax-bench-ab: %s\nusage: relax-bench-ab A.rpkg B.rpkg --test-data DIR [--rounds N] [--runs N] "
               "[--threads N]\n",
               why);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> pkgs;
  std::string dir;
  int rounds = 400, runs = 20, copies = 4, threads = 0;
  for (int i = 1; i < argc; ++i) {
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage((std::string(argv[i]) + " needs a value").c_str());
      return argv[++i];
    };
    if (!std::strcmp(argv[i], "--test-data"))
      dir = value();
    else if (!std::strcmp(argv[i], "--rounds"))
      rounds = std::atoi(value().c_str());
    else if (!std::strcmp(argv[i], "--runs"))
      runs = std::atoi(value().c_str());
    else if (!std::strcmp(argv[i], "--copies"))
      copies = std::atoi(value().c_str());
    else if (!std::strcmp(argv[i], "--threads"))
      threads = std::atoi(value().c_str());
    else if (argv[i][0] == '-')
      usage((std::string("unknown option ") + argv[i]).c_str());
    else
      pkgs.push_back(argv[i]);
  }
  if (pkgs.size() != 2 || dir.empty() || rounds < 1 || runs < 1 || copies < 1)
    usage("two packages and --test-data are needed");
  try {
    if (threads > 0) ThreadPool::set_global_num_threads(threads);
    std::vector<Value> in;
    for (size_t k = 0;; ++k) {
      std::filesystem::path p = std::filesystem::path(dir) / ("input_" + std::to_string(k) + ".pb");
      if (!std::filesystem::exists(p)) break;
      in.emplace_back(read_tensor_proto(p.string()).tensor);
    }
    std::vector<std::unique_ptr<Model>> as, bs;  // interleaved, so neither side gets the first addresses
    for (int c = 0; c < copies; ++c) as.push_back(Model::load(pkgs[0])), bs.push_back(Model::load(pkgs[1]));
    for (int c = 0; c < copies; ++c)
      for (int i = 0; i < 10; ++i) run_ms(*as[size_t(c)], in), run_ms(*bs[size_t(c)], in);  // warm caches, pools
    std::vector<double> ma, mb, ratios;
    std::vector<double> sa(static_cast<size_t>(runs)), sb(static_cast<size_t>(runs));
    for (int r = 0; r < rounds; ++r) {
      auto side = [&](Model& m, std::vector<double>& s) {
        for (double& t : s) t = run_ms(m, in);
      };
      Model &a = *as[size_t(r / 2 % copies)], &b = *bs[size_t(r / 2 % copies)];
      if (r % 2 == 0) side(a, sa), side(b, sb);
      else side(b, sb), side(a, sa);
      ma.push_back(quantile(sa, 0.5));
      mb.push_back(quantile(sb, 0.5));
      ratios.push_back(mb.back() / ma.back());
    }
    std::printf("A %s: median %.4f ms\nB %s: median %.4f ms\n", pkgs[0].c_str(), quantile(ma, 0.5), pkgs[1].c_str(),
                quantile(mb, 0.5));
    std::printf("B / A: median %.4f over %d rounds of %d runs each, %d copies (quartiles %.4f to %.4f)\n",
                quantile(ratios, 0.5), rounds, runs, copies, quantile(ratios, 0.25), quantile(ratios, 0.75));
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "relax-bench-ab: error: %s\n", e.what());
    return 1;
  }
}
