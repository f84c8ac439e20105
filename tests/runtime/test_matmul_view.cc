// blas.matmul_view (runtime/builtins_matmul.cc): products of strided views
// of their operands and result, as passes/fold_matmul_views.cc writes them
// for attention's transposed Q, K and V and its transposed result. Each
// product is checked element by element against a loop over the same
// views in double, within the error bound of an f32 sum (K * 2^-23 of the
// sum of |a| * |b|), on the BLAS layouts (a as stored or transposed, b
// likewise, a row against b either way), with broadcast batch dims, an
// epilogue, at one and two threads; then the views it refuses.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "runtime/error.h"
#include "runtime/thread_pool.h"
#include "runtime/vm.h"
#include "tests/runtime/builtin_call.h"

using namespace relax::rt;
using relax::rt::test::call;
using relax::rt::test::random_tensor;
using relax::rt::test::shape_value;

namespace {

// A view as the parameters give it: offset, dims, strides.
struct View {
  int64_t at;
  std::vector<int64_t> dims, strides;
  void append(std::vector<int64_t>& p) const {
    p.push_back(int64_t(dims.size()));
    if (dims.empty()) return;
    p.push_back(at);
    p.insert(p.end(), dims.begin(), dims.end());
    p.insert(p.end(), strides.begin(), strides.end());
  }
  // The offset of the element at batch index i (row-major over dims but
  // the last two), row r, column c; batch dims of size 1 broadcast.
  int64_t offset(const std::vector<int64_t>& batch, int64_t i, int64_t r, int64_t c) const {
    int64_t o = at;
    const size_t nb = dims.size() - 2, skip = batch.size() - nb;
    for (size_t k = batch.size(); k-- > 0;) {
      const int64_t ix = i % batch[k];
      i /= batch[k];
      if (k >= skip && dims[k - skip] != 1) o += ix * strides[k - skip];
    }
    return o + r * strides[nb] + c * strides[nb + 1];
  }
};

View contiguous_view(std::vector<int64_t> dims) {
  View v{0, dims, std::vector<int64_t>(dims.size())};
  int64_t s = 1;
  for (size_t i = dims.size(); i-- > 0;) v.strides[i] = s, s *= dims[i];
  return v;
}

// The number of elements of `out` (viewed by vc) farther from the product
// of the views than an f32 sum's error bound.
int64_t wrong_elements(const Tensor& a, const View& va, const Tensor& b, const View& vb, const Tensor& out,
                       const View& vc, const std::vector<int64_t>& batch) {
  const size_t rc = vc.dims.size();
  const int64_t M = vc.dims[rc - 2], N = vc.dims[rc - 1], K = va.dims.back();
  int64_t count = 1;
  for (int64_t d : batch) count *= d;
  const auto *pa = static_cast<const float*>(a.data()), *pb = static_cast<const float*>(b.data()),
             *pc = static_cast<const float*>(out.data());
  int64_t wrong = 0;
  for (int64_t i = 0; i < count; ++i)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double want = 0, mag = 0;
        for (int64_t k = 0; k < K; ++k) {
          const double x = pa[va.offset(batch, i, m, k)], y = pb[vb.offset(batch, i, k, n)];
          want += x * y, mag += std::abs(x * y);
        }
        wrong += std::abs(pc[vc.offset(batch, i, m, n)] - want) > double(K + 1) * 0x1p-23 * mag + 1e-30;
      }
  return wrong;
}

}  // namespace

TEST_CASE("blas.matmul_view: products of transposed and offset views match loops over the same views") {
  std::mt19937 rng(21);
  // Attention over a fused QKV projection, (B, S, 3, H, D) in memory: Q is
  // (B, H, S, D) at offset 0, K^T (B, H, D, S) at offset H * D (b read
  // transposed), V (B, H, S, D) at 2 * H * D; the result written straight
  // into (B, S, H, D).
  for (auto [B, S, H, D] : {std::array<int64_t, 4>{2, 37, 3, 16}, {1, 1, 4, 8}, {3, 70, 2, 32}}) {
    CAPTURE(S);
    const int64_t row = 3 * H * D;
    Tensor qkv = random_tensor(rng, {B, S, 3, H, D});
    View q{0, {B, H, S, D}, {S * row, D, row, 1}};
    View kt{H * D, {B, H, D, S}, {S * row, D, 1, row}};
    View v{2 * H * D, {B, H, S, D}, {S * row, D, row, 1}};
    for (int threads : {1, 2}) {
      CAPTURE(threads);
      ThreadPool::set_global_num_threads(threads);
      Tensor scores = Tensor::empty(DType::f32(), {B, H, S, S});
      std::vector<int64_t> p;
      q.append(p), kt.append(p), p.push_back(0);
      call("blas.matmul_view", {Value(qkv), Value(qkv), shape_value(p), Value(scores)});
      CHECK(wrong_elements(qkv, q, qkv, kt, scores, contiguous_view({B, H, S, S}), {B, H}) == 0);
      Tensor ctx = Tensor::empty(DType::f32(), {B, S, H, D});
      View vc{0, {B, H, S, D}, {S * H * D, D, H * D, 1}};
      p.clear();
      p.push_back(0), v.append(p), vc.append(p);
      call("blas.matmul_view", {Value(scores), Value(qkv), shape_value(p), Value(ctx)});
      CHECK(wrong_elements(scores, contiguous_view({B, H, S, S}), qkv, v, ctx, vc, {B, H}) == 0);
    }
  }
  ThreadPool::set_global_num_threads(0);
}

