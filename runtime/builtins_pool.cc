// The cpu target's f32 max pooling over 2-D planes (pool.max2d): per
// plane, each output row's window rows reduced into one row first (whole
// rows of contiguous maxima, which vectorise), then each output's taps
// along its row. A loop nest per output element read its window's taps
// with strided scalar loads: ResNet's 3x3 stride-2 pool over 24x20 planes
// took 44 us for 3,840 outputs, most of the small model's time outside
// its convolutions.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "runtime/cpu_isa.h"
#include "runtime/error.h"
#include "runtime/thread_pool.h"
#include "runtime/vm.h"

namespace relax::rt {
namespace {

struct PoolGeometry {
  int64_t N, C, H, W, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw;
};

// The reduced rows of one plane: rows[oh * stride + j] = the max over the
// window's input rows of column j - pw, -inf in the padding (and past it,
// up to `stride`).
void reduce_rows(const PoolGeometry& g, const float* xp, int64_t stride, float* rows) {
  constexpr float kLow = -std::numeric_limits<float>::infinity();
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    float* r = rows + oh * stride;
    std::fill(r, r + stride, kLow);
    for (int64_t kh = 0; kh < g.KH; ++kh) {
      const int64_t ih = oh * g.sh - g.ph + kh * g.dh;
      if (ih < 0 || ih >= g.H) continue;
      const float* in = xp + ih * g.W;
      for (int64_t iw = 0; iw < g.W; ++iw) r[g.pw + iw] = std::max(r[g.pw + iw], in[iw]);
    }
  }
}

#ifdef RELAX_X86_KERNELS
// vmaxps without the undefined pass-through operand of _mm512_max_ps (GCC
// 12 warns of it as maybe uninitialised).
__attribute__((target("avx512f"), always_inline)) inline __m512 max16(__m512 a, __m512 b) {
  return _mm512_maskz_max_ps(__mmask16(0xffff), a, b);
}
// reduce_rows 16 columns at a time, each vector of the row kept in a
// register over the window's rows and stored once (stride a multiple of
// 16): reducing into memory row by row reloaded each vector from stores
// just made, masked or of other widths, which cannot be forwarded, and
// stalled on every one (ResNet's stem pool: 14.5 us for 3,840 outputs).
__attribute__((target("avx512f"))) void reduce_rows_avx512(const PoolGeometry& g, const float* xp, int64_t stride,
                                                           float* rows) {
  const __m512 low = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t j = 0; j < stride; j += 16) {
    // Lanes l whose column j + l - pw lies inside the row.
    const int64_t first = std::clamp<int64_t>(g.pw - j, 0, 16), last = std::clamp<int64_t>(g.pw + g.W - j, 0, 16);
    const __mmask16 inside = __mmask16(((1u << last) - 1) & ~((1u << first) - 1));
    for (int64_t oh = 0; oh < g.OH; ++oh) {
      __m512 m = low;
      for (int64_t kh = 0; kh < g.KH; ++kh) {
        const int64_t ih = oh * g.sh - g.ph + kh * g.dh;
        if (ih >= 0 && ih < g.H) m = max16(m, _mm512_mask_loadu_ps(low, inside, xp + ih * g.W + j - g.pw));
      }
      _mm512_storeu_ps(rows + oh * stride + j, m);
    }
  }
}
// AVX-512, column stride 2, dilation 1: out[ow] = max over kw < KW of
// buf[2 * ow + kw] for ow < OW, 16 outputs a vector (even_lanes_avx512).
__attribute__((target("avx512f"))) void stride2_row_avx512(const float* buf, int64_t OW, int64_t KW, float* out) {
  for (int64_t o = 0; o < OW; o += 16) {
    const int64_t count = std::min<int64_t>(16, OW - o);
    __m512 m = even_lanes_avx512(buf + 2 * o, count);
    for (int64_t kw = 1; kw < KW; ++kw) m = max16(m, even_lanes_avx512(buf + 2 * o + kw, count));
    _mm512_mask_storeu_ps(out + o, count == 16 ? __mmask16(0xffff) : __mmask16((1u << count) - 1), m);
  }
}
#endif

