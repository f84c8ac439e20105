// The vulkan target (backends/target.h): kernels.vulkan (JSON) and
// kernels.vulkan.spv (SPIR-V), one compute shader per GPU stage.
#include "backends/target.h"

#include <algorithm>
#include <tuple>

#include "backends/vulkan/codegen.h"
#include "backends/vulkan/codegen_glsl.h"
#include "ir/error.h"

namespace relax {
namespace {

// --tile ROWSxCOLS, each 1 to 8.
std::pair<int64_t, int64_t> parse_tile(const std::string& tile) {
  auto digit = [](char c) { return c >= '1' && c <= '8'; };
  if (tile.size() != 3 || tile[1] != 'x' || !digit(tile[0]) || !digit(tile[2]))
    fail("--tile: expected ROWSxCOLS, each 1 to 8, got '", tile, "'");
  return {tile[0] - '0', tile[2] - '0'};
}

class VulkanTarget : public Target {
 public:
  std::string name() const override { return "vulkan"; }
  std::vector<TargetOption> options() const override {
    return {{"tile", "--tile", "4x4",
             "vulkan: the register tile of a thread for matmul-like loops, ROWSxCOLS (1x1: none); matmul and conv "
             "are also tiled through shared memory in blocks of 16*ROWS x 16*COLS"}};
  }
  void check_options(const TargetOptions& opts) const override { parse_tile(opts.at("tile")); }
  // A GPU without device libraries; launches of 256 threads, shared memory
  // up to Vulkan's guaranteed 16 KiB (the tiles of backends/gpu fit it).
  TargetTraits traits(const TargetOptions&) const override {
    TargetTraits t;
    t.gpu = true;
    t.host_kernels = false;
    t.max_threads = 256;
    t.shared_memory = 16384;
    t.precisions = {"f32", "f64"};
    return t;
  }
  // Workgroups of the traits' threads, tiles within their shared memory.
  TargetArtifact compile(const std::vector<tir::Program>& programs, const TargetOptions& opts) const override {
    TargetTraits t = traits(opts);
    vulkan::VulkanArtifact art = vulkan::compile_vulkan(programs, std::clamp(opts.opt_level, 0, 2),
                                                        parse_tile(opts.at("tile")), uint32_t(t.max_threads),
                                                        t.shared_memory);
    TargetArtifact out;
    out.sections.emplace_back("kernels.vulkan", std::move(art.metadata));
    out.sections.emplace_back("kernels.vulkan.spv", std::move(art.spirv));
    return out;
  }
  // One GLSL compute shader per stage, then the variants the runtime may
  // run instead.
  std::string emit_source(const std::vector<tir::Program>& programs, const TargetOptions& opts) const override {
    TargetTraits t = traits(opts);
    vulkan::GlslSchedule schedule;
    std::tie(schedule.tile_rows, schedule.tile_cols) = parse_tile(opts.at("tile"));
    schedule.max_shared_bytes = t.shared_memory;
    std::string out;
    for (const tir::Program& p : programs)
      for (const vulkan::GlslStage& st : vulkan::glsl_program(p, {}, uint32_t(t.max_threads), schedule).stages) {
        out += "// ---- " + st.name + "\n" + st.source + "\n";
        for (const auto& [what, source] : {std::pair<const char*, const std::string*>{"untiled", &st.plain_source},
                                           {"workgroup per row", &st.rows_source},
                                           {"shared-memory tiles", &st.shared_source}})
          if (!source->empty()) out += "// ---- " + st.name + " (" + what + ")\n" + *source + "\n";
      }
    return out;
  }
};

}  // namespace

std::unique_ptr<Target> make_vulkan_target() { return std::make_unique<VulkanTarget>(); }

}  // namespace relax
