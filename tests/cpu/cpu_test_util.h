// A test-only loader for the CPU backend's shared objects: the bytes go to a
// memfd, dlopen reads them from /proc/self/fd, and the hooks get a simple
// parallel_for on std::thread that counts its calls.
#pragma once

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "backends/cpu/codegen.h"
#include "ir/error.h"
#include "ir/parser.h"

namespace relax::cpu::test {

struct RelaxRuntimeHooks {
  int32_t version;
  int32_t num_threads;
  void (*parallel_for)(int64_t n, void (*body)(int64_t, int64_t, void*), void* ctx);
};

using Kernel = int32_t (*)(void* const*, const int64_t*);

inline std::atomic<int> parallel_calls{0};

// Four threads, each over a contiguous part of [0, n).
inline void thread_parallel_for(int64_t n, void (*body)(int64_t, int64_t, void*), void* ctx) {
  parallel_calls++;
  const int64_t parts = 4, chunk = (n + parts - 1) / parts;
  std::vector<std::thread> threads;
  for (int64_t begin = 0; begin < n; begin += chunk)
    threads.emplace_back([=] { body(begin, std::min(n, begin + chunk), ctx); });
  for (auto& t : threads) t.join();
}

class Library {
 public:
  explicit Library(const CpuArtifact& a, bool with_pool = true) : artifact_(a) {
    int fd = memfd_create("relax-kernels", MFD_CLOEXEC);
    REQUIRE(fd >= 0);
    REQUIRE(write(fd, a.shared_object.data(), a.shared_object.size()) == ssize_t(a.shared_object.size()));
    std::string path = "/proc/self/fd/" + std::to_string(fd);
    // The fd stays open while the library is loaded: glibc recognises an
    // already loaded library by its path, and a reused fd number would
    // give back the previous object.
    handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    fd_ = fd;
    if (!handle_) FAIL("dlopen: ", dlerror());
    auto* version = static_cast<int32_t*>(dlsym(handle_, "relax_abi_version"));
    REQUIRE(version);
    CHECK(*version == 1);
    hooks = static_cast<RelaxRuntimeHooks*>(dlsym(handle_, "relax_runtime_hooks"));
    REQUIRE(hooks);
    CHECK(hooks->version == 0);
    CHECK(!hooks->parallel_for);
    if (with_pool) *hooks = {1, 4, thread_parallel_for};
  }
  ~Library() {
    if (handle_) dlclose(handle_);
    close(fd_);
  }
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  Kernel kernel(const std::string& program) const {
    for (const KernelInfo& k : artifact_.kernels)
      if (k.program == program) {
        auto f = reinterpret_cast<Kernel>(dlsym(handle_, k.symbol.c_str()));
        REQUIRE(bool(f));
        return f;
      }
    FAIL("no kernel for program ", program);
    return nullptr;
  }

  RelaxRuntimeHooks* hooks = nullptr;

 private:
  CpuArtifact artifact_;
  void* handle_ = nullptr;
  int fd_ = -1;
};

inline std::vector<tir::Program> programs_in(const IRModule& m) {
  std::vector<tir::Program> out;
  for (const std::string& n : m.program_names()) out.push_back(m.program(n));
  return out;
}

inline std::vector<tir::Program> programs_of(const std::string& text) { return programs_in(parse_module(text)); }

// The programs of a file of the IR round-trip corpus (tests/ir/roundtrip).
inline std::vector<tir::Program> corpus_programs(const std::string& file) {
  return programs_in(parse_module_file(std::string(RELAX_SOURCE_DIR) + "/tests/ir/roundtrip/" + file));
}

inline int32_t call(Kernel k, std::vector<void*> buffers, std::vector<int64_t> shapes) {
  shapes.push_back(0);  // never empty, so data() is a valid pointer
  return k(buffers.data(), shapes.data());
}

// Same value, NaN equal to NaN; `rel` relative tolerance.
inline bool same(double got, double want, double rel = 0) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= rel * std::max(1.0, std::fabs(want));
}

}  // namespace relax::cpu::test
