// Loading a kernel shared object from bytes: hooks, symbols, refusals. The
// objects are built here from C with the system compiler.
#include <doctest/doctest.h>

#include <vector>

#include "runtime/kernel_library.h"
#include "runtime/thread_pool.h"
#include "tests/runtime/rt_test_util.h"

namespace relax::rt {
using test::contains;
using test::error_of;
using test::run_ok;
using test::slurp;
using test::spit;
using test::TempDir;

namespace {

// A kernel object as the cpu backend writes one, in C. VERSION, KERNEL and
// NO_HOOKS vary it.
constexpr const char* kSource = R"(
#include <stdint.h>
struct RelaxRuntimeHooks {
  int32_t version;
  int32_t num_threads;
  void (*parallel_for)(int64_t, void (*)(int64_t, int64_t, void*), void*);
};
int32_t relax_abi_version = VERSION;
#ifndef NO_HOOKS
struct RelaxRuntimeHooks relax_runtime_hooks;
#endif
struct Ctx { const float* a; const float* b; float* c; };
static void body(int64_t begin, int64_t end, void* p) {
  struct Ctx* c = (struct Ctx*)p;
  for (int64_t i = begin; i < end; ++i) c->c[i] = c->a[i] OP c->b[i];
}
int32_t KERNEL(void* const* buffers, const int64_t* shape) {
  int64_t n = shape[0];
  if (shape[1] != n || shape[2] != n) return 3;
  struct Ctx ctx = {(const float*)buffers[0], (const float*)buffers[1], (float*)buffers[2]};
#ifndef NO_HOOKS
  if (relax_runtime_hooks.parallel_for) { relax_runtime_hooks.parallel_for(n, body, &ctx); return 0; }
#endif
  body(0, n, &ctx);
  return 0;
}
#ifndef NO_HOOKS
int32_t relax_k_hooks(void* const* buffers, const int64_t* shape) {
  return relax_runtime_hooks.version * 1000 + relax_runtime_hooks.num_threads * 10 +
         (relax_runtime_hooks.parallel_for != 0);
}
#endif
)";

// Compiles the source with `defines` into a shared object; "" on failure.
std::string build(const TempDir& dir, const std::string& name, const std::string& defines) {
  spit(dir / "k.c", kSource);
  std::string so = dir / (name + ".so");
  if (!run_ok("cc -shared -fPIC -O1 " + defines + " -o " + so + " " + dir / "k.c")) return "";
  return slurp(so);
}

std::span<const uint8_t> span_of(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

}  // namespace

TEST_CASE("kernel_library: loads from bytes, fills the hooks, runs kernels") {
  if (!run_ok("cc --version")) {
    MESSAGE("skipped: no C compiler (cc) to build a test kernel object");
    return;
  }
  TempDir dir;
  std::string add = build(dir, "add", "-DVERSION=1 -DKERNEL=relax_k_add -DOP=+");
  std::string mul = build(dir, "mul", "-DVERSION=1 -DKERNEL=relax_k_mul -DOP=*");
  REQUIRE(!add.empty());
  REQUIRE(!mul.empty());

  ThreadPool::set_global_num_threads(3);
  auto lib = KernelLibrary::load(span_of(add), "add.rpkg:kernels.cpu");
  CHECK(lib->label() == "add.rpkg:kernels.cpu");
  KernelFn hooks = lib->kernel("relax_k_hooks");
  CHECK(hooks(nullptr, nullptr) == 1 * 1000 + 3 * 10 + 1);

  const int64_t n = 1000;
  std::vector<float> a(n), b(n), c(n, 0);
  for (int64_t i = 0; i < n; ++i) a[i] = float(i), b[i] = 2.0f;
  void* buffers[] = {a.data(), b.data(), c.data()};
  int64_t shape[] = {n, n, n};
  KernelFn fn = lib->kernel("relax_k_add");
  CHECK(fn(buffers, shape) == 0);
  CHECK(c[999] == 1001.0f);
  int64_t bad_shape[] = {n, n, n - 1};
  CHECK(fn(buffers, bad_shape) == 3);

  CHECK(lib->find_symbol("relax_k_nope") == nullptr);
  CHECK(contains(error_of([&] { lib->kernel("relax_k_nope"); }),
                 "add.rpkg:kernels.cpu: kernel relax_k_nope is not in the kernel object"));

  // A second object loaded at the same time stays distinct, as does one
  // loaded after the first is gone.
  auto lib2 = KernelLibrary::load(span_of(mul), "mul");
  CHECK(lib2->find_symbol("relax_k_add") == nullptr);
  CHECK(lib2->kernel("relax_k_mul")(buffers, shape) == 0);
  CHECK(c[10] == 20.0f);
  lib.reset();
  lib2.reset();
  auto lib3 = KernelLibrary::load(span_of(mul), "mul again");
  CHECK(lib3->find_symbol("relax_k_add") == nullptr);
  auto lib4 = KernelLibrary::load(span_of(add), "add again");
  CHECK(lib4->find_symbol("relax_k_add") != nullptr);
  ThreadPool::set_global_num_threads(0);
}

TEST_CASE("kernel_library: refuses other ABI versions, missing exports and junk") {
  if (!run_ok("cc --version")) {
    MESSAGE("skipped: no C compiler (cc) to build a test kernel object");
    return;
  }
  TempDir dir;
  std::string v2 = build(dir, "v2", "-DVERSION=2 -DKERNEL=relax_k_add -DOP=+");
  std::string nohooks = build(dir, "nohooks", "-DVERSION=1 -DKERNEL=relax_k_add -DOP=+ -DNO_HOOKS");
  REQUIRE(!v2.empty());
  REQUIRE(!nohooks.empty());
  CHECK(contains(error_of([&] { KernelLibrary::load(span_of(v2), "m.rpkg"); }),
                 "m.rpkg: kernel ABI version 2, this runtime supports version 1"));
  CHECK(contains(error_of([&] { KernelLibrary::load(span_of(nohooks), "m.rpkg"); }),
                 "m.rpkg: the kernel object does not export relax_runtime_hooks"));
  spit(dir / "none.c", "int relax_k_x(void) { return 0; }\n");
  REQUIRE(run_ok("cc -shared -fPIC -o " + dir / "none.so" + " " + dir / "none.c"));
  CHECK(contains(error_of([&] { KernelLibrary::load(span_of(slurp(dir / "none.so")), "m.rpkg"); }),
                 "does not export relax_abi_version"));
  CHECK(contains(error_of([&] { KernelLibrary::load(span_of(std::string("not an ELF file")), "m.rpkg"); }),
                 "m.rpkg: cannot load the kernel object"));
  CHECK(contains(error_of([&] { KernelLibrary::load({}, "m.rpkg"); }), "empty"));
}

}  // namespace relax::rt
