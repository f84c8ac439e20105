// Helpers shared by the runtime tests that call library builtins directly
// (gemm.*, blas.*): a shape argument, one call through a bare VM, a
// tensor of uniform random f32 in [-1, 1), and a body run on each ISA at
// one and two threads.
#pragma once

#include <doctest/doctest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime/cpu_isa.h"
#include "runtime/thread_pool.h"
#include "runtime/vm.h"

namespace relax::rt::test {

inline Value shape_value(std::vector<int64_t> v) {
  return Value(Shape(std::make_shared<const std::vector<int64_t>>(std::move(v))));
}

// Runs builtin `name` on `args` (the output tensors last, as the VM passes them).
inline void call(const char* name, std::vector<Value> args) {
  static VirtualMachine vm(
      Executable{}, [](const std::string&) { return Tensor(); }, nullptr);
  const Builtin* fn = find_builtin(name);
  REQUIRE(fn);
  std::vector<const Value*> argp;
  for (const Value& a : args) argp.push_back(&a);
  std::vector<int64_t> heap;
  Value out;
  BuiltinCall c{vm, heap, argp.data(), argp.size(), out};
  (*fn)(c);
}

inline Tensor random_tensor(std::mt19937& rng, std::vector<int64_t> shape) {
  Tensor t = Tensor::empty(DType::f32(), shape);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  for (int64_t i = 0; i < t.numel(); ++i) static_cast<float*>(t.data())[i] = d(rng);
  return t;
}

// Runs `body` on each ISA this CPU runs (the kernels' AVX-512, AVX2 and
// plain loops), at 1 and 2 threads; restores the widest ISA and the
// default pool after.
template <class F>
void each_isa_at_1_and_2_threads(F&& body) {
  for (int run = 0; run < 6; ++run) {
    const KernelIsa isa = run < 2 ? KernelIsa::avx512 : run < 4 ? KernelIsa::avx2 : KernelIsa::portable;
    if (isa != KernelIsa::portable && !cpu_runs(isa)) continue;
    REQUIRE(set_kernel_isa(kernel_isa_name(isa)));
    const int threads = 1 + run % 2;
    CAPTURE(std::string(kernel_isa_name(isa)));
    CAPTURE(threads);
    ThreadPool::set_global_num_threads(threads);
    body();
  }
  REQUIRE(set_kernel_isa(""));
  ThreadPool::set_global_num_threads(0);
}

}  // namespace relax::rt::test
