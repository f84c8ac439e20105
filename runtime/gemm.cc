#include "runtime/gemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "runtime/cpu_isa.h"
#include "runtime/thread_pool.h"

namespace relax::rt {
namespace {

constexpr int MR = 6, NR = 16;
constexpr int64_t kKc = 256;  // k per block: an A micro-panel (kKc x 12) stays in L1
constexpr int64_t kMc = 72;   // rows of A per packed block (L2)
constexpr int64_t kNc = 512;  // columns of B per packed block (L2)

// c (mr x nr of a 6 x 16 tile) = or += the tile's product. Both kernels
// compute each element as fma chains over k in order, so they agree
// bitwise with each other and across tiles.
// b: rows of the tile's columns, ldb floats apart (the packed panel's
// width, or B's own leading dimension when B is read in place).
using Kernel = void (*)(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc,
                        bool accumulate, int mr, int nr);

void store_tile(const float* t, float* c, int64_t ldc, bool accumulate, int mr, int nr) {
  for (int i = 0; i < mr; ++i)
    for (int j = 0; j < nr; ++j) c[i * ldc + j] = accumulate ? c[i * ldc + j] + t[i * NR + j] : t[i * NR + j];
}

void kernel_portable(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate,
                     int mr, int nr) {
  float t[MR * NR] = {};
  for (int64_t k = 0; k < kc; ++k, a += MR, b += ldb)
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j) t[i * NR + j] = std::fma(a[i], b[j], t[i * NR + j]);
  store_tile(t, c, ldc, accumulate, mr, nr);
}

#ifdef RELAX_X86_KERNELS
// Twelve named accumulators: an array of them is kept in memory by GCC.
__attribute__((target("avx2,fma"))) void kernel_avx2(int64_t kc, const float* a, const float* b, int64_t ldb,
                                                     float* c, int64_t ldc, bool accumulate, int mr, int nr) {
  __m256 t00 = _mm256_setzero_ps(), t01 = t00, t10 = t00, t11 = t00, t20 = t00, t21 = t00, t30 = t00, t31 = t00,
         t40 = t00, t41 = t00, t50 = t00, t51 = t00;
  for (int i = 0; i < mr; ++i) _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
  for (int64_t k = 0; k < kc; ++k, a += MR, b += ldb) {
    _mm_prefetch(reinterpret_cast<const char*>(b + ldb * 8), _MM_HINT_T0);
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

#ifdef RELAX_X86_KERNELS
// AVX-512: 32 columns (two vectors) by R rows, R = 6 (one panel of A) or
// 12 (two panels: the second at a + MR * kc, as pack_a lays them out), so
// packed A stays the layout every kernel reads. The 24 sums of R = 12 and
// the two rows of B fit the 32 vector registers. Edges are masked.
template <int R>
__attribute__((target("avx512f"))) void kernel_avx512(int64_t kc, const float* a, const float* b, int64_t ldb,
                                                      float* c, int64_t ldc, bool accumulate, int mr, int nr) {
  static_assert(R == 6 || R == 12, "one or two panels of A");
  const float* a2 = a + MR * kc;
  __m512 s00 = _mm512_setzero_ps(), s01 = s00, s10 = s00, s11 = s00, s20 = s00, s21 = s00, s30 = s00, s31 = s00,
         s40 = s00, s41 = s00, s50 = s00, s51 = s00, s60 = s00, s61 = s00, s70 = s00, s71 = s00, s80 = s00,
         s81 = s00, s90 = s00, s91 = s00, sa0 = s00, sa1 = s00, sb0 = s00, sb1 = s00;
  for (int i = 0; i < mr; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + 16), _MM_HINT_T0);
  }
  for (int64_t k = 0; k < kc; ++k, a += MR, a2 += MR, b += ldb) {
    _mm_prefetch(reinterpret_cast<const char*>(b + ldb * 8), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(b + ldb * 8 + 16), _MM_HINT_T0);
    __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16), ai;
#define RELAX_ROW(i, src, j)                   \
  ai = _mm512_set1_ps(src[j]);                 \
  s##i##0 = _mm512_fmadd_ps(ai, b0, s##i##0); \
  s##i##1 = _mm512_fmadd_ps(ai, b1, s##i##1);
    RELAX_ROW(0, a, 0) RELAX_ROW(1, a, 1) RELAX_ROW(2, a, 2) RELAX_ROW(3, a, 3) RELAX_ROW(4, a, 4) RELAX_ROW(5, a, 5)
    if constexpr (R == 12) {
      RELAX_ROW(6, a2, 0) RELAX_ROW(7, a2, 1) RELAX_ROW(8, a2, 2) RELAX_ROW(9, a2, 3) RELAX_ROW(a, a2, 4)
      RELAX_ROW(b, a2, 5)
    }
#undef RELAX_ROW
  }
  const __m512 rows[12][2] = {{s00, s01}, {s10, s11}, {s20, s21}, {s30, s31}, {s40, s41}, {s50, s51},
                              {s60, s61}, {s70, s71}, {s80, s81}, {s90, s91}, {sa0, sa1}, {sb0, sb1}};
  const __mmask16 m0 = nr >= 16 ? __mmask16(0xffff) : __mmask16((1u << nr) - 1);
  const __mmask16 m1 = nr >= 32 ? __mmask16(0xffff) : nr > 16 ? __mmask16((1u << (nr - 16)) - 1) : __mmask16(0);
  for (int i = 0; i < mr; ++i) {
    float* ci = c + i * ldc;
    __m512 lo = rows[i][0], hi = rows[i][1];
    if (accumulate) {
      lo = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, ci), lo);
      hi = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, ci + 16), hi);
    }
    _mm512_mask_storeu_ps(ci, m0, lo);
    _mm512_mask_storeu_ps(ci + 16, m1, hi);
  }
}

