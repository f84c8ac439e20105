#include "backends/cuda/codegen.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Verifier.h>
#include <llvm/IRReader/IRReader.h>
#include <llvm/Linker/Linker.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>

#include "backends/cuda/kernel_codegen.h"
#include "backends/cuda/ptxas.h"
#include "backends/gpu/schedule.h"
#include "backends/vm/kernel_abi.h"
#include "ir/error.h"

extern "C" {
void LLVMInitializeNVPTXTargetInfo();
void LLVMInitializeNVPTXTarget();
void LLVMInitializeNVPTXTargetMC();
void LLVMInitializeNVPTXAsmPrinter();
}

namespace fs = std::filesystem;

namespace relax::cuda {
namespace {

constexpr const char* kTriple = "nvptx64-nvidia-cuda";
constexpr const char* kPtxFeature = "+ptx78";    // LLVM 16's newest PTX ISA: sm_80 and sm_90
constexpr int64_t kTileRows = 4, kTileCols = 4;  // a thread's register tile (as Vulkan's default)

std::unique_ptr<llvm::TargetMachine> make_target_machine(const CudaOptions& opts) {
  static std::once_flag once;
  std::call_once(once, [] {
    llvmgen::install_llvm_fatal_error_handler();
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
  });
  std::string error;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(kTriple, error);
  if (!target) fail("cuda codegen: no NVPTX target in this LLVM: ", error);
  std::unique_ptr<llvm::MCSubtargetInfo> sti(target->createMCSubtargetInfo(kTriple, "", ""));
  if (opts.arch.rfind("sm_", 0) != 0 || !sti || !sti->isCPUStringValid(opts.arch))
    fail("cuda codegen: unknown --arch '", opts.arch, "' (sm_80, sm_86, sm_89, sm_90, ...)");
  llvm::TargetOptions to;
  std::unique_ptr<llvm::TargetMachine> tm(
      target->createTargetMachine(kTriple, opts.arch, kPtxFeature, to, std::nullopt, std::nullopt,
                                  opts.opt_level >= 2 ? llvm::CodeGenOpt::Aggressive : llvm::CodeGenOpt::Default));
  if (!tm) fail("cuda codegen: cannot create a target machine for ", opts.arch);
  return tm;
}

// The math the cpu code generator leaves to libm or to LLVM intrinsics that
// NVPTX cannot select become calls to libdevice's __nv_* functions.
void use_libdevice_math(llvm::Module& m) {
  static const std::set<std::string> libm = {"tanh", "erf",  "log1p", "expm1", "tan",   "asin",  "acos",
                                             "atan", "sinh", "cosh",  "asinh", "acosh", "atanh", "atan2"};
  static const std::map<llvm::Intrinsic::ID, std::string> intrinsics = {
      {llvm::Intrinsic::exp, "exp"},   {llvm::Intrinsic::exp2, "exp2"},   {llvm::Intrinsic::log, "log"},
      {llvm::Intrinsic::log2, "log2"}, {llvm::Intrinsic::log10, "log10"}, {llvm::Intrinsic::sin, "sin"},
      {llvm::Intrinsic::cos, "cos"},   {llvm::Intrinsic::pow, "pow"}};
  std::vector<std::pair<llvm::Function*, std::string>> renames;
  for (llvm::Function& f : m) {
    if (!f.isDeclaration()) continue;
    llvm::Type* t = f.getReturnType();
    if (!t->isFloatTy() && !t->isDoubleTy()) continue;
    std::string base;
    if (auto it = intrinsics.find(f.getIntrinsicID()); it != intrinsics.end()) {
      base = it->second;
    } else {
      std::string name = f.getName().str();
      if (t->isFloatTy() && !name.empty() && name.back() == 'f') name.pop_back();
      if (libm.count(name)) base = name;
    }
    if (!base.empty()) renames.push_back({&f, "__nv_" + base + (t->isFloatTy() ? "f" : "")});
  }
  for (auto& [f, name] : renames) {
    llvm::FunctionCallee nv = m.getOrInsertFunction(name, f->getFunctionType());
    f->replaceAllUsesWith(nv.getCallee());
    f->eraseFromParent();
  }
}

bool calls_libdevice(const llvm::Module& m) {
  for (const llvm::Function& f : m)
    if (f.isDeclaration() && f.getName().startswith("__nv_")) return true;
  return false;
}

void link_libdevice(llvm::Module& m, llvm::TargetMachine& tm) {
  std::string path = find_libdevice();
  if (path.empty())
    fail(
        "cuda codegen: the kernels use math functions (exp, tanh, erf, ...) that come from CUDA's libdevice, "
        "and no CUDA toolkit was found (set CUDA_HOME, or RELAX_CUDA_HOME, to where nvvm/libdevice is)");
  llvm::SMDiagnostic err;
  // Lazily: only the functions the kernels call are read (libdevice has hundreds).
  std::unique_ptr<llvm::Module> ld = llvm::getLazyIRFileModule(path, err, m.getContext());
  if (!ld) fail("cuda codegen: cannot read libdevice ", path, ": ", err.getMessage().str());
  ld->setTargetTriple(kTriple);
  ld->setDataLayout(tm.createDataLayout());
  if (llvm::Linker::linkModules(m, std::move(ld), llvm::Linker::Flags::LinkOnlyNeeded))
    fail("cuda codegen: linking libdevice ", path, " failed");
}

constexpr int64_t kWarp = 32;         // lanes of a warp: shfl_xor's butterflies
constexpr int64_t kMinRowWork = 256;  // rows known to be shorter stay a thread each

struct Built {
  std::unique_ptr<llvm::Module> module;
  nlohmann::json kernels = nlohmann::json::array();
};

// One kernel per stage of each program, and the metadata the runtime needs.
Built build(llvm::LLVMContext& ctx, const std::vector<tir::Program>& programs, llvm::TargetMachine& tm,
            int opts_block, int64_t max_shared_bytes) {
  Built out;
  out.module = std::make_unique<llvm::Module>("relax_cuda", ctx);
  llvm::Module& m = *out.module;
  m.setTargetTriple(kTriple);
  m.setDataLayout(tm.createDataLayout());
  std::vector<std::string> symbols = llvmgen::kernel_symbols(programs);
  std::set<std::string> kernel_names;
  for (size_t i = 0; i < programs.size(); ++i) {
    const tir::Program& p = programs[i];
    int64_t next = 0;
    SymMap<int64_t> slot = shape_arg_slots(*p, &next);
    nlohmann::json params = nlohmann::json::array();
    for (const auto* list : {&p->inputs, &p->outputs})
      for (const tir::Buffer& b : *list) params.push_back({{"dtype", b->dtype.str()}, {"ndim", b->shape.size()}});
    auto slot_of = [&](const SymExpr& v) -> int64_t {
      auto it = slot.find(v);
      if (it == slot.end()) fail("cuda codegen: prog @", p->name, ": variable '", v.name(), "' has no shape slot");
      return it->second;
    };
    nlohmann::json stages = nlohmann::json::array();
    std::vector<GpuStage> st = gpu_stages(p);
    auto code_of = [&](const SymExpr& e) {
      std::vector<int64_t> code;
      sym_to_code(e, slot_of, code);
      return code;
    };
    auto count = [&](const std::vector<SymExpr>& extents) {
      SymExpr n(int64_t(1));
      for (const SymExpr& e : extents) n = n * e;
      return code_of(n);
    };
    for (size_t k = 0; k < st.size(); ++k) {
      std::string symbol = symbols[i] + "_s" + std::to_string(k);
      // A thread per row, with a register tile of rows where that shares
      // loads (gpu_register_tile); the untiled form beside it for calls
      // where most of a tile would fall past the extents.
      std::optional<GpuStage> tiled = gpu_register_tile(st[k], kTileRows, kTileCols);
      const GpuStage& main_stage = tiled ? *tiled : st[k];
      KernelCodegen(m, *p, symbol).run_stage(main_stage);
      kernel_names.insert(symbol);
      nlohmann::json stage{{"symbol", symbol}, {"threads", count(main_stage.extents)}};
      if (tiled) {
        std::string psym = symbol + "_plain";
        KernelCodegen(m, *p, psym).run_stage(st[k]);
        kernel_names.insert(psym);
        stage["plain"] = {{"symbol", psym}, {"threads", count(st[k].extents)}, {"tile", kTileRows * kTileCols}};
      }
      // Matmul and conv also as blocks tiled through shared memory; the
      // runtime takes them when the blocks fill (CudaKernels).
      if (std::optional<GpuBlockStage> block = gpu_shared_tile(st[k], kTileRows, kTileCols, opts_block, 16, max_shared_bytes)) {
        std::string bsym = symbol + "_shared";
        KernelCodegen(m, *p, bsym).run_block_stage(*block);
        kernel_names.insert(bsym);
        stage["shared"] = {{"symbol", bsym},
                           {"blocks", count(block->extents)},
                           {"threads", block->threads},
                           {"rows", code_of(block->rows)},
                           {"cols", code_of(block->cols)},
                           {"depth", code_of(block->depth)},
                           {"block", {block->block_rows, block->block_cols, block->block_depth}}};
      }
      // A block per row with the row's loops split over its threads
      // (reductions through warp shuffles), unless the rows are known to be
      // short; the runtime takes it for few or long rows.
      std::optional<GpuRows> rows = gpu_rows(st[k]);
      if (rows && !(rows->work.is_const() && rows->work.const_value() < kMinRowWork)) {
        GpuBlockStage rb = gpu_row_block(st[k], *rows, opts_block, kWarp);
        std::string rsym = symbol + "_rows";
        KernelCodegen(m, *p, rsym).run_block_stage(rb);
        kernel_names.insert(rsym);
        stage["rows"] = {
            {"symbol", rsym}, {"blocks", count(st[k].extents)}, {"threads", rb.threads}, {"work", code_of(rows->work)}};
      }
      stages.push_back(std::move(stage));
    }
    out.kernels.push_back(
        {{"name", p->name}, {"num_inputs", p->inputs.size()}, {"params", params}, {"slots", next}, {"stages", stages}});
  }
  use_libdevice_math(m);
  if (calls_libdevice(m)) link_libdevice(m, tm);
  // Only the kernels are entry points: the rest (libdevice) may be inlined and dropped.
  for (llvm::Function& f : m)
    if (!f.isDeclaration() && !kernel_names.count(f.getName().str())) f.setLinkage(llvm::GlobalValue::InternalLinkage);
  m.addModuleFlag(llvm::Module::Override, "nvvm-reflect-ftz", uint32_t(0));  // IEEE denormals (libdevice asks)
  for (llvm::Function& f : m) f.addFnAttr(llvm::Attribute::NoUnwind);
  std::string err;
  llvm::raw_string_ostream os(err);
  if (llvm::verifyModule(m, &os)) fail("cuda codegen: internal error, invalid LLVM IR: ", os.str());
  return out;
}

// LLVM 16's loop strength reduction can rewrite a register tile's boolean
// recurrences into an i1 multiply, which NVPTX cannot select (an abort in
// instruction selection): code generation for PTX runs without it. The
// option is LLVM's global (-disable-lsr), set for this emission only.
struct NoLoopStrengthReduction {
  llvm::cl::opt<bool>* opt = nullptr;
  bool old = false;
  NoLoopStrengthReduction() {
    auto& options = llvm::cl::getRegisteredOptions();
    auto it = options.find("disable-lsr");
    if (it == options.end()) return;
    opt = static_cast<llvm::cl::opt<bool>*>(it->second);
    old = opt->getValue();
    opt->setValue(true);
  }
  ~NoLoopStrengthReduction() {
    if (opt) opt->setValue(old);
  }
};

std::string emit_ptx(llvm::Module& m, llvm::TargetMachine& tm) {
  static std::mutex mu;  // the option is process-wide
  std::lock_guard<std::mutex> lock(mu);
  NoLoopStrengthReduction no_lsr;
  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream os(buffer);
  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, os, nullptr, llvm::CGFT_AssemblyFile)) fail("cuda codegen: NVPTX cannot emit PTX");
  pm.run(m);
  return std::string(buffer.begin(), buffer.end());
}

