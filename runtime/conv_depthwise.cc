// The depthwise convolutions of runtime/conv_direct.h: the plane-wise
// kernel (output positions in the lanes, over a zero-padded copy of each
// channel's rows split by stride phase) and, for small planes with one
// output per channel, the channels-in-lanes kernel over packed weights.
#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/conv_direct.h"
#include "runtime/cpu_isa.h"
#include "runtime/error.h"
#include "runtime/thread_pool.h"

namespace relax::rt {
namespace {

// even[k] = in[2k], odd[k] = in[2k + 1] for the n elements of `in`.
#ifdef RELAX_X86_KERNELS
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
#ifdef RELAX_X86_KERNELS
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

#ifdef RELAX_X86_KERNELS
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

#endif

}  // namespace

void conv2d_depthwise_f32(const Conv2dGeometry& g, const float* x, const float* w, float* y, ThreadPool* pool,
                          bool vector) {
  if (g.C != g.groups || g.O % g.groups != 0)
    rt_fail("conv2d_depthwise_f32: needs one input channel per group, got ", g.C, " channels in ", g.groups, " groups");
  const int64_t Og = g.O / g.groups, planes = g.N * g.O;
  if (planes == 0 || g.OH == 0 || g.OW == 0) return;
  bool avx2 = false;
#ifdef RELAX_X86_KERNELS
  avx2 = vector && conv2d_direct_available();
#endif
  (void)vector;
  // Items: (plane, a chunk of its rows); chunks only when there are too few planes to share.
  const int threads = pool ? pool->num_threads() : 1;
  const int64_t chunks = planes >= 4 * threads ? 1 : std::min<int64_t>(g.OH, (4 * threads + planes - 1) / planes);
  const int64_t rows_per = (g.OH + chunks - 1) / chunks;
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
#ifdef RELAX_X86_KERNELS
      if (avx2) {
        depthwise_rows_avx2(g, in, toff.data(), wk, yp, oh0, oh1);
        continue;
      }
#endif
      depthwise_rows_plain(g, in, toff.data(), wk, yp, oh0, oh1);
    }
  };
  const int64_t items = planes * chunks;
  double work = double(planes) * double(g.OH * g.OW) * double(g.KH * g.KW);
  if (pool && threads > 1 && items > 1 && work >= double(1 << 15))
    pool->parallel_for(items, body);
  else
    body(0, items);
}