// AVX-512 for products of at most 16 columns (a convolution over a 4x4
// plane): R rows by one vector of 16, where the 32-column tile would leave
// half its lanes empty.
template <int R>
__attribute__((target("avx512f"))) void kernel_avx512_narrow(int64_t kc, const float* a, const float* b,
                                                             int64_t ldb, float* c, int64_t ldc, bool accumulate,
                                                             int mr, int nr) {
  static_assert(R == 6 || R == 12, "one or two panels of A");
  const float* a2 = a + MR * kc;
  __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0, s8 = s0, s9 = s0,
         sa = s0, sb = s0;
  for (int64_t k = 0; k < kc; ++k, a += MR, a2 += MR, b += ldb) {
    const __m512 b0 = _mm512_loadu_ps(b);
#define RELAX_ROW(i, src, j) s##i = _mm512_fmadd_ps(_mm512_set1_ps(src[j]), b0, s##i);
    RELAX_ROW(0, a, 0) RELAX_ROW(1, a, 1) RELAX_ROW(2, a, 2) RELAX_ROW(3, a, 3) RELAX_ROW(4, a, 4) RELAX_ROW(5, a, 5)
    if constexpr (R == 12) {
      RELAX_ROW(6, a2, 0) RELAX_ROW(7, a2, 1) RELAX_ROW(8, a2, 2) RELAX_ROW(9, a2, 3) RELAX_ROW(a, a2, 4)
      RELAX_ROW(b, a2, 5)
    }
#undef RELAX_ROW
  }
  const __m512 rows[12] = {s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, sa, sb};
  const __mmask16 m = nr >= 16 ? __mmask16(0xffff) : __mmask16((1u << nr) - 1);
  for (int i = 0; i < mr; ++i) {
    float* ci = c + i * ldc;
    __m512 v = rows[i];
    if (accumulate) v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, ci), v);
    _mm512_mask_storeu_ps(ci, m, v);
  }
}
#endif

// A micro-kernel and its tile: `rows` of A per call (one or two MR-row
// panels) by `cols` columns of B (B is packed in panels of `cols`).
struct Micro {
  Kernel narrow;  // up to MR rows
  Kernel wide;    // up to `rows` rows; == narrow when rows == MR
  int rows, cols;
};
constexpr int kMaxCols = 32;

