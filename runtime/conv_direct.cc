#include "runtime/conv_direct.h"

#include <algorithm>

#include "runtime/error.h"
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

// One tile: channels [o0, o0 + oc) (oc <= 16) at flattened output
// positions [p0, p0 + nw) (nw <= 6), which may span output rows. px[j]:
// position j's first input in the zero-padded image (its top-left tap of
// channel 0); wt: this channel block's weights [c][kh][kw][16]; yb: the
// output at channel o0, position p0 (channel stride `plane`).
template <typename Op>
__attribute__((target("avx2,fma"))) void tile(const typename Op::T* const* px, int64_t Cg, int64_t KH, int64_t KW,
                                              int64_t cstride, int64_t rstride, int64_t dw, const typename Op::T* wt,
                                              typename Op::T* yb, int64_t plane, int64_t oc, int nw) {
  using T = typename Op::T;
  using V = typename Op::V;
  V a0 = Op::zero(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0;
  V b0 = a0, b1 = a0, b2 = a0, b3 = a0, b4 = a0, b5 = a0;
  const T *p0 = px[0], *p1 = px[1], *p2 = px[2], *p3 = px[3], *p4 = px[4], *p5 = px[5];
  for (int64_t ci = 0; ci < Cg; ++ci) {
    for (int64_t kh = 0; kh < KH; ++kh) {
      int64_t off = ci * cstride + kh * rstride;
      for (int64_t kw = 0; kw < KW; ++kw, off += dw, wt += kLanes) {
        const V w0 = Op::load(wt), w1 = Op::load(wt + 8);
        V x;
#define RELAX_STEP(j)            \
  x = Op::broadcast(p##j + off); \
  a##j = Op::madd(w0, x, a##j);  \
  b##j = Op::madd(w1, x, b##j);
        RELAX_STEP(0) RELAX_STEP(1) RELAX_STEP(2) RELAX_STEP(3) RELAX_STEP(4) RELAX_STEP(5)
#undef RELAX_STEP
      }
    }
  }
  alignas(32) T t[kPos][kLanes];
  const V lo[kPos] = {a0, a1, a2, a3, a4, a5}, hi[kPos] = {b0, b1, b2, b3, b4, b5};
  for (int j = 0; j < kPos; ++j) {
    Op::store(t[j], lo[j]);
    Op::store(t[j] + 8, hi[j]);
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

namespace {

#ifdef RELAX_CONV_X86
template <typename Op>
void direct(const Conv2dGeometry& g, const typename Op::T* x, const typename Op::T* w, typename Op::T* y,
            std::vector<typename Op::T>& scratch, ThreadPool* pool) {
  using T = typename Op::T;
  const int64_t Cg = g.C / g.groups, Og = g.O / g.groups, K = Cg * g.KH * g.KW, P = g.OH * g.OW;
  const int64_t blocks = (Og + kLanes - 1) / kLanes;
  // The padded image: every tap of every output position lies inside it.
  const int64_t Hp = std::max(g.H + g.ph, (g.OH - 1) * g.sh + (g.KH - 1) * g.dh + 1);
  const int64_t Wp = std::max(g.W + g.pw, (g.OW - 1) * g.sw + (g.KW - 1) * g.dw + 1);
  // scratch: weights [group][block][k][16] (zero past Og), then the padded input (N, C, Hp, Wp).
  // Without padding, when every window lies inside the image, x itself.
  const bool copy = g.ph != 0 || g.pw != 0 || Hp != g.H || Wp != g.W;
  const size_t wsize = size_t(g.groups * blocks * K * kLanes);
  scratch.resize(wsize + (copy ? size_t(g.N * g.C * Hp * Wp) : 0));
  T* wt = scratch.data();
  T* xp = copy ? scratch.data() + wsize : nullptr;
  // Zeros where the padding is: rows above and below, columns left and right.
  for (int64_t c = 0; copy && c < g.N * g.C; ++c) {
    T* plane = xp + c * Hp * Wp;
    std::fill(plane, plane + g.ph * Wp, T(0));
    std::fill(plane + (g.ph + g.H) * Wp, plane + Hp * Wp, T(0));
    for (int64_t h = g.ph; h < g.ph + g.H; ++h) {
      std::fill(plane + h * Wp, plane + h * Wp + g.pw, T(0));
      std::fill(plane + h * Wp + g.pw + g.W, plane + (h + 1) * Wp, T(0));
    }
  }
  // Written in order, read from 16 rows at once.
  for (int64_t gb = 0; gb < g.groups * blocks; ++gb) {
    int64_t gi = gb / blocks, o0 = gb % blocks * kLanes, oc = std::min<int64_t>(kLanes, Og - o0);
    const T* src = w + (gi * Og + o0) * K;
    T* dst = wt + gb * K * kLanes;
    for (int64_t k = 0; k < K; ++k, dst += kLanes) {
      for (int64_t l = 0; l < oc; ++l) dst[l] = src[l * K + k];
      for (int64_t l = oc; l < kLanes; ++l) dst[l] = T(0);
    }
  }
  for (int64_t c = 0; copy && c < g.N * g.C; ++c)
    for (int64_t h = 0; h < g.H; ++h)
      std::copy(x + (c * g.H + h) * g.W, x + (c * g.H + h + 1) * g.W, xp + (c * Hp + h + g.ph) * Wp + g.pw);
  const T* image = copy ? xp : x;
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
      for (int j = 0; j < kPos; ++j) {
        int64_t p = p0 + std::min(j, nw - 1);  // a partial tile repeats its last position
        px[j] = xg + (p / g.OW * g.sh) * Wp + p % g.OW * g.sw;
      }
      int64_t o0 = gi * Og + b * kLanes, oc = std::min<int64_t>(kLanes, Og - b * kLanes);
      tile<Op>(px, Cg, g.KH, g.KW, Hp * Wp, g.dh * Wp, g.dw, wt + (gi * blocks + b) * K * kLanes,
               y + (n * g.O + o0) * P + p0, P, oc, nw);
    }
  };
  double flops = 2.0 * double(g.N * g.O * P) * double(K);
  if (pool && pool->num_threads() > 1 && items > 1 && flops >= double(1 << 18))
    pool->parallel_for(items, body);
  else
    body(0, items);
}
#endif

// Without AVX2 (i32 only: f32 takes im2col there): the same sums in loops.
template <typename T>
void direct_portable(const Conv2dGeometry& g, const T* x, const T* w, T* y, ThreadPool* pool) {
  const int64_t Cg = g.C / g.groups, Og = g.O / g.groups;
  auto body = [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {  // r: (n, o)
      int64_t n = r / g.O, o = r % g.O, gi = o / Og;
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          T acc = T(0);
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t kh = 0; kh < g.KH; ++kh) {
              int64_t ih = oh * g.sh + kh * g.dh - g.ph;
              if (ih < 0 || ih >= g.H) continue;
              for (int64_t kw = 0; kw < g.KW; ++kw) {
                int64_t iw = ow * g.sw + kw * g.dw - g.pw;
                if (iw < 0 || iw >= g.W) continue;
                // Wrapping as the vector code's (and a loop nest's) i32 arithmetic does.
                acc = T(uint32_t(acc) + uint32_t(x[((n * g.C + gi * Cg + c) * g.H + ih) * g.W + iw]) *
                                            uint32_t(w[((o * Cg + c) * g.KH + kh) * g.KW + kw]));
              }
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

}  // namespace

void conv2d_direct_f32(const Conv2dGeometry& g, const float* x, const float* w, float* y, std::vector<float>& scratch,
                       ThreadPool* pool) {
#ifdef RELAX_CONV_X86
  if (conv2d_direct_available()) return direct<F32x8>(g, x, w, y, scratch, pool);
#endif
  (void)g, (void)x, (void)w, (void)y, (void)scratch, (void)pool;
  rt_fail("conv2d_direct_f32: this CPU has no AVX2 and FMA (the caller asks conv2d_direct_available first)");
}

void conv2d_direct_i32(const Conv2dGeometry& g, const int32_t* x, const int32_t* w, int32_t* y,
                       std::vector<int32_t>& scratch, ThreadPool* pool) {
#ifdef RELAX_CONV_X86
  if (conv2d_direct_available()) return direct<I32x8>(g, x, w, y, scratch, pool);
#endif
  (void)scratch;
  direct_portable(g, x, w, y, pool);
}

void conv2d_loops_i32(const Conv2dGeometry& g, const int32_t* x, const int32_t* w, int32_t* y, ThreadPool* pool) {
  direct_portable(g, x, w, y, pool);
}

}  // namespace relax::rt
