#include "backends/target.h"

#include "ir/error.h"

namespace relax {

const std::string& TargetOptions::at(const std::string& name) const {
  auto it = values.find(name);
  if (it == values.end()) fail("internal error: no target option '", name, "'");
  return it->second;
}

void Target::configure(IRModule& mod, const TargetOptions& opts) const {
  mod.attrs.set("target", name());
  std::string text = traits(opts).str(), more = mod.attrs.get_string("add_traits", "");
  // Words the module's source adds (a test's way to run what the target
  // would not: add_traits="capture" on the cpu); later words win.
  TargetTraits::parse(more.empty() ? text : text + " " + more).record(mod);
}

std::string Target::options_key(const TargetOptions& opts) const {
  std::string key;
  for (const TargetOption& o : options()) key += (key.empty() ? "" : " ") + o.name + "=" + opts.at(o.name);
  return key;
}

TargetOptions resolve_options(const Target& target, int opt_level, const std::map<std::string, std::string>& given) {
  TargetOptions opts;
  opts.opt_level = opt_level;
  for (const TargetOption& o : target.options()) {
    auto it = given.find(o.name);
    opts.values[o.name] = it == given.end() ? o.default_value : it->second;
  }
  return opts;
}

}  // namespace relax