// The kernel for a product of N columns.
const Micro& micro(int64_t N) {
  static const Micro portable{kernel_portable, kernel_portable, MR, NR};
#ifdef RELAX_X86_KERNELS
  static const Micro avx2{kernel_avx2, kernel_avx2, MR, NR};
  static const Micro avx512{kernel_avx512<6>, kernel_avx512<12>, 2 * MR, 32};
  static const Micro avx512_narrow{kernel_avx512_narrow<6>, kernel_avx512_narrow<12>, 2 * MR, 16};
  switch (kernel_isa()) {
    case KernelIsa::avx512: return N <= 16 ? avx512_narrow : avx512;
    case KernelIsa::avx2: return avx2;
    case KernelIsa::portable: break;
  }
#endif
  return portable;
}

// A[rows, k0:k0+kc] as MR-row panels, k-major, zero-padded to whole panels;
// A[i, k] at A[i * rsa + k * csa].
void pack_a(const float* A, int64_t rsa, int64_t csa, int64_t rows, int64_t kc, float* out) {
  for (int64_t p = 0; p < rows; p += MR, out += MR * kc) {
    int mr = int(std::min<int64_t>(MR, rows - p));
    if (csa == 1) {
      for (int64_t k = 0; k < kc; ++k)
        for (int i = 0; i < MR; ++i) out[k * MR + i] = i < mr ? A[(p + i) * rsa + k] : 0.0f;
      continue;
    }
    // A stored transposed: a panel's rows are contiguous along i at each k.
    for (int64_t k = 0; k < kc; ++k) {
      const float* src = A + p * rsa + k * csa;
      for (int i = 0; i < MR; ++i) out[k * MR + i] = i < mr ? src[i * rsa] : 0.0f;
    }
  }
}
void pack_a(const float* A, int64_t lda, int64_t rows, int64_t kc, float* out) { pack_a(A, lda, 1, rows, kc, out); }

// B[k0:k0+kc, cols] as `w`-column panels, k-major, zero-padded. Row by
// row: each row of B is read once, in order (the hardware prefetches one
// stream well, and not a stream per row of a panel).
void pack_b(const float* B, int64_t ldb, int64_t kc, int64_t cols, int w, float* out);

// The same from B[k, j] at B[k * rsb + j * csb]: a B stored transposed
// (csb > 1) is read column by column, each contiguous along k.
void pack_b(const float* B, int64_t rsb, int64_t csb, int64_t kc, int64_t cols, int w, float* out) {
  if (csb == 1) return pack_b(B, rsb, kc, cols, w, out);
  for (int64_t j0 = 0; j0 < cols; j0 += w, out += w * kc) {
    const int64_t n = std::min<int64_t>(w, cols - j0);
    for (int64_t j = 0; j < w; ++j) {
      if (j >= n) {
        for (int64_t k = 0; k < kc; ++k) out[k * w + j] = 0.0f;
        continue;
      }
      const float* src = B + (j0 + j) * csb;
      for (int64_t k = 0; k < kc; ++k) out[k * w + j] = src[k * rsb];
    }
  }
}

void pack_b(const float* B, int64_t ldb, int64_t kc, int64_t cols, int w, float* out) {
  const int64_t whole = cols / w, rest = cols - whole * w;
  for (int64_t k = 0; k < kc; ++k) {
    const float* src = B + k * ldb;
    float* dst = out + k * w;
    for (int64_t p = 0; p < whole; ++p, src += w, dst += w * kc) std::memcpy(dst, src, size_t(w) * sizeof(float));
    if (rest) {
      std::memcpy(dst, src, size_t(rest) * sizeof(float));
      std::fill(dst + rest, dst + w, 0.0f);
    }
  }
}

// An operand as strides: element (r, c) at p[r * rs + c * cs], or, with
// `rows`, at p[rows[r] + c * cs].
struct Operand {
  const float* p;
  int64_t rs, cs;
  const int64_t* rows = nullptr;
  const float* row(int64_t r) const { return p + (rows ? rows[r] : r * rs); }
};

