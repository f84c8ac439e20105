#include "runtime/qgemm.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <utility>
#include <vector>

#include "runtime/cpu_isa.h"
#include "runtime/thread_pool.h"

namespace relax::rt {
namespace {

// A tile: `R` rows of packed A (each Kp = 4 * K4 bytes, u8) by `P` panels
// of packed B (16 columns each, `ps` bytes apart), written to C as
//   dot - ra[i] zb[n] - za[i] cz[n]
// (ra: A's row sums, za: its zero points; zb: B's zero points, cz: its
// column sums - K zb, padded to whole panels), the `cols` valid columns of
// its block only.
constexpr int kMaxRows = 6;
struct TileOut {
  int32_t* C;
  int64_t ldc, cols;
  const int32_t *ra, *za, *zb, *cz;
};
using Tile = void (*)(int64_t K4, const uint8_t* A, int64_t lda, const uint8_t* B, int64_t ps, const TileOut& o);

inline int32_t load4(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

template <int R, int P>
struct TilePortable {
  static void run(int64_t K4, const uint8_t* A, int64_t lda, const uint8_t* B, int64_t ps, const TileOut& o) {
    for (int i = 0; i < R; ++i)
      for (int64_t c = 0; c < o.cols; ++c) {
        const uint8_t* a = A + i * lda;
        const int8_t* b = reinterpret_cast<const int8_t*>(B + (c / 16) * ps + (c % 16) * 4);
        uint32_t s = 0;  // wraps as the vector forms do
        for (int64_t k = 0; k < K4; ++k, a += 4, b += 64)
          for (int j = 0; j < 4; ++j) s += uint32_t(int32_t(a[j]) * int32_t(b[j]));
        s -= uint32_t(o.ra[i]) * uint32_t(o.zb[c]) + uint32_t(o.za[i]) * uint32_t(o.cz[c]);
        o.C[i * o.ldc + c] = int32_t(s);
      }
  }
};

#ifdef RELAX_X86_KERNELS
// The tiles name their sums (c00 .. c53: row, panel) instead of indexing an
// array: GCC kept an array of sums in memory as well, storing every sum on
// every step of k. Rows and panels past the tile's R and P are never
// touched (if constexpr).
#define RELAX_SUMS(zero)                                                                                       \
  c00 = zero, c01 = zero, c02 = zero, c03 = zero, c10 = zero, c11 = zero, c12 = zero, c13 = zero, c20 = zero, \
  c21 = zero, c22 = zero, c23 = zero, c30 = zero, c31 = zero, c32 = zero, c33 = zero, c40 = zero, c41 = zero,  \
  c42 = zero, c43 = zero, c50 = zero, c51 = zero, c52 = zero, c53 = zero
#define RELAX_SUM_TABLE \
  {{c00, c01, c02, c03}, {c10, c11, c12, c13}, {c20, c21, c22, c23}, {c30, c31, c32, c33}, {c40, c41, c42, c43}, {c50, c51, c52, c53}}

// The zero-point terms and the store of 16-column vectors, the last one
// masked to the block's valid columns.
template <int R, int P>
__attribute__((target("avx512f"))) inline void finish512(const __m512i (&acc)[6][4], const TileOut& o) {
  for (int j = 0; j < P; ++j) {
    const __m512i zb = _mm512_loadu_si512(o.zb + 16 * j), cz = _mm512_loadu_si512(o.cz + 16 * j);
    const int64_t left = o.cols - 16 * j;
    const __mmask16 m = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
    for (int i = 0; i < R; ++i) {
      __m512i v = _mm512_sub_epi32(acc[i][j], _mm512_mullo_epi32(_mm512_set1_epi32(o.ra[i]), zb));
      v = _mm512_sub_epi32(v, _mm512_mullo_epi32(_mm512_set1_epi32(o.za[i]), cz));
      _mm512_mask_storeu_epi32(o.C + i * o.ldc + 16 * j, m, v);
    }
  }
}

// One vpdpbusd per row and panel per 4 k: 64 multiply-adds; up to 6 rows
// by 4 panels, 24 sums in registers.
template <int R, int P>
struct TileVnni {
  __attribute__((target("avx512f,avx512bw,avx512vnni"))) static void run(int64_t K4, const uint8_t* A, int64_t lda,
                                                                         const uint8_t* B, int64_t ps,
                                                                         const TileOut& o) {
    const __m512i zero = _mm512_setzero_si512();
    __m512i RELAX_SUMS(zero);
    for (int64_t k = 0; k < K4; ++k) {
      const uint8_t* bk = B + k * 64;
      const __m512i b0 = _mm512_loadu_si512(bk);
      const __m512i b1 = P > 1 ? _mm512_loadu_si512(bk + ps) : zero;
      const __m512i b2 = P > 2 ? _mm512_loadu_si512(bk + 2 * ps) : zero;
      const __m512i b3 = P > 3 ? _mm512_loadu_si512(bk + 3 * ps) : zero;
#define RELAX_QROW(i)                                                   \
  if constexpr (R > i) {                                                \
    const __m512i a = _mm512_set1_epi32(load4(A + i * lda + 4 * k));    \
    c##i##0 = _mm512_dpbusd_epi32(c##i##0, a, b0);                      \
    if constexpr (P > 1) c##i##1 = _mm512_dpbusd_epi32(c##i##1, a, b1); \
    if constexpr (P > 2) c##i##2 = _mm512_dpbusd_epi32(c##i##2, a, b2); \
    if constexpr (P > 3) c##i##3 = _mm512_dpbusd_epi32(c##i##3, a, b3); \
  }
      RELAX_QROW(0) RELAX_QROW(1) RELAX_QROW(2) RELAX_QROW(3) RELAX_QROW(4) RELAX_QROW(5)
#undef RELAX_QROW
    }
    const __m512i sums[6][4] = RELAX_SUM_TABLE;
    finish512<R, P>(sums, o);
  }
};

// Without VNNI: the 4 bytes of each 32-bit lane as two pairs of 16-bit
// values, (k0, k2) and (k1, k3), each pair's products summed by vpmaddwd
// (u8 x i8 products fit 16-bit operands and their pair sums 32 bits); up
// to 6 rows by 2 panels.
template <int R, int P>
struct TileBw {
  __attribute__((target("avx512f,avx512bw"))) static void run(int64_t K4, const uint8_t* A, int64_t lda,
                                                              const uint8_t* B, int64_t ps, const TileOut& o) {
    static_assert(P <= 2, "two panels");
    const __m512i zero = _mm512_setzero_si512(), low = _mm512_set1_epi32(0x00FF00FF);
    __m512i RELAX_SUMS(zero);
    for (int64_t k = 0; k < K4; ++k) {
      const uint8_t* bk = B + k * 64;
      const __m512i b0 = _mm512_loadu_si512(bk), b1 = P > 1 ? _mm512_loadu_si512(bk + ps) : zero;
      const __m512i e0 = _mm512_srai_epi16(_mm512_slli_epi16(b0, 8), 8), o0 = _mm512_srai_epi16(b0, 8);
      const __m512i e1 = _mm512_srai_epi16(_mm512_slli_epi16(b1, 8), 8), o1 = _mm512_srai_epi16(b1, 8);
#define RELAX_QROW(i)                                                                                         \
  if constexpr (R > i) {                                                                                      \
    const __m512i a = _mm512_set1_epi32(load4(A + i * lda + 4 * k));                                          \
    const __m512i ae = _mm512_and_si512(a, low), ao = _mm512_srli_epi16(a, 8);                                \
    c##i##0 = _mm512_add_epi32(c##i##0, _mm512_add_epi32(_mm512_madd_epi16(ae, e0), _mm512_madd_epi16(ao, o0))); \
    if constexpr (P > 1)                                                                                      \
      c##i##1 =                                                                                               \
          _mm512_add_epi32(c##i##1, _mm512_add_epi32(_mm512_madd_epi16(ae, e1), _mm512_madd_epi16(ao, o1)));  \
  }
      RELAX_QROW(0) RELAX_QROW(1) RELAX_QROW(2) RELAX_QROW(3) RELAX_QROW(4) RELAX_QROW(5)
#undef RELAX_QROW
    }
    const __m512i sums[6][4] = RELAX_SUM_TABLE;
    finish512<R, P>(sums, o);
  }
};

// The same in the two 256-bit halves of one panel (sums c<row>0 and
// c<row>1), up to 4 rows.
template <int R, int P>
struct TileAvx2 {
  __attribute__((target("avx2"))) static void run(int64_t K4, const uint8_t* A, int64_t lda, const uint8_t* B,
                                                  int64_t ps, const TileOut& o) {
    static_assert(P == 1 && R <= 4, "one panel, four rows");
    (void)ps;
    const __m256i zero = _mm256_setzero_si256(), low = _mm256_set1_epi32(0x00FF00FF);
    __m256i RELAX_SUMS(zero);
    for (int64_t k = 0; k < K4; ++k) {
      const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(B + k * 64));
      const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(B + k * 64 + 32));
      const __m256i e0 = _mm256_srai_epi16(_mm256_slli_epi16(b0, 8), 8), o0 = _mm256_srai_epi16(b0, 8);
      const __m256i e1 = _mm256_srai_epi16(_mm256_slli_epi16(b1, 8), 8), o1 = _mm256_srai_epi16(b1, 8);
#define RELAX_QROW(i)                                                                                            \
  if constexpr (R > i) {                                                                                         \
    const __m256i a = _mm256_set1_epi32(load4(A + i * lda + 4 * k));                                             \
    const __m256i ae = _mm256_and_si256(a, low), ao = _mm256_srli_epi16(a, 8);                                   \
    c##i##0 = _mm256_add_epi32(c##i##0, _mm256_add_epi32(_mm256_madd_epi16(ae, e0), _mm256_madd_epi16(ao, o0))); \
    c##i##1 = _mm256_add_epi32(c##i##1, _mm256_add_epi32(_mm256_madd_epi16(ae, e1), _mm256_madd_epi16(ao, o1))); \
  }
      RELAX_QROW(0) RELAX_QROW(1) RELAX_QROW(2) RELAX_QROW(3)
#undef RELAX_QROW
    }
    const __m256i sums[6][4] = RELAX_SUM_TABLE;
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int j = 0; j < 2; ++j) {
      const int64_t left = o.cols - 8 * j;
      if (left <= 0) break;
      const __m256i zb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(o.zb + 8 * j));
      const __m256i cz = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(o.cz + 8 * j));
      const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(int(std::min<int64_t>(left, 8))), lane);
      for (int i = 0; i < R; ++i) {
        __m256i v = _mm256_sub_epi32(sums[i][j], _mm256_mullo_epi32(_mm256_set1_epi32(o.ra[i]), zb));
        v = _mm256_sub_epi32(v, _mm256_mullo_epi32(_mm256_set1_epi32(o.za[i]), cz));
        _mm256_maskstore_epi32(o.C + i * o.ldc + 8 * j, m, v);
      }
    }
  }
};
#undef RELAX_SUMS
#undef RELAX_SUM_TABLE
#endif

