// The runtime's GEMM (runtime/gemm.h): right values at sizes that leave
// edge tiles in every dimension and span several k blocks, with strided
// operands, on one thread and on a pool; and its promise that an element's
// value does not depend on where it sits (equal rows give bitwise equal
// results), which OpenBLAS's Haswell kernels do not keep. From A or B
// packed once, and from operands stored transposed, bitwise the same.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

#include "runtime/cpu_isa.h"
#include "runtime/gemm.h"
#include "runtime/thread_pool.h"

namespace relax::rt {
namespace {

std::vector<float> random_matrix(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

TEST_CASE("gemm_f32 matches a double-precision product at edge sizes, strided, threaded") {
  std::mt19937 rng(3);
  ThreadPool pool(2);
  struct Size {
    int64_t m, n, k;
  };
  for (Size s : {Size{1, 1, 1}, Size{5, 7, 3}, Size{6, 16, 256}, Size{13, 37, 300}, Size{80, 150, 513}, Size{3, 0, 4},
                 Size{4, 5, 0}, Size{150, 300, 600}}) {
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
      int64_t lda = s.k + 3, ldb = s.n + 2, ldc = s.n + 5;
      std::vector<float> A = random_matrix(s.m * lda, rng), B = random_matrix(std::max<int64_t>(s.k, 1) * ldb, rng);
      std::vector<float> C(size_t(s.m * ldc), 7.0f);
      gemm_f32(s.m, s.n, s.k, A.data(), lda, B.data(), ldb, C.data(), ldc, p);
      double worst = 0;
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t j = 0; j < s.n; ++j) {
          double want = 0;
          for (int64_t k = 0; k < s.k; ++k) want += double(A[i * lda + k]) * double(B[k * ldb + j]);
          worst = std::max(worst, std::abs(double(C[i * ldc + j]) - want));
        }
      CAPTURE(s.m);
      CAPTURE(s.n);
      CAPTURE(s.k);
      CHECK(worst < 1e-4 * std::max<double>(1.0, std::sqrt(double(s.k))));
      // Padding between rows of C is left alone.
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t j = s.n; j < ldc; ++j) CHECK(C[i * ldc + j] == 7.0f);
      // From A packed once (a constant weight): the same sums, bitwise.
      std::vector<float> Ap(size_t(gemm_packed_a_size(s.m, s.k)), 5.0f), Cp(C.size(), 7.0f);
      gemm_pack_a(s.m, s.k, A.data(), lda, Ap.data());
      gemm_f32_packed_a(s.m, s.n, s.k, Ap.data(), B.data(), ldb, Cp.data(), ldc, p);
      CHECK(Cp == C);
      // From A and B stored transposed (as blas.matmul_view reads K^T): the
      // same sums, bitwise, and the same for either one alone.
      std::vector<float> At(size_t(std::max<int64_t>(s.k, 1) * (s.m + 1))), Bt(size_t((s.n + 1) * (s.k + 2)));
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t k = 0; k < s.k; ++k) At[size_t(k * (s.m + 1) + i)] = A[size_t(i * lda + k)];
      for (int64_t k = 0; k < s.k; ++k)
        for (int64_t j = 0; j < s.n; ++j) Bt[size_t(j * (s.k + 2) + k)] = B[size_t(k * ldb + j)];
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          std::vector<float> Ct(C.size(), 7.0f);
          gemm_f32_strided(s.m, s.n, s.k, ta ? At.data() : A.data(), ta ? 1 : lda, ta ? s.m + 1 : 1,
                           tb ? Bt.data() : B.data(), tb ? 1 : ldb, tb ? s.k + 2 : 1, Ct.data(), ldc, p);
          CAPTURE(ta);
          CAPTURE(tb);
          CHECK(Ct == C);
        }
      // From A's rows wherever they sit (reversed here): the same sums, bitwise.
      std::vector<int64_t> rows(size_t(s.m));
      for (int64_t i = 0; i < s.m; ++i) rows[size_t(i)] = (s.m - 1 - i) * lda;
      std::vector<float> Cr(C.size(), 7.0f);
      gemm_f32_rows(s.m, s.n, s.k, A.data(), rows.data(), B.data(), ldb, 1, Cr.data(), ldc, p);
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t j = 0; j < s.n; ++j) CHECK(Cr[size_t(i * ldc + j)] == C[size_t((s.m - 1 - i) * ldc + j)]);
    }
  }
}

