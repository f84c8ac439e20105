#include "runtime/conv_direct.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>

#include "runtime/cpu_isa.h"
#include "runtime/error.h"
#include "runtime/thread_pool.h"

namespace relax::rt {
namespace {

// f(src, p, count) for each run [p, p + count) of planes [begin, end) of
// x (plane n * C + c) that lies in one of its parts, src the run's first
// plane in that part.
template <typename F>
void part_runs(const Conv2dGeometry& g, const ChannelParts& x, int64_t begin, int64_t end, F&& f) {
  const int64_t plane = g.H * g.W;
  while (begin < end) {
    const int64_t n = begin / g.C, c = begin % g.C;
    int64_t c0 = 0;
    size_t k = 0;
    while (c >= c0 + x.channels[k]) c0 += x.channels[k++];
    const int64_t count = std::min(end - begin, c0 + x.channels[k] - c);
    f(x.data[k] + (n * x.channels[k] + c - c0) * plane, begin, count);
    begin += count;
  }
}

#ifdef RELAX_X86_KERNELS
#define RELAX_AVX2 __attribute__((target("avx2,fma"), always_inline)) static inline
// The vector operations of one element type: 8 lanes of f32 (a fused
// multiply-add) or of i32 (a multiply and an add, wrapping as i32 does).
struct F32x8 {
  using T = float;
  using V = __m256;
  RELAX_AVX2 V zero() { return _mm256_setzero_ps(); }
  RELAX_AVX2 V load(const T* p) { return _mm256_loadu_ps(p); }
  RELAX_AVX2 V broadcast(const T* p) { return _mm256_broadcast_ss(p); }
  RELAX_AVX2 V madd(V w, V x, V acc) { return _mm256_fmadd_ps(w, x, acc); }
  RELAX_AVX2 void store(T* p, V v) { _mm256_storeu_ps(p, v); }
};
struct I32x8 {
  using T = int32_t;
  using V = __m256i;
  RELAX_AVX2 V zero() { return _mm256_setzero_si256(); }
  RELAX_AVX2 V load(const T* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  RELAX_AVX2 V broadcast(const T* p) { return _mm256_set1_epi32(*p); }
  RELAX_AVX2 V madd(V w, V x, V acc) { return _mm256_add_epi32(acc, _mm256_mullo_epi32(w, x)); }
  RELAX_AVX2 void store(T* p, V v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
};
#undef RELAX_AVX2

// One tile: channels [o0, o0 + oc) (oc <= 8 * NV) at flattened output
// positions [p0, p0 + nw) (nw <= NP), which may span output rows. px[j]:
// position j's first input in the zero-padded image (its top-left tap of
// channel 0); wt: this channel block's weights [c][kh][kw][8 * NV]; yb:
// the output at channel o0, position p0 (channel stride `plane`). Two
// shapes: 16 channels (NV = 2) by 6 positions, and 8 channels by 8 for
// layers of at most 8 channels per group, which would leave half of the
// 16 lanes empty. The sums are named variables (an array of them was kept
// in memory, a store per multiply-add) and the positions' pointers fit the
// general registers.
template <typename Op, int NV, int NP>
__attribute__((target("avx2,fma"))) void tile(const typename Op::T* const* px, int64_t Cg, int64_t KH, int64_t KW,
                                              int64_t cstride, int64_t rstride, int64_t dw, const typename Op::T* wt,
                                              typename Op::T* yb, int64_t plane, int64_t oc, int nw) {
  static_assert((NV == 2 && NP == 6) || (NV == 1 && NP == 8), "the two tile shapes");
  using T = typename Op::T;
  using V = typename Op::V;
  constexpr int L = 8 * NV;
  V a0 = Op::zero(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  V b0 = a0, b1 = a0, b2 = a0, b3 = a0, b4 = a0, b5 = a0;
  const T *p0 = px[0], *p1 = px[1], *p2 = px[2], *p3 = px[3], *p4 = px[4], *p5 = px[5];
  const T *p6 = NP > 6 ? px[6] : p0, *p7 = NP > 7 ? px[7] : p0;
  for (int64_t ci = 0; ci < Cg; ++ci) {
    for (int64_t kh = 0; kh < KH; ++kh) {
      int64_t off = ci * cstride + kh * rstride;
      for (int64_t kw = 0; kw < KW; ++kw, off += dw, wt += L) {
        const V w0 = Op::load(wt);
        V x;
        if constexpr (NV == 2) {
          const V w1 = Op::load(wt + 8);
#define RELAX_STEP(j)            \
  x = Op::broadcast(p##j + off); \
  a##j = Op::madd(w0, x, a##j);  \
  b##j = Op::madd(w1, x, b##j);
          RELAX_STEP(0) RELAX_STEP(1) RELAX_STEP(2) RELAX_STEP(3) RELAX_STEP(4) RELAX_STEP(5)
#undef RELAX_STEP
        } else {
#define RELAX_STEP(j)            \
  x = Op::broadcast(p##j + off); \
  a##j = Op::madd(w0, x, a##j);
          RELAX_STEP(0)
          RELAX_STEP(1) RELAX_STEP(2) RELAX_STEP(3) RELAX_STEP(4) RELAX_STEP(5) RELAX_STEP(6) RELAX_STEP(7)
#undef RELAX_STEP
        }
      }
    }
  }
  alignas(32) T t[8][L];
  Op::store(t[0], a0), Op::store(t[1], a1), Op::store(t[2], a2), Op::store(t[3], a3);
  Op::store(t[4], a4), Op::store(t[5], a5), Op::store(t[6], a6), Op::store(t[7], a7);
  if constexpr (NV == 2) {
    Op::store(t[0] + 8, b0), Op::store(t[1] + 8, b1), Op::store(t[2] + 8, b2);
    Op::store(t[3] + 8, b3), Op::store(t[4] + 8, b4), Op::store(t[5] + 8, b5);
  }
  for (int64_t l = 0; l < oc; ++l)
    for (int j = 0; j < nw; ++j) yb[l * plane + j] = t[j][l];
}

// AVX-512, f32: OB blocks of 16 channels (the packed 16-lane blocks, the
// second K * 16 floats after the first) by R output rows of W consecutive
// positions at input stride S. Every input a tile reads is then at a
// constant offset from one pointer per row (no pointer per position), so
// up to 28 sums stay in registers: per tap, OB weight loads and R * W
// broadcasts feed OB * R * W fused multiply-adds. x0: the first row's
// first input (channel 0's top-left tap); xrow, yrow: the distance
// between its rows in the padded image and in the output.
template <int OB, int R, int W, int S>
__attribute__((target("avx512f,prfchw"))) void row_tile(const float* x0, int64_t xrow, int64_t Cg, int64_t KH,
                                                        int64_t KW, int64_t cstride, int64_t rstride, int64_t dw,
                                                        const float* wt, int64_t wblock, float* yb, int64_t plane,
                                                        int64_t yrow, int64_t oc) {
  constexpr int NP = R * W;
  __m512 acc[OB][NP];
#pragma GCC unroll 32
  for (int b = 0; b < OB; ++b)
#pragma GCC unroll 32
    for (int j = 0; j < NP; ++j) acc[b][j] = _mm512_setzero_ps();
  const float* x1 = x0 + (R > 1 ? xrow : 0);
  // The tile's output rows, fetched for writing while the sums run, so
  // that its stores at the end (32 channels' rows, each a line or two of
  // its own plane) do not each wait for their line: ResNet-50's layers
  // with cold caches (relax-bench-conv --cold), 81.7 -> 79.5 ms at one
  // thread; the whole model 82.5 -> 80.8 ms. Warm, no change.
  for (int64_t l = 0; l < oc; ++l) {
    const float* yl = yb + l * plane;
    __builtin_prefetch(yl, 1, 3);
    __builtin_prefetch(yl + W - 1, 1, 3);
    if constexpr (R > 1) __builtin_prefetch(yl + yrow + W - 1, 1, 3);
  }
  for (int64_t ci = 0; ci < Cg; ++ci) {
    for (int64_t kh = 0; kh < KH; ++kh) {
      int64_t off = ci * cstride + kh * rstride;
      for (int64_t kw = 0; kw < KW; ++kw, off += dw, wt += 16) {
        const __m512 w0 = _mm512_loadu_ps(wt), w1 = OB > 1 ? _mm512_loadu_ps(wt + wblock) : w0;
        const float *r0 = x0 + off, *r1 = x1 + off;
#pragma GCC unroll 32
        for (int j = 0; j < NP; ++j) {
          const __m512 x = _mm512_set1_ps(j < W ? r0[j * S] : r1[(j - W) * S]);
          acc[0][j] = _mm512_fmadd_ps(w0, x, acc[0][j]);
          if constexpr (OB > 1) acc[OB - 1][j] = _mm512_fmadd_ps(w1, x, acc[OB - 1][j]);
        }
      }
    }
  }
  alignas(64) float t[NP][16];
  for (int b = 0; b < OB; ++b) {
#pragma GCC unroll 32
    for (int j = 0; j < NP; ++j) _mm512_store_ps(t[j], acc[b][j]);
    for (int64_t l = 0; l < std::min<int64_t>(16, oc - 16 * b); ++l) {
      float* yl = yb + (16 * b + l) * plane;
      for (int j = 0; j < NP; ++j) yl[j < W ? j : yrow + j - W] = t[j][l];
    }
  }
}

// AVX-512, f32, layers of at most 8 output channels per group (the packed
// 8-lane blocks) at column stride 1 or 2: output positions go in the lanes
// instead, V vectors of 16 consecutive positions of one output row by the
// block's 8 channels, 8 * V sums in registers. Per tap: V loads of the
// padded input row (the positions' inputs are consecutive) and 8 weight
// broadcasts feed 8 * V fused multiply-adds; the sums are stored as rows
// (NCHW), not scattered. `count`: the tile's positions (the last vector
// masked). x0: the row's first input for channel 0, tap (0, 0).
// With column stride S = 2 a vector's 16 positions read every other input
// of 32 (even_lanes_avx512).
template <int V, int S>
__attribute__((target("avx512f"))) void lane_tile(const float* x0, int64_t Cg, int64_t KH, int64_t KW, int64_t cstride,
                                                  int64_t rstride, int64_t dw, const float* wt, float* yb,
                                                  int64_t plane, int64_t oc, int64_t count) {
  static_assert(S == 1 || S == 2, "column strides 1 and 2");
  __m512 acc[8][V];
#pragma GCC unroll 8
  for (int l = 0; l < 8; ++l)
#pragma GCC unroll 3
    for (int v = 0; v < V; ++v) acc[l][v] = _mm512_setzero_ps();
  const int64_t rest = count - 16 * (V - 1);
  const __mmask16 last = rest >= 16 ? __mmask16(0xffff) : __mmask16((1u << rest) - 1);
  for (int64_t ci = 0; ci < Cg; ++ci) {
    for (int64_t kh = 0; kh < KH; ++kh) {
      const float* row = x0 + ci * cstride + kh * rstride;
      for (int64_t kw = 0; kw < KW; ++kw, wt += 8) {
        const float* px = row + kw * dw;
        __m512 xv[V];
#pragma GCC unroll 3
        for (int v = 0; v < V; ++v) {
          if constexpr (S == 1) {
            xv[v] = v + 1 < V ? _mm512_loadu_ps(px + 16 * v) : _mm512_maskz_loadu_ps(last, px + 16 * v);
          } else {
            xv[v] = even_lanes_avx512(px + 32 * v, v + 1 < V ? 16 : std::min<int64_t>(rest, 16));
          }
        }
#pragma GCC unroll 8
        for (int l = 0; l < 8; ++l) {
          const __m512 w = _mm512_set1_ps(wt[l]);
#pragma GCC unroll 3
          for (int v = 0; v < V; ++v) acc[l][v] = _mm512_fmadd_ps(w, xv[v], acc[l][v]);
        }
      }
    }
  }
#pragma GCC unroll 8
  for (int l = 0; l < 8; ++l) {
    if (l >= oc) break;
#pragma GCC unroll 3
    for (int v = 0; v < V; ++v) {
      if (v + 1 < V)
        _mm512_storeu_ps(yb + l * plane + 16 * v, acc[l][v]);
      else
        _mm512_mask_storeu_ps(yb + l * plane + 16 * v, last, acc[l][v]);
    }
  }
}

// Small output planes (fewer than 8 positions per image: the last stages
// of a CNN on small inputs, squeeze-and-excitation 1x1 convolutions over
// 1x1 planes): there the row tiles hold two blocks by the plane's few
// positions, 2 to 8 chains of fused multiply-adds, and wait on each
// one's latency. A block tile takes OB 16-channel blocks (the second
// wblock floats after the first in the packed weights) by NP positions,
// each from its own pointer px[j] (positions of several images may share
// a tile), so that 8 to 24 sums are in flight: per tap, OB weight loads
// and NP broadcasts feed OB * NP fused multiply-adds. Position j's sums
// go to yb + yoff[j] + channel * plane.
//
// The taps of a block tile in (c, kh, kw) order: the statement given for
// each, with `off` its inputs' offset from the positions' pointers and wt
// (stepping 16 floats a tap) its weights; a 1x1 kernel as one loop over
// the channels. A macro: the two ISAs' kernels share it, and a helper
// function without their target attribute could not inline intrinsics.
#define RELAX_BLOCK_TAPS(...)                                                                                    \
  if (KH == 1 && KW == 1) {                                                                                      \
    for (int64_t ci = 0, off = 0; ci < Cg; ++ci, off += cstride, wt += 16) __VA_ARGS__;                          \
  } else {                                                                                                       \
    for (int64_t ci = 0; ci < Cg; ++ci)                                                                          \
      for (int64_t kh = 0; kh < KH; ++kh)                                                                        \
        for (int64_t kw = 0, off = ci * cstride + kh * rstride; kw < KW; ++kw, off += dw, wt += 16) __VA_ARGS__; \
  }

// Block b's sums t[j][lane] (NP positions) to its channels, at most oc - 16 * b of them.
inline void scatter_block(const float (*t)[16], int NP, int b, int64_t oc, const int64_t* yoff, float* yb,
                          int64_t plane) {
  for (int64_t l = 0; l < std::min<int64_t>(16, oc - 16 * b); ++l)
    for (int j = 0; j < NP; ++j) yb[(16 * b + l) * plane + yoff[j]] = t[j][l];
}

// One tap of a block tile: its inputs at `off` from each position's
// pointer, times the OB blocks' weights at wt.
template <int OB, int NP>
__attribute__((target("avx512f"), always_inline)) inline void block_tap_avx512(__m512 (&acc)[OB][NP],
                                                                               const float* const* p, int64_t off,
                                                                               const float* wt, int64_t wblock) {
  __m512 x[NP];
#pragma GCC unroll 4
  for (int j = 0; j < NP; ++j) x[j] = _mm512_set1_ps(p[j][off]);
#pragma GCC unroll 8
  for (int b = 0; b < OB; ++b) {
    const __m512 w = _mm512_loadu_ps(wt + b * wblock);
#pragma GCC unroll 4
    for (int j = 0; j < NP; ++j) acc[b][j] = _mm512_fmadd_ps(w, x[j], acc[b][j]);
  }
}
template <int OB, int NP>
__attribute__((target("avx2,fma"), always_inline)) inline void block_tap_avx2(__m256 (&acc)[OB][NP][2],
                                                                              const float* const* p, int64_t off,
                                                                              const float* wt, int64_t wblock) {
  __m256 x[NP];
#pragma GCC unroll 4
  for (int j = 0; j < NP; ++j) x[j] = _mm256_broadcast_ss(p[j] + off);
#pragma GCC unroll 8
  for (int b = 0; b < OB; ++b) {
    const __m256 w0 = _mm256_loadu_ps(wt + b * wblock), w1 = _mm256_loadu_ps(wt + b * wblock + 8);
#pragma GCC unroll 4
    for (int j = 0; j < NP; ++j) {
      acc[b][j][0] = _mm256_fmadd_ps(w0, x[j], acc[b][j][0]);
      acc[b][j][1] = _mm256_fmadd_ps(w1, x[j], acc[b][j][1]);
    }
  }
}

template <int OB, int NP>
__attribute__((target("avx512f"))) void block_tile_avx512(const float* const* px, const int64_t* yoff, int64_t Cg,
                                                          int64_t KH, int64_t KW, int64_t cstride, int64_t rstride,
                                                          int64_t dw, const float* wt, int64_t wblock, float* yb,
                                                          int64_t plane, int64_t oc) {
  __m512 acc[OB][NP];
#pragma GCC unroll 8
  for (int b = 0; b < OB; ++b)
#pragma GCC unroll 4
    for (int j = 0; j < NP; ++j) acc[b][j] = _mm512_setzero_ps();
  const float* p[NP];
#pragma GCC unroll 4
  for (int j = 0; j < NP; ++j) p[j] = px[j];
  RELAX_BLOCK_TAPS(block_tap_avx512<OB, NP>(acc, p, off, wt, wblock));
  alignas(64) float t[NP][16];
  for (int b = 0; b < OB; ++b) {
#pragma GCC unroll 4
    for (int j = 0; j < NP; ++j) _mm512_store_ps(t[j], acc[b][j]);
    scatter_block(t, NP, b, oc, yoff, yb, plane);
  }
}

// The same with AVX2: each 16-channel block as two vectors of 8.
template <int OB, int NP>
__attribute__((target("avx2,fma"))) void block_tile_avx2(const float* const* px, const int64_t* yoff, int64_t Cg,
                                                         int64_t KH, int64_t KW, int64_t cstride, int64_t rstride,
                                                         int64_t dw, const float* wt, int64_t wblock, float* yb,
                                                         int64_t plane, int64_t oc) {
  __m256 acc[OB][NP][2];
#pragma GCC unroll 8
  for (int b = 0; b < OB; ++b)
#pragma GCC unroll 4
    for (int j = 0; j < NP; ++j) acc[b][j][0] = acc[b][j][1] = _mm256_setzero_ps();
  const float* p[NP];
#pragma GCC unroll 4
  for (int j = 0; j < NP; ++j) p[j] = px[j];
  RELAX_BLOCK_TAPS(block_tap_avx2<OB, NP>(acc, p, off, wt, wblock));
  alignas(32) float t[NP][16];
  for (int b = 0; b < OB; ++b) {
#pragma GCC unroll 4
    for (int j = 0; j < NP; ++j) _mm256_store_ps(t[j], acc[b][j][0]), _mm256_store_ps(t[j] + 8, acc[b][j][1]);
    scatter_block(t, NP, b, oc, yoff, yb, plane);
  }
}

#undef RELAX_BLOCK_TAPS

using BlockTile = void (*)(const float* const*, const int64_t*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                           const float*, int64_t, float*, int64_t, int64_t);
constexpr int kBlockMax = 8, kPosMax = 4;
// The most blocks a tile of NP positions takes: its sums, weights and
// broadcasts fit the 32 (AVX-512) or 16 (AVX2) vector registers.
constexpr int block_max(bool avx512, int NP) {
  return avx512 ? (NP <= 2 ? 8 : NP == 3 ? 6 : 5) : (NP == 1 ? 6 : NP == 2 ? 3 : NP == 3 ? 2 : 1);
}
// block_tiles().f[avx512][OB - 1][NP - 1]; null past block_max.
struct BlockTiles {
  BlockTile f[2][kBlockMax][kPosMax] = {};
  template <int OB, int NP>
  void add() {
    if constexpr (OB <= block_max(true, NP)) f[1][OB - 1][NP - 1] = block_tile_avx512<OB, NP>;
    if constexpr (OB <= block_max(false, NP)) f[0][OB - 1][NP - 1] = block_tile_avx2<OB, NP>;
  }
  template <int OB>
  void add_blocks() {
    add<OB, 1>(), add<OB, 2>(), add<OB, 3>(), add<OB, 4>();
  }
  template <int... OB>
  void add_all(std::integer_sequence<int, OB...>) {
    (add_blocks<OB + 1>(), ...);
  }
  BlockTiles() { add_all(std::make_integer_sequence<int, kBlockMax>{}); }
};
const BlockTiles& block_tiles() {
  static const BlockTiles t;
  return t;
}

// The padded copy of `planes` planes of H x W: each (Hp, Wp), x's rows
// at (ph, pw), zeros around them. Small layers have planes of a few
// short rows, where a library call per row and per stretch of padding
// (std::copy, std::fill) cost as much as the convolution's sums: here a
// row is a few masked vector loads and stores (the loads' masked-off
// lanes are not read, so a row's first and last vectors may reach past x).
__attribute__((target("avx512f"))) void pad_planes_avx512(const float* x, int64_t planes, int64_t H, int64_t W,
                                                          int64_t ph, int64_t pw, int64_t Hp, int64_t Wp, float* out) {
  // Per vector of a row (lane l: column c + l): the lanes read from x,
  // pw <= c + l < pw + W, and those stored, c + l < Wp; the same for
  // every row, so reckoned once.
  const int64_t vectors = (Wp + 15) / 16;
  auto read_mask = [&](int64_t v) {
    const int64_t lo = std::clamp<int64_t>(pw - 16 * v, 0, 16), hi = std::clamp<int64_t>(pw + W - 16 * v, 0, 16);
    return hi > lo ? __mmask16(((1u << hi) - 1) & ~((1u << lo) - 1)) : __mmask16(0);
  };
  auto store_mask = [&](int64_t v) {
    return Wp - 16 * v >= 16 ? __mmask16(0xffff) : __mmask16((1u << (Wp - 16 * v)) - 1);
  };
  constexpr int64_t kCached = 8;
  __mmask16 reads[kCached], stores[kCached];
  for (int64_t v = 0; v < std::min(vectors, kCached); ++v) reads[v] = read_mask(v), stores[v] = store_mask(v);
  auto reads_of = [&](int64_t v) { return v < kCached ? reads[v] : read_mask(v); };
  auto stores_of = [&](int64_t v) { return v < kCached ? stores[v] : store_mask(v); };
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t p = 0; p < planes; ++p) {
    float* dst = out + p * Hp * Wp;
    // Rows of padding (above and below) store zeros and load nothing: a
    // masked-off lane that would fault costs a microcode assist
    // (hundreds of cycles), and such a row has no address to read at.
    for (int64_t r = 0; r < Hp; ++r) {
      const bool inside = r >= ph && r < ph + H;
      const float* src = inside ? x + (p * H + r - ph) * W - pw : nullptr;
      float* row = dst + r * Wp;
      for (int64_t v = 0; v < vectors; ++v) {
        const __mmask16 m = inside ? reads_of(v) : __mmask16(0);
        _mm512_mask_storeu_ps(row + 16 * v, stores_of(v), m ? _mm512_maskz_loadu_ps(m, src + 16 * v) : zero);
      }
    }
  }
}
__attribute__((target("avx2,fma"))) void pad_planes_avx2(const float* x, int64_t planes, int64_t H, int64_t W,
                                                         int64_t ph, int64_t pw, int64_t Hp, int64_t Wp, float* out) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t hp = 0; hp < Hp; ++hp) {
      const float* src = hp >= ph && hp < ph + H ? x + (p * H + hp - ph) * W : nullptr;
      float* dst = out + (p * Hp + hp) * Wp;
      for (int64_t c = 0; c < Wp; c += 8) {
        const __m256i col = _mm256_add_epi32(lane, _mm256_set1_epi32(int(c)));
        const __m256i keep = _mm256_cmpgt_epi32(_mm256_set1_epi32(int(Wp)), col);
        __m256 v = _mm256_setzero_ps();
        if (src) {
          const __m256i in = _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(int(pw)), col),
                                                 _mm256_cmpgt_epi32(_mm256_set1_epi32(int(pw + W)), col));
          v = _mm256_maskload_ps(src + (c - pw), in);
        }
        _mm256_maskstore_ps(dst + c, keep, v);
      }
    }
}
void pad_planes(const float* x, int64_t planes, int64_t H, int64_t W, int64_t ph, int64_t pw, int64_t Hp, int64_t Wp,
                float* out) {
  if (kernel_isa() == KernelIsa::avx512) return pad_planes_avx512(x, planes, H, W, ph, pw, Hp, Wp, out);
  pad_planes_avx2(x, planes, H, W, ph, pw, Hp, Wp, out);
}

using RowTile = void (*)(const float*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, const float*,
                         int64_t, float*, int64_t, int64_t, int64_t);
constexpr int kRowMax = 14;  // positions per tile: 2 x 14 sums, 2 weights and a broadcast fill the 32 registers

// row_tiles()[OB - 1][R - 1][W - 1][S - 1]; null where R * W > kRowMax.
struct RowTiles {
  RowTile f[2][2][kRowMax][2] = {};
  template <int OB, int R, int W, int S>
  void add() {
    if constexpr (R * W <= kRowMax) f[OB - 1][R - 1][W - 1][S - 1] = row_tile<OB, R, W, S>;
  }
  template <int W>
  void add_width() {
    add<1, 1, W, 1>(), add<1, 1, W, 2>(), add<1, 2, W, 1>(), add<1, 2, W, 2>();
    add<2, 1, W, 1>(), add<2, 1, W, 2>(), add<2, 2, W, 1>(), add<2, 2, W, 2>();
  }
  template <int... W>
  void add_widths(std::integer_sequence<int, W...>) {
    (add_width<W + 1>(), ...);
  }
  RowTiles() { add_widths(std::make_integer_sequence<int, kRowMax>{}); }
};
const RowTiles& row_tiles() {
  static const RowTiles t;
  return t;
}
#endif

}  // namespace

bool conv2d_direct_available() {
#ifdef RELAX_X86_KERNELS
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return ok;
#else
  return false;
#endif
}

namespace {

// An item index's mixed-radix digits, the first the fastest: divided out
// once per chunk of items, then stepped. Dividing per item cost five or
// six 64-bit divisions (40 to 90 cycles each) against a small layer's
// 500 to 1,000 cycles of sums an item.
template <int D>
struct Digits {
  int64_t extent[D], d[D];
  Digits(const int64_t (&extents)[D], int64_t r) {
    for (int k = 0; k < D; ++k) extent[k] = extents[k], d[k] = r % extents[k], r /= extents[k];
  }
  void next() {
    for (int k = 0; k < D && ++d[k] == extent[k]; ++k) d[k] = 0;
  }
};

// The weights w (O, K) of `groups` groups as the kernel reads them:
// [group][block of L channels][k][L], zero past each group's channels.
template <typename T>
void pack_weights(const T* w, int64_t O, int64_t groups, int64_t K, int64_t L, T* out, ThreadPool* pool) {
  const int64_t Og = O / groups, blocks = (Og + L - 1) / L;
  auto body = [&](int64_t begin, int64_t end) {
    for (int64_t gb = begin; gb < end; ++gb) {
      int64_t gi = gb / blocks, o0 = gb % blocks * L, oc = std::min<int64_t>(L, Og - o0);
      const T* src = w + (gi * Og + o0) * K;
      T* dst = out + gb * K * L;
      for (int64_t k = 0; k < K; ++k, dst += L) {
        for (int64_t l = 0; l < oc; ++l) dst[l] = src[l * K + k];
        for (int64_t l = oc; l < L; ++l) dst[l] = T(0);
      }
    }
  };
  if (pool && pool->num_threads() > 1 && groups * blocks > 1 && O * K >= 16384)
    pool->parallel_for(groups * blocks, body);
  else
    body(0, groups * blocks);
}

#ifdef RELAX_X86_KERNELS
// `packed`: the weights as pack_weights lays them out for this tile's
// lanes, or null: then they are packed here, into scratch. `parts`: x
// as parts along its channels (x null), read into the padded copy.
template <typename Op, int NV, int NP>
void direct_tiles(const Conv2dGeometry& g, const typename Op::T* x, const typename Op::T* w,
                  const typename Op::T* packed, typename Op::T* y, std::vector<typename Op::T>& scratch,
                  ThreadPool* pool, const ChannelParts* parts) {
  using T = typename Op::T;
  constexpr int kLanes = 8 * NV, kPos = NP;
  const int64_t Cg = g.C / g.groups, Og = g.O / g.groups, K = Cg * g.KH * g.KW, P = g.OH * g.OW;
  const int64_t blocks = (Og + kLanes - 1) / kLanes;
  // The padded image: every tap of every output position lies inside it.
  const int64_t Hp = std::max(g.H + g.ph, (g.OH - 1) * g.sh + (g.KH - 1) * g.dh + 1);
  const int64_t Wp = std::max(g.W + g.pw, (g.OW - 1) * g.sw + (g.KW - 1) * g.dw + 1);
  // scratch: the packed weights unless given, then the padded input (N,
  // C, Hp, Wp). Without padding, when every window lies inside the image,
  // x itself (unless x is in parts).
  const bool copy = parts || g.ph != 0 || g.pw != 0 || Hp != g.H || Wp != g.W;
  const size_t wsize = packed ? 0 : size_t(g.groups * blocks * K * kLanes);
  scratch.resize(wsize + (copy ? size_t(g.N * g.C * Hp * Wp) : 0));
  T* xp = copy ? scratch.data() + wsize : nullptr;
  // Both cores where the work pays for waking the second and sharing the
  // data between two cores: at 2^18 multiply-adds a layer (a 16-channel
  // 3x3 convolution over 6x5, two images) took longer on two threads
  // than on one. (With the pool handing each thread the same part of
  // every layer, 2^18 flops paid where the two vCPUs were close, and cost
  // a third more where a cache line took 300 ns between them.)
  const bool split = pool && pool->num_threads() > 1 && 2.0 * double(g.N * g.O * P) * double(K) >= double(1 << 20);
  auto run = [&](int64_t n, auto&& body) {
    if (split && n > 1)
      pool->parallel_for(n, body);
    else
      body(0, n);
  };
  // The padded image, one plane per item: zeros where the padding is
  // (rows above and below, columns left and right), the input inside.
  // Split as the sums are, so that each thread pads the planes of the
  // images it then reads (one thread padding all of them for both cost
  // resnet_small 5% at two threads).
  if (copy) {
    static_assert(sizeof(T) == sizeof(float), "the rows are copied as 32-bit lanes");
    auto pad = [&](int64_t begin, int64_t end) {
      float* out = reinterpret_cast<float*>(xp);
      if (parts)
        return part_runs(g, *parts, begin, end, [&](const float* src, int64_t p, int64_t count) {
          pad_planes(src, count, g.H, g.W, g.ph, g.pw, Hp, Wp, out + p * Hp * Wp);
        });
      pad_planes(reinterpret_cast<const float*>(x) + begin * g.H * g.W, end - begin, g.H, g.W, g.ph, g.pw, Hp, Wp,
                 out + begin * Hp * Wp);
    };
    run(g.N * g.C, pad);
  }
  if (!packed) pack_weights(w, g.O, g.groups, K, kLanes, scratch.data(), split ? pool : nullptr);
  const T* wt = packed ? packed : scratch.data();
  const T* image = copy ? xp : x;
  if constexpr (std::is_same_v<Op, F32x8> && kLanes == 16) {
    if (P < 8 && kernel_isa() != KernelIsa::portable) {
      // Block tiles over the positions of all images (near-equal parts of
      // at most kPosMax) by near-equal runs of the blocks.
      const bool wide = kernel_isa() == KernelIsa::avx512;
      const int64_t T = g.N * P, ptiles = (T + kPosMax - 1) / kPosMax, np = (T + ptiles - 1) / ptiles;
      const int64_t bmax = block_max(wide, int(np)), bgroups = (blocks + bmax - 1) / bmax;
      const int64_t ob = (blocks + bgroups - 1) / bgroups;
      const BlockTiles& table = block_tiles();
      run(g.groups * ptiles * bgroups, [&](int64_t begin, int64_t end) {
        for (Digits<3> r({bgroups, ptiles, g.groups}, begin); begin < end; ++begin, r.next()) {
          int64_t bg = r.d[0], t = r.d[1], gi = r.d[2];
          int64_t b0 = bg * ob, nb = std::min(ob, blocks - b0), q0 = t * np, cnt = std::min(np, T - q0);
          const float* px[kPosMax];
          int64_t yoff[kPosMax];
          int64_t n = q0 / P, p = q0 % P, oh = p / g.OW, ow = p % g.OW;
          for (int64_t j = 0; j < cnt; ++j) {
            px[j] = image + (n * g.C + gi * Cg) * Hp * Wp + oh * g.sh * Wp + ow * g.sw;
            yoff[j] = n * g.O * P + p;
            if (++p == P)
              p = 0, oh = 0, ow = 0, ++n;  // the next position, maybe of the next image
            else if (++ow == g.OW)
              ow = 0, ++oh;
          }
          int64_t o0 = gi * Og + b0 * kLanes, oc = std::min<int64_t>(nb * kLanes, Og - b0 * kLanes);
          table.f[wide][nb - 1][cnt - 1](px, yoff, Cg, g.KH, g.KW, Hp * Wp, g.dh * Wp, g.dw,
                                         wt + (gi * blocks + b0) * K * kLanes, K * kLanes, y + o0 * P, P, oc);
        }
      });
      return;
    }
    if (kernel_isa() == KernelIsa::avx512 && (g.sw == 1 || g.sw == 2)) {
      // Tiles of whole output rows (two at a time when a row has at most
      // 7 positions), or of a row's columns in near-equal parts of at
      // most 14; two 16-channel blocks per tile where there are two.
      const int R = g.OW * 2 <= kRowMax ? 2 : 1;
      const int64_t col_tiles = (g.OW + kRowMax - 1) / kRowMax, width = (g.OW + col_tiles - 1) / col_tiles;
      const int64_t row_groups = (g.OH + R - 1) / R, pairs = (blocks + 1) / 2;
      const int64_t per_image = pairs * row_groups * col_tiles;
      const RowTiles& table = row_tiles();
      run(g.N * g.groups * per_image, [&](int64_t begin, int64_t end) {
        // Items by rows, then channel pairs, where an image's input is at
        // least as large as the weights (the early layers: a thread reads
        // mostly the rows it wrote the layer before, and each reads all
        // the weights, which are few); else by pairs, then rows (a thread
        // reads half the weights, each pair's from L2 for every row).
        // ResNet-50 at two threads: 51.4 -> 49.4 ms.
        const bool rows_outer = g.C * g.H * g.W >= g.O * K;
        const int64_t inner = rows_outer ? pairs : row_groups, outer = rows_outer ? row_groups : pairs;
        for (Digits<5> r({col_tiles, inner, outer, g.groups, g.N}, begin); begin < end; ++begin, r.next()) {
          int64_t ct = r.d[0], rg = rows_outer ? r.d[2] : r.d[1], bp = rows_outer ? r.d[1] : r.d[2], gi = r.d[3];
          int64_t n = r.d[4];
          int64_t ow0 = ct * width, w = std::min(width, g.OW - ow0), oh0 = rg * R;
          int rows = int(std::min<int64_t>(R, g.OH - oh0)), ob = int(std::min<int64_t>(2, blocks - 2 * bp));
          int64_t o0 = gi * Og + 2 * bp * kLanes, oc = std::min<int64_t>(2 * kLanes, Og - 2 * bp * kLanes);
          const T* x0 = image + (n * g.C + gi * Cg) * Hp * Wp + oh0 * g.sh * Wp + ow0 * g.sw;
          table.f[ob - 1][rows - 1][w - 1][g.sw - 1](x0, g.sh * Wp, Cg, g.KH, g.KW, Hp * Wp, g.dh * Wp, g.dw,
                                                     wt + (gi * blocks + 2 * bp) * K * kLanes, K * kLanes,
                                                     y + (n * g.O + o0) * P + oh0 * g.OW + ow0, P, g.OW, oc);
        }
      });
      return;
    }
  }
  if constexpr (std::is_same_v<Op, F32x8> && kLanes == 8) {
    if (kernel_isa() == KernelIsa::avx512 && (g.sw == 1 || g.sw == 2)) {
      // Tiles of up to 48 consecutive positions of one output row, in near-equal parts.
      const int64_t col_tiles = (g.OW + 47) / 48, width = (g.OW + col_tiles - 1) / col_tiles;
      const int64_t per_image = blocks * g.OH * col_tiles;
      run(g.N * g.groups * per_image, [&](int64_t begin, int64_t end) {
        for (Digits<5> r({col_tiles, g.OH, blocks, g.groups, g.N}, begin); begin < end; ++begin, r.next()) {
          int64_t ct = r.d[0], oh = r.d[1], b = r.d[2], gi = r.d[3], n = r.d[4];
          int64_t ow0 = ct * width, count = std::min(width, g.OW - ow0);
          int64_t o0 = gi * Og + b * kLanes, oc = std::min<int64_t>(kLanes, Og - b * kLanes);
          const T* x0 = image + (n * g.C + gi * Cg) * Hp * Wp + oh * g.sh * Wp + ow0 * g.sw;
          const T* wb = wt + (gi * blocks + b) * K * kLanes;
          T* yb = y + (n * g.O + o0) * P + oh * g.OW + ow0;
          int vectors = int((count + 15) / 16);
          auto f = g.sw == 1 ? (vectors == 1   ? lane_tile<1, 1>
                                : vectors == 2 ? lane_tile<2, 1>
                                               : lane_tile<3, 1>)
                             : (vectors == 1   ? lane_tile<1, 2>
                                : vectors == 2 ? lane_tile<2, 2>
                                               : lane_tile<3, 2>);
          f(x0, Cg, g.KH, g.KW, Hp * Wp, g.dh * Wp, g.dw, wb, yb, P, oc, count);
        }
      });
      return;
    }
  }
  const int64_t tiles = (P + kPos - 1) / kPos;
  const int64_t items = g.N * g.groups * blocks * tiles;
  auto body = [&](int64_t begin, int64_t end) {
    for (Digits<4> r({tiles, blocks, g.groups, g.N}, begin); begin < end; ++begin, r.next()) {
      int64_t t = r.d[0], b = r.d[1], gi = r.d[2], n = r.d[3];
      const T* xg = image + (n * g.C + gi * Cg) * Hp * Wp;
      int64_t p0 = t * kPos;
      int nw = int(std::min<int64_t>(kPos, P - p0));
      const T* px[kPos];
      // One division for the tile's first position, then steps along the
      // row (a division per position cost as much as a small conv's sums).
      int64_t oh = p0 / g.OW, ow = p0 - oh * g.OW;
      for (int j = 0; j < kPos; ++j) {
        px[j] = xg + oh * g.sh * Wp + ow * g.sw;
        if (j + 1 < nw && ++ow == g.OW) ow = 0, ++oh;  // a partial tile repeats its last position
      }
      int64_t o0 = gi * Og + b * kLanes, oc = std::min<int64_t>(kLanes, Og - b * kLanes);
      tile<Op, NV, NP>(px, Cg, g.KH, g.KW, Hp * Wp, g.dh * Wp, g.dw, wt + (gi * blocks + b) * K * kLanes,
                       y + (n * g.O + o0) * P + p0, P, oc, nw);
    }
  };
  run(items, body);
}
// Layers of at most 8 output channels per group take the 8-channel tile.
template <typename Op>
void direct(const Conv2dGeometry& g, const typename Op::T* x, const typename Op::T* w, const typename Op::T* packed,
            typename Op::T* y, std::vector<typename Op::T>& scratch, ThreadPool* pool,
            const ChannelParts* parts = nullptr) {
  if (conv2d_direct_lanes(g.O / g.groups) == 8) return direct_tiles<Op, 1, 8>(g, x, w, packed, y, scratch, pool, parts);
  direct_tiles<Op, 2, 6>(g, x, w, packed, y, scratch, pool, parts);
}
#endif

// Without AVX2: the same sums in loops, every tap (the padding's as
// zeros) in order. weight(o, k): output channel o's weight k of (c, kh,
// kw); madd(w, x, acc): the step the vector code takes.
template <typename T, typename Weight, typename Madd>
void direct_loops(const Conv2dGeometry& g, const T* x, Weight weight, Madd madd, T* y, ThreadPool* pool) {
  const int64_t Cg = g.C / g.groups, Og = g.O / g.groups;
  auto body = [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {  // r: (n, o)
      int64_t n = r / g.O, o = r % g.O, gi = o / Og;
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          T acc = T(0);
          for (int64_t c = 0, k = 0; c < Cg; ++c)
            for (int64_t kh = 0; kh < g.KH; ++kh)
              for (int64_t kw = 0; kw < g.KW; ++kw, ++k) {
                int64_t ih = oh * g.sh + kh * g.dh - g.ph, iw = ow * g.sw + kw * g.dw - g.pw;
                bool inside = ih >= 0 && ih < g.H && iw >= 0 && iw < g.W;
                acc = madd(weight(o, k), inside ? x[((n * g.C + gi * Cg + c) * g.H + ih) * g.W + iw] : T(0), acc);
              }
          y[(r * g.OH + oh) * g.OW + ow] = acc;
        }
    }
  };
  if (pool && pool->num_threads() > 1)
    pool->parallel_for(g.N * g.O, body);
  else
    body(0, g.N * g.O);
}

// i32, wrapping as the vector code's (and a loop nest's) arithmetic does.
void direct_portable(const Conv2dGeometry& g, const int32_t* x, const int32_t* w, int32_t* y, ThreadPool* pool) {
  const int64_t K = g.C / g.groups * g.KH * g.KW;
  direct_loops(
      g, x, [&](int64_t o, int64_t k) { return w[o * K + k]; },
      [](int32_t a, int32_t b, int32_t acc) { return int32_t(uint32_t(acc) + uint32_t(a) * uint32_t(b)); }, y, pool);
}

}  // namespace

