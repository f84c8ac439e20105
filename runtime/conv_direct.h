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
// instead (9 loads for 8). The weights are first transposed to
// [group][c][kh][kw][o] with o padded to the tile's channels. Every output
// element is one chain of fused multiply-adds over (c, kh, kw) in order,
// padding read as zeros (as im2col's would be), whatever its position.
#pragma once

#include <cstdint>
#include <vector>

namespace relax::rt {

class ThreadPool;

struct Conv2dGeometry {
  int64_t N, C, H, W;       // x
  int64_t O, KH, KW;        // w: (O, C / groups, KH, KW)
  int64_t OH, OW;           // y: (N, O, OH, OW)
  int64_t sh, sw, ph, pw, dh, dw, groups;
};

// Whether this CPU has the kernel (AVX2 and FMA).
bool conv2d_direct_available();

// y = conv(x, w). `scratch` holds the transposed weights and the padded
// input. The f32 one needs conv2d_direct_available().
void conv2d_direct_f32(const Conv2dGeometry& g, const float* x, const float* w, float* y, std::vector<float>& scratch,
                       ThreadPool* pool);
// The same in i32 (products and sums wrap as i32 arithmetic does), on any
// CPU: AVX2 where it has it, else plain loops.
void conv2d_direct_i32(const Conv2dGeometry& g, const int32_t* x, const int32_t* w, int32_t* y,
                       std::vector<int32_t>& scratch, ThreadPool* pool);
// Its plain-loop form (what a CPU without AVX2 runs).
void conv2d_loops_i32(const Conv2dGeometry& g, const int32_t* x, const int32_t* w, int32_t* y, ThreadPool* pool);

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

}  // namespace relax::rt