// One row of A: its bytes xor `flip` (i8 -> u8) into dst[0, K) and zeros
// up to Kp (when dst is not null), and their sum.
uint32_t row_portable(const uint8_t* src, int64_t K, uint8_t flip, uint8_t* dst, int64_t Kp) {
  uint32_t s = 0;
  for (int64_t k = 0; k < K; ++k) {
    const uint8_t v = src[k] ^ flip;
    if (dst) dst[k] = v;
    s += v;
  }
  if (dst) std::fill(dst + K, dst + Kp, uint8_t(0));
  return s;
}

#ifdef RELAX_X86_KERNELS
__attribute__((target("avx512f,avx512bw"))) uint32_t row_avx512(const uint8_t* src, int64_t K, uint8_t flip,
                                                                 uint8_t* dst, int64_t Kp) {
  const __m512i f = _mm512_set1_epi8(char(flip)), zero = _mm512_setzero_si512();
  __m512i acc = zero;
  int64_t k = 0;
  for (; k + 64 <= K; k += 64) {
    const __m512i v = _mm512_xor_si512(_mm512_loadu_si512(src + k), f);
    if (dst) _mm512_storeu_si512(dst + k, v);
    acc = _mm512_add_epi64(acc, _mm512_sad_epu8(v, zero));  // 8 sums of 8 bytes
  }
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, acc);
  uint64_t sum = 0;
  for (uint64_t l : lanes) sum += l;
  return uint32_t(sum) + row_portable(src + k, K - k, flip, dst ? dst + k : nullptr, Kp - k);
}

