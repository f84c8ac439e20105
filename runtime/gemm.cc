#include "runtime/gemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "runtime/thread_pool.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define RELAX_GEMM_X86 1
#endif

namespace relax::rt {
namespace {

constexpr int MR = 6, NR = 16;
constexpr int64_t kKc = 256;  // k per block: a B micro-panel (kKc x NR) stays in L1
constexpr int64_t kMc = 72;   // rows of A per packed block (L2)
constexpr int64_t kNc = 256;  // columns of B per packed block (L2)

// c (mr x nr of a 6 x 16 tile) = or += the tile's product. Both kernels
// compute each element as fma chains over k in order, so they agree
// bitwise with each other and across tiles.
using Kernel = void (*)(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate, int mr,
                        int nr);

void store_tile(const float* t, float* c, int64_t ldc, bool accumulate, int mr, int nr) {
  for (int i = 0; i < mr; ++i)
    for (int j = 0; j < nr; ++j) c[i * ldc + j] = accumulate ? c[i * ldc + j] + t[i * NR + j] : t[i * NR + j];
}

void kernel_portable(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate, int mr,
                     int nr) {
  float t[MR * NR] = {};
  for (int64_t k = 0; k < kc; ++k, a += MR, b += NR)
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j) t[i * NR + j] = std::fma(a[i], b[j], t[i * NR + j]);
  store_tile(t, c, ldc, accumulate, mr, nr);
}

#ifdef RELAX_GEMM_X86
// Twelve named accumulators: an array of them is kept in memory by GCC.
__attribute__((target("avx2,fma"))) void kernel_avx2(int64_t kc, const float* a, const float* b, float* c,
                                                     int64_t ldc, bool accumulate, int mr, int nr) {
  __m256 t00 = _mm256_setzero_ps(), t01 = t00, t10 = t00, t11 = t00, t20 = t00, t21 = t00, t30 = t00, t31 = t00,
         t40 = t00, t41 = t00, t50 = t00, t51 = t00;
  for (int64_t k = 0; k < kc; ++k, a += MR, b += NR) {
    __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8), ai;
#define RELAX_ROW(i)                       \
  ai = _mm256_broadcast_ss(a + i);         \
  t##i##0 = _mm256_fmadd_ps(ai, b0, t##i##0); \
  t##i##1 = _mm256_fmadd_ps(ai, b1, t##i##1);
    RELAX_ROW(0) RELAX_ROW(1) RELAX_ROW(2) RELAX_ROW(3) RELAX_ROW(4) RELAX_ROW(5)
#undef RELAX_ROW
  }
  const __m256 rows[MR][2] = {{t00, t01}, {t10, t11}, {t20, t21}, {t30, t31}, {t40, t41}, {t50, t51}};
  if (mr == MR && nr == NR) {
    for (int i = 0; i < MR; ++i) {
      float* ci = c + i * ldc;
      __m256 lo = rows[i][0], hi = rows[i][1];
      if (accumulate) {
        lo = _mm256_add_ps(_mm256_loadu_ps(ci), lo);
        hi = _mm256_add_ps(_mm256_loadu_ps(ci + 8), hi);
      }
      _mm256_storeu_ps(ci, lo);
      _mm256_storeu_ps(ci + 8, hi);
    }
    return;
  }
  alignas(32) float tile[MR * NR];
  for (int i = 0; i < MR; ++i) {
    _mm256_store_ps(tile + i * NR, rows[i][0]);
    _mm256_store_ps(tile + i * NR + 8, rows[i][1]);
  }
  store_tile(tile, c, ldc, accumulate, mr, nr);
}
#endif

Kernel pick_kernel() {
#ifdef RELAX_GEMM_X86
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return kernel_avx2;
#endif
  return kernel_portable;
}

// A[rows, k0:k0+kc] as MR-row panels, k-major, zero-padded to whole panels.
void pack_a(const float* A, int64_t lda, int64_t rows, int64_t kc, float* out) {
  for (int64_t p = 0; p < rows; p += MR, out += MR * kc) {
    int mr = int(std::min<int64_t>(MR, rows - p));
    for (int64_t k = 0; k < kc; ++k)
      for (int i = 0; i < MR; ++i) out[k * MR + i] = i < mr ? A[(p + i) * lda + k] : 0.0f;
  }
}

