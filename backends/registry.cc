// The registry of targets (backends/target.h).
#include "backends/target.h"
#include "ir/error.h"

namespace relax {

// The registry: backends/CMakeLists.txt writes one line per target,
// RELAX_TARGET(name) for those built and RELAX_TARGET_LEFT_OUT(name,
// "OPTION") for those the configuration left out.
#define RELAX_TARGET(name) std::unique_ptr<Target> make_##name##_target();
#define RELAX_TARGET_LEFT_OUT(name, option)
#include "relax_targets.inc"
#undef RELAX_TARGET
#undef RELAX_TARGET_LEFT_OUT

namespace {

struct Registry {
  std::vector<std::unique_ptr<Target>> built;
  std::vector<std::pair<std::string, std::string>> left_out;  // name, the CMake option
  Registry() {
#define RELAX_TARGET(name) built.push_back(make_##name##_target());
#define RELAX_TARGET_LEFT_OUT(name, option) left_out.emplace_back(#name, option);
#include "relax_targets.inc"
#undef RELAX_TARGET
#undef RELAX_TARGET_LEFT_OUT
  }
};

const Registry& registry() {
  static const Registry r;
  return r;
}

}  // namespace

const Target& find_target(const std::string& name) {
  const Registry& r = registry();
  for (const auto& t : r.built)
    if (t->name() == name) return *t;
  for (const auto& [left, option] : r.left_out)
    if (left == name) fail("this build has no ", name, " target (configured with ", option, "=OFF)");
  std::string known;
  for (const auto& t : r.built) known += (known.empty() ? "" : ", ") + t->name();
  fail("unknown target '", name, "'; known targets: ", known);
}

const Target* host_target() {
  for (const auto& t : registry().built) {
    TargetOptions defaults = resolve_options(*t, 2, {});
    if (!t->traits(defaults).gpu && t->folds_here(defaults)) return t.get();
  }
  return nullptr;
}

std::vector<const Target*> all_targets() {
  std::vector<const Target*> out;
  for (const auto& t : registry().built) out.push_back(t.get());
  return out;
}

}  // namespace relax
