#include "runtime/conv_direct.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>

#include "runtime/cpu_isa.h"
#include "runtime/error.h"
#include "runtime/thread_pool.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define RELAX_CONV_X86 1
#endif

namespace relax::rt {
namespace {

#ifdef RELAX_CONV_X86
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
__attribute__((target("avx512f"))) void row_tile(const float* x0, int64_t xrow, int64_t Cg, int64_t KH, int64_t KW,
                                                 int64_t cstride, int64_t rstride, int64_t dw, const float* wt,
                                                 int64_t wblock, float* yb, int64_t plane, int64_t yrow, int64_t oc) {
  constexpr int NP = R * W;
  __m512 acc[OB][NP];
#pragma GCC unroll 32
  for (int b = 0; b < OB; ++b)
#pragma GCC unroll 32
    for (int j = 0; j < NP; ++j) acc[b][j] = _mm512_setzero_ps();
  const float* x1 = x0 + (R > 1 ? xrow : 0);
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
// 8-lane blocks) at column stride 1: output positions go in the lanes
// instead, V vectors of 16 consecutive positions of one output row by the
// block's 8 channels, 8 * V sums in registers. Per tap: V loads of the
// padded input row (the positions' inputs are consecutive) and 8 weight
// broadcasts feed 8 * V fused multiply-adds; the sums are stored as rows
// (NCHW), not scattered. `count`: the tile's positions (the last vector
// masked). x0: the row's first input for channel 0, tap (0, 0).
template <int V>
__attribute__((target("avx512f"))) void lane_tile(const float* x0, int64_t Cg, int64_t KH, int64_t KW, int64_t cstride,
                                                  int64_t rstride, int64_t dw, const float* wt, float* yb,
                                                  int64_t plane, int64_t oc, int64_t count) {
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
        for (int v = 0; v < V; ++v)
          xv[v] = v + 1 < V ? _mm512_loadu_ps(px + 16 * v) : _mm512_maskz_loadu_ps(last, px + 16 * v);
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
  if (KH == 1 && KW == 1) {  // one loop over the channels: most of these layers are 1x1
    for (int64_t ci = 0, off = 0; ci < Cg; ++ci, off += cstride, wt += 16)
      block_tap_avx512<OB, NP>(acc, p, off, wt, wblock);
  } else {
    for (int64_t ci = 0; ci < Cg; ++ci)
      for (int64_t kh = 0; kh < KH; ++kh)
        for (int64_t kw = 0, off = ci * cstride + kh * rstride; kw < KW; ++kw, off += dw, wt += 16)
          block_tap_avx512<OB, NP>(acc, p, off, wt, wblock);
  }
  alignas(64) float t[NP][16];
  for (int b = 0; b < OB; ++b) {
#pragma GCC unroll 4
    for (int j = 0; j < NP; ++j) _mm512_store_ps(t[j], acc[b][j]);
    for (int64_t l = 0; l < std::min<int64_t>(16, oc - 16 * b); ++l)
      for (int j = 0; j < NP; ++j) yb[(16 * b + l) * plane + yoff[j]] = t[j][l];
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
  if (KH == 1 && KW == 1) {
    for (int64_t ci = 0, off = 0; ci < Cg; ++ci, off += cstride, wt += 16)
      block_tap_avx2<OB, NP>(acc, p, off, wt, wblock);
  } else {
    for (int64_t ci = 0; ci < Cg; ++ci)
      for (int64_t kh = 0; kh < KH; ++kh)
        for (int64_t kw = 0, off = ci * cstride + kh * rstride; kw < KW; ++kw, off += dw, wt += 16)
          block_tap_avx2<OB, NP>(acc, p, off, wt, wblock);
  }
  alignas(32) float t[NP][16];
  for (int b = 0; b < OB; ++b) {
#pragma GCC unroll 4
    for (int j = 0; j < NP; ++j) _mm256_store_ps(t[j], acc[b][j][0]), _mm256_store_ps(t[j] + 8, acc[b][j][1]);
    for (int64_t l = 0; l < std::min<int64_t>(16, oc - 16 * b); ++l)
      for (int j = 0; j < NP; ++j) yb[(16 * b + l) * plane + yoff[j]] = t[j][l];
  }
}

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
#ifdef RELAX_CONV_X86
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return ok;
#else
  return false;
#endif
}

namespace {

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

#ifdef RELAX_CONV_X86
// `packed`: the weights as pack_weights lays them out for this tile's
// lanes, or null: then they are packed here, into scratch.
template <typename Op, int NV, int NP>
void direct_tiles(const Conv2dGeometry& g, const typename Op::T* x, const typename Op::T* w,
                  const typename Op::T* packed, typename Op::T* y, std::vector<typename Op::T>& scratch,
                  ThreadPool* pool) {
  using T = typename Op::T;
  constexpr int kLanes = 8 * NV, kPos = NP;
  const int64_t Cg = g.C / g.groups, Og = g.O / g.groups, K = Cg * g.KH * g.KW, P = g.OH * g.OW;
  const int64_t blocks = (Og + kLanes - 1) / kLanes;
  // The padded image: every tap of every output position lies inside it.
  const int64_t Hp = std::max(g.H + g.ph, (g.OH - 1) * g.sh + (g.KH - 1) * g.dh + 1);
  const int64_t Wp = std::max(g.W + g.pw, (g.OW - 1) * g.sw + (g.KW - 1) * g.dw + 1);
  // scratch: the packed weights unless given, then the padded input (N,
  // C, Hp, Wp). Without padding, when every window lies inside the image,
  // x itself.
  const bool copy = g.ph != 0 || g.pw != 0 || Hp != g.H || Wp != g.W;
  const size_t wsize = packed ? 0 : size_t(g.groups * blocks * K * kLanes);
  scratch.resize(wsize + (copy ? size_t(g.N * g.C * Hp * Wp) : 0));
  T* xp = copy ? scratch.data() + wsize : nullptr;
  // Both cores where the work pays for waking the second.
  const bool split = pool && pool->num_threads() > 1 && 2.0 * double(g.N * g.O * P) * double(K) >= double(1 << 18);
  auto run = [&](int64_t n, auto&& body) {
    if (split && n > 1)
      pool->parallel_for(n, body);
    else
      body(0, n);
  };
  // The padded image, one plane per item: zeros where the padding is
  // (rows above and below, columns left and right), the input inside.
  if (copy)
    run(g.N * g.C, [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) {
        T* plane = xp + c * Hp * Wp;
        std::fill(plane, plane + g.ph * Wp, T(0));
        std::fill(plane + (g.ph + g.H) * Wp, plane + Hp * Wp, T(0));
        for (int64_t h = 0; h < g.H; ++h) {
          T* row = plane + (h + g.ph) * Wp;
          std::fill(row, row + g.pw, T(0));
          std::copy(x + (c * g.H + h) * g.W, x + (c * g.H + h + 1) * g.W, row + g.pw);
          std::fill(row + g.pw + g.W, row + Wp, T(0));
        }
      }
    });
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
        for (int64_t r = begin; r < end; ++r) {
          int64_t bg = r % bgroups, t = r / bgroups % ptiles, gi = r / (bgroups * ptiles);
          int64_t b0 = bg * ob, nb = std::min(ob, blocks - b0), q0 = t * np, cnt = std::min(np, T - q0);
          const float* px[kPosMax];
          int64_t yoff[kPosMax];
          for (int64_t j = 0; j < cnt; ++j) {
            int64_t n = (q0 + j) / P, p = (q0 + j) % P, oh = p / g.OW, ow = p % g.OW;
            px[j] = image + (n * g.C + gi * Cg) * Hp * Wp + oh * g.sh * Wp + ow * g.sw;
            yoff[j] = n * g.O * P + p;
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
        for (int64_t r = begin; r < end; ++r) {
          int64_t ct = r % col_tiles, rg = r / col_tiles % row_groups, bp = r / (col_tiles * row_groups) % pairs,
                  ng = r / per_image, gi = ng % g.groups, n = ng / g.groups;
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
    if (kernel_isa() == KernelIsa::avx512 && g.sw == 1) {
      // Tiles of up to 48 consecutive positions of one output row, in near-equal parts.
      const int64_t col_tiles = (g.OW + 47) / 48, width = (g.OW + col_tiles - 1) / col_tiles;
      const int64_t per_image = blocks * g.OH * col_tiles;
      run(g.N * g.groups * per_image, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          int64_t ct = r % col_tiles, oh = r / col_tiles % g.OH, b = r / (col_tiles * g.OH) % blocks,
                  ng = r / per_image, gi = ng % g.groups, n = ng / g.groups;
          int64_t ow0 = ct * width, count = std::min(width, g.OW - ow0);
          int64_t o0 = gi * Og + b * kLanes, oc = std::min<int64_t>(kLanes, Og - b * kLanes);
          const T* x0 = image + (n * g.C + gi * Cg) * Hp * Wp + oh * g.sh * Wp + ow0;
          const T* wb = wt + (gi * blocks + b) * K * kLanes;
          T* yb = y + (n * g.O + o0) * P + oh * g.OW + ow0;
          int vectors = int((count + 15) / 16);
          auto f = vectors == 1 ? lane_tile<1> : vectors == 2 ? lane_tile<2> : lane_tile<3>;
          f(x0, Cg, g.KH, g.KW, Hp * Wp, g.dh * Wp, g.dw, wb, yb, P, oc, count);
        }
      });
      return;
    }
  }
  const int64_t tiles = (P + kPos - 1) / kPos;
  const int64_t items = g.N * g.groups * blocks * tiles;
  auto body = [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      int64_t t = r % tiles, b = r / tiles % blocks, gi = r / (tiles * blocks) % g.groups,
              n = r / (tiles * blocks * g.groups);
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
            typename Op::T* y, std::vector<typename Op::T>& scratch, ThreadPool* pool) {
  if (conv2d_direct_lanes(g.O / g.groups) == 8) return direct_tiles<Op, 1, 8>(g, x, w, packed, y, scratch, pool);
  direct_tiles<Op, 2, 6>(g, x, w, packed, y, scratch, pool);
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
#ifdef RELAX_CONV_X86
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
#ifdef RELAX_CONV_X86
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

void conv2d_direct_i32(const Conv2dGeometry& g, const int32_t* x, const int32_t* w, int32_t* y,
                       std::vector<int32_t>& scratch, ThreadPool* pool) {
#ifdef RELAX_CONV_X86
  if (conv2d_direct_available()) return direct<I32x8>(g, x, w, nullptr, y, scratch, pool);
#endif
  (void)scratch;
  direct_portable(g, x, w, y, pool);
}

void conv2d_loops_i32(const Conv2dGeometry& g, const int32_t* x, const int32_t* w, int32_t* y, ThreadPool* pool) {
  direct_portable(g, x, w, y, pool);
}

namespace {

// even[k] = in[2k], odd[k] = in[2k + 1] for the n elements of `in`.
#ifdef RELAX_CONV_X86
__attribute__((target("avx2,fma"))) void deinterleave2(const float* in, int64_t n, float* even, float* odd) {
  int64_t k = 0;
  for (; 2 * k + 16 <= n; k += 8) {
    __m256 a = _mm256_loadu_ps(in + 2 * k), b = _mm256_loadu_ps(in + 2 * k + 8);
    // Per 128-bit half: (a0 a2 b0 b2 | a4 a6 b4 b6), then the 64-bit pairs in order.
    __m256 e = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)), o = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
    _mm256_storeu_ps(even + k, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), _MM_SHUFFLE(3, 1, 2, 0))));
    _mm256_storeu_ps(odd + k, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), _MM_SHUFFLE(3, 1, 2, 0))));
  }
  if (2 * k + 8 <= n) {  // 4 pairs
    __m256 a = _mm256_loadu_ps(in + 2 * k);
    __m256 e = _mm256_permutevar8x32_ps(a, _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7));
    _mm_storeu_ps(even + k, _mm256_castps256_ps128(e));
    _mm_storeu_ps(odd + k, _mm256_extractf128_ps(e, 1));
    k += 4;
  }
  for (; 2 * k < n; ++k) {
    even[k] = in[2 * k];
    if (2 * k + 1 < n) odd[k] = in[2 * k + 1];
  }
}
#endif

