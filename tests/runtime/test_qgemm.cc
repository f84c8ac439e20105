// The runtime's 8-bit integer product (runtime/qgemm.h): every kernel
// family this CPU runs (VNNI, AVX-512BW, AVX2, portable) gives exactly
// the integers of a 64-bit reference, wrapped to i32, for u8 and i8 on
// either side, zero points per tensor, per row of A and per column of B
// anywhere in their range (extremes included), at sizes that leave edge
// tiles in every dimension (M, N, and K not a multiple of 4), strided
// operands, on one thread and on a pool.
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
                        {13, 33, 64},  {37, 130, 77}, {3, 0, 4},   {4, 5, 0},     {24, 200, 300}};
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

}  // namespace
}  // namespace relax::rt
