// GLSL compute shaders to SPIR-V, in-process: glslang compiles (its C++
// API, no glslangValidator process), SPIRV-Tools validates every module for
// the Vulkan environment and, at opt_level >= 2, optimises it with its
// performance passes (and validates again).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace relax::vulkan {

struct SpirvOptions {
  int opt_level = 2;
  // The Vulkan version the module targets: 1.1 gives SPIR-V 1.3, which has
  // subgroup operations; what every Vulkan 1.1 device (lavapipe, NVIDIA,
  // AMD, Intel) accepts.
  int vulkan_minor = 1;
};

// Builds glslang's tables of built-in functions for compute shaders of
// `opts` in this process, which every later compile reuses: a parent that
// forks a worker per job (onnx-conformance) calls it first, so that the
// workers do not each parse them again (most of a small shader's compile).
void warm_up_glslang(const SpirvOptions& opts = {});

// The SPIR-V words of `glsl`, a compute shader. Throws relax::Error naming
// `name` with glslang's messages (and the offending source lines) when it
// does not compile, or SPIRV-Tools' when the module does not validate.
std::vector<uint32_t> compile_glsl(const std::string& glsl, const std::string& name, const SpirvOptions& opts = {});

// SPIRV-Tools' disassembly, for tests and relax-inspect.
std::string disassemble(const std::vector<uint32_t>& words);

}  // namespace relax::vulkan