// A's rows [r0, r0 + rows), columns [k0, k0 + kc) as pack_a lays them out.
void pack_a(const Operand& a, int64_t r0, int64_t k0, int64_t rows, int64_t kc, float* out) {
  if (!a.rows) return pack_a(a.p + r0 * a.rs + k0 * a.cs, a.rs, a.cs, rows, kc, out);
  for (int64_t p = 0; p < rows; p += MR, out += MR * kc) {
    int mr = int(std::min<int64_t>(MR, rows - p));
    const float* src[MR];
    for (int i = 0; i < MR; ++i) src[i] = i < mr ? a.row(r0 + p + i) + k0 * a.cs : nullptr;
    for (int64_t k = 0; k < kc; ++k)
      for (int i = 0; i < MR; ++i) out[k * MR + i] = i < mr ? src[i][k * a.cs] : 0.0f;
  }
}

// B packed once by gemm_pack_b (a constant weight): per block of kKc
// rows, the columns in panels of kPanelB, k-major, zero-padded; `Np` the
// columns rounded up to whole panels. Every micro-kernel reads its tile
// there (ldb kPanelB), the narrower ones a part of a panel.
constexpr int64_t kPanelB = kGemmPanelB;
static_assert(kPanelB == kMaxCols, "a packed panel is the widest tile");
// N rounded up to whole panels.
int64_t panel_columns(int64_t N) { return (N + kPanelB - 1) / kPanelB * kPanelB; }
struct PackedB {
  const float* p = nullptr;
  int64_t Np = 0;
  // The tile of columns from `col` in the block of rows from `pc` (kc rows).
  const float* tile(int64_t pc, int64_t kc, int64_t col) const {
    return p + pc * Np + col / kPanelB * kPanelB * kc + col % kPanelB;
  }
};

// Columns [n0, n1) of C. `Ap`: A packed by gemm_pack_a, or null: then
// each kKc x kMc block of A is packed here. `bp`: B packed by
// gemm_pack_b, or none (bp.p null): then B's blocks are packed here.
void gemm_columns(const Micro& u, int64_t M, int64_t n0, int64_t n1, int64_t K, Operand a, const float* Ap,
                  Operand b, float* C, int64_t ldc, PackedB bp = {}) {
  thread_local std::vector<float> apack, bpack;
  if (!Ap) apack.resize(size_t((kMc + MR) * kKc));
  bpack.resize(size_t((kNc + kMaxCols) * kKc));
  const int64_t Mp = (M + MR - 1) / MR * MR;
  // One call's rows hold all of A: each element of B is read once, so the
  // whole tiles read B in place and only the last, partial one is packed
  // (a 1x1 convolution with a few outputs spent most of its time packing
  // all of B for a single pass).
  // (B stored transposed is always packed.)
  const bool in_place = !bp.p && M <= u.rows && b.cs == 1;
  const float* B = b.p;
  const int64_t ldb = b.rs;
  for (int64_t jc = n0; jc < n1; jc += kNc) {
    int64_t nc = std::min(kNc, n1 - jc);
    const int64_t whole = in_place ? nc / u.cols * u.cols : 0;
    for (int64_t pc = 0; pc < K; pc += kKc) {
      int64_t kc = std::min(kKc, K - pc);
      if (!bp.p && whole < nc)
        pack_b(B + pc * b.rs + (jc + whole) * b.cs, b.rs, b.cs, kc, nc - whole, u.cols, bpack.data() + whole * kc);
      for (int64_t ic = 0; ic < M; ic += kMc) {
        int64_t mc = std::min(kMc, M - ic);
        const float* ablock = Ap ? Ap + pc * Mp + ic * kc : apack.data();
        if (!Ap) pack_a(a, ic, pc, mc, kc, apack.data());
        for (int64_t ir = 0; ir < mc; ir += u.rows) {
          int mr = int(std::min<int64_t>(u.rows, mc - ir));
          for (int64_t jr = 0; jr < nc; jr += u.cols) {
            int nr = int(std::min<int64_t>(u.cols, nc - jr));
            const bool direct = jr < whole;
            const float* btile = bp.p ? bp.tile(pc, kc, jc + jr) : direct ? B + pc * ldb + jc + jr : bpack.data() + jr * kc;
            const int64_t bld = bp.p ? kPanelB : direct ? ldb : int64_t(u.cols);
            (mr > MR ? u.wide : u.narrow)(kc, ablock + ir * kc, btile, bld, C + (ic + ir) * ldc + jc + jr, ldc, pc > 0,
                                          mr, nr);
          }
        }
      }
    }
  }
}