__attribute__((target("avx2"))) uint32_t row_avx2(const uint8_t* src, int64_t K, uint8_t flip, uint8_t* dst,
                                                  int64_t Kp) {
  const __m256i f = _mm256_set1_epi8(char(flip)), zero = _mm256_setzero_si256();
  __m256i acc = zero;
  int64_t k = 0;
  for (; k + 32 <= K; k += 32) {
    const __m256i v = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + k)), f);
    if (dst) _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + k), v);
    acc = _mm256_add_epi64(acc, _mm256_sad_epu8(v, zero));
  }
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc);
  return uint32_t(lanes[0] + lanes[1] + lanes[2] + lanes[3]) +
         row_portable(src + k, K - k, flip, dst ? dst + k : nullptr, Kp - k);
}
#endif

using RowFn = uint32_t (*)(const uint8_t*, int64_t, uint8_t, uint8_t*, int64_t);

// A micro-kernel family: tiles of up to `rows` rows by `panels` panels,
// table[(r - 1) * panels + (p - 1)] for r rows and p panels.
struct Micro {
  const Tile* table;
  int rows, panels;
  const char* name;
  KernelIsa isa;  // the kernel_isa() it needs
  RowFn row;      // A's rows: sums (and packing) at the same width
  Tile at(int r, int p) const { return table[(r - 1) * panels + (p - 1)]; }
};

