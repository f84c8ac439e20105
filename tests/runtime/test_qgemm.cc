// The runtime's 8-bit integer product (runtime/qgemm.h): every kernel
// family this CPU runs (VNNI, AVX-512BW, AVX2, portable) gives exactly
// the integers of a 64-bit reference, wrapped to i32, for u8 and i8 on
// either side, zero points per tensor, per row of A and per column of B
// anywhere in their range (extremes included), at sizes that leave edge
// tiles in every dimension (M, N, and K not a multiple of 4), strided
// operands, on one thread and on a pool. The convolutions built on it
// (qconv2d: patches as rows) against a direct 64-bit convolution with the
// padding reading as the zero point: strides, padding, dilation, groups,
// 1x1 and 1-D, per-channel weight zero points.
#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "runtime/qgemm.h"
#include "runtime/thread_pool.h"

namespace relax::rt {
namespace {

std::vector<uint8_t> random_bytes(int64_t n, std::mt19937& rng, bool extremes) {
  std::uniform_int_distribution<int> d(0, 255);
  std::vector<uint8_t> v(static_cast<size_t>(n));
  for (uint8_t& x : v) x = uint8_t(d(rng));
  if (extremes)  // every value at an end of its range: the largest products
    for (size_t i = 0; i < v.size(); ++i) v[i] = (i % 3 == 0) ? 0x80 : (i % 3 == 1 ? 0x7f : 0xff);
  return v;
}

int32_t value(uint8_t byte, bool is_signed) { return is_signed ? int32_t(int8_t(byte)) : int32_t(byte); }

struct Case {
  int64_t m, n, k;
};

TEST_CASE("qgemm: exact on every kernel family, operand signedness and zero-point kind") {
  std::mt19937 rng(5);
  ThreadPool pool(2);
  std::vector<std::string> families;
  for (const char* f : {"avx512-vnni", "avx512bw", "avx2", "portable"})
    if (set_qgemm_kernels(f)) families.push_back(f);
  REQUIRE(families.size() >= 1);
  CHECK(families.back() == "portable");
  CHECK_FALSE(set_qgemm_kernels("sse9"));
  MESSAGE("qgemm kernel families on this CPU: ", families.size());
  const Case cases[] = {{1, 1, 1},     {1, 100, 768}, {2, 17, 3},  {5, 16, 4},    {6, 64, 5},   {7, 65, 129},
                        {13, 33, 64},  {37, 130, 77}, {3, 0, 4},   {4, 5, 0},     {24, 200, 300},
                        {300, 40, 1001}};  // A packed by the pool's threads (M x K >= 2^18)
  int variant = 0;
  for (const Case& s : cases) {
    for (bool a_signed : {false, true})
      for (bool b_signed : {false, true}) {
        ++variant;
        const bool extremes = variant % 5 == 0;
        const bool row_zp = variant % 2 == 0, col_zp = variant % 3 == 0;
        const int64_t lda = s.k + 3, ldb = s.n + 1, ldc = s.n + 2;
        std::vector<uint8_t> A = random_bytes(s.m * lda, rng, extremes);
        std::vector<uint8_t> B = random_bytes(std::max<int64_t>(s.k, 1) * ldb, rng, extremes);
        std::vector<int32_t> za(size_t(row_zp ? s.m : 1)), zb(size_t(col_zp ? s.n : 1));
        std::uniform_int_distribution<int> zd(0, 255);
        for (int32_t& z : za) z = value(uint8_t(extremes ? 0x80 : zd(rng)), a_signed);
        for (int32_t& z : zb) z = value(uint8_t(extremes ? 0xff : zd(rng)), b_signed);
        if (za.empty()) za.push_back(0);
        if (zb.empty()) zb.push_back(0);
        std::vector<int32_t> want(size_t(s.m * ldc), 77);
        for (int64_t i = 0; i < s.m; ++i)
          for (int64_t j = 0; j < s.n; ++j) {
            int64_t acc = 0;
            for (int64_t k = 0; k < s.k; ++k)
              acc += int64_t(value(A[size_t(i * lda + k)], a_signed) - za[row_zp ? size_t(i) : 0]) *
                     int64_t(value(B[size_t(k * ldb + j)], b_signed) - zb[col_zp ? size_t(j) : 0]);
            want[size_t(i * ldc + j)] = int32_t(uint32_t(uint64_t(acc)));
          }
        std::vector<uint8_t> Bp(size_t(qgemm_packed_b_size(s.k, s.n)));
        qgemm_pack_b(s.k, s.n, {B.data(), b_signed, ldb}, zb.data(), int64_t(col_zp ? s.n : 1), Bp.data());
        for (const std::string& f : families)
          for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
            CAPTURE(f);
            CAPTURE(s.m);
            CAPTURE(s.n);
            CAPTURE(s.k);
            CAPTURE(a_signed);
            CAPTURE(b_signed);
            CAPTURE(row_zp);
            CAPTURE(col_zp);
            REQUIRE(set_qgemm_kernels(f));
            std::vector<int32_t> got(want.size(), 77);
            qgemm_packed(s.m, s.n, s.k, {A.data(), a_signed, lda}, za.data(), row_zp ? s.m : 1, Bp.data(),
                         got.data(), ldc, p);
            CHECK(got == want);
          }
      }
  }
  CHECK(set_qgemm_kernels(""));
}

struct ConvCase {
  int64_t N, C, H, W, O, KH, KW, sh, sw, ph, pw, dh, dw, groups;
};

TEST_CASE("qconv2d: exact against a direct convolution, every kernel family") {
  std::mt19937 rng(9);
  ThreadPool pool(2);
  const ConvCase cases[] = {
      {1, 3, 7, 9, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1},    {2, 16, 10, 10, 24, 3, 3, 2, 2, 1, 1, 1, 1, 1},
      {1, 8, 6, 5, 16, 1, 1, 1, 1, 0, 0, 1, 1, 1},   {1, 12, 9, 9, 12, 3, 3, 1, 1, 2, 2, 2, 2, 3},
      {1, 6, 1, 20, 10, 1, 5, 1, 2, 0, 2, 1, 1, 2},  {1, 64, 8, 8, 33, 3, 3, 1, 1, 1, 1, 1, 1, 1},
      {2, 64, 10, 12, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1},
      {2, 64, 24, 24, 48, 1, 1, 1, 1, 0, 0, 1, 1, 1},  // 1x1: the pixels as patches, split over the pool
  };
  std::vector<std::string> families;
  for (const char* f : {"avx512-vnni", "avx512bw", "avx2", "portable"})
    if (set_qgemm_kernels(f)) families.push_back(f);
  int variant = 0;
  for (const ConvCase& cc : cases)
    for (bool x_signed : {false, true})
      for (bool w_signed : {false, true}) {
        ++variant;
        const int64_t Cg = cc.C / cc.groups, Og = cc.O / cc.groups, K = Cg * cc.KH * cc.KW;
        const int64_t OH = (cc.H + 2 * cc.ph - cc.dh * (cc.KH - 1) - 1) / cc.sh + 1;
        const int64_t OW = (cc.W + 2 * cc.pw - cc.dw * (cc.KW - 1) - 1) / cc.sw + 1;
        const Conv2dGeometry g{cc.N, cc.C, cc.H, cc.W, cc.O, cc.KH, cc.KW, OH, OW,
                               cc.sh, cc.sw, cc.ph, cc.pw, cc.dh, cc.dw, cc.groups};
        std::vector<uint8_t> x = random_bytes(cc.N * cc.C * cc.H * cc.W, rng, variant % 5 == 0);
        std::vector<uint8_t> w = random_bytes(cc.O * K, rng, variant % 5 == 0);
        std::uniform_int_distribution<int> zd(0, 255);
        const int32_t zx = value(uint8_t(zd(rng)), x_signed);
        const bool per_channel = variant % 2 == 0;
        std::vector<int32_t> zw(size_t(per_channel ? cc.O : 1));
        for (int32_t& z : zw) z = value(uint8_t(zd(rng)), w_signed);
        std::vector<int32_t> want(size_t(cc.N * cc.O * OH * OW));
        for (int64_t n = 0; n < cc.N; ++n)
          for (int64_t o = 0; o < cc.O; ++o)
            for (int64_t oh = 0; oh < OH; ++oh)
              for (int64_t ow = 0; ow < OW; ++ow) {
                int64_t acc = 0;
                const int64_t gr = o / Og;
                for (int64_t c = 0; c < Cg; ++c)
                  for (int64_t kh = 0; kh < cc.KH; ++kh)
                    for (int64_t kw = 0; kw < cc.KW; ++kw) {
                      const int64_t ih = oh * cc.sh - cc.ph + kh * cc.dh, iw = ow * cc.sw - cc.pw + kw * cc.dw;
                      if (ih < 0 || ih >= cc.H || iw < 0 || iw >= cc.W) continue;  // x_zp - x_zp
                      const int64_t xv = value(x[size_t(((n * cc.C + gr * Cg + c) * cc.H + ih) * cc.W + iw)], x_signed);
                      const int64_t wv = value(w[size_t(((o * Cg + c) * cc.KH + kh) * cc.KW + kw)], w_signed);
                      acc += (xv - zx) * (wv - zw[per_channel ? size_t(o) : 0]);
                    }
                want[size_t(((n * cc.O + o) * OH + oh) * OW + ow)] = int32_t(acc);
              }
        std::vector<uint8_t> wp(size_t(qconv2d_packed_size(cc.O, cc.groups, K)));
        qconv2d_pack_weights(w.data(), w_signed, cc.O, cc.groups, K, cc.KH * cc.KW, zw.data(), int64_t(zw.size()),
                             wp.data());
        for (const std::string& f : families)
          for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
            CAPTURE(f);
            CAPTURE(variant);
            CAPTURE(x_signed);
            CAPTURE(w_signed);
            REQUIRE(set_qgemm_kernels(f));
            std::vector<int32_t> got(want.size(), 77);
            qconv2d(g, x.data(), x_signed, zx, wp.data(), got.data(), p);
            CHECK(got == want);
          }
      }
  CHECK(set_qgemm_kernels(""));
}

}  // namespace
}  // namespace relax::rt