void gemm(int64_t M, int64_t N, int64_t K, Operand a, const float* Ap, Operand b, float* C, int64_t ldc,
          ThreadPool* pool, PackedB bp = {}) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    for (int64_t i = 0; i < M; ++i) std::fill(C + i * ldc, C + i * ldc + N, 0.0f);
    return;
  }
  const Micro& u = micro(N);
  const int64_t w = u.cols, panels = (N + w - 1) / w;
  int64_t chunks = pool ? std::min<int64_t>(pool->num_threads(), panels) : 1;
  if (double(M) * double(N) * double(K) < double(1 << 20)) chunks = 1;
  if (chunks <= 1) return gemm_columns(u, M, 0, N, K, a, Ap, b, C, ldc, bp);
  pool->parallel_for(chunks, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      int64_t n0 = std::min(N, panels * t / chunks * w), n1 = std::min(N, panels * (t + 1) / chunks * w);
      if (n0 < n1) gemm_columns(u, M, n0, n1, K, a, Ap, b, C, ldc, bp);
    }
  });
}

// ---- one row: y = x B ---------------------------------------------------------------------

// Columns [j0, j1) of y = x B, one column at a time: the portable form, and
// the AVX2 one's last columns.
void gemv_columns(int64_t j0, int64_t j1, int64_t K, const float* x, const float* B, int64_t ldb, float* y) {
  for (int64_t j = j0; j < j1; ++j) {
    float acc = 0.0f;
    for (int64_t k = 0; k < K; ++k) acc = std::fma(x[k], B[k * ldb + j], acc);
    y[j] = acc;
  }
}

// Columns [0, count) of y = x B (x: K floats, B: K rows of ldb), count <=
// 16 * V: V vectors of sums, the last masked, each column one chain of
// fused multiply-adds over k in order.
#ifdef RELAX_X86_KERNELS
template <int V>
__attribute__((target("avx512f"))) void gemv_block_avx512(int64_t K, const float* x, const float* B, int64_t ldb,
                                                          float* y, int64_t count) {
  __m512 acc[V];
#pragma GCC unroll 16
  for (int v = 0; v < V; ++v) acc[v] = _mm512_setzero_ps();
  const int64_t rest = count - 16 * (V - 1);
  const __mmask16 last = rest >= 16 ? __mmask16(0xffff) : __mmask16((1u << rest) - 1);
  for (int64_t k = 0; k < K; ++k, B += ldb) {
    const __m512 xk = _mm512_set1_ps(x[k]);
#pragma GCC unroll 16
    for (int v = 0; v < V; ++v)
      acc[v] = _mm512_fmadd_ps(xk, v + 1 < V ? _mm512_loadu_ps(B + 16 * v) : _mm512_maskz_loadu_ps(last, B + 16 * v),
                               acc[v]);
  }
#pragma GCC unroll 16
  for (int v = 0; v < V; ++v) {
    if (v + 1 < V)
      _mm512_storeu_ps(y + 16 * v, acc[v]);
    else
      _mm512_mask_storeu_ps(y + 16 * v, last, acc[v]);
  }
}

template <int... V>
void gemv_avx512(int64_t N, int64_t K, const float* x, const float* B, int64_t ldb, float* y,
                 std::integer_sequence<int, V...>) {
  using Block = void (*)(int64_t, const float*, const float*, int64_t, float*, int64_t);
  static constexpr Block blocks[] = {gemv_block_avx512<V + 1>...};
  constexpr int64_t kWide = 16 * int64_t(sizeof...(V));  // 256 columns: 1 KiB of each row of B per step
  for (int64_t j = 0; j < N; j += kWide) {
    int64_t count = std::min(kWide, N - j);
    blocks[(count + 15) / 16 - 1](K, x, B + j, ldb, y + j, count);
  }
}