// The padded columns a depthwise conv's outputs read.
int64_t padded_width(const Conv2dGeometry& g) { return (g.OW - 1) * g.sw + (g.KW - 1) * g.dw + 1; }

// The depthwise kernel's input buffer: rows [r0, r0 + rows) of the padded
// image of one channel (padded row r is input row r - ph), each row split
// into sw phases of `pitch` elements (phase q holds padded columns
// j * sw + q), zeros where the padding is and past the row's end, so that
// vector loads past the last output stay inside and read zeros.
struct PhasedRows {
  std::vector<float> buf;
  int64_t pitch, row_len;  // row_len = sw * pitch

  explicit PhasedRows(const Conv2dGeometry& g)
      : pitch((padded_width(g) + g.sw - 1) / g.sw + 16), row_len(g.sw * pitch) {}

  // avx2: the CPU has AVX2 (stride 2 splits its columns with shuffles).
  void fill(const Conv2dGeometry& g, const float* plane, int64_t r0, int64_t rows, bool avx2) {
    const int64_t Wp = padded_width(g);
    // Padded column j reads input column j - pw; only those inside both.
    const int64_t jlo = std::max<int64_t>(0, g.pw), jhi = std::max(jlo, std::min<int64_t>(Wp, g.W + g.pw));
    if (buf.size() < size_t(rows * row_len)) buf.resize(size_t(rows * row_len));
    // A small buffer is cleared at once; a large one only where no input goes.
    const bool cleared = rows * row_len <= 4096;
    if (cleared) std::fill(buf.data(), buf.data() + rows * row_len, 0.0f);
    for (int64_t r = 0; r < rows; ++r) {
      int64_t ih = r0 + r - g.ph;
      float* out = buf.data() + r * row_len;
      if (ih < 0 || ih >= g.H) {
        if (!cleared) std::fill(out, out + row_len, 0.0f);
        continue;
      }
      const float* in = plane + ih * g.W;
      // Each phase: zeros, its columns in [jlo, jhi), zeros to its end.
      for (int64_t q = 0; q < g.sw && !cleared; ++q) {
        int64_t lo = (jlo - q + g.sw - 1) / g.sw, hi = std::max(lo, (jhi - q + g.sw - 1) / g.sw);
        std::fill(out + q * pitch, out + q * pitch + lo, 0.0f);
        std::fill(out + q * pitch + hi, out + (q + 1) * pitch, 0.0f);
      }
      if (g.sw == 1) {
        std::copy(in + jlo - g.pw, in + jhi - g.pw, out + jlo);
        continue;
      }
#ifdef RELAX_CONV_X86
      if (g.sw == 2 && avx2) {
        // Pairs of columns from an even padded column on: the even ones to phase 0, the odd to phase 1.
        int64_t j = jlo;
        if (j % 2 && j < jhi) out[pitch + j / 2] = in[j - g.pw], ++j;
        deinterleave2(in + j - g.pw, jhi - j, out + j / 2, out + pitch + j / 2);
        continue;
      }
#endif
      (void)avx2;
      for (int64_t q = 0; q < g.sw; ++q) {  // phase q: padded columns j = i * sw + q in [jlo, jhi)
        float* dst = out + q * pitch;
        for (int64_t i = (jlo - q + g.sw - 1) / g.sw, j = i * g.sw + q; j < jhi; ++i, j += g.sw) dst[i] = in[j - g.pw];
      }
    }
  }
  // Where each tap (kh, kw) reads for output (0, 0), from the buffer's start.
  void tap_offsets(const Conv2dGeometry& g, std::vector<int64_t>& off) const {
    off.resize(size_t(g.KH * g.KW));
    for (int64_t kh = 0; kh < g.KH; ++kh)
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        int64_t c = kw * g.dw;
        off[size_t(kh * g.KW + kw)] = kh * g.dh * row_len + (c % g.sw) * pitch + c / g.sw;
      }
  }
};

