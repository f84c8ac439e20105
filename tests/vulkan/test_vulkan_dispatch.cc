// The Vulkan path below code generation: a GLSL compute shader compiled to
// SPIR-V in-process (glslang, validated and optimised by SPIRV-Tools), then
// loaded and dispatched through the real loader and driver (lavapipe in
// CI), its results read back. Also the refusals: a shader that does not
// compile names the line, a buffer beyond the device's storage-buffer
// range, a dispatch with the wrong buffers.
#include <doctest/doctest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "backends/vulkan/spirv.h"
#include "ir/error.h"
#include "runtime/error.h"
#include "runtime/vulkan.h"

using namespace relax;

namespace {

const char* kSaxpy = R"(#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) readonly buffer X { float x[]; };
layout(set = 0, binding = 1) buffer Y { float y[]; };
layout(push_constant) uniform P { float a; uint n; } p;
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < p.n) y[i] = p.a * x[i] + y[i];
}
)";

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("vulkan: GLSL to SPIR-V in-process, validated, at -O0 and -O2") {
  for (int opt : {0, 2}) {
    std::vector<uint32_t> words = vulkan::compile_glsl(kSaxpy, "saxpy", {opt, 1});
    REQUIRE(words.size() > 5);
    CHECK(words[0] == 0x07230203u);  // the SPIR-V magic number
    std::string text = vulkan::disassemble(words);
    CHECK(text.find("OpEntryPoint GLCompute") != std::string::npos);
  }
  std::string e = error_of([] { vulkan::compile_glsl("#version 450\nvoid main() {\n  int x = y;\n}\n", "bad"); });
  CHECK(e.find("shader 'bad' does not compile") != std::string::npos);
  CHECK(e.find("int x = y;") != std::string::npos);  // the offending line is quoted
}

TEST_CASE("vulkan: dispatch on the first device, results read back") {
  std::string why;
  if (!rt::vulkan_available(&why)) {
    // scripts/setup.sh installs lavapipe, so CI always has a device.
    FAIL("no Vulkan device: ", why);
    return;
  }
  auto dev = rt::VulkanDevice::open(0);
  MESSAGE("device: ", dev->info().name);
  std::vector<uint32_t> spirv = vulkan::compile_glsl(kSaxpy, "saxpy");
  auto k = dev->load_kernel("saxpy", spirv, 2, 8);
  for (uint32_t n : {1u, 63u, 64u, 1000u, 100000u}) {
    std::vector<float> x(n), y(n);
    std::iota(x.begin(), x.end(), 0.0f);
    for (uint32_t i = 0; i < n; ++i) y[i] = float(i % 7);
    auto bx = dev->alloc(n * 4), by = dev->alloc(n * 4);
    dev->upload(*bx, x.data(), n * 4);
    dev->upload(*by, y.data(), n * 4);
    struct {
      float a;
      uint32_t n;
    } push{2.5f, n};
    uint32_t groups[3] = {(n + 63) / 64, 1, 1};
    dev->dispatch(*k, {bx.get(), by.get()}, &push, sizeof(push), groups);
    std::vector<float> out(n);
    dev->download(*by, out.data(), n * 4);
    int wrong = 0;
    for (uint32_t i = 0; i < n; ++i) wrong += out[i] != 2.5f * x[i] + y[i];
    CAPTURE(n);
    CHECK(wrong == 0);
  }
  // Refusals.
  auto b = dev->alloc(16);
  uint32_t one[3] = {1, 1, 1};
  uint64_t push = 0;
  CHECK(error_of([&] { dev->dispatch(*k, {b.get()}, &push, 8, one); }).find("takes 2 buffers") != std::string::npos);
  CHECK(error_of([&] { dev->alloc(dev->info().max_storage_buffer_range + 1); }).find("storage-buffer range") !=
        std::string::npos);
  CHECK(error_of([&] { rt::VulkanDevice::open(99); }).find("--device 99 does not exist") != std::string::npos);
}
