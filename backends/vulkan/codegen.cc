#include "backends/vulkan/codegen.h"

#include <nlohmann/json.hpp>

#include "backends/common/vm_lower.h"
#include "backends/vulkan/codegen_glsl.h"
#include "backends/vulkan/spirv.h"
#include "ir/error.h"

namespace relax::vulkan {

VulkanArtifact compile_vulkan(const std::vector<tir::Program>& programs, int opt_level,
                              std::pair<int64_t, int64_t> tile) {
  VulkanArtifact out;
  nlohmann::json meta;
  meta["kernels"] = nlohmann::json::array();
  std::set<std::string> needs;
  std::vector<uint32_t> words;
  uint32_t block = 256;
  for (const tir::Program& p : programs) {
    GlslProgram g = glsl_program(p, {}, block, {tile.first, tile.second});
    needs.insert(g.needs.begin(), g.needs.end());
    // Shape-args slot of each variable: the first plain dim that binds it,
    // else its symbolic parameter.
    SymMap<int64_t> slot;
    int64_t next = 0;
    nlohmann::json params = nlohmann::json::array();
    for (const auto* list : {&p->inputs, &p->outputs})
      for (const tir::Buffer& b : *list) {
        params.push_back({{"dtype", b->dtype.str()}, {"ndim", b->shape.size()}});
        for (const SymExpr& d : b->shape) {
          if (d.is_var() && !slot.count(d)) slot[d] = next;
          ++next;
        }
      }
    for (const SymExpr& s : p->sym_params) {
      if (!slot.count(s)) slot[s] = next;
      ++next;
    }
    auto slot_of = [&](const SymExpr& v) -> int64_t {
      auto it = slot.find(v);
      if (it == slot.end()) fail("vulkan codegen: prog @", p->name, ": variable '", v.name(), "' has no shape slot");
      return it->second;
    };
    nlohmann::json push = nlohmann::json::array();
    for (const SymExpr& v : g.push_vars) push.push_back(slot_of(v));
    nlohmann::json stages = nlohmann::json::array();
    for (const GlslStage& st : g.stages) {
      std::vector<uint32_t> spv = compile_glsl(st.source, st.name, {opt_level, 1});
      SymExpr threads(int64_t(1));
      for (const SymExpr& e : st.extents) threads = threads * e;
      std::vector<int64_t> code;
      sym_to_code(threads, slot_of, code);
      nlohmann::json stage{{"name", st.name}, {"offset", words.size()}, {"words", spv.size()}, {"threads", code}};
      words.insert(words.end(), spv.begin(), spv.end());
      if (!st.plain_source.empty()) {
        std::vector<uint32_t> plain = compile_glsl(st.plain_source, st.name + "_plain", {opt_level, 1});
        std::vector<int64_t> count;
        SymExpr n(int64_t(1));
        for (const SymExpr& e : st.plain_extents) n = n * e;
        sym_to_code(n, slot_of, count);
        stage["plain"] = {{"offset", words.size()}, {"words", plain.size()}, {"threads", count}, {"tile", st.tile}};
        words.insert(words.end(), plain.begin(), plain.end());
      }
      if (!st.rows_source.empty()) {
        std::vector<uint32_t> rows = compile_glsl(st.rows_source, st.name + "_rows", {opt_level, 1});
        std::vector<int64_t> work, count;
        sym_to_code(st.rows_work, slot_of, work);
        SymExpr n(int64_t(1));
        for (const SymExpr& e : st.rows_extents) n = n * e;
        sym_to_code(n, slot_of, count);
        stage["rows"] = {{"offset", words.size()}, {"words", rows.size()}, {"work", work}, {"count", count},
                         {"needs", st.rows_needs}};
        words.insert(words.end(), rows.begin(), rows.end());
      }
      stages.push_back(std::move(stage));
    }
    meta["kernels"].push_back({{"name", p->name},
                               {"num_inputs", p->inputs.size()},
                               {"params", params},
                               {"push", push},
                               {"stages", stages}});
  }
  meta["block"] = block;
  meta["needs"] = needs;
  out.metadata = meta.dump(1);
  out.spirv.assign(reinterpret_cast<const char*>(words.data()), words.size() * sizeof(uint32_t));
  return out;
}

}  // namespace relax::vulkan