template <template <int, int> class T, int NP, size_t... I>
constexpr std::array<Tile, sizeof...(I)> tiles(std::index_sequence<I...>) {
  return {&T<int(I) / NP + 1, int(I) % NP + 1>::run...};
}
template <template <int, int> class T, int NR, int NP>
const Micro& family(const char* name, KernelIsa isa, RowFn row) {
  static const std::array<Tile, NR * NP> table = tiles<T, NP>(std::make_index_sequence<NR * NP>());
  static const Micro m{table.data(), NR, NP, name, isa, row};
  return m;
}

const Micro& portable() { return family<TilePortable, 4, 1>("portable", KernelIsa::portable, row_portable); }

// Every family this CPU runs, widest first.
std::vector<const Micro*> runnable() {
  std::vector<const Micro*> v;
#ifdef RELAX_X86_KERNELS
  if (cpu_runs(KernelIsa::avx512) && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw"))
    v.push_back(&family<TileVnni, 6, 4>("avx512-vnni", KernelIsa::avx512, row_avx512));
  if (cpu_runs(KernelIsa::avx512) && __builtin_cpu_supports("avx512bw")) v.push_back(&family<TileBw, 6, 2>("avx512bw", KernelIsa::avx512, row_avx512));
  if (cpu_runs(KernelIsa::avx2)) v.push_back(&family<TileAvx2, 4, 1>("avx2", KernelIsa::avx2, row_avx2));
#endif
  v.push_back(&portable());
  return v;
}

std::atomic<const Micro*> pinned{nullptr};

// The widest family the current kernel_isa() allows (or the pinned one).
const Micro& micro() {
  if (const Micro* m = pinned.load(std::memory_order_relaxed)) return *m;
  static const std::vector<const Micro*> all = runnable();
  const KernelIsa isa = kernel_isa();
  for (const Micro* m : all)
    if (int(m->isa) <= int(isa)) return *m;
  return portable();
}

}  // namespace