void conv2d_direct_f32(const Conv2dGeometry& g, const float* x, const float* w, float* y, std::vector<float>& scratch,
                       ThreadPool* pool) {
#ifdef RELAX_X86_KERNELS
  if (conv2d_direct_available()) return direct<F32x8>(g, x, w, nullptr, y, scratch, pool);
#endif
  (void)g, (void)x, (void)w, (void)y, (void)scratch, (void)pool;
  rt_fail("conv2d_direct_f32: this CPU has no AVX2 and FMA (the caller asks conv2d_direct_available first)");
}

int64_t conv2d_direct_lanes(int64_t Og) { return Og <= 8 ? 8 : 16; }

int64_t conv2d_packed_size(int64_t O, int64_t groups, int64_t K) {
  int64_t L = conv2d_direct_lanes(O / groups);
  return groups * ((O / groups + L - 1) / L) * K * L;
}

void conv2d_pack_weights_f32(const float* w, int64_t O, int64_t groups, int64_t K, float* out, ThreadPool* pool) {
  pack_weights(w, O, groups, K, conv2d_direct_lanes(O / groups), out, pool);
}

void conv2d_direct_packed_f32(const Conv2dGeometry& g, const float* x, const float* packed, float* y,
                              std::vector<float>& scratch, ThreadPool* pool, bool vector) {
#ifdef RELAX_X86_KERNELS
  if (vector && conv2d_direct_available()) return direct<F32x8>(g, x, nullptr, packed, y, scratch, pool);
#endif
  (void)vector;
  // Without AVX2: the same chains of fused multiply-adds in loops (the
  // padding's zeros included), reading the packed layout.
  const int64_t Og = g.O / g.groups, K = g.C / g.groups * g.KH * g.KW, L = conv2d_direct_lanes(Og);
  const int64_t blocks = (Og + L - 1) / L;
  (void)scratch;
  direct_loops(
      g, x,
      [&](int64_t o, int64_t k) {
        int64_t gi = o / Og, og = o % Og;
        return packed[((gi * blocks + og / L) * K + k) * L + og % L];
      },
      [](float a, float b, float acc) { return std::fma(a, b, acc); }, y, pool);
}

