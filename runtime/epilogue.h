// What a library call's outputs go through once summed, fused into it
// from the elementwise kernel that followed (passes/fuse_library_epilogues.cc):
// gemm.conv2d_packed's convolutions and blas.matmul's products.
//
//   v = y * scale[c] + bias[0][c] + bias[1][c] + residual
//   v = act(v)
//   y = min(max(v, lo), hi)
//
// c is the output's channel (a convolution's output channel, a product's
// column); the scale, where there is one, takes y as i32 sums (an integer
// product's, in the output's memory: gemm.qmatmul_packed) to f32, per
// column or one for all; a residual has y's shape and is read at y's offset (a null
// pointer is absent). act is one of: none; v * sigmoid(v) (SiLU);
// v < leak_at ? slope * v : v (leaky ReLU); tanh(v); or the erf form of
// GELU as exporters write it, v * (erf(v / k1) + k2) * k3 (v * k1 where
// `gelu_div` is false: the legaliser's x * 0.70710678); or hardswish,
// v * min(max(k1 * v + k2, lo), hi), where lo and hi bound the gate and
// not the result (ONNX HardSwish: k1 1/6, k2 0.5, 0 and 1). exp, tanh and erf
// run on vectors (AVX-512, AVX2): exp about 1 ulp; tanh and erf the
// polynomials the code generator inlines (backends/llvm/expr.cc), so a
// fused tanh or GELU rounds as the kernel it replaces did but for the
// order of the additions (biases first, then the residual).
//
// The library applies it right after the sums, while they are in cache.
// Applied tile by tile inside the direct convolution it cost more than it
// saved (a call per channel and output row of 10: resnet_small 0.285 ->
// 0.302 ms, against 0.268 after the sums).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace relax::rt {

class ThreadPool;
struct BuiltinCall;

struct Epilogue {
  enum class Act : uint8_t { none, silu, leaky, tanh, gelu, hardswish };
  const float* scale = nullptr;  // set: y holds i32 sums, times scale[c] (scale_columns) or scale_value
  bool scale_columns = false;
  float scale_value = 1.0f;
  // Set: the result quantized into qout (u8, or i8 where q_signed), at y's
  // offsets: saturate(round_half_even(v / q_scale) + q_zero).
  void* qout = nullptr;
  bool q_signed = false;
  float q_scale = 1.0f, q_zero = 0.0f;
  const float* bias[2] = {nullptr, nullptr};
  const float* residual = nullptr;
  Act act = Act::none;
  float leak_at = 0.0f, slope = 0.0f;
  bool gelu_div = true;
  float k1 = 1.0f, k2 = 0.0f, k3 = 1.0f;
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();

  // A convolution's y (N, O, P): channel o of image n is the plane at
  // (n * O + o) * P. Split over the pool where it is large.
  void apply_all(float* y, int64_t N, int64_t O, int64_t P, ThreadPool* pool) const;
  // A product's output `out` (its element 0; the residual has its
  // shape): `rows` rows of row stride ld from element `at`, columns [c0,
  // c1), bias[k][c] for column c. One thread (the caller splits the
  // product).
  void apply_rows(float* out, int64_t at, int64_t ld, int64_t rows, int64_t c0, int64_t c1) const;
  // A blocked convolution's output (runtime/conv_blocked.h): n elements
  // (a multiple of 16) of y from element `at`, all of channel block
  // `block` (channel block * 16 + lane; the residual has y's shape). One
  // thread.
  void apply_blocked(float* y, int64_t at, int64_t n, int64_t block) const;
};

// The epilogue of a library call as passes/fuse_library_epilogues.cc
// writes it: the six parameters p[0..5] (flags, lo and hi as f32 bits,
// k1, k2 and k3 as f32 bits), and its tensors from argument `first` on;
// `channels` elements per bias, `y_shape`'s for a residual. Fails with a
// message naming `what` for operands that do not fit. Returns the number
// of tensor arguments it read.
//
// flags: bits 0-1 the number of biases (up to 2); bit 2 a residual; bit 3
// SiLU; bits 4 and 5 lo and hi from one-element tensors (else the
// parameters'); bit 6 a leaky ReLU (its threshold and slope two
// one-element tensors); bit 7 tanh; bit 8 GELU; bit 9 GELU's k1 divides;
// bits 10, 11, 12 GELU's k1, k2, k3 from one-element tensors (else the
// parameters'); bit 13 hardswish (its k1, k2 as GELU's, bits 10 and 11);
// bit 14 the sums are i32, scaled by a tensor of one or `channels` f32;
// bit 15 that scale the product of two one-element tensors; bit 16 the
// result quantized by a one-element f32 scale and a one-element u8 or i8
// zero point (Epilogue::qout, which the caller sets). The tensors come in
// that order: scale (and its second factor), biases, residual, lo, hi,
// threshold, slope, k1, k2, k3, the quantization's scale and zero point.
// Only gemm.qmatmul_packed takes bits 14-16 (`integer`); others fail.
constexpr int kEpilogueParams = 6;
size_t read_epilogue(const char* what, BuiltinCall& c, const int64_t* p, size_t first, int64_t channels,
                     const std::vector<int64_t>& y_shape, Epilogue& e, bool integer = false);
// The number of tensor arguments the flags name (whether they fit aside),
// or -1 when the flags are not an epilogue's.
int epilogue_tensors(int64_t flags);

}  // namespace relax::rt