// Output rows [oh0, oh1) of one output plane from its input rows in `in`
// (whose first row is padded row oh0 * sh); wk: the plane's KH * KW weights.
// toff: the taps' offsets (PhasedRows::tap_offsets).
void depthwise_rows_plain(const Conv2dGeometry& g, const PhasedRows& in, const int64_t* toff, const float* wk,
                          float* yp, int64_t oh0, int64_t oh1) {
  const int64_t taps = g.KH * g.KW;
  for (int64_t oh = oh0; oh < oh1; ++oh) {
    float* yr = yp + oh * g.OW;
    const float* row = in.buf.data() + (oh - oh0) * g.sh * in.row_len;
    for (int64_t ow = 0; ow < g.OW; ++ow) yr[ow] = 0.0f;
    for (int64_t t = 0; t < taps; ++t) {
      const float* src = row + toff[t];
      for (int64_t ow = 0; ow < g.OW; ++ow) yr[ow] = std::fma(wk[t], src[ow], yr[ow]);
    }
  }
}

#ifdef RELAX_CONV_X86
// R rows of up to B vectors of 8 outputs each, from src (the first row's
// first tap input at the block's first column; the next row's is rstride
// further): every tap, then the stores (each row's last vector masked to
// `tail` lanes when tail < 8). Several rows at once keep narrow rows' sums
// in independent registers.
template <int R, int B>
__attribute__((target("avx2,fma"), always_inline)) inline void depthwise_block(const float* src, int64_t rstride,
                                                                               const int64_t* toff, int64_t taps,
                                                                               const float* wk, float* yb,
                                                                               int64_t ystride, int tail) {
  __m256 acc[R][B];
  for (int r = 0; r < R; ++r)
    for (int b = 0; b < B; ++b) acc[r][b] = _mm256_setzero_ps();
  for (int64_t t = 0; t < taps; ++t) {
    const float* p = src + toff[t];
    const __m256 wv = _mm256_broadcast_ss(wk + t);
    for (int r = 0; r < R; ++r)
      for (int b = 0; b < B; ++b) acc[r][b] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(p + r * rstride + 8 * b), acc[r][b]);
  }
  const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(tail), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  for (int r = 0; r < R; ++r) {
    float* yr = yb + r * ystride;
    for (int b = 0; b + 1 < B; ++b) _mm256_storeu_ps(yr + 8 * b, acc[r][b]);
    if (tail == 8)
      _mm256_storeu_ps(yr + 8 * (B - 1), acc[r][B - 1]);
    else
      _mm256_maskstore_ps(yr + 8 * (B - 1), mask, acc[r][B - 1]);
  }
}