void gather_channel_parts(const Conv2dGeometry& g, const ChannelParts& x, int64_t begin, int64_t end, float* out) {
  const int64_t plane = g.H * g.W;
  part_runs(g, x, begin, end, [&](const float* src, int64_t p, int64_t count) {
    std::copy(src, src + count * plane, out + (p - begin) * plane);
  });
}

void conv2d_direct_packed_parts_f32(const Conv2dGeometry& g, const ChannelParts& x, const float* packed, float* y,
                                    std::vector<float>& scratch, ThreadPool* pool, bool vector) {
#ifdef RELAX_X86_KERNELS
  if (vector && conv2d_direct_available()) return direct<F32x8>(g, nullptr, nullptr, packed, y, scratch, pool, &x);
#endif
  // The loops read x whole: the parts side by side first.
  std::vector<float> whole(size_t(g.N * g.C * g.H * g.W));
  gather_channel_parts(g, x, 0, g.N * g.C, whole.data());
  conv2d_direct_packed_f32(g, whole.data(), packed, y, scratch, pool, false);
}

void conv2d_direct_i32(const Conv2dGeometry& g, const int32_t* x, const int32_t* w, int32_t* y,
                       std::vector<int32_t>& scratch, ThreadPool* pool) {
#ifdef RELAX_X86_KERNELS
  if (conv2d_direct_available()) return direct<I32x8>(g, x, w, nullptr, y, scratch, pool);
#endif
  (void)scratch;
  direct_portable(g, x, w, y, pool);
}

void conv2d_loops_i32(const Conv2dGeometry& g, const int32_t* x, const int32_t* w, int32_t* y, ThreadPool* pool) {
  direct_portable(g, x, w, y, pool);
}

}  // namespace relax::rt