void max_pool2d_f32(const PoolGeometry& g, const float* x, float* y, ThreadPool* pool) {
#ifdef RELAX_X86_KERNELS
  const bool avx512 = kernel_isa() == KernelIsa::avx512;
#else
  const bool avx512 = false;
#endif
  // A reduced row holds column iw at iw + pw, as far as the last window
  // reaches; with AVX-512 rounded up to whole vectors.
  const int64_t span = std::max(g.pw + g.W, (g.OW - 1) * g.sw + (g.KW - 1) * g.dw + 1);
  const int64_t stride = avx512 ? (span + 15) / 16 * 16 : span;
  auto body = [&](int64_t p0, int64_t p1) {
    // A plane's rows are all reduced before any output reads them, so
    // the reads find the stores written back.
    // Every element is written before it is read: kept per thread, never cleared.
    thread_local std::vector<float> buf;
    buf.resize(std::max(buf.size(), size_t(std::max<int64_t>(g.OH * stride, 1))));
    for (int64_t p = p0; p < p1; ++p) {
      const float* xp = x + p * g.H * g.W;
      float* yp = y + p * g.OH * g.OW;
#ifdef RELAX_X86_KERNELS
      if (avx512) {
        reduce_rows_avx512(g, xp, stride, buf.data());
        if (g.sw == 2 && g.dw == 1) {
          for (int64_t oh = 0; oh < g.OH; ++oh)
            stride2_row_avx512(buf.data() + oh * stride, g.OW, g.KW, yp + oh * g.OW);
          continue;
        }
      } else {
        reduce_rows(g, xp, stride, buf.data());
      }
#else
      reduce_rows(g, xp, stride, buf.data());
#endif
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        const float* r = buf.data() + oh * stride;
        float* out = yp + oh * g.OW;
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          const float* w = r + ow * g.sw;
          float m = w[0];
          for (int64_t kw = 1; kw < g.KW; ++kw) m = std::max(m, w[kw * g.dw]);
          out[ow] = m;
        }
      }
    }
  };
  const int64_t planes = g.N * g.C;
  const double work = double(planes) * double(g.OH) * double(g.KH * g.W + g.OW * g.KW);
  // Over the pool from 2^15 loads: resnet_small's stem pooling (32 planes
  // of 24x20 into 12x10, 3x3 windows, about 39,000) at two threads, 0.149
  // -> 0.147 ms a run; it ran on one thread under the earlier 2^17.
  if (pool && pool->num_threads() > 1 && planes > 1 && work >= double(1 << 15))
    pool->parallel_for(planes, body);
  else
    body(0, planes);
}

// Planes of positions of L lanes each (a blocked layout's (N, C / 16, H,
// W, 16), passes/block_layout.cc): each output position's lanes the max
// over the window's positions in range, -inf where none is; a row of
// outputs per work item.
#ifdef RELAX_X86_KERNELS
// One output row of 16-lane positions: a vector per position, one max per
// tap in range (max(tap, m): a NaN tap is dropped as std::max(m, tap)
// drops it).
__attribute__((target("avx512f"))) void lanes16_row_avx512(const PoolGeometry& g, const float* xp, float* yr,
                                                           int64_t oh) {
  const __m512 low = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t kh0 = 0, kh1 = g.KH;
  while (kh0 < g.KH && oh * g.sh - g.ph + kh0 * g.dh < 0) ++kh0;
  while (kh1 > kh0 && oh * g.sh - g.ph + (kh1 - 1) * g.dh >= g.H) --kh1;
  for (int64_t ow = 0; ow < g.OW; ++ow) {
    __m512 m = low;
    for (int64_t kh = kh0; kh < kh1; ++kh) {
      const float* row = xp + (oh * g.sh - g.ph + kh * g.dh) * g.W * 16;
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        const int64_t iw = ow * g.sw - g.pw + kw * g.dw;
        if (iw >= 0 && iw < g.W) m = _mm512_maskz_max_ps(0xffff, _mm512_loadu_ps(row + iw * 16), m);
      }
    }
    _mm512_storeu_ps(yr + ow * 16, m);
  }
}
#endif

