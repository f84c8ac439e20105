// Convolutions in the blocked channel layout (NCHW16c): a tensor of C
// channels (N, C, H, W) is held as (N, ceil(C / 16), H, W, 16), channel
// block * 16 + lane at [n, block, h, w, lane], the lanes past C zero. A CNN
// kept so between layers (passes/block_layout.cc) convolves with the 16
// channels of a block in one vector register: no transposes, no scattered
// stores, every output position a whole vector whatever the plane's width,
// and the bias and activation applied to the sums while they are in cache.
//
// Two kinds, each from weights packed once (gemm.conv2d_pack layout 4):
// - dense (groups 1): per output block the weights [in block][kh][kw][16
//   inputs][16 outputs], zero past C and O. A tile of up to 12 output
//   positions of one row (a product's positions across rows) by two output
//   blocks keeps 24 sums in registers; per input channel two weight loads
//   and 12 broadcasts feed 24 fused multiply-adds. Padding is a padded copy
//   of the input.
// - depthwise (one input channel and one output per group): the weights
//   [block][kh][kw][16]; each position's 16 channels one vector, the
//   padding skipped per tap (rows) and per position (the columns at the
//   edges).
//
// The geometry's C and O are the padded counts (blocks * 16), its groups 1
// or C (depthwise); a dense one may read a plain x (N, C, H, W) instead. AVX-512, AVX2 (two 8-lane halves) or plain loops.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/conv_direct.h"

namespace relax::rt {

class ThreadPool;
struct Epilogue;

constexpr int64_t kChannelBlock = 16;
inline int64_t channel_blocks(int64_t channels) { return (channels + kChannelBlock - 1) / kChannelBlock; }

// The packed weights' size in floats for w (O, C / groups, KH, KW), groups
// 1 or C (depthwise, one output per group); -1 for other groupings.
int64_t conv2d_blocked_packed_size(int64_t O, int64_t Cg, int64_t groups, int64_t KH, int64_t KW);
// Packs w (O, C / groups, KH, KW) into out (conv2d_blocked_packed_size
// floats).
void conv2d_blocked_pack_f32(const float* w, int64_t O, int64_t Cg, int64_t groups, int64_t KH, int64_t KW,
                             float* out);
// y = conv(x, w) (then the epilogue, where there is one) for x (N, C / 16,
// H, W, 16) and y (N, O / 16, OH, OW, 16), g's C and O multiples of 16;
// or, `plain_x`, a dense one from x (N, C, H, W) as it is, g.C its channels
// (a network's first convolution: 3 channels padded to 16 would cost 5x
// the work, and converting its output a pass). `scratch` holds the padded
// input. `vector` false: the plain loops (for tests).
void conv2d_blocked_f32(const Conv2dGeometry& g, const float* x, const float* packed, float* y, const Epilogue* ep,
                        std::vector<float>& scratch, ThreadPool* pool, bool vector = true, bool plain_x = false);

}  // namespace relax::rt