TEST_CASE("gemm_f32: equal rows and equal columns give bitwise equal results") {
  std::mt19937 rng(5);
  ThreadPool pool(2);
  int64_t M = 100, N = 169, K = 520;
  std::vector<float> A(size_t(M * K)), B = random_matrix(K * N, rng);
  std::vector<float> row = random_matrix(K, rng);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k) A[i * K + k] = row[k] * 1e6f;
  std::vector<float> C(size_t(M * N));
  gemm_f32(M, N, K, A.data(), K, B.data(), N, C.data(), N, &pool);
  int differing = 0;
  for (int64_t i = 1; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) differing += C[i * N + j] != C[j];
  CHECK(differing == 0);
  // And columns: B with every column the same.
  std::vector<float> Bc(size_t(K * N));
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < N; ++j) Bc[k * N + j] = row[k];
  std::vector<float> A2 = random_matrix(M * K, rng);
  gemm_f32(M, N, K, A2.data(), K, Bc.data(), N, C.data(), N, &pool);
  differing = 0;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 1; j < N; ++j) differing += C[i * N + j] != C[i * N];
  CHECK(differing == 0);
}

TEST_CASE("gemm_f32: every micro-kernel this CPU runs gives the portable kernel's sums, bitwise") {
  std::mt19937 rng(11);
  ThreadPool pool(2);
  struct Size {
    int64_t m, n, k;
  };
  // Edge tiles of every kernel (6 / 12 rows, 16 / 32 columns; AVX-512's narrow one for 16 columns or
  // fewer), several k blocks; rows that fit one micro-kernel call, where B is read in place but for
  // its last partial tile, over two column blocks.
  // From B packed once too (gemm_f32_packed_b, whole and in two column slices); one row is gemv_f32's
  // (a matrix-vector product over the packed blocks).
  for (Size s : {Size{1, 1, 1}, Size{7, 33, 5}, Size{12, 32, 256}, Size{13, 47, 300}, Size{75, 531, 520},
                 Size{25, 16, 270}, Size{12, 3, 9}, Size{4, 1000, 600}, Size{12, 70, 257}, Size{1, 100, 600}}) {
    int64_t lda = s.k + 1, ldb = s.n + 3, ldc = s.n + 2;
    std::vector<float> A = random_matrix(s.m * lda, rng), B = random_matrix(s.k * ldb, rng);
    std::vector<float> want(size_t(s.m * ldc), 3.0f), Ap(size_t(gemm_packed_a_size(s.m, s.k)));
    std::vector<float> Bp(size_t(gemm_packed_b_size(s.k, s.n)), 5.0f);
    gemm_pack_a(s.m, s.k, A.data(), lda, Ap.data());
    gemm_pack_b(s.k, s.n, B.data(), ldb, Bp.data());
    REQUIRE(set_kernel_isa("portable"));
    gemm_f32(s.m, s.n, s.k, A.data(), lda, B.data(), ldb, want.data(), ldc, nullptr);
    std::vector<float> want_gemm = want;
    // One row: gemv_f32's sums (one chain over all of k).
    if (s.m == 1) gemv_f32(s.n, s.k, A.data(), B.data(), ldb, want.data());
    auto from_packed_b = [&] {
      std::vector<float> whole(want.size(), 3.0f), sliced(want.size(), 3.0f);
      gemm_f32_packed_b(s.m, s.n, s.k, A.data(), lda, Bp.data(), 0, s.n, whole.data(), ldc);
      const int64_t cut = std::min<int64_t>(s.n, kGemmPanelB);
      gemm_f32_packed_b(s.m, s.n, s.k, A.data(), lda, Bp.data(), cut, s.n, sliced.data(), ldc);
      gemm_f32_packed_b(s.m, s.n, s.k, A.data(), lda, Bp.data(), 0, cut, sliced.data(), ldc);
      CHECK(whole == want);
      CHECK(sliced == want);
    };
    CAPTURE(s.m);
    CAPTURE(s.n);
    CAPTURE(s.k);
    from_packed_b();
    for (KernelIsa isa : {KernelIsa::avx2, KernelIsa::avx512}) {
      if (!cpu_runs(isa)) continue;
      CAPTURE(kernel_isa_name(isa));
      CAPTURE(s.m);
      CAPTURE(s.n);
      CAPTURE(s.k);
      REQUIRE(set_kernel_isa(kernel_isa_name(isa)));
      std::vector<float> got(want.size(), 3.0f), packed(want.size(), 3.0f);
      gemm_f32(s.m, s.n, s.k, A.data(), lda, B.data(), ldb, got.data(), ldc, &pool);
      gemm_f32_packed_a(s.m, s.n, s.k, Ap.data(), B.data(), ldb, packed.data(), ldc, nullptr);
      CHECK(got == want_gemm);
      CHECK(packed == want_gemm);
      from_packed_b();
    }
  }
  CHECK(set_kernel_isa(""));
  CHECK_FALSE(set_kernel_isa("sse9"));
}

