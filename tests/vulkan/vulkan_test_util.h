// What the vulkan tests share: a module configured as the vulkan target
// configures it (its name and traits, backends/target.h).
#pragma once

#include <memory>

#include "backends/target.h"

namespace relax {

std::unique_ptr<Target> make_vulkan_target();  // backends/vulkan/target.cc

inline void configure_vulkan(IRModule& mod) {
  std::unique_ptr<Target> t = make_vulkan_target();
  t->configure(mod, resolve_options(*t, 2, {}));
}

}  // namespace relax