// Columns [ow0, OW) (at most 32) of R rows from `row` (the first row's buffer row).
template <int R>
__attribute__((target("avx2,fma"), always_inline)) inline void depthwise_tail(const float* row, int64_t rstride,
                                                                              const int64_t* toff, int64_t taps,
                                                                              const float* wk, float* yr,
                                                                              int64_t ystride, int64_t left) {
  int tail = int((left - 1) % 8 + 1);
  switch ((left + 7) / 8) {
    case 1:
      return depthwise_block<R, 1>(row, rstride, toff, taps, wk, yr, ystride, tail);
    case 2:
      return depthwise_block<R, 2>(row, rstride, toff, taps, wk, yr, ystride, tail);
    case 3:
      return depthwise_block<R, 3>(row, rstride, toff, taps, wk, yr, ystride, tail);
    default:
      return depthwise_block<R, 4>(row, rstride, toff, taps, wk, yr, ystride, tail);
  }
}

// R rows from output row oh: their full blocks of 32 columns one row at a
// time, then the columns past them for the R rows at once.
template <int R>
__attribute__((target("avx2,fma"), always_inline)) inline void depthwise_row_group(const Conv2dGeometry& g,
                                                                                   const float* row, int64_t rstride,
                                                                                   const int64_t* toff, int64_t taps,
                                                                                   const float* wk, float* yr,
                                                                                   int64_t full, int64_t left) {
  for (int64_t r = 0; r < R; ++r)
    for (int64_t ow0 = 0; ow0 < full; ow0 += 32)
      depthwise_block<1, 4>(row + r * rstride + ow0, rstride, toff, taps, wk, yr + r * g.OW + ow0, g.OW, 8);
  if (left) depthwise_tail<R>(row + full, rstride, toff, taps, wk, yr + full, g.OW, left);
}