int64_t qgemm_packed_b_size(int64_t K, int64_t N) {
  const int64_t K4 = (K + 3) / 4, NP = (N + 15) / 16;
  return NP * K4 * 64 + NP * 16 * 2 * int64_t(sizeof(int32_t));
}

void qgemm_pack_b(int64_t K, int64_t N, const QMatrix& B, const int32_t* b_zp, int64_t zp_count, uint8_t* out) {
  const int64_t K4 = (K + 3) / 4, NP = (N + 15) / 16;
  const auto* bytes = static_cast<const uint8_t*>(B.data);
  // u8 as u8 - 128, so that both kinds are i8 here: flipping the top bit.
  const uint8_t flip = B.is_signed ? 0 : 0x80;
  std::vector<int64_t> sums(size_t(NP * 16), 0);  // taken modulo 2^32 below
  // In the order written: panel, group of 4 k, column, k.
  uint8_t* o = out;
  for (int64_t p = 0; p < NP; ++p) {
    const int64_t n0 = p * 16, width = std::min<int64_t>(16, N - n0);
    int64_t* colsum = sums.data() + n0;
    for (int64_t k4 = 0; k4 < K4; ++k4, o += 64) {
      const int64_t depth = std::min<int64_t>(4, K - k4 * 4);
      std::memset(o, 0, 64);
      for (int64_t kk = 0; kk < depth; ++kk) {
        const uint8_t* row = bytes + (k4 * 4 + kk) * B.ld + n0;
        for (int64_t j = 0; j < width; ++j) {
          const uint8_t v = uint8_t(row[j] ^ flip);
          o[j * 4 + kk] = v;
          colsum[j] += int8_t(v);
        }
      }
    }
  }
  // zb, then cz = column sum - K zb (modulo 2^32).
  std::vector<int32_t> tail(size_t(NP * 16 * 2), 0);
  for (int64_t n = 0; n < N; ++n) {
    const int32_t zb = b_zp[zp_count == 1 ? 0 : n] - (B.is_signed ? 0 : 128);
    tail[size_t(n)] = zb;
    tail[size_t(NP * 16 + n)] = int32_t(uint32_t(sums[size_t(n)]) - uint32_t(K) * uint32_t(zb));
  }
  if (!tail.empty()) std::memcpy(out + NP * K4 * 64, tail.data(), tail.size() * sizeof(int32_t));
}

