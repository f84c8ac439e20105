#include "backends/vulkan/codegen.h"

#include <atomic>
#include <cstdlib>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "backends/vm/kernel_abi.h"
#include "backends/vulkan/codegen_glsl.h"
#include "backends/vulkan/spirv.h"
#include "ir/error.h"

namespace relax::vulkan {
namespace {

// f(0..n-1) on up to the machine's cores; the first error is rethrown.
void parallel_for(size_t n, const std::function<void(size_t)>& f) {
  size_t threads = std::min<size_t>(n, std::max(1u, std::thread::hardware_concurrency()));
  if (threads <= 1) {
    for (size_t i = 0; i < n; ++i) f(i);
    return;
  }
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&] {
    for (size_t i; (i = next++) < n;) {
      try {
        f(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        next = n;
      }
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace

VulkanArtifact compile_vulkan(const std::vector<tir::Program>& programs, int opt_level,
                              std::pair<int64_t, int64_t> tile, uint32_t block, int64_t max_shared_bytes) {
  VulkanArtifact out;
  nlohmann::json meta;
  meta["kernels"] = nlohmann::json::array();
  std::set<std::string> needs;
  std::vector<uint32_t> words;
  GlslSchedule schedule{tile.first, tile.second};
  schedule.max_shared_bytes = max_shared_bytes;
  const char* row_blocks = std::getenv("RELAX_VULKAN_ROW_BLOCKS");  // tests: codegen_glsl.h
  schedule.row_blocks = row_blocks && std::string(row_blocks) == "1";
  // Every shader first, compiled on all cores (glslang and SPIRV-Tools
  // take most of a build's time: 0.5-1.2 s for a fused conv with dynamic
  // shapes), then the metadata in program order.
  std::vector<GlslProgram> glsl;
  glsl.reserve(programs.size());  // jobs point into its stages
  std::vector<std::pair<const std::string*, std::string>> jobs;  // source, name
  for (const tir::Program& p : programs) {
    glsl.push_back(glsl_program(p, {}, block, schedule));
    for (const GlslStage& st : glsl.back().stages) {
      jobs.emplace_back(&st.source, st.name);
      if (!st.plain_source.empty()) jobs.emplace_back(&st.plain_source, st.name + "_plain");
      if (!st.rows_source.empty()) jobs.emplace_back(&st.rows_source, st.name + "_rows");
      if (!st.shared_source.empty()) jobs.emplace_back(&st.shared_source, st.name + "_shared");
    }
  }
  std::vector<std::vector<uint32_t>> compiled(jobs.size());
  parallel_for(jobs.size(), [&](size_t i) { compiled[i] = compile_glsl(*jobs[i].first, jobs[i].second, {opt_level, 1}); });
  size_t next_job = 0;
  for (size_t pi = 0; pi < programs.size(); ++pi) {
    const tir::Program& p = programs[pi];
    const GlslProgram& g = glsl[pi];
    needs.insert(g.needs.begin(), g.needs.end());
    // Shape-args slot of each variable: the first plain dim that binds it,
    // else its symbolic parameter.
    SymMap<int64_t> slot = shape_arg_slots(*p);
    nlohmann::json params = nlohmann::json::array();
    size_t param = 0;
    for (const auto* list : {&p->inputs, &p->outputs})
      for (const tir::Buffer& b : *list) {
        params.push_back({{"dtype", b->dtype.str()}, {"ndim", b->shape.size()}});
        if (g.chunks[param] > 1) params.back()["chunks"] = g.chunks[param];
        ++param;
      }
    auto slot_of = [&](const SymExpr& v) -> int64_t {
      auto it = slot.find(v);
      if (it == slot.end()) fail("vulkan codegen: prog @", p->name, ": variable '", v.name(), "' has no shape slot");
      return it->second;
    };
    nlohmann::json push = nlohmann::json::array();
    for (const SymExpr& v : g.push_vars) push.push_back(slot_of(v));
    nlohmann::json stages = nlohmann::json::array();
    // A shader compiled and appended: its "offset" and "words".
    auto spirv = [&](const std::string& source, const std::string& name) {
      RELAX_CHECK(next_job < jobs.size() && jobs[next_job].first == &source && jobs[next_job].second == name,
                  "vulkan codegen: shaders compiled out of order");
      const std::vector<uint32_t>& spv = compiled[next_job++];
      nlohmann::json at{{"offset", words.size()}, {"words", spv.size()}};
      words.insert(words.end(), spv.begin(), spv.end());
      return at;
    };
    // The product of `extents` as postfix code over the shape args.
    auto count = [&](const std::vector<SymExpr>& extents) {
      SymExpr n(int64_t(1));
      for (const SymExpr& e : extents) n = n * e;
      std::vector<int64_t> code;
      sym_to_code(n, slot_of, code);
      return code;
    };
    for (const GlslStage& st : g.stages) {
      nlohmann::json stage = spirv(st.source, st.name);
      stage["name"] = st.name;
      stage["threads"] = count(st.extents);
      stage["reads"] = st.reads;
      stage["writes"] = st.writes;
      if (st.loop_iters.defined()) stage["loop_iters"] = count({st.loop_iters});
      if (!st.plain_source.empty()) {
        stage["plain"] = spirv(st.plain_source, st.name + "_plain");
        stage["plain"]["threads"] = count(st.plain_extents);
        stage["plain"]["tile"] = st.tile;
      }
      if (!st.rows_source.empty()) {
        std::vector<int64_t> work;
        sym_to_code(st.rows_work, slot_of, work);
        stage["rows"] = spirv(st.rows_source, st.name + "_rows");
        stage["rows"]["work"] = work;
        stage["rows"]["count"] = count(st.rows_extents);
        stage["rows"]["needs"] = st.rows_needs;
      }
      if (!st.shared_source.empty()) {
        stage["shared"] = spirv(st.shared_source, st.name + "_shared");
        stage["shared"]["count"] = count(st.shared_extents);
        for (const auto& [key, e] : {std::pair<const char*, SymExpr>{"rows", st.shared_rows},
                                     {"cols", st.shared_cols},
                                     {"depth", st.shared_depth}})
          stage["shared"][key] = count({e});
        stage["shared"]["block"] = st.shared_block;
      }
      stages.push_back(std::move(stage));
    }
    meta["kernels"].push_back(
        {{"name", p->name}, {"num_inputs", p->inputs.size()}, {"params", params}, {"push", push}, {"stages", stages}});
    if (g.push_in_buffer) meta["kernels"].back()["push_buffer"] = true;
  }
  meta["block"] = block;
  meta["needs"] = needs;
  out.metadata = meta.dump(1);
  out.spirv.assign(reinterpret_cast<const char*>(words.data()), words.size() * sizeof(uint32_t));
  return out;
}

}  // namespace relax::vulkan