__attribute__((target("avx2,fma"))) void depthwise_rows_avx2(const Conv2dGeometry& g, const PhasedRows& in,
                                                             const int64_t* toff, const float* wk, float* yp,
                                                             int64_t oh0, int64_t oh1) {
  const int64_t taps = g.KH * g.KW, rstride = g.sh * in.row_len;
  const int64_t full = g.OW / 32 * 32, left = g.OW - full;
  // Rows at once for the columns past the full blocks of 32: 4 when they fit one vector, 2 when two.
  const int64_t R = left == 0 ? 1 : left <= 8 ? 4 : left <= 16 ? 2 : 1;
  for (int64_t oh = oh0; oh < oh1;) {
    const float* row = in.buf.data() + (oh - oh0) * rstride;
    float* yr = yp + oh * g.OW;
    if (R == 4 && oh + 4 <= oh1) {
      depthwise_row_group<4>(g, row, rstride, toff, taps, wk, yr, full, left);
      oh += 4;
    } else if (R >= 2 && oh + 2 <= oh1) {
      depthwise_row_group<2>(g, row, rstride, toff, taps, wk, yr, full, left);
      oh += 2;
    } else {
      depthwise_row_group<1>(g, row, rstride, toff, taps, wk, yr, full, left);
      ++oh;
    }
  }
}

// Small output planes (at most kSmallPlane positions: the last stages of
// a CNN on small inputs): no padded copy per channel, whose zeroing and
// splitting cost far more than the plane's few sums. Every tap's input
// offsets for the whole plane are computed once per call (the same for
// every channel), -1 where the tap reads padding; each channel is then a
// masked gather (zeros in the padding) and a fused multiply-add per tap
// and vector of positions: the same chains as the padded buffer's.
constexpr int64_t kSmallPlane = 64;

// off[t * stride + p]: tap t's input offset for output position p, or -1
// (padding, or a lane past the plane's P positions).
std::vector<int32_t> small_plane_offsets(const Conv2dGeometry& g, int64_t stride) {
  const int64_t taps = g.KH * g.KW;
  std::vector<int32_t> off(size_t(taps * stride), -1);
  for (int64_t kh = 0; kh < g.KH; ++kh)
    for (int64_t kw = 0; kw < g.KW; ++kw)
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          int64_t ih = oh * g.sh + kh * g.dh - g.ph, iw = ow * g.sw + kw * g.dw - g.pw;
          if (ih >= 0 && ih < g.H && iw >= 0 && iw < g.W)
            off[size_t((kh * g.KW + kw) * stride + oh * g.OW + ow)] = int32_t(ih * g.W + iw);
        }
  return off;
}