void qgemm_packed(int64_t M, int64_t N, int64_t K, const QMatrix& A, const int32_t* a_zp, int64_t zp_count,
                  const uint8_t* Bp, int32_t* C, int64_t ldc, ThreadPool* pool, const QgemmDone* done) {
  if (M <= 0 || N <= 0) return;
  const int64_t Kp = (K + 3) / 4 * 4;
  // A as u8 rows of Kp bytes (zero-padded), or in place when it is
  // already (u8, K a multiple of 4); its row sums and zero points.
  const Micro& u = micro();
  const bool in_place = !A.is_signed && K == Kp;
  thread_local std::vector<uint8_t> apack;
  thread_local std::vector<int32_t> rowsum, za;
  if (!in_place) apack.resize(size_t(M * Kp));
  rowsum.resize(size_t(M));
  za.resize(size_t(M));
  const auto* abytes = static_cast<const uint8_t*>(A.data);
  const uint8_t flip = A.is_signed ? 0x80 : 0;  // i8 + 128 as u8
  // The calling thread's buffers, by pointer: the pool's workers have their own thread_locals.
  uint8_t* packed = in_place ? nullptr : apack.data();
  int32_t *rs = rowsum.data(), *zs = za.data();
  auto pack_rows = [&](int64_t r0, int64_t r1) {
    for (int64_t m = r0; m < r1; ++m) {
      rs[m] = int32_t(u.row(abytes + m * A.ld, K, flip, packed ? packed + m * Kp : nullptr, Kp));
      zs[m] = a_zp[zp_count == 1 ? 0 : m] + (A.is_signed ? 128 : 0);
    }
  };
  if (pool && pool->num_threads() > 1 && M * K >= (1 << 18) && double(M) * double(N) * double(K) >= double(1 << 17))
    pool->parallel_for(M, pack_rows);
  else
    pack_rows(0, M);
  qgemm_rows(M, N, K, {in_place ? abytes : packed, in_place ? A.ld : Kp, rs, zs}, Bp, C, ldc, pool, done);
}

uint32_t qgemm_row_sum(const uint8_t* row, int64_t n) { return micro().row(row, n, 0, nullptr, n); }

void qgemm_rows(int64_t M, int64_t N, int64_t K, const QRows& A, const uint8_t* Bp, int32_t* C, int64_t ldc,
                ThreadPool* pool, const QgemmDone* done) {
  if (M <= 0 || N <= 0) return;
  const int64_t K4 = (K + 3) / 4, NP = (N + 15) / 16;
  // B's zero points and column terms (copied: a package's constant need
  // not be aligned for i32).
  std::vector<int32_t> zb(size_t(NP * 16)), cz(size_t(NP * 16));
  std::memcpy(zb.data(), Bp + NP * K4 * 64, zb.size() * sizeof(int32_t));
  std::memcpy(cz.data(), Bp + NP * K4 * 64 + NP * 16 * 4, cz.size() * sizeof(int32_t));
  const Micro& u = micro();
  const bool split = pool && pool->num_threads() > 1 && double(M) * double(N) * double(K) >= double(1 << 17);
  const int64_t block = int64_t(u.panels) * 16, blocks = (N + block - 1) / block;
  const int64_t rtiles = (M + u.rows - 1) / u.rows;
  int64_t chunks = 1;  // row chunks per column block
  if (split) chunks = std::clamp<int64_t>((pool->num_threads() * 4 + blocks - 1) / blocks, 1, rtiles);
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t jb = item / chunks, rc = item % chunks;
      const int64_t p0 = jb * u.panels, n0 = p0 * 16;
      const int panels = int(std::min<int64_t>(u.panels, NP - p0));
      const uint8_t* bpanel = Bp + p0 * K4 * 64;
      const int64_t t0 = rtiles * rc / chunks, t1 = rtiles * (rc + 1) / chunks;
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t m0 = t * u.rows;
        const int rows = int(std::min<int64_t>(u.rows, M - m0));
        const TileOut o{C + m0 * ldc + n0, ldc, std::min<int64_t>(panels * 16, N - n0), A.sums + m0,
                        A.zero_points + m0, zb.data() + n0, cz.data() + n0};
        u.at(rows, panels)(K4, A.data + m0 * A.ld, A.ld, bpanel, K4 * 64, o);
      }
      if (done && t1 > t0) (*done)(t0 * u.rows, std::min(M, t1 * u.rows), n0, std::min<int64_t>(N, n0 + panels * 16));
    }
  };
  if (split && blocks * chunks > 1)
    pool->parallel_for(blocks * chunks, run);
  else
    run(0, blocks * chunks);
}

// ---- convolutions -----------------------------------------------------------------------

int64_t qconv2d_packed_size(int64_t O, int64_t groups, int64_t K) {
  return groups * qgemm_packed_b_size(K, O / groups);
}

