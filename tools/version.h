// What every tool's --version prints: the tool, the project's version and
// the support compiled in (RELAX_BUILD_FEATURES, which CMakeLists.txt
// writes into relax_build_info.h:
// the LLVM of the cpu backend, the Vulkan code generator's glslang and the
// Vulkan headers the runtime was built with, CUDA).
#pragma once

#include <string>

#include "relax_build_info.h"

namespace relax {

inline std::string version_text(const char* tool) {
  return std::string(tool) + " " + RELAX_VERSION + "\n" + RELAX_BUILD_FEATURES;
}

}  // namespace relax
