// Direct 2-D convolution for f32 NCHW tensors, for the convolutions whose
// im2col matrix would cost more to build than the product it feeds: small
// images, where an im2col row is a handful of elements and copying it (and
// packing it again for the GEMM) took most of a CNN's time.
//
// Output channels go in the vector lanes (16 per tile, two AVX2 registers)
// and 6 output positions of a row in registers beside them: each
// (channel, tap) step loads the 16 weights once and broadcasts the 6
// inputs, so 12 fused multiply-adds need 8 loads. Layers of at most 8
// output channels per group take a tile of 8 channels by 8 positions
// instead (9 loads for 8). With AVX-512 (runtime/cpu_isa.h), layers of
// more than 8 channels at column stride 1 or 2 take row tiles instead: two
// 16-channel blocks by up to 14 positions of one output row (or of two
// rows of at most 7), every input at a constant offset from one pointer
// per row, so 28 sums stay in registers and 16 loads feed 28 fused
// multiply-adds; layers of at most 8 channels per group at column stride 1
// put output positions in the lanes instead (up to 48 of one row by the 8
// channels: 24 sums, the inputs loaded as vectors, the sums stored as
// rows); the same packed weights. Output planes of fewer than 8
// positions (AVX2 or AVX-512) take block tiles instead: up to 8 blocks of
// 16 channels by up to 4 positions, which may come from several images,
// so that a 1x1 layer over a 1x1 plane keeps 8 to 24 sums in flight where
// the other tiles held 2. The weights are first transposed to
// [group][c][kh][kw][o] with o padded to the tile's channels. Every output
// element is one chain of fused multiply-adds over (c, kh, kw) in order,
// padding read as zeros (as im2col's would be), whatever its position.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