void qconv2d_pack_weights(const void* w, bool w_signed, int64_t O, int64_t groups, int64_t K, int64_t taps,
                          const int32_t* w_zp, int64_t zp_count, uint8_t* out) {
  const int64_t Og = O / groups, size = qgemm_packed_b_size(K, Og), Cg = taps ? K / taps : 0;
  const auto* wb = static_cast<const uint8_t*>(w);
  std::vector<uint8_t> t(size_t(K * Og));  // w_g^T: K x Og, k = tap * Cg + c (the rows' order)
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t o = 0; o < Og; ++o)
      for (int64_t c = 0; c < Cg; ++c)
        for (int64_t tap = 0; tap < taps; ++tap)
          t[size_t((tap * Cg + c) * Og + o)] = wb[(g * Og + o) * K + c * taps + tap];
    qgemm_pack_b(K, Og, {t.data(), w_signed, Og}, zp_count == 1 ? w_zp : w_zp + g * Og, zp_count == 1 ? 1 : Og,
                 out + g * size);
  }
}

namespace {
// dst[c * ld_dst + r] = src[r * ld_src + c] ^ flip for a rows x cols block,
// in 32 x 32 tiles, through restrict pointers (the compiler keeps them in
// registers): a whole-row scatter, a store per element a row apart, was
// most of a quantized ResNet-50's convolution time outside the integer
// products.
template <typename T>
void transpose(const T* __restrict src, int64_t ld_src, int64_t rows, int64_t cols, T* __restrict dst, int64_t ld_dst,
               T flip = T(0)) {
  constexpr int64_t kTile = 32;
  for (int64_t rb = 0; rb < rows; rb += kTile) {
    const int64_t re = std::min(rows, rb + kTile);
    for (int64_t cb = 0; cb < cols; cb += kTile) {
      const int64_t ce = std::min(cols, cb + kTile);
      for (int64_t c = cb; c < ce; ++c) {
        T* __restrict d = dst + c * ld_dst;
        const T* __restrict s = src + c;
        for (int64_t r = rb; r < re; ++r) d[r] = T(s[r * ld_src] ^ flip);
      }
    }
  }
}
}  // namespace

