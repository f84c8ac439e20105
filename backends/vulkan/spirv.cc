#include "backends/vulkan/spirv.h"

#include <glslang/Public/ResourceLimits.h>
#include <glslang/Public/ShaderLang.h>
#include <glslang/SPIRV/GlslangToSpv.h>

#include <mutex>
#include <spirv-tools/libspirv.hpp>
#include <spirv-tools/optimizer.hpp>
#include <sstream>

#include "ir/error.h"

namespace relax::vulkan {
namespace {

// glslang's process-wide state, set up once and kept for the process.
void init_glslang() {
  static std::once_flag once;
  std::call_once(once, [] { glslang::InitializeProcess(); });
}

// glslang's messages ("ERROR: NAME:LINE: ..."), each followed by the
// source line it names (once per line).
std::string with_source_lines(const std::string& log, const std::string& glsl) {
  std::vector<std::string> lines;
  std::istringstream src(glsl);
  for (std::string l; std::getline(src, l);) lines.push_back(l);
  std::ostringstream out;
  std::istringstream in(log);
  size_t last_quoted = 0;
  for (std::string l; std::getline(in, l);) {
    if (l.empty()) continue;
    out << "  " << l << "\n";
    // The first ":<digits>:" is the line number.
    for (size_t a = l.find(':'); a != std::string::npos; a = l.find(':', a + 1)) {
      size_t b = a + 1;
      while (b < l.size() && isdigit(static_cast<unsigned char>(l[b]))) ++b;
      if (b == a + 1 || b >= l.size() || l[b] != ':') continue;
      size_t n = std::stoul(l.substr(a + 1, b - a - 1));
      if (n >= 1 && n <= lines.size() && n != last_quoted) out << "    " << n << " | " << lines[n - 1] << "\n";
      last_quoted = n;
      break;
    }
  }
  return out.str();
}

spv_target_env target_env(const SpirvOptions& o) {
  switch (o.vulkan_minor) {
    case 0:
      return SPV_ENV_VULKAN_1_0;
    case 1:
      return SPV_ENV_VULKAN_1_1;
    case 2:
      return SPV_ENV_VULKAN_1_2;
    default:
      return SPV_ENV_VULKAN_1_3;
  }
}

void validate(const std::vector<uint32_t>& words, const std::string& name, const SpirvOptions& opts,
              const char* stage) {
  spvtools::SpirvTools tools(target_env(opts));
  std::string messages;
  tools.SetMessageConsumer([&](spv_message_level_t, const char*, const spv_position_t& pos, const char* m) {
    messages += "  word " + std::to_string(pos.index) + ": " + m + "\n";
  });
  if (!tools.Validate(words)) fail("vulkan: shader '", name, "' ", stage, " does not validate:\n", messages);
}

}  // namespace

std::vector<uint32_t> compile_glsl(const std::string& glsl, const std::string& name, const SpirvOptions& opts) {
  init_glslang();
  glslang::EShTargetClientVersion client = opts.vulkan_minor <= 0   ? glslang::EShTargetVulkan_1_0
                                           : opts.vulkan_minor == 1 ? glslang::EShTargetVulkan_1_1
                                           : opts.vulkan_minor == 2 ? glslang::EShTargetVulkan_1_2
                                                                    : glslang::EShTargetVulkan_1_3;
  glslang::EShTargetLanguageVersion spv = opts.vulkan_minor <= 0   ? glslang::EShTargetSpv_1_0
                                          : opts.vulkan_minor == 1 ? glslang::EShTargetSpv_1_3
                                          : opts.vulkan_minor == 2 ? glslang::EShTargetSpv_1_5
                                                                   : glslang::EShTargetSpv_1_6;
  glslang::TShader shader(EShLangCompute);
  const char* src = glsl.c_str();
  const char* names[] = {name.c_str()};
  shader.setStringsWithLengthsAndNames(&src, nullptr, names, 1);
  shader.setEnvInput(glslang::EShSourceGlsl, EShLangCompute, glslang::EShClientVulkan, 100);
  shader.setEnvClient(glslang::EShClientVulkan, client);
  shader.setEnvTarget(glslang::EShTargetSpv, spv);
  EShMessages msgs = EShMessages(EShMsgSpvRules | EShMsgVulkanRules);
  if (!shader.parse(GetDefaultResources(), 450, false, msgs))
    fail("vulkan: shader '", name, "' does not compile (glslang):\n", with_source_lines(shader.getInfoLog(), glsl));
  glslang::TProgram program;
  program.addShader(&shader);
  if (!program.link(msgs)) fail("vulkan: shader '", name, "' does not link (glslang):\n", program.getInfoLog());
  std::vector<uint32_t> words;
  glslang::SpvOptions so;
  so.disableOptimizer = true;  // SPIRV-Tools does that below
  so.validate = false;
  glslang::GlslangToSpv(*program.getIntermediate(EShLangCompute), words, &so);
  if (opts.opt_level < 2) {
    validate(words, name, opts, "as compiled");
    return words;
  }
  // SPIR-V's own clean-up, not its full performance list: glslang's
  // variables into SSA values, constants folded, dead code and redundant
  // loads gone. The drivers optimise again (lavapipe through LLVM, GPU
  // drivers through their own compilers); the performance list took 4x as
  // long to build resnet_small for the same kernel speed on lavapipe, and
  // unoptimised modules took lavapipe a quarter longer to compile at load.
  // One validation, of what the package holds; on failure, the module as
  // glslang wrote it says whose fault it is.
  spvtools::Optimizer opt(target_env(opts));
  std::string messages;
  opt.SetMessageConsumer([&](spv_message_level_t, const char*, const spv_position_t&, const char* m) {
    messages += std::string("  ") + m + "\n";
  });
  opt.RegisterPass(spvtools::CreateMergeReturnPass())
      .RegisterPass(spvtools::CreateInlineExhaustivePass())
      .RegisterPass(spvtools::CreatePrivateToLocalPass())
      .RegisterPass(spvtools::CreateLocalSingleBlockLoadStoreElimPass())
      .RegisterPass(spvtools::CreateLocalSingleStoreElimPass())
      .RegisterPass(spvtools::CreateScalarReplacementPass())
      .RegisterPass(spvtools::CreateSSARewritePass())
      .RegisterPass(spvtools::CreateCCPPass())
      .RegisterPass(spvtools::CreateSimplificationPass())
      .RegisterPass(spvtools::CreateAggressiveDCEPass())
      .RegisterPass(spvtools::CreateDeadBranchElimPass())
      .RegisterPass(spvtools::CreateBlockMergePass())
      .RegisterPass(spvtools::CreateLocalRedundancyEliminationPass())
      .RegisterPass(spvtools::CreateAggressiveDCEPass());
  std::vector<uint32_t> optimized;
  if (!opt.Run(words.data(), words.size(), &optimized)) {
    validate(words, name, opts, "as compiled");
    fail("vulkan: optimising shader '", name, "' failed (SPIRV-Tools):\n", messages);
  }
  try {
    validate(optimized, name, opts, "after optimisation");
  } catch (const Error&) {
    validate(words, name, opts, "as compiled");
    throw;
  }
  return optimized;
}

void warm_up_glslang(const SpirvOptions& opts) {
  SpirvOptions o = opts;
  o.opt_level = 0;
  compile_glsl("#version 450\nlayout(local_size_x = 1) in;\nvoid main() {}\n", "warm_up", o);
}

std::string disassemble(const std::vector<uint32_t>& words) {
  spvtools::SpirvTools tools(SPV_ENV_VULKAN_1_1);
  std::string text;
  if (!tools.Disassemble(words, &text, SPV_BINARY_TO_TEXT_OPTION_FRIENDLY_NAMES)) return "<not SPIR-V>";
  return text;
}

}  // namespace relax::vulkan
