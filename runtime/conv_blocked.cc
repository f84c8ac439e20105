#include "runtime/conv_blocked.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "runtime/cpu_isa.h"
#include "runtime/epilogue.h"
#include "runtime/thread_pool.h"

namespace relax::rt {
namespace {

constexpr int64_t B = kChannelBlock;

bool is_depthwise(const Conv2dGeometry& g) { return g.groups > 1 && g.groups == g.C && g.O == g.C; }

// ---- dense (groups 1) ----------------------------------------------------------------

// One tile: NP output positions by OB output blocks. x: the first
// position's input at input block 0, taps (0, 0); S * 16 floats between
// the positions' inputs; xcb, xkh, xkw between input blocks, kernel rows
// and kernel columns. w: the first output block's weights, [Cb][KH][KW][16
// inputs][16 outputs]; the second block's wob floats on. y: the first
// position's output of the first block; the second block's yob floats on.
// A plain x (N, C, H, W) instead (the network's first convolution, whose
// few channels would pad to 16): xc floats between its channels, S
// between positions, and the last input block `last` channels long.
struct DenseTile {
  const float* x;
  int64_t xcb, xkh, xkw, Cb, KH, KW;
  const float* w;
  int64_t wob;
  float* y;
  int64_t yob;
  int64_t xc = 1, last = B;
};

// Every output is one chain of fused multiply-adds over (input block,
// kh, kw, input lane) in that order, in every form below.
void dense_tile_loops(const DenseTile& t, int ob_count, int np, int64_t xpos) {
  for (int b = 0; b < ob_count; ++b)
    for (int j = 0; j < np; ++j)
      for (int64_t o = 0; o < B; ++o) {
        float acc = 0.0f;
        const float* wp = t.w + b * t.wob + o;
        for (int64_t cb = 0; cb < t.Cb; ++cb)
          for (int64_t kh = 0; kh < t.KH; ++kh)
            for (int64_t kw = 0; kw < t.KW; ++kw, wp += B * B) {
              const float* xp = t.x + j * xpos + cb * t.xcb + kh * t.xkh + kw * t.xkw;
              const int64_t cn = cb + 1 == t.Cb ? t.last : B;
              for (int64_t c = 0; c < cn; ++c) acc = std::fma(wp[c * B], xp[c * t.xc], acc);
            }
        t.y[b * t.yob + j * B + o] = acc;
      }
}

#ifdef RELAX_X86_KERNELS
// P: a plain x (positions S floats apart, channels xc apart); else
// blocked (positions S * 16 apart, channels adjacent).
template <int OB, int NP, int S, bool P>
__attribute__((target("avx512f"))) void dense_tile_avx512(const DenseTile& t) {
  constexpr int64_t XS = P ? S : S * B;
  __m512 acc[OB][NP];
#pragma GCC unroll 2
  for (int b = 0; b < OB; ++b)
#pragma GCC unroll 12
    for (int j = 0; j < NP; ++j) acc[b][j] = _mm512_setzero_ps();
  const float* wp = t.w;
  for (int64_t cb = 0; cb < t.Cb; ++cb)
    for (int64_t kh = 0; kh < t.KH; ++kh)
      for (int64_t kw = 0; kw < t.KW; ++kw, wp += B * B) {
        const float* xp = t.x + cb * t.xcb + kh * t.xkh + kw * t.xkw;
        const int64_t cn = P && cb + 1 == t.Cb ? t.last : B;
        for (int c = 0; c < cn; ++c) {
          const __m512 w0 = _mm512_loadu_ps(wp + c * B);
          const __m512 w1 = OB > 1 ? _mm512_loadu_ps(wp + t.wob + c * B) : w0;
          const float* xc = P ? xp + c * t.xc : xp + c;
#pragma GCC unroll 12
          for (int j = 0; j < NP; ++j) {
            const __m512 xb = _mm512_set1_ps(xc[j * XS]);
            acc[0][j] = _mm512_fmadd_ps(w0, xb, acc[0][j]);
            if constexpr (OB > 1) acc[1][j] = _mm512_fmadd_ps(w1, xb, acc[1][j]);
          }
        }
      }
#pragma GCC unroll 2
  for (int b = 0; b < OB; ++b)
#pragma GCC unroll 12
    for (int j = 0; j < NP; ++j) _mm512_storeu_ps(t.y + b * t.yob + j * B, acc[b][j]);
}

// AVX2: one output block as two 8-lane halves, up to 6 positions (12 sums).
template <int NP, int S, bool P>
__attribute__((target("avx2,fma"))) void dense_tile_avx2(const DenseTile& t) {
  constexpr int64_t XS = P ? S : S * B;
  __m256 lo[NP], hi[NP];
#pragma GCC unroll 6
  for (int j = 0; j < NP; ++j) lo[j] = hi[j] = _mm256_setzero_ps();
  const float* wp = t.w;
  for (int64_t cb = 0; cb < t.Cb; ++cb)
    for (int64_t kh = 0; kh < t.KH; ++kh)
      for (int64_t kw = 0; kw < t.KW; ++kw, wp += B * B) {
        const float* xp = t.x + cb * t.xcb + kh * t.xkh + kw * t.xkw;
        const int64_t cn = P && cb + 1 == t.Cb ? t.last : B;
        for (int c = 0; c < cn; ++c) {
          const __m256 w0 = _mm256_loadu_ps(wp + c * B), w1 = _mm256_loadu_ps(wp + c * B + 8);
          const float* xc = P ? xp + c * t.xc : xp + c;
#pragma GCC unroll 6
          for (int j = 0; j < NP; ++j) {
            const __m256 xb = _mm256_broadcast_ss(xc + j * XS);
            lo[j] = _mm256_fmadd_ps(w0, xb, lo[j]);
            hi[j] = _mm256_fmadd_ps(w1, xb, hi[j]);
          }
        }
      }
#pragma GCC unroll 6
  for (int j = 0; j < NP; ++j) {
    _mm256_storeu_ps(t.y + j * B, lo[j]);
    _mm256_storeu_ps(t.y + j * B + 8, hi[j]);
  }
}

using DenseFn = void (*)(const DenseTile&);
constexpr int kNp512 = 12, kNp2 = 6;
// [OB - 1][NP - 1][S - 1] for column strides 1 and 2; other strides take
// one position a tile (NP 1, where the stride does not matter).
// [plain x][OB - 1][NP - 1][S - 1].
struct DenseTable {
  DenseFn avx512[2][2][kNp512][2];
  DenseFn avx2[2][kNp2][2];
};
template <int OB, int NP, bool P>
void fill512(DenseTable& t) {
  t.avx512[P][OB - 1][NP - 1][0] = dense_tile_avx512<OB, NP, 1, P>;
  t.avx512[P][OB - 1][NP - 1][1] = dense_tile_avx512<OB, NP, 2, P>;
  if constexpr (NP > 1) fill512<OB, NP - 1, P>(t);
}
template <int NP, bool P>
void fill2(DenseTable& t) {
  t.avx2[P][NP - 1][0] = dense_tile_avx2<NP, 1, P>;
  t.avx2[P][NP - 1][1] = dense_tile_avx2<NP, 2, P>;
  if constexpr (NP > 1) fill2<NP - 1, P>(t);
}
const DenseTable& dense_table() {
  static const DenseTable table = [] {
    DenseTable t{};
    fill512<1, kNp512, false>(t);
    fill512<2, kNp512, false>(t);
    fill512<1, kNp512, true>(t);
    fill512<2, kNp512, true>(t);
    fill2<kNp2, false>(t);
    fill2<kNp2, true>(t);
    return t;
  }();
  return table;
}
#endif

// ---- depthwise -----------------------------------------------------------------------

// The taps k of a window starting at i0 (step d) that land in [0, n): [k0, k1).
inline std::pair<int64_t, int64_t> taps_in_range(int64_t i0, int64_t d, int64_t K, int64_t n) {
  const int64_t k0 = i0 >= 0 ? 0 : (-i0 + d - 1) / d;
  const int64_t k1 = i0 >= n ? 0 : std::min(K, (n - 1 - i0) / d + 1);
  return {k0, std::max(k0, k1)};
}

// One output position of a depthwise row: the taps in range only, their
// ranges found first, then loops without tests (the edges of a 7x7 plane
// under a 5x5 kernel are 4 of its 7 columns). x: the image's block (its H
// x W plane of 16-lane vectors); w: the block's weights [KH][KW][16]; (ih0,
// iw0) the input under tap (0, 0).
void dw_position_loops(const float* x, const float* w, float* y, int64_t H, int64_t W, int64_t ih0, int64_t iw0,
                       int64_t KH, int64_t KW, int64_t dh, int64_t dw) {
  const auto [kh0, kh1] = taps_in_range(ih0, dh, KH, H);
  const auto [kw0, kw1] = taps_in_range(iw0, dw, KW, W);
  float acc[B] = {};
  for (int64_t kh = kh0; kh < kh1; ++kh)
    for (int64_t kw = kw0; kw < kw1; ++kw) {
      const float *xp = x + ((ih0 + kh * dh) * W + iw0 + kw * dw) * B, *wp = w + (kh * KW + kw) * B;
      for (int64_t l = 0; l < B; ++l) acc[l] = std::fma(xp[l], wp[l], acc[l]);
    }
  std::memcpy(y, acc, sizeof acc);
}

#ifdef RELAX_X86_KERNELS
__attribute__((target("avx512f"))) void dw_position_avx512(const float* x, const float* w, float* y, int64_t H,
                                                           int64_t W, int64_t ih0, int64_t iw0, int64_t KH,
                                                           int64_t KW, int64_t dh, int64_t dw) {
  const auto [kh0, kh1] = taps_in_range(ih0, dh, KH, H);
  const auto [kw0, kw1] = taps_in_range(iw0, dw, KW, W);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t kh = kh0; kh < kh1; ++kh)
    for (int64_t kw = kw0; kw < kw1; ++kw)
      acc = _mm512_fmadd_ps(_mm512_loadu_ps(x + ((ih0 + kh * dh) * W + iw0 + kw * dw) * B),
                            _mm512_loadu_ps(w + (kh * KW + kw) * B), acc);
  _mm512_storeu_ps(y, acc);
}

// NP positions of a row whose taps all lie in the row's columns: x the
// first position's input at tap (kh0, 0), rows kh0..kh0 + nkh in range,
// w at row kh0; S * 16 floats between the positions' inputs.
template <int NP, int S>
__attribute__((target("avx512f"))) void dw_tile_avx512(const float* x, const float* w, float* y, int64_t nkh,
                                                       int64_t KW, int64_t xkh, int64_t xkw) {
  __m512 acc[NP];
#pragma GCC unroll 8
  for (int j = 0; j < NP; ++j) acc[j] = _mm512_setzero_ps();
  for (int64_t kh = 0; kh < nkh; ++kh)
    for (int64_t kw = 0; kw < KW; ++kw) {
      const __m512 wv = _mm512_loadu_ps(w + (kh * KW + kw) * B);
      const float* xp = x + kh * xkh + kw * xkw;
#pragma GCC unroll 8
      for (int j = 0; j < NP; ++j) acc[j] = _mm512_fmadd_ps(_mm512_loadu_ps(xp + j * S * B), wv, acc[j]);
    }
#pragma GCC unroll 8
  for (int j = 0; j < NP; ++j) _mm512_storeu_ps(y + j * B, acc[j]);
}

__attribute__((target("avx2,fma"))) void dw_position_avx2(const float* x, const float* w, float* y, int64_t H,
                                                          int64_t W, int64_t ih0, int64_t iw0, int64_t KH, int64_t KW,
                                                          int64_t dh, int64_t dw) {
  const auto [kh0, kh1] = taps_in_range(ih0, dh, KH, H);
  const auto [kw0, kw1] = taps_in_range(iw0, dw, KW, W);
  __m256 lo = _mm256_setzero_ps(), hi = lo;
  for (int64_t kh = kh0; kh < kh1; ++kh)
    for (int64_t kw = kw0; kw < kw1; ++kw) {
      const float *xp = x + ((ih0 + kh * dh) * W + iw0 + kw * dw) * B, *wp = w + (kh * KW + kw) * B;
      lo = _mm256_fmadd_ps(_mm256_loadu_ps(xp), _mm256_loadu_ps(wp), lo);
      hi = _mm256_fmadd_ps(_mm256_loadu_ps(xp + 8), _mm256_loadu_ps(wp + 8), hi);
    }
  _mm256_storeu_ps(y, lo);
  _mm256_storeu_ps(y + 8, hi);
}

template <int NP, int S>
__attribute__((target("avx2,fma"))) void dw_tile_avx2(const float* x, const float* w, float* y, int64_t nkh,
                                                      int64_t KW, int64_t xkh, int64_t xkw) {
  __m256 lo[NP], hi[NP];
#pragma GCC unroll 4
  for (int j = 0; j < NP; ++j) lo[j] = hi[j] = _mm256_setzero_ps();
  for (int64_t kh = 0; kh < nkh; ++kh)
    for (int64_t kw = 0; kw < KW; ++kw) {
      const float* wp = w + (kh * KW + kw) * B;
      const __m256 w0 = _mm256_loadu_ps(wp), w1 = _mm256_loadu_ps(wp + 8);
      const float* xp = x + kh * xkh + kw * xkw;
#pragma GCC unroll 4
      for (int j = 0; j < NP; ++j) {
        lo[j] = _mm256_fmadd_ps(_mm256_loadu_ps(xp + j * S * B), w0, lo[j]);
        hi[j] = _mm256_fmadd_ps(_mm256_loadu_ps(xp + j * S * B + 8), w1, hi[j]);
      }
    }
#pragma GCC unroll 4
  for (int j = 0; j < NP; ++j) {
    _mm256_storeu_ps(y + j * B, lo[j]);
    _mm256_storeu_ps(y + j * B + 8, hi[j]);
  }
}
#endif

// The row's output columns whose taps all lie inside the input's W
// columns: [lo, hi), lo <= hi.
std::pair<int64_t, int64_t> inner_columns(const Conv2dGeometry& g) {
  const int64_t lo = std::min(g.OW, (g.pw + g.sw - 1) / g.sw);
  const int64_t last = g.W - 1 - (g.KW - 1) * g.dw + g.pw;  // the last column start that fits, padded
  const int64_t hi = last < 0 ? lo : std::clamp(last / g.sw + 1, lo, g.OW);
  return {lo, hi};
}

void depthwise(const Conv2dGeometry& g, const float* x, const float* w, float* y, const Epilogue* ep,
               ThreadPool* pool, KernelIsa isa) {
  const int64_t Cb = g.C / B, plane = g.H * g.W * B, oplane = g.OH * g.OW * B;
  const auto [lo, hi] = inner_columns(g);
  auto row = [&](int64_t item) {
    const int64_t oh = item % g.OH, cb = item / g.OH % Cb, n = item / g.OH / Cb;
    const float* xb = x + (n * Cb + cb) * plane;
    const float* wb = w + cb * g.KH * g.KW * B;
    float* yr = y + (n * Cb + cb) * oplane + oh * g.OW * B;
    const int64_t ih0 = oh * g.sh - g.ph;
    // The kernel rows in range: [kh0, kh1).
    int64_t kh0 = 0, kh1 = g.KH;
    while (kh0 < g.KH && ih0 + kh0 * g.dh < 0) ++kh0;
    while (kh1 > kh0 && ih0 + (kh1 - 1) * g.dh >= g.H) --kh1;
    auto position = [&](int64_t ow) {
      const int64_t iw0 = ow * g.sw - g.pw;
#ifdef RELAX_X86_KERNELS
      if (isa == KernelIsa::avx512)
        return dw_position_avx512(xb, wb, yr + ow * B, g.H, g.W, ih0, iw0, g.KH, g.KW, g.dh, g.dw);
      if (isa == KernelIsa::avx2)
        return dw_position_avx2(xb, wb, yr + ow * B, g.H, g.W, ih0, iw0, g.KH, g.KW, g.dh, g.dw);
#endif
      dw_position_loops(xb, wb, yr + ow * B, g.H, g.W, ih0, iw0, g.KH, g.KW, g.dh, g.dw);
    };
    int64_t ow = 0;
    for (; ow < lo; ++ow) position(ow);
#ifdef RELAX_X86_KERNELS
    if (kh1 > kh0 && isa != KernelIsa::portable && (g.sw == 1 || g.sw == 2)) {
      const int64_t x0 = (ih0 + kh0 * g.dh) * g.W - g.pw;  // position 0's input at tap (kh0, 0), in vectors
      const float* w0 = wb + kh0 * g.KW * B;
      const int64_t xkh = g.dh * g.W * B, xkw = g.dw * B, nkh = kh1 - kh0;
      const int np_max = isa == KernelIsa::avx512 ? 8 : 4;
      while (ow < hi) {
        const int np = int(std::min<int64_t>(np_max, hi - ow));
        const float* xs = xb + (x0 + ow * g.sw) * B;
        float* ys = yr + ow * B;
        using Fn = void (*)(const float*, const float*, float*, int64_t, int64_t, int64_t, int64_t);
        static const Fn t512[2][8] = {
            {dw_tile_avx512<1, 1>, dw_tile_avx512<2, 1>, dw_tile_avx512<3, 1>, dw_tile_avx512<4, 1>,
             dw_tile_avx512<5, 1>, dw_tile_avx512<6, 1>, dw_tile_avx512<7, 1>, dw_tile_avx512<8, 1>},
            {dw_tile_avx512<1, 2>, dw_tile_avx512<2, 2>, dw_tile_avx512<3, 2>, dw_tile_avx512<4, 2>,
             dw_tile_avx512<5, 2>, dw_tile_avx512<6, 2>, dw_tile_avx512<7, 2>, dw_tile_avx512<8, 2>}};
        static const Fn t2[2][4] = {{dw_tile_avx2<1, 1>, dw_tile_avx2<2, 1>, dw_tile_avx2<3, 1>, dw_tile_avx2<4, 1>},
                                    {dw_tile_avx2<1, 2>, dw_tile_avx2<2, 2>, dw_tile_avx2<3, 2>, dw_tile_avx2<4, 2>}};
        (isa == KernelIsa::avx512 ? t512[g.sw - 1][np - 1] : t2[g.sw - 1][np - 1])(xs, w0, ys, nkh, g.KW, xkh, xkw);
        ow += np;
      }
    }
#endif
    for (; ow < g.OW; ++ow) position(ow);
    if (ep) ep->apply_blocked(y, (n * Cb + cb) * oplane + oh * g.OW * B, g.OW * B, cb);
  };
  const int64_t items = g.N * Cb * g.OH;
  const double work = double(g.N) * double(g.C) * double(g.OH * g.OW) * double(g.KH * g.KW);
  if (pool && pool->num_threads() > 1 && items > 1 && work >= double(1 << 15))
    pool->parallel_for(items, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) row(i);
    });
  else
    for (int64_t i = 0; i < items; ++i) row(i);
}