namespace {

// G blocks of 16 channels from channel c0 at one output position, every
// tap in order: acc = fma(w, x or 0, acc). xs[t]: the tap's input
// (channels last; null in the padding); wt: the first block's weights.
#ifdef RELAX_X86_KERNELS
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

// dst[c * ld_dst + r] = src[r * ld_src + c] for r < rows, c < cols: in
// 8 x 8 blocks through registers (AVX2), the edges one by one. A layer's
// channels-last copy was one strided store per element, a miss in L1 for
// each once a plane's column outgrew it (48 channels of 16 x 16: 75% of
// the convolution's time).
#ifdef RELAX_X86_KERNELS
__attribute__((target("avx2"))) void transpose_blocks_avx2(const float* src, int64_t rows, int64_t cols,
                                                           int64_t ld_src, float* dst, int64_t ld_dst) {
  // Columns outer: the 8 rows of dst a step writes are filled whole
  // (every r0) before the next step's, and src's rows are read 32 bytes
  // further each step, their lines still in L1.
  for (int64_t c0 = 0; c0 + 8 <= cols; c0 += 8)
    for (int64_t r0 = 0; r0 + 8 <= rows; r0 += 8) {
      __m256 v[8], t[8];
      for (int i = 0; i < 8; ++i) v[i] = _mm256_loadu_ps(src + (r0 + i) * ld_src + c0);
      for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(v[i], v[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(v[i], v[i + 1]);
      }
      for (int i = 0; i < 8; i += 4) {
        v[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        v[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
        v[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        v[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
      }
      // v[0..3]: columns 0, 1, 2, 3 of rows 0-3 (low half) and 4-7 of them
      // (high half); v[4..7] the same for rows 4-7.
      for (int i = 0; i < 4; ++i) {
        _mm256_storeu_ps(dst + (c0 + i) * ld_dst + r0, _mm256_permute2f128_ps(v[i], v[i + 4], 0x20));
        _mm256_storeu_ps(dst + (c0 + i + 4) * ld_dst + r0, _mm256_permute2f128_ps(v[i], v[i + 4], 0x31));
      }
    }
}
#endif
void transpose_f32(const float* src, int64_t rows, int64_t cols, int64_t ld_src, float* dst, int64_t ld_dst) {
  int64_t r8 = 0, c8 = 0;
#ifdef RELAX_X86_KERNELS
  if (conv2d_direct_available()) {
    transpose_blocks_avx2(src, rows, cols, ld_src, dst, ld_dst);
    r8 = rows / 8 * 8, c8 = cols / 8 * 8;
  }
#endif
  // What the blocks left: the last columns of the blocked rows, then the last rows.
  for (int64_t r = 0; r < r8; ++r)
    for (int64_t c = c8; c < cols; ++c) dst[c * ld_dst + r] = src[r * ld_src + c];
  for (int64_t r = r8; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[c * ld_dst + r] = src[r * ld_src + c];
}

#ifdef RELAX_X86_KERNELS
// AVX-512: one output row's positions [ow0, ow1) of one 16-channel block,
// every tap of each inside the image in width (the row's interior), four
// positions at a time: per tap one weight load feeds four chains.
// rows[kh]: input row kh of the window, channels last at the block's
// first channel, or null in the padding (its taps add w * 0, as the other
// forms do, so every form gives the same sums bitwise). out: the row's
// first position at the block.
__attribute__((target("avx512f"))) void depthwise_row_avx512(const float* const* rows, int64_t KH, int64_t KW,
                                                             int64_t sw, int64_t dw, int64_t pw, int64_t Cp,
                                                             const float* wt, int64_t ow0, int64_t ow1, float* out) {
  const __m512 zero = _mm512_setzero_ps();
  int64_t ow = ow0;
  for (; ow + 4 <= ow1; ow += 4) {
    __m512 a0 = zero, a1 = zero, a2 = zero, a3 = zero;
    const float* w = wt;
    for (int64_t kh = 0; kh < KH; ++kh) {
      const float* row = rows[kh];
      for (int64_t kw = 0; kw < KW; ++kw, w += 16) {
        const __m512 wv = _mm512_loadu_ps(w);
        if (!row) {
          a0 = _mm512_fmadd_ps(wv, zero, a0), a1 = _mm512_fmadd_ps(wv, zero, a1);
          a2 = _mm512_fmadd_ps(wv, zero, a2), a3 = _mm512_fmadd_ps(wv, zero, a3);
          continue;
        }
        const float* x = row + (ow * sw + kw * dw - pw) * Cp;
        a0 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x), a0);
        a1 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + sw * Cp), a1);
        a2 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + 2 * sw * Cp), a2);
        a3 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + 3 * sw * Cp), a3);
      }
    }
    _mm512_storeu_ps(out + ow * Cp, a0), _mm512_storeu_ps(out + (ow + 1) * Cp, a1);
    _mm512_storeu_ps(out + (ow + 2) * Cp, a2), _mm512_storeu_ps(out + (ow + 3) * Cp, a3);
  }
  for (; ow < ow1; ++ow) {
    __m512 a = zero;
    const float* w = wt;
    for (int64_t kh = 0; kh < KH; ++kh)
      for (int64_t kw = 0; kw < KW; ++kw, w += 16)
        a = _mm512_fmadd_ps(_mm512_loadu_ps(w),
                            rows[kh] ? _mm512_loadu_ps(rows[kh] + (ow * sw + kw * dw - pw) * Cp) : zero, a);
    _mm512_storeu_ps(out + ow * Cp, a);
  }
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
    if (Cp > C)
      for (int64_t s = 0; s < HW; ++s) std::fill(xn + s * Cp + C, xn + (s + 1) * Cp, 0.0f);
    transpose_f32(x + n * C * HW, C, HW, HW, xn, Cp);
  }
  enum { kPlain, kAvx2, kAvx512 } isa = kPlain;
#ifdef RELAX_X86_KERNELS
  if (vector && conv2d_direct_available()) isa = kernel_isa() == KernelIsa::avx512 ? kAvx512 : kAvx2;