template <int V>
__attribute__((target("avx512f"))) void depthwise_plane_avx512(const float* plane, const float* wk, const int32_t* off,
                                                               int64_t taps, float* yp, int64_t P) {
  __m512 acc[V];
#pragma GCC unroll 4
  for (int v = 0; v < V; ++v) acc[v] = _mm512_setzero_ps();
  for (int64_t t = 0; t < taps; ++t, off += 16 * V) {
    const __m512 w = _mm512_set1_ps(wk[t]);
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      const __m512i idx = _mm512_loadu_si512(off + 16 * v);
      const __mmask16 in = _mm512_cmpge_epi32_mask(idx, _mm512_setzero_si512());
      // A tap wholly in the padding adds w * 0 without gathering (small planes under wide taps have many).
      const __m512 xv = in ? _mm512_mask_i32gather_ps(_mm512_setzero_ps(), in, idx, plane, 4) : _mm512_setzero_ps();
      acc[v] = _mm512_fmadd_ps(w, xv, acc[v]);
    }
  }
  const int64_t rest = P - 16 * (V - 1);
  const __mmask16 last = rest >= 16 ? __mmask16(0xffff) : __mmask16((1u << rest) - 1);
#pragma GCC unroll 4
  for (int v = 0; v < V; ++v) _mm512_mask_storeu_ps(yp + 16 * v, v + 1 < V ? __mmask16(0xffff) : last, acc[v]);
}

template <int V>
__attribute__((target("avx2,fma"))) void depthwise_plane_avx2(const float* plane, const float* wk, const int32_t* off,
                                                              int64_t taps, float* yp, int64_t P) {
  __m256 acc[V];
#pragma GCC unroll 8
  for (int v = 0; v < V; ++v) acc[v] = _mm256_setzero_ps();
  for (int64_t t = 0; t < taps; ++t, off += 8 * V) {
    const __m256 w = _mm256_broadcast_ss(wk + t);
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) {
      const __m256i idx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(off + 8 * v));
      const __m256 in = _mm256_castsi256_ps(_mm256_cmpgt_epi32(idx, _mm256_set1_epi32(-1)));
      const __m256 xv = _mm256_movemask_ps(in) ? _mm256_mask_i32gather_ps(_mm256_setzero_ps(), plane, idx, in, 4)
                                               : _mm256_setzero_ps();
      acc[v] = _mm256_fmadd_ps(w, xv, acc[v]);
    }
  }
  alignas(32) float t[8 * V];
#pragma GCC unroll 8
  for (int v = 0; v < V; ++v) _mm256_store_ps(t + 8 * v, acc[v]);
  std::copy(t, t + P, yp);
}

using DepthwisePlane = void (*)(const float*, const float*, const int32_t*, int64_t, float*, int64_t);

// The plane kernel for P positions and the lanes its offsets are padded to.
std::pair<DepthwisePlane, int64_t> depthwise_plane_kernel(bool avx512, int64_t P) {
  if (avx512) {
    static constexpr DepthwisePlane f[] = {depthwise_plane_avx512<1>, depthwise_plane_avx512<2>,
                                           depthwise_plane_avx512<3>, depthwise_plane_avx512<4>};
    int64_t v = (P + 15) / 16;
    return {f[v - 1], 16 * v};
  }
  static constexpr DepthwisePlane f[] = {depthwise_plane_avx2<1>, depthwise_plane_avx2<2>, depthwise_plane_avx2<3>,
                                         depthwise_plane_avx2<4>, depthwise_plane_avx2<5>, depthwise_plane_avx2<6>,
                                         depthwise_plane_avx2<7>, depthwise_plane_avx2<8>};
  int64_t v = (P + 7) / 8;
  return {f[v - 1], 8 * v};
}
#endif

}  // namespace