// B[k0:k0+kc, cols] as NR-column panels, k-major, zero-padded.
void pack_b(const float* B, int64_t ldb, int64_t kc, int64_t cols, float* out) {
  for (int64_t p = 0; p < cols; p += NR, out += NR * kc) {
    int nr = int(std::min<int64_t>(NR, cols - p));
    for (int64_t k = 0; k < kc; ++k) {
      const float* src = B + k * ldb + p;
      float* dst = out + k * NR;
      std::memcpy(dst, src, size_t(nr) * sizeof(float));
      for (int j = nr; j < NR; ++j) dst[j] = 0.0f;
    }
  }
}

// Columns [n0, n1) of C. `Ap`: A packed by gemm_pack_a, or null: then
// each kKc x kMc block of A is packed here.
void gemm_columns(Kernel kernel, int64_t M, int64_t n0, int64_t n1, int64_t K, const float* A, int64_t lda,
                  const float* Ap, const float* B, int64_t ldb, float* C, int64_t ldc) {
  thread_local std::vector<float> apack, bpack;
  if (!Ap) apack.resize(size_t((kMc + MR) * kKc));
  bpack.resize(size_t((kNc + NR) * kKc));
  const int64_t Mp = (M + MR - 1) / MR * MR;
  for (int64_t jc = n0; jc < n1; jc += kNc) {
    int64_t nc = std::min(kNc, n1 - jc);
    for (int64_t pc = 0; pc < K; pc += kKc) {
      int64_t kc = std::min(kKc, K - pc);
      pack_b(B + pc * ldb + jc, ldb, kc, nc, bpack.data());
      for (int64_t ic = 0; ic < M; ic += kMc) {
        int64_t mc = std::min(kMc, M - ic);
        const float* ablock = Ap ? Ap + pc * Mp + ic * kc : apack.data();
        if (!Ap) pack_a(A + ic * lda + pc, lda, mc, kc, apack.data());
        for (int64_t jr = 0; jr < nc; jr += NR) {
          int nr = int(std::min<int64_t>(NR, nc - jr));
          const float* bp = bpack.data() + jr * kc;
          for (int64_t ir = 0; ir < mc; ir += MR) {
            int mr = int(std::min<int64_t>(MR, mc - ir));
            kernel(kc, ablock + ir * kc, bp, C + (ic + ir) * ldc + jc + jr, ldc, pc > 0, mr, nr);
          }
        }
      }
    }
  }
}

void gemm(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* Ap, const float* B, int64_t ldb,
          float* C, int64_t ldc, ThreadPool* pool) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    for (int64_t i = 0; i < M; ++i) std::fill(C + i * ldc, C + i * ldc + N, 0.0f);
    return;
  }
  static const Kernel kernel = pick_kernel();
  int64_t panels = (N + NR - 1) / NR;
  int64_t chunks = pool ? std::min<int64_t>(pool->num_threads(), panels) : 1;
  if (double(M) * double(N) * double(K) < double(1 << 20)) chunks = 1;
  if (chunks <= 1) return gemm_columns(kernel, M, 0, N, K, A, lda, Ap, B, ldb, C, ldc);
  pool->parallel_for(chunks, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      int64_t n0 = std::min(N, panels * t / chunks * NR), n1 = std::min(N, panels * (t + 1) / chunks * NR);
      if (n0 < n1) gemm_columns(kernel, M, n0, n1, K, A, lda, Ap, B, ldb, C, ldc);
    }
  });
}

}  // namespace

void gemm_f32(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
              int64_t ldc, ThreadPool* pool) {
  gemm(M, N, K, A, lda, nullptr, B, ldb, C, ldc, pool);
}

int64_t gemm_packed_a_size(int64_t M, int64_t K) { return (M + MR - 1) / MR * MR * K; }

// Per block of kKc columns, the rows in panels of MR, k-major: what
// gemm_columns packs for each block, once for all.
void gemm_pack_a(int64_t M, int64_t K, const float* A, int64_t lda, float* out) {
  const int64_t Mp = (M + MR - 1) / MR * MR;
  for (int64_t pc = 0; pc < K; pc += kKc) pack_a(A + pc, lda, M, std::min(kKc, K - pc), out + pc * Mp);
}

void gemm_f32_packed_a(int64_t M, int64_t N, int64_t K, const float* Ap, const float* B, int64_t ldb, float* C,
                       int64_t ldc, ThreadPool* pool) {
  gemm(M, N, K, nullptr, 0, Ap, B, ldb, C, ldc, pool);
}

}  // namespace relax::rt
