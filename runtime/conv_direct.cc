#include "runtime/conv_direct.h"

#include <algorithm>

#include "runtime/thread_pool.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define RELAX_CONV_X86 1
#endif

namespace relax::rt {
namespace {

constexpr int kLanes = 16;  // output channels per tile
constexpr int kPos = 6;     // output positions per tile

#ifdef RELAX_CONV_X86
// One tile: channels [o0, o0 + oc) (oc <= 16) at flattened output
// positions [p0, p0 + nw) (nw <= 6), which may span output rows. px[j]:
// position j's first input in the zero-padded image (its top-left tap of
// channel 0); wt: this channel block's weights [c][kh][kw][16]; yb: the
// output at channel o0, position p0 (channel stride `plane`).
__attribute__((target("avx2,fma"))) void tile(const float* const* px, int64_t Cg, int64_t KH, int64_t KW,
                                              int64_t cstride, int64_t rstride, int64_t dw, const float* wt,
                                              float* yb, int64_t plane, int64_t oc, int nw) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0;
  __m256 b0 = a0, b1 = a0, b2 = a0, b3 = a0, b4 = a0, b5 = a0;
  const float *p0 = px[0], *p1 = px[1], *p2 = px[2], *p3 = px[3], *p4 = px[4], *p5 = px[5];
  for (int64_t ci = 0; ci < Cg; ++ci) {
    for (int64_t kh = 0; kh < KH; ++kh) {
      int64_t off = ci * cstride + kh * rstride;
      for (int64_t kw = 0; kw < KW; ++kw, off += dw, wt += kLanes) {
        const __m256 w0 = _mm256_loadu_ps(wt), w1 = _mm256_loadu_ps(wt + 8);
        __m256 x;
#define RELAX_STEP(j)                   \
  x = _mm256_broadcast_ss(p##j + off); \
  a##j = _mm256_fmadd_ps(w0, x, a##j);  \
  b##j = _mm256_fmadd_ps(w1, x, b##j);
        RELAX_STEP(0) RELAX_STEP(1) RELAX_STEP(2) RELAX_STEP(3) RELAX_STEP(4) RELAX_STEP(5)
#undef RELAX_STEP
      }
    }
  }
  alignas(32) float t[kPos][kLanes];
  const __m256 lo[kPos] = {a0, a1, a2, a3, a4, a5}, hi[kPos] = {b0, b1, b2, b3, b4, b5};
  for (int j = 0; j < kPos; ++j) {
    _mm256_store_ps(t[j], lo[j]);
    _mm256_store_ps(t[j] + 8, hi[j]);
  }
  for (int64_t l = 0; l < oc; ++l)
    for (int j = 0; j < nw; ++j) yb[l * plane + j] = t[j][l];
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

void conv2d_direct_f32(const Conv2dGeometry& g, const float* x, const float* w, float* y, std::vector<float>& scratch,
                       ThreadPool* pool) {
#ifdef RELAX_CONV_X86
  const int64_t Cg = g.C / g.groups, Og = g.O / g.groups, K = Cg * g.KH * g.KW, P = g.OH * g.OW;
  const int64_t blocks = (Og + kLanes - 1) / kLanes;
  // The padded image: every tap of every output position lies inside it.
  const int64_t Hp = std::max(g.H + g.ph, (g.OH - 1) * g.sh + (g.KH - 1) * g.dh + 1);
  const int64_t Wp = std::max(g.W + g.pw, (g.OW - 1) * g.sw + (g.KW - 1) * g.dw + 1);
  // scratch: weights [group][block][k][16] (zero past Og), then the padded input (N, C, Hp, Wp).
  const size_t wsize = size_t(g.groups * blocks * K * kLanes);
  scratch.resize(wsize + size_t(g.N * g.C * Hp * Wp));
  float* wt = scratch.data();
  float* xp = scratch.data() + wsize;
  // Zeros where the padding is: rows above and below, columns left and right.
  for (int64_t c = 0; c < g.N * g.C; ++c) {
    float* plane = xp + c * Hp * Wp;
    std::fill(plane, plane + g.ph * Wp, 0.0f);
    std::fill(plane + (g.ph + g.H) * Wp, plane + Hp * Wp, 0.0f);
    for (int64_t h = g.ph; h < g.ph + g.H; ++h) {
      std::fill(plane + h * Wp, plane + h * Wp + g.pw, 0.0f);
      std::fill(plane + h * Wp + g.pw + g.W, plane + (h + 1) * Wp, 0.0f);
    }
  }
  // Written in order, read from 16 rows at once.
  for (int64_t gb = 0; gb < g.groups * blocks; ++gb) {
    int64_t gi = gb / blocks, o0 = gb % blocks * kLanes, oc = std::min<int64_t>(kLanes, Og - o0);
    const float* src = w + (gi * Og + o0) * K;
    float* dst = wt + gb * K * kLanes;
    for (int64_t k = 0; k < K; ++k, dst += kLanes) {
      for (int64_t l = 0; l < oc; ++l) dst[l] = src[l * K + k];
      for (int64_t l = oc; l < kLanes; ++l) dst[l] = 0.0f;
    }
  }
  for (int64_t c = 0; c < g.N * g.C; ++c)
    for (int64_t h = 0; h < g.H; ++h)
      std::copy(x + (c * g.H + h) * g.W, x + (c * g.H + h + 1) * g.W, xp + (c * Hp + h + g.ph) * Wp + g.pw);
  const int64_t tiles = (P + kPos - 1) / kPos;
  const int64_t items = g.N * g.groups * blocks * tiles;
  auto body = [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      int64_t t = r % tiles, b = r / tiles % blocks, gi = r / (tiles * blocks) % g.groups,
              n = r / (tiles * blocks * g.groups);
      const float* xg = xp + (n * g.C + gi * Cg) * Hp * Wp;
      int64_t p0 = t * kPos;
      int nw = int(std::min<int64_t>(kPos, P - p0));
      const float* px[kPos];
      for (int j = 0; j < kPos; ++j) {
        int64_t p = p0 + std::min(j, nw - 1);  // a partial tile repeats its last position
        px[j] = xg + (p / g.OW * g.sh) * Wp + p % g.OW * g.sw;
      }
      int64_t o0 = gi * Og + b * kLanes, oc = std::min<int64_t>(kLanes, Og - b * kLanes);
      tile(px, Cg, g.KH, g.KW, Hp * Wp, g.dh * Wp, g.dw, wt + (gi * blocks + b) * K * kLanes,
           y + (n * g.O + o0) * P + p0, P, oc, nw);
    }
  };
  double flops = 2.0 * double(g.N * g.O * P) * double(K);
  if (pool && pool->num_threads() > 1 && items > 1 && flops >= double(1 << 18))
    pool->parallel_for(items, body);
  else
    body(0, items);
#else
  (void)g, (void)x, (void)w, (void)y, (void)scratch, (void)pool;
#endif
}

}  // namespace relax::rt
