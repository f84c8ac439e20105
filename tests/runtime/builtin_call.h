// Helpers shared by the runtime tests that call library builtins directly
// (gemm.*, blas.*): a shape argument, one call through a bare VM, and a
// tensor of uniform random f32 in [-1, 1).
#pragma once

#include <doctest/doctest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

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

}  // namespace relax::rt::test