void conv2d_depthwise_f32(const Conv2dGeometry& g, const float* x, const float* w, float* y, ThreadPool* pool,
                          bool vector) {
  if (g.C != g.groups || g.O % g.groups != 0)
    rt_fail("conv2d_depthwise_f32: needs one input channel per group, got ", g.C, " channels in ", g.groups, " groups");
  const int64_t Og = g.O / g.groups, planes = g.N * g.O;
  if (planes == 0 || g.OH == 0 || g.OW == 0) return;
  bool avx2 = false;
#ifdef RELAX_CONV_X86
  avx2 = vector && conv2d_direct_available();
#endif
  (void)vector;
  // Items: (plane, a chunk of its rows); chunks only when there are too few planes to share.
  const int threads = pool ? pool->num_threads() : 1;
  const int64_t chunks = planes >= 4 * threads ? 1 : std::min<int64_t>(g.OH, (4 * threads + planes - 1) / planes);
  const int64_t rows_per = (g.OH + chunks - 1) / chunks;
  const int64_t P = g.OH * g.OW;
  const double work = double(planes) * double(P) * double(g.KH * g.KW);
  const bool split = pool && threads > 1 && planes > 1 && work >= double(1 << 15);
#ifdef RELAX_CONV_X86
  if (avx2 && P <= kSmallPlane && g.H * g.W < (int64_t(1) << 31)) {
    auto [kernel, lanes] = depthwise_plane_kernel(kernel_isa() == KernelIsa::avx512, P);
    const std::vector<int32_t> off = small_plane_offsets(g, lanes);
    const int64_t taps = g.KH * g.KW;
    auto planes_body = [&](int64_t begin, int64_t end) {
      for (int64_t plane = begin; plane < end; ++plane) {
        int64_t n = plane / g.O, o = plane - n * g.O, c = Og == 1 ? o : o / Og;
        kernel(x + (n * g.C + c) * g.H * g.W, w + o * taps, off.data(), taps, y + plane * P, P);
      }
    };
    if (split)
      pool->parallel_for(planes, planes_body);
    else
      planes_body(0, planes);
    return;
  }
#endif
  std::vector<int64_t> toff;
  PhasedRows(g).tap_offsets(g, toff);
  auto body = [&](int64_t begin, int64_t end) {
    PhasedRows in(g);
    for (int64_t item = begin; item < end; ++item) {
      int64_t plane = chunks == 1 ? item : item / chunks, oh0 = chunks == 1 ? 0 : item % chunks * rows_per,
              oh1 = std::min(g.OH, oh0 + rows_per);
      if (oh0 >= oh1) continue;
      int64_t n = plane / g.O, o = plane - n * g.O, c = Og == 1 ? o : o / Og;
      in.fill(g, x + (n * g.C + c) * g.H * g.W, oh0 * g.sh, (oh1 - 1 - oh0) * g.sh + (g.KH - 1) * g.dh + 1, avx2);
      const float* wk = w + o * g.KH * g.KW;
      float* yp = y + plane * g.OH * g.OW;
#ifdef RELAX_CONV_X86
      if (avx2) {
        depthwise_rows_avx2(g, in, toff.data(), wk, yp, oh0, oh1);
        continue;
      }
#endif
      depthwise_rows_plain(g, in, toff.data(), wk, yp, oh0, oh1);
    }
  };
  const int64_t items = planes * chunks;
  if (pool && threads > 1 && items > 1 && work >= double(1 << 15))
    pool->parallel_for(items, body);
  else
    body(0, items);
}

namespace {

// G blocks of 16 channels from channel c0 at one output position, every
// tap in order: acc = fma(w, x or 0, acc). xs[t]: the tap's input
// (channels last; null in the padding); wt: the first block's weights.
#ifdef RELAX_CONV_X86
template <int G>
__attribute__((target("avx512f"))) void depthwise_channels_avx512(const float* const* xs, int64_t c0, int64_t taps,
                                                                  const float* wt, float* out) {
  __m512 acc[G];
#pragma GCC unroll 8
  for (int j = 0; j < G; ++j) acc[j] = _mm512_setzero_ps();
  for (int64_t t = 0; t < taps; ++t) {
    const float* x = xs[t];
#pragma GCC unroll 8
    for (int j = 0; j < G; ++j)
      acc[j] = _mm512_fmadd_ps(_mm512_loadu_ps(wt + (j * taps + t) * 16),
                               x ? _mm512_loadu_ps(x + c0 + 16 * j) : _mm512_setzero_ps(), acc[j]);
  }
#pragma GCC unroll 8
  for (int j = 0; j < G; ++j) _mm512_storeu_ps(out + 16 * j, acc[j]);
}
template <int G>
__attribute__((target("avx2,fma"))) void depthwise_channels_avx2(const float* const* xs, int64_t c0, int64_t taps,
                                                                 const float* wt, float* out) {
  __m256 acc[G][2];
#pragma GCC unroll 8
  for (int j = 0; j < G; ++j) acc[j][0] = acc[j][1] = _mm256_setzero_ps();
  for (int64_t t = 0; t < taps; ++t) {
    const float* x = xs[t];
#pragma GCC unroll 8
    for (int j = 0; j < G; ++j)
      for (int h = 0; h < 2; ++h)
        acc[j][h] = _mm256_fmadd_ps(_mm256_loadu_ps(wt + (j * taps + t) * 16 + 8 * h),
                                    x ? _mm256_loadu_ps(x + c0 + 16 * j + 8 * h) : _mm256_setzero_ps(), acc[j][h]);
  }
#pragma GCC unroll 8
  for (int j = 0; j < G; ++j) _mm256_storeu_ps(out + 16 * j, acc[j][0]), _mm256_storeu_ps(out + 16 * j + 8, acc[j][1]);
}
#endif

// The portable form: the same chains with std::fma.
void depthwise_channels_plain(const float* const* xs, int64_t taps, const float* wt, int64_t blocks, float* out) {
  for (int64_t j = 0; j < blocks; ++j)
    for (int l = 0; l < 16; ++l) {
      float acc = 0.0f;
      for (int64_t t = 0; t < taps; ++t)
        acc = std::fma(wt[(j * taps + t) * 16 + l], xs[t] ? xs[t][16 * j + l] : 0.0f, acc);
      out[16 * j + l] = acc;
    }
}

}  // namespace

