// The runtime's 8-bit integer matrix product, for MatMulInteger and
// QLinearMatMul (passes/legalize/matmul.cc sends matmul_integer here) and,
// over x's patches, ConvInteger and QLinearConv (conv_integer,
// passes/legalize/nn.cc):
//
//   C[m, n] = sum_k (A[m, k] - a_zp[m]) * (B[k, n] - b_zp[n])
//
// for A and B of u8 or i8 each, zero points per tensor or per row of A /
// column of B, C i32. Integer dot products over groups of 4 k: AVX-512
// VNNI (vpdpbusd, u8 x i8) where the CPU has it, else pairs of 16-bit
// products (vpmaddwd, AVX-512BW or AVX2), else portable C++. Every form
// is exact: the same integers, with i32's wrap-around, on every CPU.
//
// Operands are shifted into vpdpbusd's u8 x i8 once: an i8 A is read as
// A + 128 (u8) with its zero point + 128, a u8 B as B - 128 (i8) with its
// zero point - 128; neither changes A - a_zp or B - b_zp. The zero points
// come out of the dot product:
//   sum (a - za)(b - zb) = sum a b - zb sum_k a - za (sum_k b - K zb)
// with B's column terms packed beside it and A's row sums taken as A is
// packed.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "runtime/conv_direct.h"

namespace relax::rt {

class ThreadPool;

// An 8-bit operand: its bytes and whether they are i8 (else u8).
struct QMatrix {
  const void* data;
  bool is_signed;
  int64_t ld;  // row stride in elements
};

// B (K x N) packed for qgemm_packed: bytes. Panels of 16 columns, each
// K rounded up to 4 by 16 columns by 4 k (vpdpbusd's operand), then two
// i32 per column (N rounded up to 16 each): the zero points zb and the
// sums of the columns less K zb.
int64_t qgemm_packed_b_size(int64_t K, int64_t N);
// b_zp: `zp_count` zero points (1, or N: one per column), as integers.
void qgemm_pack_b(int64_t K, int64_t N, const QMatrix& B, const int32_t* b_zp, int64_t zp_count, uint8_t* out);

// Called with each block of C once its sums are written, on the thread
// that wrote them: rows [m0, m1), columns [n0, n1).
using QgemmDone = std::function<void(int64_t m0, int64_t m1, int64_t n0, int64_t n1)>;

// C (M x N, row stride ldc) = (A - a_zp) (B - b_zp) from B packed by
// qgemm_pack_b; a_zp: `zp_count` zero points (1, or M: one per row).
// `pool` may be null (one thread); `done`, when set, sees every block.
void qgemm_packed(int64_t M, int64_t N, int64_t K, const QMatrix& A, const int32_t* a_zp, int64_t zp_count,
                  const uint8_t* Bp, int32_t* C, int64_t ldc, ThreadPool* pool, const QgemmDone* done = nullptr);

// A already as the kernels read it: u8 rows `ld` bytes apart, each K
// rounded up to 4 with zeros past K, with each row's sum (of its first K
// bytes) and its zero point (as a u8 A's: an i8 one's + 128). What
// qgemm_packed makes of an A; a convolution writes its patches so.
struct QRows {
  const uint8_t* data;
  int64_t ld;
  const int32_t *sums, *zero_points;
};
void qgemm_rows(int64_t M, int64_t N, int64_t K, const QRows& A, const uint8_t* Bp, int32_t* C, int64_t ldc,
                ThreadPool* pool, const QgemmDone* done = nullptr);
// The sum of n bytes, at the kernels' vector width.
uint32_t qgemm_row_sum(const uint8_t* row, int64_t n);

// 2-D convolutions of 8-bit x (N, C, H, W) by 8-bit w (O, C / groups, KH,
// KW) into i32 y (N, O, OH, OW), y = conv(x - x_zp, w - w_zp) with the
// padding reading as x_zp: per image and group, x's patches as rows
// (K = C / groups * KH * KW bytes each, tap by tap with the channels
// innermost, copied from a channels-last copy of x; written as QRows)
// times w^T packed once per group in that order by qconv2d_pack_weights
// (taps = KH * KW; w_zp: 1, or O, one per output channel), then
// transposed into y.
int64_t qconv2d_packed_size(int64_t O, int64_t groups, int64_t K);
void qconv2d_pack_weights(const void* w, bool w_signed, int64_t O, int64_t groups, int64_t K, int64_t taps,
                          const int32_t* w_zp, int64_t zp_count, uint8_t* out);
void qconv2d(const Conv2dGeometry& g, const void* x, bool x_signed, int32_t x_zp, const uint8_t* wp, int32_t* y,
             ThreadPool* pool);

// The name of the kernels qgemm_packed runs on this CPU under the current
// kernel_isa(): "avx512-vnni", "avx512bw", "avx2" or "portable".
const char* qgemm_kernel_name();
// For tests and benchmarks: pins the kernels by that name (false, and
// nothing changes, for one this CPU cannot run); "" follows kernel_isa()
// again.
bool set_qgemm_kernels(const std::string& name);

}  // namespace relax::rt