// plain: x (N, C, H, W) as it is, g.C its channels (the tiles read each
// input block's channels a plane apart, and only the last block's own).
void dense(const Conv2dGeometry& g, const float* x, const float* w, float* y, const Epilogue* ep,
           std::vector<float>& scratch, ThreadPool* pool, KernelIsa isa, bool plain) {
  const int64_t Cb = plain ? channel_blocks(g.C) : g.C / B, Ob = g.O / B;
  // Per image, planes of H x W positions of E floats each.
  const int64_t E = plain ? 1 : B, planes = plain ? g.C : Cb;
  // The input, padded where the convolution pads: planes of Hp x Wp
  // holding every tap of every output.
  // (Padding only at the ends, TensorFlow's "same" at stride 2, shows
  // only there: taps past H or W.)
  const int64_t Hp = std::max(g.H + g.ph, (g.OH - 1) * g.sh + (g.KH - 1) * g.dh + 1);
  const int64_t Wp = std::max(g.W + g.pw, (g.OW - 1) * g.sw + (g.KW - 1) * g.dw + 1);
  const float* xp = x;
  if (Hp > g.H || Wp > g.W) {
    scratch.assign(size_t(g.N * planes * Hp * Wp * E), 0.0f);
    float* s = scratch.data();
    auto copy = [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p)
        for (int64_t h = 0; h < g.H; ++h)
          std::memcpy(s + ((p * Hp + h + g.ph) * Wp + g.pw) * E, x + (p * g.H + h) * g.W * E,
                      size_t(g.W * E) * sizeof(float));
    };
    if (pool && pool->num_threads() > 1 && g.N * planes > 1)
      pool->parallel_for(g.N * planes, copy);
    else
      copy(0, g.N * planes);
    xp = s;
  }
  // A strided 1x1 convolution, unpadded, of a blocked x: x's positions it
  // reads gathered first (OH x OW of them), then a product. Its tiles read
  // one position of every sh * sw, half of each line they fetch, and 7-wide
  // rows as 7-position tiles (ResNet-50's downsampling 1x1 layers, cold
  // caches: 146 -> 185 and 156 -> 181 GFLOP/s).
  const bool gathered = !plain && g.KH == 1 && g.KW == 1 && xp == x && (g.sh > 1 || g.sw > 1);
  if (gathered) {
    scratch.resize(size_t(g.N * Cb * g.OH * g.OW * B));
    float* s = scratch.data();
    auto gather = [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p)  // (image, block, output row)
        for (int64_t ow = 0; ow < g.OW; ++ow)
          std::memcpy(s + (p * g.OW + ow) * B,
                      x + ((p / g.OH * g.H + p % g.OH * g.sh) * g.W + ow * g.sw) * B, B * sizeof(float));
    };
    if (pool && pool->num_threads() > 1 && g.N * Cb * g.OH > 1)
      pool->parallel_for(g.N * Cb * g.OH, gather);
    else
      gather(0, g.N * Cb * g.OH);
    xp = s;
  }
  const int64_t Hx = gathered ? g.OH : Hp, Wx = gathered ? g.OW : Wp;  // x's planes as the tiles read them
  // A plain product (1x1, stride 1, unpadded): the whole plane one row.
  const bool product = gathered || conv2d_is_product(g);
  const int64_t OH = product ? 1 : g.OH, OW = product ? g.OH * g.OW : g.OW;
  const int64_t sw = product ? 1 : g.sw;
  const int ob_tile = isa == KernelIsa::avx512 ? 2 : 1;
  const int np_max = isa == KernelIsa::avx512 ? 12 : isa == KernelIsa::avx2 ? 6 : 4;
  // Work items: an image's row (a product's run of positions) of a group of
  // ob_tile output blocks, in chunks of at most 4 tiles, as even as they go
  // (a 7x7 plane's 49 positions as 25 + 24, not 48 + 1: a tile of one
  // position is two multiply-adds per three loads). Each group runs over
  // the whole input before the next, its weights in cache (the groups first
  // per chunk, the chunk in cache instead: 194 -> 165 GFLOP/s on ResNet-50's
  // 512 -> 128 1x1 over 28x28, cold).
  const int64_t chunks = (OW + 4 * np_max - 1) / (4 * np_max), chunk = (OW + chunks - 1) / chunks;
  const int64_t groups = (Ob + ob_tile - 1) / ob_tile;
  const int64_t wob = Cb * g.KH * g.KW * B * B, yob = g.OH * g.OW * B, xcb = Hx * Wx * B;
  const int64_t last = plain ? g.C - (Cb - 1) * B : B;
  auto item = [&](int64_t it) {
    const int64_t c = it % chunks, oh = it / chunks % OH, grp = it / chunks / OH % groups,
                  n = it / chunks / OH / groups;
    const int64_t ob = grp * ob_tile, obs = std::min<int64_t>(ob_tile, Ob - ob);
    const int64_t ow0 = c * chunk, ow1 = std::min(OW, ow0 + chunk);
    DenseTile t{nullptr, xcb,     g.dh * Wx * E, g.dw * E, Cb,  g.KH, g.KW, w + ob * wob, wob, nullptr,
                yob,     plain ? Hx * Wx : 1,  last};
    // Tiles of the chunk as even as they go (a 14-wide row as 7 + 7, not
    // 12 + 2: 162 -> 200 GFLOP/s on ResNet-50's 3x3 layers over 14x14).
    const int64_t tiles = (ow1 - ow0 + np_max - 1) / np_max, even = (ow1 - ow0 + tiles - 1) / tiles;
    for (int64_t ow = ow0; ow < ow1;) {
      const int np = int(std::min<int64_t>(even, ow1 - ow));
      // The first position's input (padded coordinates: oh * sh, ow * sw).
      t.x = xp + (n * planes * Hx + (product ? 0 : oh * g.sh)) * Wx * E + ow * sw * E;
      t.y = y + ((n * Ob + ob) * OH + oh) * OW * B + ow * B;
      const bool strided_ok = sw == 1 || sw == 2;
      const int n_here = strided_ok ? np : 1;
#ifdef RELAX_X86_KERNELS
      if (isa == KernelIsa::avx512)
        dense_table().avx512[plain][obs - 1][n_here - 1][strided_ok ? sw - 1 : 0](t);
      else if (isa == KernelIsa::avx2)
        for (int64_t b = 0; b < obs; ++b) {
          DenseTile tb = t;
          tb.w += b * wob, tb.y += b * yob;
          dense_table().avx2[plain][n_here - 1][strided_ok ? sw - 1 : 0](tb);
        }
      else
#endif
        dense_tile_loops(t, int(obs), n_here, sw * E);
      ow += n_here;
    }
    if (ep)
      for (int64_t b = ob; b < ob + obs; ++b)
        ep->apply_blocked(y, ((n * Ob + b) * OH + oh) * OW * B + ow0 * B, (ow1 - ow0) * B, b);
  };
  const int64_t items = g.N * groups * OH * chunks;
  const double work = double(g.N) * double(g.O) * double(g.OH * g.OW) * double(g.C * g.KH * g.KW);
  if (pool && pool->num_threads() > 1 && items > 1 && work >= double(1 << 15))
    pool->parallel_for(items, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) item(i);
    });
  else
    for (int64_t i = 0; i < items; ++i) item(i);
}

}  // namespace

