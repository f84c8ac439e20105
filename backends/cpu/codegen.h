// The CPU backend: tensor programs compiled by the LLVM code generator
// (backends/llvm/) into one x86-64 ELF shared object, linked in-process by lld, that follows the kernel ABI of
// docs/runtime_abi.md section 2.
//
// Each program becomes `int32_t relax_k_<name>(void* const* buffers, const
// int64_t* shape_args)`. The object also exports `relax_abi_version` (1)
// and a zero-initialised `relax_runtime_hooks` that the loader fills; a
// `parallel` loop runs through its `parallel_for` when set, serially
// otherwise. The object needs libm.so.6 (a DT_NEEDED entry) and nothing else.
//
// The buffers of one call must not overlap where one is written (the
// runtime allocates outputs fresh): accesses carry per-buffer alias scopes.
// On CPUs without F16C (x86-64, x86-64-v2) f16 conversions call
// __extendhfsf2 / __truncsfhf2, which the loading process must provide.
//
// Return codes of a kernel: 0 success; 2 when shape_args contradict the
// program's declared shapes (a dim that is a constant or an expression of
// already bound variables has another value).
//
// Values of the narrow float formats (bf16, float8, f4e2m1) are computed in
// f32. bf16 results are rounded back to bf16 after every operation; float8
// and f4 values are rounded only where they are cast or stored. A cast to a
// float8 format does not saturate (ONNX's saturate=0: out of range gives
// NaN, or inf for e5m2); the legaliser clamps first when it wants
// saturation. f4e2m1 has no NaN or inf and always saturates.
#pragma once

#include <string>
#include <vector>

#include "backends/llvm/support.h"  // kernel_symbols, LlvmTask
#include "ir/tir.h"

namespace relax::cpu {

// A parallel loop whose estimated work (scalar operations: a load, an
// arithmetic op or a select 1, a math intrinsic 16, times the loops'
// extents) is below this runs on the calling thread: waking a worker and
// sharing the data between two cores costs a few microseconds, more than
// a small kernel takes.
constexpr int64_t kParallelMinWork = int64_t(1) << 15;

struct CpuOptions {
  std::string cpu = "host";  // an LLVM CPU name: "host" (the build machine), "x86-64", "x86-64-v3", "znver3", ...
  int opt_level = 3;         // 0..3
};

struct KernelInfo {
  std::string program;
  std::string symbol;
};

struct CpuArtifact {
  std::string shared_object;        // the bytes of the .so
  std::vector<KernelInfo> kernels;  // program name -> exported symbol, in input order
};

// Throws relax::Error naming the program (and the variable or construct) on
// anything it cannot compile.
CpuArtifact compile_programs(const std::vector<tir::Program>& programs, const CpuOptions& opts);

// What --cpu NAME compiles for, as a stable string: NAME itself, or for
// "host" the host's CPU name and a checksum of its feature string
// ("host:znver3:1f2e...").
std::string cpu_key(const std::string& cpu);

// Whether --cpu NAME has AVX-512 (avx512f): the runtime's convolutions
// then take its row tiles, and a build packs weights for them.
bool cpu_has_avx512(const std::string& cpu);

// The x86 extensions of rt::x86_feature_names() that --cpu NAME has, space
// separated: the package's section kernels.cpu.features, which the runtime
// checks against the CPU it loads on.
std::string cpu_kernel_features(const std::string& cpu);

// The optimised LLVM IR of the programs, for inspection and tests.
std::string emit_llvm_ir(const std::vector<tir::Program>& programs, const CpuOptions& opts);

}  // namespace relax::cpu