__attribute__((target("avx2,fma"))) void gemv_avx2(int64_t N, int64_t K, const float* x, const float* B,
                                                   int64_t ldb, float* y) {
  int64_t j = 0;
  for (; j + 32 <= N; j += 32) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    const float* b = B + j;
    for (int64_t k = 0; k < K; ++k, b += ldb) {
      const __m256 xk = _mm256_broadcast_ss(x + k);
      a0 = _mm256_fmadd_ps(xk, _mm256_loadu_ps(b), a0);
      a1 = _mm256_fmadd_ps(xk, _mm256_loadu_ps(b + 8), a1);
      a2 = _mm256_fmadd_ps(xk, _mm256_loadu_ps(b + 16), a2);
      a3 = _mm256_fmadd_ps(xk, _mm256_loadu_ps(b + 24), a3);
    }
    _mm256_storeu_ps(y + j, a0), _mm256_storeu_ps(y + j + 8, a1);
    _mm256_storeu_ps(y + j + 16, a2), _mm256_storeu_ps(y + j + 24, a3);
  }
  gemv_columns(j, N, K, x, B, ldb, y);
}
#endif

// One panel's part of one block: y[j] (+)= sum over the block's kc rows
// of x[k] b[k * kPanelB + j] for j < n, from y's values where
// `accumulate`, else from zero.
using PanelKernel = void (*)(int64_t kc, const float* x, const float* b, float* y, int64_t n, bool accumulate);

void panel_portable(int64_t kc, const float* x, const float* b, float* y, int64_t n, bool accumulate) {
  float t[kPanelB] = {};
  if (accumulate) std::copy(y, y + n, t);
  for (int64_t k = 0; k < kc; ++k)
    for (int j = 0; j < kPanelB; ++j) t[j] = std::fma(x[k], b[k * kPanelB + j], t[j]);
  std::copy(t, t + n, y);
}
#ifdef RELAX_X86_KERNELS
__attribute__((target("avx512f"))) void panel_avx512(int64_t kc, const float* x, const float* b, float* y, int64_t n,
                                                     bool accumulate) {
  const __mmask16 m0 = n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1);
  const __mmask16 m1 = n >= 32 ? __mmask16(0xffff) : n > 16 ? __mmask16((1u << (n - 16)) - 1) : __mmask16(0);
  __m512 t0 = accumulate ? _mm512_maskz_loadu_ps(m0, y) : _mm512_setzero_ps();
  __m512 t1 = accumulate ? _mm512_maskz_loadu_ps(m1, y + 16) : _mm512_setzero_ps();
  for (int64_t k = 0; k < kc; ++k, b += kPanelB) {
    const __m512 xk = _mm512_set1_ps(x[k]);
    t0 = _mm512_fmadd_ps(xk, _mm512_loadu_ps(b), t0);
    t1 = _mm512_fmadd_ps(xk, _mm512_loadu_ps(b + 16), t1);
  }
  _mm512_mask_storeu_ps(y, m0, t0);
  _mm512_mask_storeu_ps(y + 16, m1, t1);
}
__attribute__((target("avx2,fma"))) void panel_avx2(int64_t kc, const float* x, const float* b, float* y, int64_t n,
                                                    bool accumulate) {
  alignas(32) float tile[kPanelB] = {};
  if (accumulate) std::copy(y, y + n, tile);
  __m256 t[4];
  for (int v = 0; v < 4; ++v) t[v] = _mm256_load_ps(tile + 8 * v);
  for (int64_t k = 0; k < kc; ++k, b += kPanelB) {
    const __m256 xk = _mm256_broadcast_ss(x + k);
    for (int v = 0; v < 4; ++v) t[v] = _mm256_fmadd_ps(xk, _mm256_loadu_ps(b + 8 * v), t[v]);
  }
  for (int v = 0; v < 4; ++v) _mm256_store_ps(tile + 8 * v, t[v]);
  std::copy(tile, tile + n, y);
}
#endif