// LLVM 16's NVPTX selects `and (sra x, P), 2^L - 1` on i64 as `bfe.u64 x,
// P, L` even where P + L > 64: it counts the bits left above P with the
// shift amount's type (i32), which wraps for P > 32. Past bit 63 that field
// is the sign (sra) but bfe.u64 fills it with zeros, so a select of 0 or 3
// on an index bit, which the DAG turns into that and-of-sra, read 0 or 1
// (test_convinteger_without_padding on a GPU: a row offset of 1 instead of
// 3). A logical shift never reaches it in that form (known-zero bits drop
// the and), so every such bfe.u64 is the arithmetic one: it becomes the
// signed field cut to its L bits. LLVM releases that count the bits as
// signed never emit it.
std::string repair_sign_fill_bfe(const std::string& ptx) {
  std::string out;
  out.reserve(ptx.size());
  size_t begin = 0;
  while (begin < ptx.size()) {
    size_t end = ptx.find('\n', begin);
    end = end == std::string::npos ? ptx.size() : end + 1;
    std::string_view line(ptx.data() + begin, end - begin);
    begin = end;
    size_t op = line.find("bfe.u64");
    std::string_view args = op == std::string::npos ? std::string_view() : line.substr(op + 7);
    std::vector<std::string_view> parts;  // d, a, pos, len
    while (!args.empty() && parts.size() < 4) {
      size_t comma = args.find_first_of(",;");
      std::string_view p = args.substr(0, comma);
      while (!p.empty() && std::isspace(static_cast<unsigned char>(p.front()))) p.remove_prefix(1);
      while (!p.empty() && std::isspace(static_cast<unsigned char>(p.back()))) p.remove_suffix(1);
      parts.push_back(p);
      args = comma == std::string_view::npos ? std::string_view() : args.substr(comma + 1);
    }
    auto literal = [](std::string_view v) {
      if (v.empty() || v.size() > 3 || !std::all_of(v.begin(), v.end(), ::isdigit)) return -1;
      return std::stoi(std::string(v));
    };
    int pos = parts.size() == 4 ? literal(parts[2]) : -1, len = parts.size() == 4 ? literal(parts[3]) : -1;
    if (pos < 0 || len <= 0 || len >= 64 || pos + len <= 64) {
      out.append(line);
      continue;
    }
    std::string indent(line.substr(0, op));
    out += cat(indent, "bfe.s64 \t", parts[0], ", ", parts[1], ", ", pos, ", ", len, ";\n", indent, "and.b64 \t",
               parts[0], ", ", parts[0], ", ", (uint64_t(1) << len) - 1, ";\n");
  }
  return out;
}