#endif
  (void)vector;
  // One output position, every block: its taps' inputs (null in the padding), then the blocks' chains.
  auto position = [&](int64_t n, int64_t oh, int64_t ow, const float** xs) {
    for (int64_t kh = 0; kh < g.KH; ++kh)
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        int64_t ih = oh * g.sh + kh * g.dh - g.ph, iw = ow * g.sw + kw * g.dw - g.pw;
        xs[kh * g.KW + kw] = ih >= 0 && ih < g.H && iw >= 0 && iw < g.W ? xt + (n * HW + ih * g.W + iw) * Cp : nullptr;
      }
    float* out = yt + (n * P + oh * g.OW + ow) * Cp;
#ifdef RELAX_X86_KERNELS
    int64_t j = 0;
    // Four blocks at once: four chains in flight.
    if (isa == kAvx512) {
      for (; j + 4 <= blocks; j += 4)
        depthwise_channels_avx512<4>(xs, 16 * j, taps, packed + j * taps * 16, out + 16 * j);
      for (; j < blocks; ++j) depthwise_channels_avx512<1>(xs, 16 * j, taps, packed + j * taps * 16, out + 16 * j);
    } else if (isa == kAvx2) {
      for (; j + 2 <= blocks; j += 2)
        depthwise_channels_avx2<2>(xs, 16 * j, taps, packed + j * taps * 16, out + 16 * j);
      for (; j < blocks; ++j) depthwise_channels_avx2<1>(xs, 16 * j, taps, packed + j * taps * 16, out + 16 * j);
    }
#endif
    if (isa == kPlain) depthwise_channels_plain(xs, taps, packed, blocks, out);
  };
  // The row's interior: the positions whose taps all lie inside the image
  // in width, ow * sw - pw >= 0 and ow * sw + (KW - 1) * dw - pw < W.
  const int64_t ow_lo = std::min(g.OW, (g.pw + g.sw - 1) / g.sw);
  const int64_t last = g.W - 1 - (g.KW - 1) * g.dw + g.pw;
  const int64_t ow_hi = std::max(ow_lo, std::min(g.OW, last < 0 ? 0 : last / g.sw + 1));
  auto body = [&](int64_t begin, int64_t end) {
    std::vector<const float*> xs(static_cast<size_t>(taps)), rows(static_cast<size_t>(g.KH));
    for (int64_t r = begin; r < end; ++r) {  // r: (image, output row)
      const int64_t n = r / g.OH, oh = r % g.OH;
#ifdef RELAX_X86_KERNELS
      if (isa == kAvx512) {
        // The interior by rows of each block (one weight load a tap for
        // four positions), the edges position by position.
        for (int64_t ow = 0; ow < ow_lo; ++ow) position(n, oh, ow, xs.data());
        for (int64_t ow = ow_hi; ow < g.OW; ++ow) position(n, oh, ow, xs.data());
        float* out = yt + (n * P + oh * g.OW) * Cp;
        for (int64_t j = 0; j < blocks; ++j) {
          for (int64_t kh = 0; kh < g.KH; ++kh) {
            const int64_t ih = oh * g.sh + kh * g.dh - g.ph;
            rows[size_t(kh)] = ih >= 0 && ih < g.H ? xt + (n * HW + ih * g.W) * Cp + 16 * j : nullptr;
          }
          depthwise_row_avx512(rows.data(), g.KH, g.KW, g.sw, g.dw, g.pw, Cp, packed + j * taps * 16, ow_lo, ow_hi,
                               out + 16 * j);
        }
        continue;
      }
#endif
      for (int64_t ow = 0; ow < g.OW; ++ow) position(n, oh, ow, xs.data());
    }
  };
  const int64_t items = g.N * g.OH;
  if (pool && pool->num_threads() > 1 && items > 1 && double(g.N * P) * double(Cp * taps) >= double(1 << 16))
    pool->parallel_for(items, body);
  else
    body(0, items);
  for (int64_t n = 0; n < g.N; ++n) transpose_f32(yt + n * P * Cp, P, C, Cp, y + n * C * P, P);
}

}  // namespace relax::rt