int64_t conv2d_depthwise_packed_size(int64_t O, int64_t taps) { return (O + 15) / 16 * taps * 16; }

void conv2d_depthwise_pack_f32(const float* w, int64_t O, int64_t taps, float* out) {
  for (int64_t b = 0; b < (O + 15) / 16; ++b)
    for (int64_t t = 0; t < taps; ++t)
      for (int64_t l = 0; l < 16; ++l) {
        int64_t o = b * 16 + l;
        out[(b * taps + t) * 16 + l] = o < O ? w[o * taps + t] : 0.0f;
      }
}

void conv2d_depthwise_packed_f32(const Conv2dGeometry& g, const float* x, const float* packed, float* y,
                                 std::vector<float>& scratch, ThreadPool* pool, bool vector) {
  if (g.C != g.groups || g.O != g.C)
    rt_fail("conv2d_depthwise_packed_f32: needs one input channel and one output per group, got ", g.C, " channels, ",
            g.O, " outputs in ", g.groups, " groups");
  const int64_t C = g.C, HW = g.H * g.W, P = g.OH * g.OW, taps = g.KH * g.KW, blocks = (C + 15) / 16, Cp = 16 * blocks;
  if (g.N == 0 || C == 0 || P == 0) return;
  // Channels last: xt (N, H * W, Cp), yt (N, P, Cp); the lanes past C hold zeros in xt.
  scratch.resize(size_t(g.N * (HW + P) * Cp));
  float *xt = scratch.data(), *yt = xt + g.N * HW * Cp;
  for (int64_t n = 0; n < g.N; ++n) {
    float* xn = xt + n * HW * Cp;
    for (int64_t s = 0; s < HW; ++s) std::fill(xn + s * Cp + C, xn + (s + 1) * Cp, 0.0f);
    for (int64_t c = 0; c < C; ++c) {
      const float* src = x + (n * C + c) * HW;
      for (int64_t s = 0; s < HW; ++s) xn[s * Cp + c] = src[s];
    }
  }
  enum { kPlain, kAvx2, kAvx512 } isa = kPlain;
#ifdef RELAX_CONV_X86
  if (vector && conv2d_direct_available()) isa = kernel_isa() == KernelIsa::avx512 ? kAvx512 : kAvx2;
#endif
  (void)vector;
  auto body = [&](int64_t begin, int64_t end) {
    std::vector<const float*> xs(static_cast<size_t>(taps));
    for (int64_t r = begin; r < end; ++r) {  // r: (image, output position)
      int64_t n = r / P, p = r % P, oh = p / g.OW, ow = p % g.OW;
      for (int64_t kh = 0; kh < g.KH; ++kh)
        for (int64_t kw = 0; kw < g.KW; ++kw) {
          int64_t ih = oh * g.sh + kh * g.dh - g.ph, iw = ow * g.sw + kw * g.dw - g.pw;
          xs[size_t(kh * g.KW + kw)] =
              ih >= 0 && ih < g.H && iw >= 0 && iw < g.W ? xt + (n * HW + ih * g.W + iw) * Cp : nullptr;
        }
      float* out = yt + r * Cp;
      int64_t j = 0;
#ifdef RELAX_CONV_X86
      // Four blocks at once: four chains in flight.
      if (isa == kAvx512) {
        for (; j + 4 <= blocks; j += 4)
          depthwise_channels_avx512<4>(xs.data(), 16 * j, taps, packed + j * taps * 16, out + 16 * j);
        for (; j < blocks; ++j)
          depthwise_channels_avx512<1>(xs.data(), 16 * j, taps, packed + j * taps * 16, out + 16 * j);
      } else if (isa == kAvx2) {
        for (; j + 2 <= blocks; j += 2)
          depthwise_channels_avx2<2>(xs.data(), 16 * j, taps, packed + j * taps * 16, out + 16 * j);
        for (; j < blocks; ++j)
          depthwise_channels_avx2<1>(xs.data(), 16 * j, taps, packed + j * taps * 16, out + 16 * j);
      }
#endif
      if (j < blocks) {
        std::vector<const float*> shifted(xs);
        for (const float*& q : shifted)
          if (q) q += 16 * j;
        depthwise_channels_plain(shifted.data(), taps, packed + j * taps * 16, blocks - j, out + 16 * j);
      }
    }
  };
  const int64_t items = g.N * P;
  if (pool && pool->num_threads() > 1 && items > 1 && double(items) * double(Cp * taps) >= double(1 << 16))
    pool->parallel_for(items, body);
  else
    body(0, items);
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      float* dst = y + (n * C + c) * P;
      const float* src = yt + n * P * Cp + c;
      for (int64_t p = 0; p < P; ++p) dst[p] = src[p * Cp];
    }
}

}  // namespace relax::rt
