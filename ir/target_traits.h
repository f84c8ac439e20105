// What the passes know of a target: its traits, recorded on the module.
//
// A target (backends/target.h) declares its traits for the options it is
// built with; the driver records them on the module as the attribute
// `traits` (beside `target`, the name, which only packages and messages
// read). The pipelines are built from them and the passes read them; no
// pass compares a target's name. In IR text:
//
//   module_attrs {target="cuda", traits="gpu capture matmul=cublas:4194304 threads=1024 shared=49152
//   precisions=f32,f64"}
//
// A module without the attribute has the default traits: a host target
// with the runtime's host kernels and no wide vectors, as the cpu target
// at x86-64-v3.
#pragma once

#include <cstdint>
#include <set>
#include <string>

namespace relax {

class IRModule;

struct TargetTraits {
  // gpu: kernels run as launches of many threads (backends/gpu schedules
  // them), cannot allocate (workspaces are lifted to their callers), and
  // legalisers prefer one output element per iteration. host (false): the
  // kernels are loops on the threads of this process.
  bool gpu = false;
  // Ops may become calls of the runtime's host kernels (BLAS, GEMM, direct
  // convolutions, pools) and tensor programs take host forms (lane-wise
  // running results, vector loops, strided views of matmul operands).
  bool host_kernels = true;
  // The host's vector width in bits (512 with AVX-512, else 256): the
  // packing of convolution weights.
  int vector_bits = 256;
  // A device library large matmuls go to ("cublas"; empty: none), and the
  // workspace in bytes it is given.
  std::string matmul_library;
  int64_t matmul_workspace = 0;
  // Runs of kernel launches can be captured once and replayed (CUDA
  // graphs): rewrite-cuda-graph forms regions.
  bool capture = false;
  // A launch's limits: threads per workgroup, shared memory per workgroup
  // in bytes (0 on a host target).
  int64_t max_threads = 0;
  int64_t shared_memory = 0;
  // The element types whose products the kernels compute natively; "i8":
  // 8-bit integer dot products (dequantized matmuls become integer ones).
  std::set<std::string> precisions = {"f32", "f64", "i8"};

  bool has_precision(const std::string& p) const { return precisions.count(p) > 0; }

  // The attribute's text, and back; parse fails naming the word it does
  // not know.
  std::string str() const;
  static TargetTraits parse(const std::string& text);
  // The traits a module records (the default ones when it has none).
  static TargetTraits of(const IRModule& mod);
  void record(IRModule& mod) const;
};

}  // namespace relax