// Columns [p0 * kPanelB, N) of panels [p0, p1) of y = x Bp, B packed by
// gemm_pack_b: each column one chain of fused multiply-adds over k in
// order, as gemv_f32 gives it (blas.matmul's one row). The packed blocks
// are streamed in memory order, block by block, each panel's sums kept in
// y between blocks (a float stored and reloaded is the same float): read
// panel by panel across the blocks, the stream jumped a block's size
// every 32 KiB and ran at half the copy bandwidth.
void gemv_packed(int64_t N, int64_t K, const float* x, PackedB bp, int64_t p0, int64_t p1, float* y) {
  PanelKernel panel = panel_portable;
#ifdef RELAX_X86_KERNELS
  if (kernel_isa() == KernelIsa::avx512) panel = panel_avx512;
  if (kernel_isa() == KernelIsa::avx2) panel = panel_avx2;
#endif
  for (int64_t pc = 0; pc < K; pc += kKc) {
    const int64_t kc = std::min(kKc, K - pc);
    for (int64_t p = p0; p < p1; ++p)
      panel(kc, x + pc, bp.tile(pc, kc, p * kPanelB), y + p * kPanelB, std::min<int64_t>(kPanelB, N - p * kPanelB),
            pc > 0);
  }
}

}  // namespace

void gemv_f32(int64_t N, int64_t K, const float* x, const float* B, int64_t ldb, float* y) {
  if (N <= 0) return;
#ifdef RELAX_X86_KERNELS
  switch (kernel_isa()) {
    case KernelIsa::avx512:
      return gemv_avx512(N, K, x, B, ldb, y, std::make_integer_sequence<int, 16>{});
    case KernelIsa::avx2:
      return gemv_avx2(N, K, x, B, ldb, y);
    case KernelIsa::portable:
      break;
  }
#endif
  gemv_columns(0, N, K, x, B, ldb, y);
}

void gemm_f32(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
              int64_t ldc, ThreadPool* pool) {
  gemm(M, N, K, {A, lda, 1}, nullptr, {B, ldb, 1}, C, ldc, pool);
}

void gemm_f32_strided(int64_t M, int64_t N, int64_t K, const float* A, int64_t rsa, int64_t csa, const float* B,
                      int64_t rsb, int64_t csb, float* C, int64_t ldc, ThreadPool* pool) {
  gemm(M, N, K, {A, rsa, csa}, nullptr, {B, rsb, csb}, C, ldc, pool);
}

void gemm_f32_rows(int64_t M, int64_t N, int64_t K, const float* A, const int64_t* rows, const float* B, int64_t rsb,
                   int64_t csb, float* C, int64_t ldc, ThreadPool* pool) {
  gemm(M, N, K, {A, 0, 1, rows}, nullptr, {B, rsb, csb}, C, ldc, pool);
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
  gemm(M, N, K, {nullptr, 0, 1}, Ap, {B, ldb, 1}, C, ldc, pool);
}

int64_t gemm_packed_b_size(int64_t K, int64_t N) { return K * panel_columns(N); }

void gemm_pack_b(int64_t K, int64_t N, const float* B, int64_t ldb, float* out) {
  for (int64_t pc = 0; pc < K; pc += kKc)
    pack_b(B + pc * ldb, ldb, std::min(kKc, K - pc), N, int(kPanelB), out + pc * panel_columns(N));
}

void gemm_f32_packed_b(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* Bp, int64_t n0,
                       int64_t n1, float* C, int64_t ldc) {
  if (M <= 0 || n0 >= n1) return;
  const PackedB bp{Bp, panel_columns(N)};
  if (K <= 0) {
    for (int64_t i = 0; i < M; ++i) std::fill(C + i * ldc + n0, C + i * ldc + n1, 0.0f);
    return;
  }
  // One row: the packed blocks streamed as a matrix-vector product.
  if (M == 1) return gemv_packed(std::min(N, n1), K, A, bp, n0 / kPanelB, (n1 + kPanelB - 1) / kPanelB, C);
  gemm_columns(micro(N), M, n0, n1, K, {A, lda, 1}, nullptr, {nullptr, 0, 1}, C, ldc, bp);
}

}  // namespace relax::rt