TEST_CASE("blas.matmul_view: a read transposed, rows against b either way, broadcast batch dims, an epilogue") {
  std::mt19937 rng(22);
  // a (4, M, K) stored as (K, 4, M): its rows have stride 1 (BLAS reads it
  // transposed); b (K, N) shared by the batch, stored as (N, K) or as is.
  for (int64_t M : {1, 5, 64}) {
    CAPTURE(M);
    const int64_t K = 48, N = 300;
    Tensor at = random_tensor(rng, {K, 4, M}), bt = random_tensor(rng, {N, K}), bn = random_tensor(rng, {K, N});
    View va{0, {4, M, K}, {M, 1, 4 * M}};
    View vbt{0, {1, K, N}, {0, 1, K}};
    View vbn = contiguous_view({K, N});
    for (int threads : {1, 2}) {
      CAPTURE(threads);
      ThreadPool::set_global_num_threads(threads);
      for (const View* vb : {&vbt, &vbn}) {
        const Tensor& b = vb == &vbt ? bt : bn;
        Tensor y = Tensor::empty(DType::f32(), {4, M, N});
        std::vector<int64_t> p;
        va.append(p), vb->append(p), p.push_back(0);
        call("blas.matmul_view", {Value(at), Value(b), shape_value(p), Value(y)});
        CHECK(wrong_elements(at, va, b, *vb, y, contiguous_view({4, M, N}), {4}) == 0);
        // A row of a read as stored against b transposed: the gemv path.
        Tensor a1 = random_tensor(rng, {4, 1, K}), y1 = Tensor::empty(DType::f32(), {4, 1, N});
        p.clear();
        p.push_back(0), vb->append(p), p.push_back(0);
        call("blas.matmul_view", {Value(a1), Value(b), shape_value(p), Value(y1)});
        CHECK(wrong_elements(a1, contiguous_view({4, 1, K}), b, *vb, y1, contiguous_view({4, 1, N}), {4}) == 0);
      }
      // An epilogue (one bias) on a product of views: the plain product plus the bias.
      Tensor bias = random_tensor(rng, {N}), y = Tensor::empty(DType::f32(), {4, M, N}),
             plain = Tensor::empty(DType::f32(), {4, M, N});
      std::vector<int64_t> p;
      va.append(p), vbt.append(p), p.push_back(0);
      call("blas.matmul_view", {Value(at), Value(bt), shape_value(p), Value(plain)});
      for (int64_t e :
           {int64_t(1), int64_t(0xff800000), int64_t(0x7f800000), int64_t(0x3f800000), int64_t(0), int64_t(0x3f800000)})
        p.push_back(e);
      call("blas.matmul_view", {Value(at), Value(bt), shape_value(p), Value(bias), Value(y)});
      int64_t wrong = 0;
      for (int64_t i = 0; i < y.numel(); ++i)
        wrong += static_cast<const float*>(y.data())[i] !=
                 static_cast<const float*>(plain.data())[i] + static_cast<const float*>(bias.data())[i % N];
      CHECK(wrong == 0);
    }
  }
  ThreadPool::set_global_num_threads(0);
}

TEST_CASE("blas.matmul_view refuses views outside their tensors and layouts BLAS cannot read") {
  std::mt19937 rng(23);
  Tensor a = random_tensor(rng, {2, 6, 8}), b = random_tensor(rng, {8, 5}), y = Tensor::empty(DType::f32(), {2, 6, 5});
  auto run = [&](std::vector<int64_t> p, std::vector<Value> extra = {}) {
    std::vector<Value> args = {Value(a), Value(b), shape_value(std::move(p))};
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back(Value(y));
    call("blas.matmul_view", args);
  };
  // One element past a's end.
  CHECK_THROWS_WITH_AS(run({3, 1, 2, 6, 8, 48, 8, 1, 0, 0}), doctest::Contains("a's view (offset 1"), Error);
  CHECK_THROWS_WITH_AS(run({3, 0, 2, 6, 8, -48, 8, 1, 0, 0}), doctest::Contains("does not lie inside f32[2, 6, 8]"),
                       Error);
  // Neither of a's last two strides is 1.
  CHECK_THROWS_WITH_AS(run({3, 0, 2, 6, 8, 0, 16, 2, 0, 0}), doctest::Contains("need a stride of 1"), Error);
  // A view of rank 1, and parameters that end early.
  CHECK_THROWS_WITH_AS(run({1, 0, 8, 1, 0, 0}), doctest::Contains("a rank from 2 to 8"), Error);
  CHECK_THROWS_WITH_AS(run({0, 0}), doctest::Contains("end before out's view"), Error);
  // out's view must be the product's dims.
  CHECK_THROWS_WITH_AS(run({0, 0, 3, 0, 2, 5, 6, 30, 1, 5}), doctest::Contains("out's view has dims [2, 5, 6]"), Error);
  // An epilogue with out read through a view.
  Tensor bias = random_tensor(rng, {5});
  CHECK_THROWS_WITH_AS(run({0, 0, 3, 0, 2, 6, 5, 30, 5, 1, 1, 0, 0, 0, 0, 0}, {Value(bias)}),
                       doctest::Contains("an epilogue needs out read as it is"), Error);
}