namespace relax::rt {

class ThreadPool;

struct Conv2dGeometry {
  int64_t N, C, H, W;  // x
  int64_t O, KH, KW;   // w: (O, C / groups, KH, KW)
  int64_t OH, OW;      // y: (N, O, OH, OW)
  int64_t sh, sw, ph, pw, dh, dw, groups;
};

// Whether the convolution is a plain matrix product (1x1 kernel, stride 1,
// no padding): x itself is the im2col matrix.
inline bool conv2d_is_product(const Conv2dGeometry& g) {
  return g.KH == 1 && g.KW == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0 && g.OH == g.H && g.OW == g.W;
}

enum class ConvMethod { automatic, direct, im2col };

// The library's f32 convolution (gemm.conv2d, runtime/builtins_blas.cc):
// depthwise ones (one input channel per group, fewer than 8 outputs each)
// by their kernel, the others direct or as im2col + matrix product
// (runtime/gemm.h), as `method` says or, automatically, as measured to
// pay. `col` holds the im2col matrix of one image and group, (C / groups
// * KH * KW) x (OH * OW); a plain product needs none.
void conv2d_f32(const Conv2dGeometry& g, const float* x, const float* w, float* y, float* col, ThreadPool* pool,
                ConvMethod method = ConvMethod::automatic);

// Whether a convolution runs directly or as im2col + product: for an
// Og-output-per-group layer with a K-long reduction over P output
// positions an image (-1: not known), on a CPU with AVX-512 (the row
// tiles) or without. conv2d_prefers_direct asks it for this CPU, a
// build's packing (passes/legalize/nn.cc) for the target's.
//
// Measured with relax-bench-conv on ResNet-50's layers:
// - Without AVX-512 (Intel, AVX2 tiles of 6 positions): 3x3 layers of 64
//   to 256 channels ran 1.1x to 1.7x faster direct; 1x1 ones 1.4x to 2.2x
//   faster as a product (the tile rereads each weight block from L2 per 6
//   positions), down to 7x7 planes; a reduction of 4096 or more goes to
//   the GEMM's cache blocking; strided 1x1 layers (ResNet's downsampling)
//   over at most 128 channels in and out direct (the im2col matrix is a
//   strided copy as large as the product's input: 1.1x to 9x), wider ones
//   as a product (1.4x to 1.8x).
// - With AVX-512 (AMD EPYC, row tiles of up to 28 sums): direct everywhere
//   but 1x1 layers reducing fewer than 128 channels. One thread: 1x1
//   layers of 256 to 2048 channels 1.1x to 1.6x faster direct, 3x3 ones
//   of 512 channels (K = 4608) 1.7x, strided 1x1 ones 1.1x to 1.6x; 64
//   channels into 256 1.1x faster as a product. Two threads: direct 1.3x
//   to 2.1x faster (it splits by rows, the product's packing does not).
//   The whole network's convolutions: 72.9 ms against 85.7 at one
//   thread, 40.1 against 54.6 at two.
// - Either way, under 8 positions (1x1 and 2x2 planes) direct, any kernel
//   and reduction (the block tiles keep many channels' sums in flight
//   where the GEMM's tiles would be mostly padding), and with 4 to 7
//   outputs per group direct where the kernel is wider than 1x1 (the
//   8-channel tiles, half empty, still beat building the im2col matrix
//   for so few rows: 2.6x to 7x), under 4 never.
inline bool conv2d_direct_pays(int64_t KH, int64_t KW, int64_t Og, int64_t K, int64_t P, int64_t sh, int64_t sw,
                               bool avx512) {
  const bool wide = KH > 1 || KW > 1, strided = sh > 1 || sw > 1;
  if (Og < 4) return false;
  if (Og < 8) return wide && K < 4096;
  if (P >= 0 && P < 8) return true;
  if (avx512 && (sw == 1 || sw == 2)) return wide || strided || K >= 128;  // the row tiles' column strides
  if (!wide && strided) return K <= 128 && Og <= 128;
  return wide && K < 4096;
}

// Whether conv2d_f32 convolves g directly (the rest as im2col + product):
// conv2d_direct_pays for this CPU. RELAX_CONV=direct|im2col forces one or
// the other.
bool conv2d_prefers_direct(const Conv2dGeometry& g);

// Whether this CPU has the kernel (AVX2 and FMA).
bool conv2d_direct_available();

// y = conv(x, w). `scratch` holds the transposed weights and the padded
// input. The f32 one needs conv2d_direct_available().
void conv2d_direct_f32(const Conv2dGeometry& g, const float* x, const float* w, float* y, std::vector<float>& scratch,
                       ThreadPool* pool);
// The direct kernel's weights packed once (a build folds this into the
// package's weights): w (O, K) for K = C / groups * KH * KW as
// [group][block of L channels][k][L], zero past each group's O / groups
// channels, L = conv2d_direct_lanes(O / groups); conv2d_packed_size
// floats.
int64_t conv2d_direct_lanes(int64_t Og);
int64_t conv2d_packed_size(int64_t O, int64_t groups, int64_t K);
void conv2d_pack_weights_f32(const float* w, int64_t O, int64_t groups, int64_t K, float* out, ThreadPool* pool);
// y = conv(x, w) from w packed so; `scratch` holds the padded input. Any
// CPU: without AVX2 and FMA (or `vector` false, for tests), plain loops
// that compute the same chains of fused multiply-adds.
void conv2d_direct_packed_f32(const Conv2dGeometry& g, const float* x, const float* packed, float* y,
                              std::vector<float>& scratch, ThreadPool* pool, bool vector = true);

// x given as parts along its channels, in order: part k (N, channels[k],
// H, W), the channels summing to g.C. A concat that only a convolution
// reads (passes/fuse_concat_into_conv.cc) is never made: the kernel's
// padded copy of x, which it makes anyway where the convolution pads,
// reads each plane from its part instead (unpadded, it makes the copy
// for the parts). Without AVX2, the parts are copied into one x first.
struct ChannelParts {
  std::vector<const float*> data;
  std::vector<int64_t> channels;
};
void conv2d_direct_packed_parts_f32(const Conv2dGeometry& g, const ChannelParts& x, const float* packed, float* y,
                                    std::vector<float>& scratch, ThreadPool* pool, bool vector = true);
// The parts side by side as one (N, g.C, H, W) tensor: planes [begin, end)
// of it, at `out` (plane `begin`'s place).
void gather_channel_parts(const Conv2dGeometry& g, const ChannelParts& x, int64_t begin, int64_t end, float* out);

// The same in i32 (products and sums wrap as i32 arithmetic does), on any
// CPU: AVX2 where it has it, else plain loops.
void conv2d_direct_i32(const Conv2dGeometry& g, const int32_t* x, const int32_t* w, int32_t* y,
                       std::vector<int32_t>& scratch, ThreadPool* pool);
// Its plain-loop form (what a CPU without AVX2 runs).
void conv2d_loops_i32(const Conv2dGeometry& g, const int32_t* x, const int32_t* w, int32_t* y, ThreadPool* pool);

// Depthwise convolutions (runtime/conv_depthwise.cc).
//
// A depthwise convolution: one input channel per group (C == groups; O a
// multiple of it). Output positions of a row go in the vector lanes: each
// worker copies the input rows its output rows read into a zero-padded
// buffer, its columns split by phase of the stride (column j * sw + q in
// phase q) so that every tap reads consecutive elements, then each tap
// adds weight * 8 inputs into up to 32 accumulators in registers. Every
// output is one chain of fused multiply-adds over (kh, kw) in order. Any
// CPU: AVX2 and FMA where it has them, else plain loops over the same
// buffer (`vector` false forces those, for tests).
void conv2d_depthwise_f32(const Conv2dGeometry& g, const float* x, const float* w, float* y, ThreadPool* pool,
                          bool vector = true);

// Depthwise convolutions with one output per channel (C == O == groups)
// over small planes, from weights packed once as [O / 16 blocks][KH *
// KW][16] (zeros past O; conv2d_depthwise_packed_size floats): channels
// go in the vector lanes. x is copied channels-last per call and y back,
// a pass over each; every tap is then one contiguous load per 16 channels
// (zeros where it reads padding), where the plane-wise kernel pads and
// splits a copy of each channel for a few outputs. Every
// output is the same chain of fused multiply-adds over (kh, kw) in order
// as conv2d_depthwise_f32's, so the two agree bitwise. `scratch` holds
// the copies. Any CPU: plain loops without AVX2 (or `vector` false).
int64_t conv2d_depthwise_packed_size(int64_t O, int64_t taps);
void conv2d_depthwise_pack_f32(const float* w, int64_t O, int64_t taps, float* out);
void conv2d_depthwise_packed_f32(const Conv2dGeometry& g, const float* x, const float* packed, float* y,
                                 std::vector<float>& scratch, ThreadPool* pool, bool vector = true);

}  // namespace relax::rt
