#include "passes/pass.h"

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <iostream>

#include "ir/error.h"
#include "ir/printer.h"
#include "ir/verifier.h"

namespace relax {

const Pass* find_pass(const std::string& name) {
  for (const Pass& p : all_passes())
    if (p.name == name) return &p;
  return nullptr;
}

std::vector<std::string> split_pass_list(const std::string& list) {
  std::vector<std::string> names;
  std::string cur;
  auto flush = [&] {
    size_t b = cur.find_first_not_of(" \t"), e = cur.find_last_not_of(" \t");
    if (b != std::string::npos) names.push_back(cur.substr(b, e - b + 1));
    cur.clear();
  };
  for (char c : list) {
    if (c == ',')
      flush();
    else
      cur += c;
  }
  flush();
  return names;
}

namespace {

std::string known_passes(const std::vector<Pass>& extra) {
  std::string s;
  for (const Pass& p : extra) s += (s.empty() ? "" : ", ") + p.name;
  for (const Pass& p : all_passes()) s += (s.empty() ? "" : ", ") + p.name;
  for (const std::string& p : pipeline_names()) s += ", " + p;
  return s;
}

const Pass* find_in(const std::string& name, const std::vector<Pass>& extra) {
  for (const Pass& p : extra)
    if (p.name == name) return &p;
  return find_pass(name);
}

// Pipeline names expand to their passes; anything else must be a pass.
std::vector<const Pass*> resolve(const std::vector<std::string>& names, const TargetTraits& traits,
                                 const std::vector<Pass>& extra) {
  std::vector<const Pass*> passes;
  for (const std::string& n : names) {
    if (const Pass* p = find_in(n, extra)) {
      passes.push_back(p);
      continue;
    }
    bool is_pipeline = false;
    for (const std::string& pl : pipeline_names()) is_pipeline |= pl == n;
    if (!is_pipeline) fail("unknown pass '", n, "'; known: ", known_passes(extra));
    for (const std::string& sub : pipeline(n, traits)) passes.push_back(find_pass(sub));
  }
  return passes;
}

}  // namespace

std::vector<std::string> pipeline(const std::string& name, const TargetTraits& traits,
                                  const std::vector<TargetPass>& own, int level) {
  std::vector<std::string> base = pipeline(name, traits), names;
  for (const TargetPass& t : own)
    if (level >= t.min_level && std::find(base.begin(), base.end(), t.after) == base.end())
      fail("the target's pass '", t.pass.name, "' runs after '", t.after, "', which pipeline ", name, " lacks");
  for (const std::string& n : base) {
    names.push_back(n);
    for (const TargetPass& t : own)
      if (t.after == n && level >= t.min_level) names.push_back(t.pass.name);
  }
  return names;
}

IRModule run_passes(const IRModule& mod, const std::vector<std::string>& names, const PassOptions& opts) {
  std::ostream& log = opts.log ? *opts.log : std::cerr;
  for (const std::string& n : opts.print_after)
    if (!find_in(n, opts.extra)) fail("--print-after: unknown pass '", n, "'; known: ", known_passes(opts.extra));
  std::vector<const Pass*> passes = resolve(names, TargetTraits::of(mod), opts.extra);
  IRModule cur = mod;
  std::vector<std::pair<std::string, double>> times;
  for (const Pass* p : passes) {
    auto start = std::chrono::steady_clock::now();
    try {
      cur = p->run(cur);
    } catch (const Error& e) {
      fail("pass '", p->name, "' failed: ", e.what());
    }
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    times.emplace_back(p->name, ms);
    if (opts.verify_each) {
      std::vector<std::string> errors = verify(cur);
      if (!errors.empty()) {
        std::string msg = cat("the IR is not well formed after pass '", p->name, "':");
        for (const std::string& e : errors) msg += "\n  " + e;
        throw Error(msg);
      }
    }
    if (opts.print_after_all || opts.print_after.count(p->name))
      log << "# IR after " << p->name << "\n" << print_module(cur) << "\n";
  }
  if (opts.time_passes) {
    double total = 0;
    for (const auto& [n, ms] : times) total += ms;
    log << "# pass timing (ms)\n";
    for (const auto& [n, ms] : times)
      log << std::setw(10) << std::fixed << std::setprecision(3) << ms << "  " << n << "\n";
    log << std::setw(10) << std::fixed << std::setprecision(3) << total << "  total\n";
  }
  return cur;
}

}  // namespace relax