TEST_CASE("gemv_f32: right values, equal columns bitwise equal, the same sums on every ISA") {
  std::mt19937 rng(13);
  for (int64_t N : {1, 15, 16, 17, 255, 256, 300, 1000}) {
    const int64_t K = 700, ldb = N + 3;
    std::vector<float> x = random_matrix(K, rng), B = random_matrix(K * ldb, rng);
    // Column 0 repeated at every 7th column, x large: equal columns must stay equal.
    for (int64_t k = 0; k < K; ++k) {
      x[size_t(k)] *= 4e9f;
      for (int64_t j = 7; j < N; j += 7) B[size_t(k * ldb + j)] = B[size_t(k * ldb)];
    }
    CAPTURE(N);
    REQUIRE(set_kernel_isa("portable"));
    std::vector<float> want(size_t(N) + 1, 5.0f);
    gemv_f32(N, K, x.data(), B.data(), ldb, want.data());
    CHECK(want[size_t(N)] == 5.0f);  // nothing past N written
    double worst = 0, scale = 0;
    for (int64_t j = 0; j < N; ++j) {
      double ref = 0, mag = 0;
      for (int64_t k = 0; k < K; ++k) {
        ref += double(x[size_t(k)]) * double(B[size_t(k * ldb + j)]);
        mag += std::abs(double(x[size_t(k)]) * double(B[size_t(k * ldb + j)]));
      }
      worst = std::max(worst, std::abs(double(want[size_t(j)]) - ref));
      scale = std::max(scale, mag);
      if (j % 7 == 0) CHECK(want[size_t(j)] == want[0]);
    }
    CHECK(worst < 1e-5 * scale);
    for (KernelIsa isa : {KernelIsa::avx2, KernelIsa::avx512}) {
      if (!cpu_runs(isa)) continue;
      CAPTURE(kernel_isa_name(isa));
      REQUIRE(set_kernel_isa(kernel_isa_name(isa)));
      std::vector<float> got(want.size(), 5.0f);
      gemv_f32(N, K, x.data(), B.data(), ldb, got.data());
      CHECK(got == want);
    }
  }
  CHECK(set_kernel_isa(""));
}

}  // namespace
}  // namespace relax::rt