void qconv2d(const Conv2dGeometry& g, const void* x, bool x_signed, int32_t x_zp, const uint8_t* wp, int32_t* y,
             ThreadPool* pool) {
  const int64_t Cg = g.C / g.groups, Og = g.O / g.groups, K = Cg * g.KH * g.KW, Kp = (K + 3) / 4 * 4;
  const int64_t P = g.OH * g.OW, HW = g.H * g.W, wsize = qgemm_packed_b_size(K, Og);
  if (g.N == 0 || g.O == 0 || P == 0) return;
  const uint8_t flip = x_signed ? 0x80 : 0;
  const uint8_t pad = uint8_t(x_zp) ^ flip;  // x_zp as the rows read it: 0 once subtracted
  const int32_t zp = x_zp + (x_signed ? 128 : 0);
  thread_local std::vector<uint8_t> rows, pixels;
  thread_local std::vector<int32_t> sums, zps, prod;
  rows.resize(size_t(P * Kp));
  pixels.resize(size_t(HW * Cg));
  sums.resize(size_t(P));
  zps.assign(size_t(P), zp);
  prod.resize(size_t(P * Og));
  const auto* xb = static_cast<const uint8_t*>(x);
  // The calling thread's buffers, by pointer: the pool's workers have their own thread_locals.
  uint8_t* const rowp = rows.data();
  uint8_t* const pix = pixels.data();
  int32_t* const sump = sums.data();
  const bool split = pool && pool->num_threads() > 1 && P * K >= (1 << 15);
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t gr = 0; gr < g.groups; ++gr) {
      // The group's channels innermost (pixels: H x W x Cg, i8 read as
      // u8), so that each tap of a patch is one copy of Cg bytes.
      const uint8_t* planes = xb + (n * g.C + gr * Cg) * HW;
      // planes is Cg x HW, pix its transpose: pixels [q0, q1) are columns [q0, q1) of planes.
      auto channels_last = [&](int64_t q0, int64_t q1) {
        transpose<uint8_t>(planes + q0, HW, Cg, q1 - q0, pix + q0 * Cg, Cg, flip);
      };
      // Row p: for each tap (kh, kw) the Cg channels at that input pixel,
      // or the padding.
      auto patches = [&](int64_t p0, int64_t p1) {
        const int64_t H = g.H, W = g.W, KH = g.KH, KW = g.KW, OW = g.OW, sh = g.sh, sw = g.sw, ph = g.ph,
                      pw = g.pw, dh = g.dh, dw = g.dw;  // locals: byte stores may alias g's fields
        for (int64_t p = p0; p < p1; ++p) {
          const int64_t oh = p / OW, ow = p % OW;
          uint8_t* const row = rowp + p * Kp;
          uint8_t* dst = row;
          for (int64_t kh = 0; kh < KH; ++kh) {
            const int64_t ih = oh * sh - ph + kh * dh;
            for (int64_t kw = 0; kw < KW; ++kw, dst += Cg) {
              const int64_t iw = ow * sw - pw + kw * dw;
              if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                std::memset(dst, pad, size_t(Cg));
              else
                std::memcpy(dst, pix + (ih * W + iw) * Cg, size_t(Cg));
            }
          }
          std::memset(dst, 0, size_t(Kp - K));
          sump[p] = int32_t(qgemm_row_sum(row, K));
        }
      };
      // A 1x1 kernel at stride 1 without padding over whole 4-byte groups:
      // the pixels are the patches, only their sums to take.
      auto pixel_sums = [&](int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p) sump[p] = int32_t(qgemm_row_sum(pix + p * K, K));
      };
      const bool pixels_are_rows = g.KH == 1 && g.KW == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0 &&
                                   g.OH == g.H && g.OW == g.W && K == Kp;
      int32_t* out = y + (n * g.O + gr * Og) * P;
      const uint8_t* const src = pixels_are_rows ? pix : rowp;
      int32_t* const prodp = prod.data();  // the calling thread's, by pointer
      const int32_t* const zpp = zps.data();
      // Output pixels [p0, p1): their patches (or sums), their integer
      // product, and its transpose into y's group (Og x P), on one
      // thread: one barrier for the channels-last copy and one for the
      // rest (a barrier per stage cost a QDQ ResNet-50 8-14% on two
      // threads against its f32 convolutions). The sums are exact, so a
      // split anywhere gives the same result.
      // Unsplit (few pixels), the product may still split its columns
      // over `product_pool` (ResNet-50's last 1x1 layers: 49 pixels, 2048
      // outputs).
      auto rows_of = [&](int64_t p0, int64_t p1, ThreadPool* product_pool) {
        if (pixels_are_rows)
          pixel_sums(p0, p1);
        else
          patches(p0, p1);
        qgemm_rows(p1 - p0, Og, K, {src + p0 * Kp, Kp, sump + p0, zpp + p0}, wp + gr * wsize, prodp + p0 * Og, Og,
                   product_pool);
        transpose(prodp + p0 * Og, Og, p1 - p0, Og, out + p0, P);
      };
      if (split) {
        pool->parallel_for(HW, channels_last);
        pool->parallel_for(P, [&](int64_t p0, int64_t p1) { rows_of(p0, p1, nullptr); });
      } else {
        channels_last(0, HW);
        rows_of(0, P, pool);
      }
    }
}

const char* qgemm_kernel_name() { return micro().name; }

bool set_qgemm_kernels(const std::string& name) {
  if (name.empty()) {
    pinned.store(nullptr);
    return true;
  }
  for (const Micro* m : runnable())
    if (name == m->name) {
      pinned.store(m);
      return true;
    }
  return false;
}

}  // namespace relax::rt