int64_t conv2d_blocked_packed_size(int64_t O, int64_t Cg, int64_t groups, int64_t KH, int64_t KW) {
  if (groups == 1) return channel_blocks(O) * channel_blocks(Cg) * KH * KW * B * B;
  if (Cg == 1 && groups == O) return channel_blocks(O) * KH * KW * B;
  return -1;
}

void conv2d_blocked_pack_f32(const float* w, int64_t O, int64_t Cg, int64_t groups, int64_t KH, int64_t KW,
                             float* out) {
  const int64_t taps = KH * KW;
  std::fill(out, out + conv2d_blocked_packed_size(O, Cg, groups, KH, KW), 0.0f);
  if (groups == 1) {
    const int64_t Cb = channel_blocks(Cg);
    for (int64_t o = 0; o < O; ++o)
      for (int64_t c = 0; c < Cg; ++c)
        for (int64_t k = 0; k < taps; ++k)
          out[(((o / B * Cb + c / B) * taps + k) * B + c % B) * B + o % B] = w[(o * Cg + c) * taps + k];
    return;
  }
  for (int64_t o = 0; o < O; ++o)
    for (int64_t k = 0; k < taps; ++k) out[(o / B * taps + k) * B + o % B] = w[o * taps + k];
}

void conv2d_blocked_f32(const Conv2dGeometry& g, const float* x, const float* packed, float* y, const Epilogue* ep,
                        std::vector<float>& scratch, ThreadPool* pool, bool vector, bool plain_x) {
  if (g.N == 0 || g.O == 0 || g.OH * g.OW == 0) return;
  KernelIsa isa = vector ? kernel_isa() : KernelIsa::portable;
  if (!plain_x && is_depthwise(g))
    depthwise(g, x, packed, y, ep, pool, isa);
  else
    dense(g, x, packed, y, ep, scratch, pool, isa, plain_x);
}

}  // namespace relax::rt