std::string compile(const std::vector<tir::Program>& programs, const CudaOptions& opts, nlohmann::json* kernels) {
  llvmgen::LlvmTask task("compiling " + std::to_string(programs.size()) + " kernels to PTX for " + opts.arch);
  auto tm = make_target_machine(opts);
  llvm::LLVMContext ctx;
  Built b = build(ctx, programs, *tm, opts.block, opts.max_shared_bytes);
  llvmgen::optimize_module(*b.module, *tm, std::clamp(opts.opt_level, 0, 3));
  for (const llvm::Function& f : *b.module)
    if (f.isDeclaration() && !f.isIntrinsic() && !f.use_empty())
      fail("cuda codegen: the kernels call '", f.getName().str(), "', which a GPU does not have");
  std::string ptx = repair_sign_fill_bfe(emit_ptx(*b.module, *tm));
  if (kernels) *kernels = std::move(b.kernels);
  return ptx;
}

}  // namespace

std::string find_libdevice() {
  if (const char* e = std::getenv("RELAX_CUDA_HOME"); e && std::string(e) == "none") return "";  // as without CUDA
  for (const char* var : {"RELAX_CUDA_HOME", "CUDA_HOME", "CUDA_PATH"})
    if (const char* home = std::getenv(var); home && *home) {
      fs::path p = fs::path(home) / "nvvm" / "libdevice" / "libdevice.10.bc";
      if (fs::exists(p)) return p.string();
    }
  fs::path p = "/usr/local/cuda/nvvm/libdevice/libdevice.10.bc";
  return fs::exists(p) ? p.string() : "";
}

std::string cuda_ptx(const std::vector<tir::Program>& programs, const CudaOptions& opts) {
  return compile(programs, opts, nullptr);
}

CudaArtifact compile_cuda(const std::vector<tir::Program>& programs, const CudaOptions& opts) {
  nlohmann::json kernels;
  CudaArtifact out;
  out.ptx = compile(programs, opts, &kernels);
  nlohmann::json meta{{"arch", opts.arch}, {"ptx_isa", "7.8"}, {"block", opts.block}, {"kernels", kernels}};
  if (opts.check_with_ptxas) {
    if (std::optional<std::string> ptxas = find_ptxas()) {
      PtxasReport r = run_ptxas(*ptxas, out.ptx, opts.arch);
      nlohmann::json k = nlohmann::json::object();
      for (const auto& [name, f] : r.kernels)
        k[name] = {{"registers", f.registers},
                   {"spill_stores", f.spill_stores},
                   {"spill_loads", f.spill_loads},
                   {"stack", f.stack}};
      meta["ptxas"] = {{"version", r.version}, {"kernels", k}};
    }
  }
  out.metadata = meta.dump(1);
  return out;
}

}  // namespace relax::cuda
