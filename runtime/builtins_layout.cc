// layout.transpose: batched 2-D transposes of 4-byte elements, the cpu
// target's form of a permute_dims that swaps two runs of axes
// (passes/legalize/manipulate.cc): NCHW <-> NHWC, and the blocked channel
// layout's conversions (N, C / 16, 16, H, W) <-> (N, C / 16, H, W, 16)
// (passes/block_layout.cc). Tiles of 16 x 16 go through registers
// (AVX-512: 16 loads, 64 shuffles, 16 stores); a loop nest per element read
// one side a row apart (the blocked layout's conversions ran at 6 GB/s).
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "runtime/builtin_util.h"
#include "runtime/cpu_isa.h"
#include "runtime/error.h"
#include "runtime/thread_pool.h"
#include "runtime/vm.h"

namespace relax::rt {
namespace {

constexpr int64_t kTile = 16;

// y (C x R) = x (R x C)^T for the tile's rows [r0, r0 + nr) and columns
// [c0, c0 + nc), row strides ldx and ldy.
void tile_loops(const uint32_t* x, uint32_t* y, int64_t ldx, int64_t ldy, int64_t nr, int64_t nc) {
  for (int64_t c = 0; c < nc; ++c)
    for (int64_t r = 0; r < nr; ++r) y[c * ldy + r] = x[r * ldx + c];
}

#ifdef RELAX_X86_KERNELS
__attribute__((target("avx512f"))) void tile_avx512(const uint32_t* x, uint32_t* y, int64_t ldx, int64_t ldy) {
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(reinterpret_cast<const float*>(x + i * ldx));
  // (Masked forms, all lanes: GCC 12 warns of the plain ones' undefined
  // source.) Pairs of rows interleaved by element, then by pairs of elements, then
  // 128-bit quarters twice: element (i, j) ends in row j, lane i.
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_maskz_unpacklo_ps(0xffff, r[i], r[i + 1]);
    t[i + 1] = _mm512_maskz_unpackhi_ps(0xffff, r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    const __m512d a = _mm512_castps_pd(t[i]), b = _mm512_castps_pd(t[i + 1]), c = _mm512_castps_pd(t[i + 2]),
                  d = _mm512_castps_pd(t[i + 3]);
    r[i] = _mm512_castpd_ps(_mm512_maskz_unpacklo_pd(0xff, a, c));
    r[i + 1] = _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(0xff, a, c));
    r[i + 2] = _mm512_castpd_ps(_mm512_maskz_unpacklo_pd(0xff, b, d));
    r[i + 3] = _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(0xff, b, d));
  }
  // r[4q + k] holds, per 128-bit quarter m, column 4m + k of rows 4q..4q+3.
  for (int q = 0; q < 2; ++q)
    for (int k = 0; k < 4; ++k) {
      t[8 * q + k] = _mm512_maskz_shuffle_f32x4(0xffff, r[8 * q + k], r[8 * q + 4 + k], 0x88);      // quarters 0, 2 of each
      t[8 * q + 4 + k] = _mm512_maskz_shuffle_f32x4(0xffff, r[8 * q + k], r[8 * q + 4 + k], 0xdd);  // quarters 1, 3 of each
    }
  for (int k = 0; k < 8; ++k) {
    r[k] = _mm512_maskz_shuffle_f32x4(0xffff, t[k], t[8 + k], 0x88);
    r[8 + k] = _mm512_maskz_shuffle_f32x4(0xffff, t[k], t[8 + k], 0xdd);
  }
  // r[k]: column k, rows 0 to 15 in order.
  for (int i = 0; i < 16; ++i) _mm512_storeu_ps(reinterpret_cast<float*>(y + i * ldy), r[i]);
}
#endif

// y[b] (C x R) = x[b] (R x C)^T for b < B.
void transpose(const uint32_t* x, uint32_t* y, int64_t B, int64_t R, int64_t C, ThreadPool* pool, bool vector) {
#ifdef RELAX_X86_KERNELS
  const bool avx512 = vector && kernel_isa() == KernelIsa::avx512;
#else
  const bool avx512 = false;
  (void)vector;
#endif
  const int64_t row_tiles = (R + kTile - 1) / kTile;
  auto body = [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t b = i / row_tiles, r0 = i % row_tiles * kTile, nr = std::min(kTile, R - r0);
      const uint32_t* xb = x + b * R * C + r0 * C;
      uint32_t* yb = y + b * R * C + r0;
      for (int64_t c0 = 0; c0 < C; c0 += kTile) {
        const int64_t nc = std::min(kTile, C - c0);
#ifdef RELAX_X86_KERNELS
        if (avx512 && nr == kTile && nc == kTile) {
          tile_avx512(xb + c0, yb + c0 * R, C, R);
          continue;
        }
#endif
        tile_loops(xb + c0, yb + c0 * R, C, R, nr, nc);
      }
    }
  };
  const int64_t items = B * row_tiles;
  if (pool && pool->num_threads() > 1 && items > 1 && double(B) * double(R) * double(C) >= double(1 << 16))
    pool->parallel_for(items, body);
  else
    body(0, items);
}

// layout.transpose(x, shape(B, R, C), y): y[b, c, r] = x[b, r, c] for x
// and y of 4-byte elements, B * R * C of them (any shapes).
void transpose_b(BuiltinCall& c) {
  const char* what = "layout.transpose";
  if (c.num_args != 3) rt_fail(what, ": takes 3 arguments, got ", c.num_args);
  const Tensor& x = c.arg(0).tensor("layout.transpose x");
  const std::vector<int64_t>& p = c.arg(1).shape("layout.transpose parameters");
  const Tensor& y = c.arg(2).tensor("layout.transpose y");
  if (p.size() != 3 || p[0] < 0 || p[1] < 0 || p[2] < 0)
    rt_fail(what, ": needs (B, R, C), three sizes, got ", shape_str(p));
  if (x.dtype().storage_bits() != 32 || !(y.dtype() == x.dtype()) || x.numel() != p[0] * p[1] * p[2] ||
      y.numel() != x.numel())
    rt_fail(what, ": needs x and y of one 4-byte dtype and ", p[0] * p[1] * p[2], " elements, got ", x.type_str(),
            " and ", y.type_str());
  if (x.numel() == 0) return;
  transpose(static_cast<const uint32_t*>(x.data()), static_cast<uint32_t*>(y.data()), p[0], p[1], p[2],
            ThreadPool::global().get(), true);
}

}  // namespace

void register_layout_builtins() { register_builtin("layout.transpose", transpose_b); }

}  // namespace relax::rt
