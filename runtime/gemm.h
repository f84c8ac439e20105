// The runtime's own single-precision matrix product, for the library
// kernels that need one with a guarantee BLAS does not give: every element
// of C is the same chain of fused multiply-adds over k in order (blocked
// by kKc, the blocks added in order), whatever its row, column or tile,
// on every CPU. So rows (or columns) with equal inputs give bitwise equal
// results, as a loop nest would; OpenBLAS's Haswell kernels do not (its
// edge tiles round differently), which turns ties into noise that a later
// softmax of large logits amplifies into a different answer.
//
// Blocked and packed (kKc x kMc panels of A in 6-row panels, kKc-row
// panels of B as wide as the micro-kernel's tile), with the widest
// micro-kernel the CPU runs (runtime/cpu_isa.h): AVX-512 12 x 32 (two
// panels of A per call), AVX2 + FMA 6 x 16, or a portable 6 x 16 with
// std::fma; columns split over the thread pool when the product is large
// enough.
#pragma once

#include <cstdint>

namespace relax::rt {

class ThreadPool;

// C[M, N] = A[M, K] * B[K, N], all row-major with leading dims lda, ldb,
// ldc; C is overwritten. `pool` may be null (one thread).
void gemm_f32(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
              int64_t ldc, ThreadPool* pool);

// The same product of strided operands: A[m, k] at A[m * rsa + k * csa],
// B[k, n] at B[k * rsb + n * csb] (a transposed operand: a row stride of
// 1), with the same sums: the packing reads them, the kernels never do
// (but a B with csb = 1, read in place as gemm_f32 reads it).
void gemm_f32_strided(int64_t M, int64_t N, int64_t K, const float* A, int64_t rsa, int64_t csa, const float* B,
                      int64_t rsb, int64_t csb, float* C, int64_t ldc, ThreadPool* pool);

// The same with A's rows anywhere: row m of A at A + rows[m], contiguous
// along k (a batched product whose B is shared, as one product of all
// the batch's rows: B streamed once instead of once per batch entry).
void gemm_f32_rows(int64_t M, int64_t N, int64_t K, const float* A, const int64_t* rows, const float* B, int64_t rsb,
                   int64_t csb, float* C, int64_t ldc, ThreadPool* pool);

// A packed once (a constant weight: a build folds this), as gemm_f32
// packs it block by block on every call: gemm_packed_a_size floats.
int64_t gemm_packed_a_size(int64_t M, int64_t K);
void gemm_pack_a(int64_t M, int64_t K, const float* A, int64_t lda, float* out);
// gemm_f32 from A so packed: the same sums, bitwise.
void gemm_f32_packed_a(int64_t M, int64_t N, int64_t K, const float* Ap, const float* B, int64_t ldb, float* C,
                       int64_t ldc, ThreadPool* pool);

// B packed once (a constant weight: a build folds this): per block of kKc
// rows, its columns in panels of kGemmPanelB, k-major, zero-padded:
// gemm_packed_b_size floats. gemm_f32_packed_b: columns [n0, n1) of
// gemm_f32's C from B so packed, bitwise the same sums, on the calling
// thread (callers split the columns at multiples of kGemmPanelB); but one
// row (M = 1) is gemv_f32's, bitwise, streamed from the packed blocks as
// a matrix-vector product.
constexpr int64_t kGemmPanelB = 32;
int64_t gemm_packed_b_size(int64_t K, int64_t N);
void gemm_pack_b(int64_t K, int64_t N, const float* B, int64_t ldb, float* out);
void gemm_f32_packed_b(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* Bp, int64_t n0,
                       int64_t n1, float* C, int64_t ldc);

// One row: y[j] = sum_k x[k] B[k, j] for j < N, each column one chain of
// fused multiply-adds over k in order, whatever its position and the CPU
// (OpenBLAS's SkylakeX kernels give a row's last columns a different
// rounding: equal columns came out unequal, and a softmax over logits of
// 4e12 turned that into zeros). Streams B once, a row segment of up to 1
// KiB at a time: a matrix-vector product runs at memory bandwidth.
void gemv_f32(int64_t N, int64_t K, const float* x, const float* B, int64_t ldb, float* y);

}  // namespace relax::rt
