// Library kernels: matrix products through OpenBLAS (cblas), for the
// matmuls the matmul legaliser sends here (f32 and f64). numpy matmul
// semantics: 1-D operands are promoted and the extra axis dropped, batch
// axes broadcast.
#include <cblas.h>

#include <cstring>

#include "runtime/error.h"
#include "runtime/thread_pool.h"
#include "runtime/vm.h"

namespace relax::rt {
namespace {

// Row-major strides in elements, with stride 0 where a broadcast dim is 1.
std::vector<int64_t> batch_strides(const std::vector<int64_t>& batch, const std::vector<int64_t>& out_batch,
                                   int64_t matrix) {
  std::vector<int64_t> s(out_batch.size(), 0);
  int64_t stride = matrix;
  size_t off = out_batch.size() - batch.size();
  for (size_t i = batch.size(); i-- > 0;) {
    s[off + i] = batch[i] == 1 ? 0 : stride;
    stride *= batch[i];
  }
  return s;
}

// blas.matmul(a, b, out)
void matmul(BuiltinCall& c) {
  const Tensor& a = c.arg(0).tensor("blas.matmul a");
  const Tensor& b = c.arg(1).tensor("blas.matmul b");
  const Tensor& out = c.arg(2).tensor("blas.matmul out");
  DType d = a.dtype();
  if (!(b.dtype() == d) || !(out.dtype() == d) || !(d == DType::f32() || d == DType::f(64)))
    rt_fail("blas.matmul: needs f32 or f64 operands of one dtype, got ", a.type_str(), " and ", b.type_str());
  std::vector<int64_t> as = a.shape(), bs = b.shape();
  if (as.empty() || bs.empty()) rt_fail("blas.matmul: operands must have rank >= 1");
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  if (bs[bs.size() - 2] != K) rt_fail("blas.matmul: inner dims ", K, " and ", bs[bs.size() - 2], " differ");
  std::vector<int64_t> ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  std::vector<int64_t> ob(std::max(ab.size(), bb.size()), 1);
  for (size_t i = 0; i < ob.size(); ++i) {
    int64_t x = i + ab.size() >= ob.size() ? ab[i + ab.size() - ob.size()] : 1;
    int64_t y = i + bb.size() >= ob.size() ? bb[i + bb.size() - ob.size()] : 1;
    if (x != y && x != 1 && y != 1) rt_fail("blas.matmul: batch dims ", x, " and ", y, " do not broadcast");
    ob[i] = x == 1 ? y : x;
  }
  int64_t batch = 1;
  for (int64_t v : ob) batch *= v;
  if (out.numel() != batch * M * N) rt_fail("blas.matmul: the output ", out.type_str(), " has the wrong size");
  if (M == 0 || N == 0 || batch == 0) return;
  size_t esize = size_t(d.bits / 8);
  if (K == 0) {
    std::memset(out.data(), 0, out.nbytes());
    return;
  }
  std::vector<int64_t> sa = batch_strides(ab, ob, M * K), sb = batch_strides(bb, ob, K * N);
  static thread_local int threads = -1;
  int want = ThreadPool::global()->num_threads();
  if (threads != want) {
    openblas_set_num_threads(want);
    threads = want;
  }
  std::vector<int64_t> idx(ob.size(), 0);
  for (int64_t i = 0; i < batch; ++i) {
    int64_t oa = 0, obb = 0;
    for (size_t k = 0; k < ob.size(); ++k) {
      oa += idx[k] * sa[k];
      obb += idx[k] * sb[k];
    }
    const char* pa = static_cast<const char*>(a.data()) + size_t(oa) * esize;
    const char* pb = static_cast<const char*>(b.data()) + size_t(obb) * esize;
    char* pc = static_cast<char*>(out.data()) + size_t(i * M * N) * esize;
    if (d == DType::f32())
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, blasint(M), blasint(N), blasint(K), 1.0f,
                  reinterpret_cast<const float*>(pa), blasint(K), reinterpret_cast<const float*>(pb), blasint(N), 0.0f,
                  reinterpret_cast<float*>(pc), blasint(N));
    else
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, blasint(M), blasint(N), blasint(K), 1.0,
                  reinterpret_cast<const double*>(pa), blasint(K), reinterpret_cast<const double*>(pb), blasint(N), 0.0,
                  reinterpret_cast<double*>(pc), blasint(N));
    for (size_t k = ob.size(); k-- > 0;) {
      if (++idx[k] < ob[k]) break;
      idx[k] = 0;
    }
  }
}

}  // namespace

void register_blas_builtins() { register_builtin("blas.matmul", matmul); }

}  // namespace relax::rt