void max_pool2d_lanes_f32(const PoolGeometry& g, int64_t L, const float* x, float* y, ThreadPool* pool) {
  constexpr float kLow = -std::numeric_limits<float>::infinity();
  auto body = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t p = r / g.OH, oh = r % g.OH;
      const float* xp = x + p * g.H * g.W * L;
#ifdef RELAX_X86_KERNELS
      if (L == 16 && kernel_isa() == KernelIsa::avx512) {
        lanes16_row_avx512(g, xp, y + r * g.OW * L, oh);
        continue;
      }
#endif
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        float* o = y + (r * g.OW + ow) * L;
        std::fill(o, o + L, kLow);
        for (int64_t kh = 0; kh < g.KH; ++kh) {
          const int64_t ih = oh * g.sh - g.ph + kh * g.dh;
          if (ih < 0 || ih >= g.H) continue;
          for (int64_t kw = 0; kw < g.KW; ++kw) {
            const int64_t iw = ow * g.sw - g.pw + kw * g.dw;
            if (iw < 0 || iw >= g.W) continue;
            const float* in = xp + (ih * g.W + iw) * L;
            for (int64_t l = 0; l < L; ++l) o[l] = std::max(o[l], in[l]);
          }
        }
      }
    }
  };
  const int64_t rows = g.N * g.C * g.OH;
  const double work = double(rows) * double(g.OW * g.KH * g.KW * L);
  if (pool && pool->num_threads() > 1 && rows > 1 && work >= double(1 << 15))
    pool->parallel_for(rows, body);
  else
    body(0, rows);
}

// pool.max2d(x, shape(KH, KW, sh, sw, ph, pw, dh, dw[, L]), y): y = the max
// over each window of x (N, C, H, W) f32, y (N, C, OH, OW) f32 (OH and OW
// as the pool's padding and ceil mode give them); taps in the padding do
// not count, a window wholly in it gives -inf.
void max_pool2d(BuiltinCall& c) {
  const char* what = "pool.max2d";
  if (c.num_args != 3) rt_fail(what, ": takes 3 arguments, got ", c.num_args);
  const Tensor& x = c.arg(0).tensor("pool.max2d x");
  const std::vector<int64_t>& p = c.arg(1).shape("pool.max2d parameters");
  const Tensor& y = c.arg(2).tensor("pool.max2d y");
  const size_t rank = p.size() == 9 ? 5 : 4;
  if (!(x.dtype() == DType::f32()) || !(y.dtype() == DType::f32()) || x.shape().size() != rank ||
      y.shape().size() != rank)
    rt_fail(what, ": needs f32 x and y of rank ", rank, ", got ", x.type_str(), " and ", y.type_str());
  if ((p.size() != 8 && p.size() != 9) || p[0] < 1 || p[1] < 1 || p[2] < 1 || p[3] < 1 || p[4] < 0 || p[5] < 0 ||
      p[6] < 1 || p[7] < 1)
    rt_fail(what, ": needs (KH, KW, sh, sw, ph, pw, dh, dw[, lanes]) with positive sizes, strides and dilations, got ",
            shape_str(p));
  const std::vector<int64_t>&xs = x.shape(), &ys = y.shape();
  if (xs[0] != ys[0] || xs[1] != ys[1] || (rank == 5 && (xs[4] != p[8] || ys[4] != p[8])))
    rt_fail(what, ": x ", x.type_str(), " and y ", y.type_str(), " do not agree");
  const PoolGeometry g{xs[0], xs[1], xs[2], xs[3], ys[2], ys[3], p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]};
  // Every window starts inside the padded input (the pool's output sizes guarantee it).
  if ((g.OH > 0 && (g.OH - 1) * g.sh - g.ph >= g.H + g.ph) || (g.OW > 0 && (g.OW - 1) * g.sw - g.pw >= g.W + g.pw))
    rt_fail(what, ": y ", y.type_str(), " has windows past x ", x.type_str(), " and its padding");
  if (x.numel() == 0 || y.numel() == 0) return;
  if (rank == 5)
    return max_pool2d_lanes_f32(g, p[8], static_cast<const float*>(x.data()), static_cast<float*>(y.data()),
                                ThreadPool::global().get());
  max_pool2d_f32(g, static_cast<const float*>(x.data()), static_cast<float*>(y.data()), ThreadPool::global().get());
}

}  // namespace

void register_pool_builtins() { register_builtin("pool.max2d", max_pool2d); }

}  // namespace relax::rt
