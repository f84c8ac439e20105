// Library products:
//  - blas.matmul: the matmuls the matmul legaliser sends here (f32 and
//    f64): f32 by the runtime's product (runtime/gemm.h: AVX-512 where the
//    CPU has it; Debian's OpenBLAS 0.3.21 runs its Haswell kernels on
//    AVX-512 AMD EPYCs, at 60% of the runtime's speed), a row by gemv_f32,
//    f64 and a row by a transposed b through OpenBLAS. numpy matmul semantics: 1-D
//    operands are promoted and the extra axis dropped, batch axes
//    broadcast. blas.matmul_view: the same product of strided views of its
//    operands and result (passes/fold_matmul_views.cc).
//  - gemm.qmatmul, gemm.qmatmul_pack, gemm.qmatmul_packed: 8-bit integer
//    products with zero points and an i32 result (matmul_integer,
//    runtime/qgemm.h), B packed once when it is a constant.
// OpenBLAS's threads are set up by register_blas_builtins
// (runtime/builtins_blas.cc), which the VM calls first.
#include <cblas.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "runtime/epilogue.h"
#include "runtime/error.h"
#include "runtime/gemm.h"
#include "runtime/library_util.h"
#include "runtime/qgemm.h"
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

// The batch dims of a matmul of a (..., M, K) and b (..., K, N), numpy
// broadcast: their count and each output matrix's offsets into a and b.
struct MatmulBatch {
  std::vector<int64_t> dims, sa, sb;
  int64_t count = 1;
  // Element offsets of output matrix i's operands.
  std::pair<int64_t, int64_t> offsets(int64_t i) const {
    int64_t oa = 0, ob = 0;
    for (size_t k = dims.size(); k-- > 0;) {
      int64_t ix = i % dims[k];
      i /= dims[k];
      oa += ix * sa[k];
      ob += ix * sb[k];
    }
    return {oa, ob};
  }
};
MatmulBatch matmul_batch(const char* what, const std::vector<int64_t>& as, const std::vector<int64_t>& bs) {
  std::vector<int64_t> ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  MatmulBatch r;
  r.dims.assign(std::max(ab.size(), bb.size()), 1);
  for (size_t i = 0; i < r.dims.size(); ++i) {
    int64_t x = i + ab.size() >= r.dims.size() ? ab[i + ab.size() - r.dims.size()] : 1;
    int64_t y = i + bb.size() >= r.dims.size() ? bb[i + bb.size() - r.dims.size()] : 1;
    if (x != y && x != 1 && y != 1) rt_fail(what, ": batch dims ", x, " and ", y, " do not broadcast");
    r.dims[i] = x == 1 ? y : x;
  }
  for (int64_t v : r.dims) r.count *= v;
  const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  r.sa = batch_strides(ab, r.dims, M * K);
  r.sb = batch_strides(bb, r.dims, K * N);
  return r;
}

// An operand or the result of a product as the BLAS reads it: dims and
// strides in elements, from element `at` of its tensor.
struct Strided {
  std::vector<int64_t> dims, strides;
  int64_t at = 0;
};

Strided contiguous(std::vector<int64_t> dims) {
  Strided s;
  s.strides.assign(dims.size(), 0);
  int64_t stride = 1;
  for (size_t i = dims.size(); i-- > 0;) s.strides[i] = stride, stride *= dims[i];
  s.dims = std::move(dims);
  return s;
}

// One operand's view in blas.matmul_view's parameters, from p[pos]: its
// rank r, then (r > 0) its offset, r dims and r strides; rank 0 reads the
// tensor as it is. Fails unless every element it names lies inside `t`.
std::optional<Strided> read_view(const char* what, const char* label, const Tensor& t, const std::vector<int64_t>& p,
                                 size_t& pos) {
  if (pos >= p.size()) rt_fail(what, ": the parameters ", shape_str(p), " end before ", label, "'s view");
  const int64_t r = p[pos++];
  if (r == 0) return std::nullopt;
  if (r < 2 || r > 8 || pos + 1 + 2 * size_t(r) > p.size())
    rt_fail(what, ": ", label, "'s view needs a rank from 2 to 8 and 1 + 2 * rank words, got rank ", r, " in ",
            shape_str(p));
  Strided s;
  s.at = p[pos++];
  s.dims.assign(p.begin() + long(pos), p.begin() + long(pos) + r);
  s.strides.assign(p.begin() + long(pos) + r, p.begin() + long(pos) + 2 * r);
  pos += 2 * size_t(r);
  int64_t last = s.at, count = 1;
  bool bad = s.at < 0;
  for (size_t i = 0; i < s.dims.size(); ++i) {
    bad |= s.dims[i] < 0 || s.strides[i] < 0;
    count *= s.dims[i];
    if (s.dims[i] > 0) last += (s.dims[i] - 1) * s.strides[i];
  }
  if (bad || (count > 0 && last >= t.numel()))
    rt_fail(what, ": ", label, "'s view (offset ", s.at, ", dims ", shape_str(s.dims), ", strides ",
            shape_str(s.strides), ") does not lie inside ", t.type_str());
  return s;
}

// How BLAS reads a rows x cols matrix at strides (sr, sc): as stored
// (row-major, leading dimension ld) or transposed; nullopt where neither
// stride is 1.
struct BlasLayout {
  bool trans = false;
  int64_t ld = 1;
};
std::optional<BlasLayout> blas_layout(int64_t rows, int64_t cols, int64_t sr, int64_t sc) {
  if (sc == 1 || cols <= 1) {
    const int64_t ld = rows <= 1 ? std::max<int64_t>(cols, 1) : sr;
    if (ld >= std::max<int64_t>(cols, 1)) return BlasLayout{false, ld};
  }
  if (sr == 1 || rows <= 1) {
    const int64_t ld = cols <= 1 ? std::max<int64_t>(rows, 1) : sc;
    if (ld >= std::max<int64_t>(rows, 1)) return BlasLayout{true, ld};
  }
  return std::nullopt;
}

// The batch dims of a product of strided operands, numpy broadcast: each
// output matrix's element offsets into a, b and the result.
struct StridedBatch {
  std::vector<int64_t> dims, sa, sb, sc;
  int64_t count = 1;
  std::array<int64_t, 3> offsets(int64_t i) const {
    std::array<int64_t, 3> o = {0, 0, 0};
    for (size_t k = dims.size(); k-- > 0;) {
      const int64_t ix = i % dims[k];
      i /= dims[k];
      o[0] += ix * sa[k], o[1] += ix * sb[k], o[2] += ix * sc[k];
    }
    return o;
  }
};

// blas.matmul(a, b, out), or blas.matmul(a, b, shape(e, lo, hi, k1, k2,
// k3), tensors..., out) with an epilogue fused from the elementwise kernel
// after it (passes/fuse_library_epilogues.cc; runtime/epilogue.h
// read_epilogue: biases of N elements, one per column, a residual of
// out's shape, one-element scalars), f32 only. Each worker applies it to
// its slice of the product right after computing it.
//
// blas.matmul_view(a, b, shape(views..., [e, lo, hi, k1, k2, k3]),
// [tensors...], out): the same product of strided views of a, b and out
// (passes/fold_matmul_views.cc: the transposes, reshapes and slices that
// fed the product, or the transpose of its result, read in place). The
// parameters hold a's, b's and out's views in turn (read_view), then an
// epilogue, taken only where out is read as it is. In each operand's two
// last dims one stride must be 1 (BLAS reads it as stored or transposed);
// out's last one.
void matmul_impl(BuiltinCall& c, bool views) {
  const char* what = views ? "blas.matmul_view" : "blas.matmul";
  const Tensor& a = c.arg(0).tensor("blas.matmul a");
  const Tensor& b = c.arg(1).tensor("blas.matmul b");
  const Tensor& out = c.arg(c.num_args - 1).tensor("blas.matmul out");
  std::optional<Strided> va, vb, vc;
  const std::vector<int64_t>* params = nullptr;
  size_t pos = 0;
  if (views || c.num_args > 3)
    params = &c.arg(2).shape(views ? "blas.matmul_view parameters" : "blas.matmul epilogue parameters");
  if (views) {
    if (c.num_args < 4) rt_fail(what, ": takes at least 4 arguments, got ", c.num_args);
    va = read_view(what, "a", a, *params, pos);
    vb = read_view(what, "b", b, *params, pos);
    vc = read_view(what, "out", out, *params, pos);
  }
  const bool fused = views ? pos < params->size() : c.num_args > 3;
  if (fused && (params->size() - pos != size_t(kEpilogueParams) || epilogue_tensors((*params)[pos]) < 0 ||
                c.num_args != 4 + size_t(epilogue_tensors((*params)[pos]))))
    rt_fail(what, ": an epilogue needs ", kEpilogueParams, " parameters and the tensors its flags name, got ",
            shape_str(*params), " and ", c.num_args, " arguments");
  if (!fused && c.num_args != (views ? 4 : 3)) rt_fail(what, ": takes ", views ? 4 : 3, " arguments, got ", c.num_args);
  if (fused && vc) rt_fail(what, ": an epilogue needs out read as it is, not through a view");
  DType d = a.dtype();
  if (!(b.dtype() == d) || !(out.dtype() == d) || !(d == DType::f32() || d == DType::f(64)))
    rt_fail(what, ": needs f32 or f64 operands of one dtype, got ", a.type_str(), " and ", b.type_str());
  // The operands as strided matrices; 1-D ones read as they are promoted.
  Strided sa, sb;
  if (va) {
    sa = *va;
  } else {
    std::vector<int64_t> as = a.shape();
    if (as.empty()) rt_fail(what, ": operands must have rank >= 1");
    if (as.size() == 1) as.insert(as.begin(), 1);
    sa = contiguous(as);
  }
  if (vb) {
    sb = *vb;
  } else {
    std::vector<int64_t> bs = b.shape();
    if (bs.empty()) rt_fail(what, ": operands must have rank >= 1");
    if (bs.size() == 1) bs.push_back(1);
    sb = contiguous(bs);
  }
  const size_t ra = sa.dims.size(), rb = sb.dims.size();
  const int64_t M = sa.dims[ra - 2], K = sa.dims[ra - 1], N = sb.dims[rb - 1];
  if (sb.dims[rb - 2] != K) rt_fail(what, ": inner dims ", K, " and ", sb.dims[rb - 2], " differ");
  StridedBatch mb;
  const size_t nb = std::max(ra, rb) - 2;
  mb.dims.assign(nb, 1), mb.sa.assign(nb, 0), mb.sb.assign(nb, 0), mb.sc.assign(nb, 0);
  for (size_t i = 0; i < nb; ++i) {
    const bool in_a = i + ra >= nb + 2, in_b = i + rb >= nb + 2;
    const int64_t x = in_a ? sa.dims[i + ra - 2 - nb] : 1, y = in_b ? sb.dims[i + rb - 2 - nb] : 1;
    if (x != y && x != 1 && y != 1) rt_fail(what, ": batch dims ", x, " and ", y, " do not broadcast");
    mb.dims[i] = x == 1 ? y : x;
    if (x != 1) mb.sa[i] = sa.strides[i + ra - 2 - nb];
    if (y != 1) mb.sb[i] = sb.strides[i + rb - 2 - nb];
  }
  for (int64_t v : mb.dims) mb.count *= v;
  const int64_t batch = mb.count;
  int64_t sCm = N, sCn = 1;
  if (vc) {
    std::vector<int64_t> want = mb.dims;
    want.push_back(M), want.push_back(N);
    if (vc->dims != want)
      rt_fail(what, ": out's view has dims ", shape_str(vc->dims), ", the product ", shape_str(want));
    for (size_t i = 0; i < nb; ++i) mb.sc[i] = vc->strides[i];
    sCm = vc->strides[nb], sCn = vc->strides[nb + 1];
  } else {
    if (out.numel() != batch * M * N) rt_fail(what, ": the output ", out.type_str(), " has the wrong size");
    int64_t stride = M * N;
    for (size_t i = nb; i-- > 0;) mb.sc[i] = stride, stride *= mb.dims[i];
  }
  const int64_t sBn = sb.strides[rb - 1];  // b's column stride, for column slices
  Epilogue epilogue;
  if (fused) {
    if (!(d == DType::f32())) rt_fail(what, ": an epilogue needs f32 operands, got ", a.type_str());
    read_epilogue(what, c, params->data() + pos, 3, N, out.shape(), epilogue);
  }
  c.flops = 2.0 * double(batch) * double(M) * double(N) * double(K);
  if (M == 0 || N == 0 || batch == 0) return;
  size_t esize = size_t(d.bits / 8);
  if (K == 0) {
    if (vc) {
      for (int64_t i = 0; i < batch; ++i)
        for (int64_t m = 0; m < M; ++m)
          std::memset(static_cast<char*>(out.data()) + size_t(vc->at + mb.offsets(i)[2] + m * sCm) * esize, 0,
                      size_t(N) * esize);
      return;
    }
    std::memset(out.data(), 0, out.nbytes());
    if (fused) epilogue.apply_rows(static_cast<float*>(out.data()), 0, N, batch * M, 0, N);
    return;
  }
  const std::optional<BlasLayout> la = blas_layout(M, K, sa.strides[ra - 2], sa.strides[ra - 1]);
  const std::optional<BlasLayout> lb = blas_layout(K, N, sb.strides[rb - 2], sb.strides[rb - 1]);
  const std::optional<BlasLayout> lc = blas_layout(M, N, sCm, sCn);
  if (!la || !lb || !lc || lc->trans)
    rt_fail(what, ": a, b and out need a stride of 1 in their last two dims (out in its last), got strides ",
            shape_str(sa.strides), ", ", shape_str(sb.strides), " and (", sCm, ", ", sCn, ")");
  std::shared_ptr<ThreadPool> pool = ThreadPool::global();
  double work = double(batch) * double(M) * double(N) * double(K);
  int64_t threads = pool->num_threads();
  // A batch sharing one b (every batch stride of b 0: a weight) into a
  // result stored whole, a not transposed: one product of all the batch's
  // rows, wherever a's sit, so that b streams once and not once per batch
  // entry (a transposed view of activations times a weight was a row-by-
  // row product per position).
  bool shared_b = batch > 1 && d == DType::f32() && !vc && !la->trans;
  for (int64_t v : mb.sb) shared_b = shared_b && v == 0;
  if (shared_b) {
    std::vector<int64_t> rows(size_t(batch * M));
    for (int64_t i = 0; i < batch; ++i)
      for (int64_t m = 0; m < M; ++m) rows[size_t(i * M + m)] = sa.at + mb.offsets(i)[0] + m * la->ld;
    Slices sl = column_slices(N, threads, work);
    const float* pa = static_cast<const float*>(a.data());
    for_items(*pool, sl.count, work >= double(1 << 17), [&](int64_t s0, int64_t s1) {
      for (int64_t s = s0; s < s1; ++s) {
        int64_t j0 = s * sl.width, nj = std::min(sl.width, N - j0);
        const float* pb = static_cast<const float*>(b.data()) + sb.at + j0 * sBn;
        float* pc = static_cast<float*>(out.data()) + j0;
        gemm_f32_rows(batch * M, nj, K, pa, rows.data(), pb, lb->trans ? 1 : lb->ld, lb->trans ? lb->ld : 1, pc, N,
                      nullptr);
        if (fused) epilogue.apply_rows(static_cast<float*>(out.data()), 0, N, batch * M, j0, j0 + nj);
      }
    });
    return;
  }
  // Work items: each output matrix, in column slices when there are fewer
  // matrices than threads.
  Slices sl = column_slices(N, batch < threads ? (threads + batch - 1) / batch : 1, work);
  int64_t slices = sl.count, cols = sl.width;
  const auto ta = la->trans ? CblasTrans : CblasNoTrans, tb = lb->trans ? CblasTrans : CblasNoTrans;
  auto one = [&](int64_t item) {
    int64_t i = item / slices, j0 = item % slices * cols, nj = std::min(cols, N - j0);
    const auto [oa, obb, oc] = mb.offsets(i);
    const char* pa = static_cast<const char*>(a.data()) + size_t(sa.at + oa) * esize;
    const char* pb = static_cast<const char*>(b.data()) + size_t(sb.at + obb + j0 * sBn) * esize;
    char* pc = static_cast<char*>(out.data()) + size_t((vc ? vc->at : 0) + oc + j0) * esize;
    if (d == DType::f32() && M == 1 && !la->trans &&
        !lb->trans)  // a row: the runtime's own, every column the same chain
      gemv_f32(nj, K, reinterpret_cast<const float*>(pa), reinterpret_cast<const float*>(pb), lb->ld,
               reinterpret_cast<float*>(pc));
    else if (d == DType::f32() && M == 1 && !la->trans)  // a row by b stored transposed: b's rows dotted with it
      cblas_sgemv(CblasRowMajor, CblasNoTrans, blasint(nj), blasint(K), 1.0f, reinterpret_cast<const float*>(pb),
                  blasint(lb->ld), reinterpret_cast<const float*>(pa), 1, 0.0f, reinterpret_cast<float*>(pc), 1);
    else if (d == DType::f32())  // the runtime's product: AVX-512 where the CPU has it (OpenBLAS may not use it)
      gemm_f32_strided(M, nj, K, reinterpret_cast<const float*>(pa), la->trans ? 1 : la->ld, la->trans ? la->ld : 1,
                       reinterpret_cast<const float*>(pb), lb->trans ? 1 : lb->ld, lb->trans ? lb->ld : 1,
                       reinterpret_cast<float*>(pc), lc->ld, nullptr);
    else
      cblas_dgemm(CblasRowMajor, ta, tb, blasint(M), blasint(nj), blasint(K), 1.0, reinterpret_cast<const double*>(pa),
                  blasint(la->ld), reinterpret_cast<const double*>(pb), blasint(lb->ld), 0.0,
                  reinterpret_cast<double*>(pc), blasint(lc->ld));
    if (fused) epilogue.apply_rows(static_cast<float*>(out.data()), i * M * N, N, M, j0, j0 + nj);
  };
  for_items(*pool, batch * slices, work >= double(1 << 17), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) one(t);
  });
}

void matmul(BuiltinCall& c) { matmul_impl(c, false); }
void matmul_view(BuiltinCall& c) { matmul_impl(c, true); }

// ---- f32 products with B packed once -----------------------------------------------------

// The parameters (K, N) of a product from packed weights, or (K, N) and an
// epilogue's (runtime/epilogue.h): whether there is an epilogue, its
// flags checked to be ones this product takes (`scaled`: i32 sums scaled
// into f32, bit 14 required; else f32 sums, bits 14-16 refused).
bool packed_product_params(const char* what, const std::vector<int64_t>& p, bool scaled) {
  const bool fused = p.size() == 2 + size_t(kEpilogueParams);
  if ((p.size() != 2 && !fused) || p[0] < 0 || p[1] < 0)
    rt_fail(what, ": needs the parameters (K, N), or (K, N) and an epilogue's ", kEpilogueParams, ", got ",
            shape_str(p));
  if (fused && (epilogue_tensors(p[2]) < 0 || (scaled ? !(p[2] >> 14 & 1) : (p[2] >> 14) != 0)))
    rt_fail(what, ": ", p[2], " is not the flags of an epilogue of ", scaled ? "scaled" : "f32", " sums");
  return fused;
}

// gemm.matmul_pack(b, out): b (K, N) f32 packed for gemm.matmul_packed
// (f32, gemm_packed_b_size floats). A build runs it once, folding the
// result into the package.
void matmul_pack(BuiltinCall& c) {
  const char* what = "gemm.matmul_pack";
  if (c.num_args != 2) rt_fail(what, ": takes 2 arguments, got ", c.num_args);
  const Tensor& b = c.arg(0).tensor("gemm.matmul_pack b");
  const Tensor& out = c.arg(1).tensor("gemm.matmul_pack out");
  if (b.shape().size() != 2 || !(b.dtype() == DType::f32()))
    rt_fail(what, ": b must be f32 of rank 2, got ", b.type_str());
  const int64_t K = b.shape()[0], N = b.shape()[1], size = gemm_packed_b_size(K, N);
  if (!(out.dtype() == DType::f32()) || out.numel() != size)
    rt_fail(what, ": the output must hold ", size, " f32, got ", out.type_str());
  gemm_pack_b(K, N, static_cast<const float*>(b.data()), N, static_cast<float*>(out.data()));
}

// gemm.matmul_packed(a, bp, shape(K, N), out): out (..., M, N) = a b for
// a (..., M, K) f32 (every row of every batch: one product) and b packed
// by gemm.matmul_pack, the runtime's product (runtime/gemm.h: the sums
// blas.matmul gives, bitwise). Or gemm.matmul_packed(a, bp, shape(K, N,
// e, lo, hi, k1, k2, k3), tensors..., out) with an epilogue fused from
// the kernel after it (passes/fuse_library_epilogues.cc;
// runtime/epilogue.h read_epilogue: biases of N, a residual of out's
// shape, one-element scalars). Columns split over the pool, each worker
// applying the epilogue to its slice right after computing it.
void matmul_packed(BuiltinCall& c) {
  const char* what = "gemm.matmul_packed";
  if (c.num_args < 4) rt_fail(what, ": takes 4 arguments or more, got ", c.num_args);
  const Tensor& a = c.arg(0).tensor("gemm.matmul_packed a");
  const Tensor& bp = c.arg(1).tensor("gemm.matmul_packed weights");
  const std::vector<int64_t>& p = c.arg(2).shape("gemm.matmul_packed parameters");
  const Tensor& out = c.arg(c.num_args - 1).tensor("gemm.matmul_packed out");
  const bool fused = packed_product_params(what, p, /*scaled=*/false);
  if (c.num_args != 4 + (fused ? size_t(epilogue_tensors(p[2])) : 0))
    rt_fail(what, ": takes 4 arguments and its epilogue's tensors, got ", c.num_args);
  const int64_t K = p[0], N = p[1];
  for (const Tensor* t : {&a, &bp, &out})
    if (!(t->dtype() == DType::f32())) rt_fail(what, ": needs f32 tensors, got ", t->type_str());
  if (a.shape().empty() || a.shape().back() != K) rt_fail(what, ": a ", a.type_str(), " must end in K = ", K);
  if (bp.numel() != gemm_packed_b_size(K, N))
    rt_fail(what, ": the packed weights must hold ", gemm_packed_b_size(K, N), " f32, got ", bp.type_str());
  const int64_t M = K == 0 ? (N == 0 ? 0 : out.numel() / N) : a.numel() / K;  // every row of every batch
  if (out.numel() != M * N || out.shape().empty() || out.shape().back() != N)
    rt_fail(what, ": the output ", out.type_str(), " must hold ", M, " rows of N = ", N);
  Epilogue epilogue;
  if (fused) read_epilogue(what, c, p.data() + 2, 3, N, out.shape(), epilogue);
  c.flops = 2.0 * double(M) * double(N) * double(K);
  if (M == 0 || N == 0) return;
  ThreadPool& pool = *ThreadPool::global();
  const Slices sl = column_slices(N, pool.num_threads(), double(M) * double(N) * double(K), kGemmPanelB);
  const auto* pa = static_cast<const float*>(a.data());
  const auto* pb = static_cast<const float*>(bp.data());
  auto* pc = static_cast<float*>(out.data());
  for_items(pool, sl.count, true, [&](int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; ++s) {
      const int64_t j0 = s * sl.width, j1 = std::min(N, j0 + sl.width);
      gemm_f32_packed_b(M, N, K, pa, K, pb, j0, j1, pc, N);
      if (fused) epilogue.apply_rows(pc, 0, N, M, j0, j1);
    }
  });
}

// ---- 8-bit integer products -------------------------------------------------------------

QMatrix qmatrix(const Tensor& t, const char* what, const char* name, int64_t ld, size_t offset = 0) {
  if (!is_8bit(t)) rt_fail(what, ": ", name, " must be u8 or i8, got ", t.type_str());
  return {static_cast<const uint8_t*>(t.data()) + offset, t.dtype().is_int(), ld};
}

void check_i32_out(const Tensor& out, const char* what, int64_t numel) {
  if (!(out.dtype() == DType::i32()) || out.numel() != numel)
    rt_fail(what, ": the output must be i32 with ", numel, " elements, got ", out.type_str());
}

// gemm.qmatmul_pack(b, b_zp, out): b (K, N) of u8 or i8 and its zero
// point (one, or one per column) packed for gemm.qmatmul_packed (u8, of
// qgemm_packed_b_size bytes). A build runs it once, folding the result
// into the package.
void qmatmul_pack(BuiltinCall& c) {
  const char* what = "gemm.qmatmul_pack";
  if (c.num_args != 3) rt_fail(what, ": takes 3 arguments, got ", c.num_args);
  const Tensor& b = c.arg(0).tensor("gemm.qmatmul_pack b");
  const Tensor& zp = c.arg(1).tensor("gemm.qmatmul_pack b_zp");
  const Tensor& out = c.arg(2).tensor("gemm.qmatmul_pack out");
  if (b.shape().size() != 2) rt_fail(what, ": b must have rank 2, got ", b.type_str());
  const int64_t K = b.shape()[0], N = b.shape()[1];
  std::vector<int32_t> zb = zero_points(zp, what, "b_zp", N);
  const int64_t size = qgemm_packed_b_size(K, N);
  if (!(out.dtype() == DType::u(8)) || out.numel() != size)
    rt_fail(what, ": the output must hold ", size, " u8, got ", out.type_str());
  qgemm_pack_b(K, N, qmatrix(b, what, "b", N), zb.data(), int64_t(zb.size()), static_cast<uint8_t*>(out.data()));
}

// gemm.qmatmul_packed(a, bp, a_zp, shape(K, N), out): out (..., M, N) i32
// = (a - a_zp) (b - b_zp) for a (..., M, K) of u8 or i8, b packed by
// gemm.qmatmul_pack; a_zp one zero point or one per row of a. Or
// gemm.qmatmul_packed(a, bp, a_zp, shape(K, N, e, lo, hi, k1, k2, k3),
// tensors..., out) with an epilogue fused from the kernel after it
// (passes/fuse_library_epilogues.cc; runtime/epilogue.h): its flags name
// the sums' scale (bit 14, required: one f32 or one per column), and out
// is f32; with bit 16 too, the result quantized into out (u8 or i8, the
// zero point's dtype), the sums in a scratch buffer. Each worker scales
// its block of sums in place and applies the rest while they are in cache.
void qmatmul_packed(BuiltinCall& c) {
  const char* what = "gemm.qmatmul_packed";
  if (c.num_args < 5) rt_fail(what, ": takes 5 arguments or more, got ", c.num_args);
  const Tensor& a = c.arg(0).tensor("gemm.qmatmul_packed a");
  const Tensor& bp = c.arg(1).tensor("gemm.qmatmul_packed weights");
  const Tensor& zp = c.arg(2).tensor("gemm.qmatmul_packed a_zp");
  const std::vector<int64_t>& p = c.arg(3).shape("gemm.qmatmul_packed parameters");
  const Tensor& out = c.arg(c.num_args - 1).tensor("gemm.qmatmul_packed out");
  const bool fused = packed_product_params(what, p, /*scaled=*/true);
  if (c.num_args != 5 + (fused ? size_t(epilogue_tensors(p[2])) : 0))
    rt_fail(what, ": takes 5 arguments and its epilogue's tensors, got ", c.num_args);
  const int64_t K = p[0], N = p[1];
  if (a.shape().empty() || a.shape().back() != K) rt_fail(what, ": a ", a.type_str(), " must end in K = ", K);
  if (!(bp.dtype() == DType::u(8)) || bp.numel() != qgemm_packed_b_size(K, N))
    rt_fail(what, ": the packed weights must hold ", qgemm_packed_b_size(K, N), " u8, got ", bp.type_str());
  const int64_t M = K == 0 ? a.numel() : a.numel() / K;  // every row of every batch
  std::vector<int32_t> za = zero_points(zp, what, "a_zp", M);
  Epilogue epilogue;
  const bool quantized = fused && (p[2] >> 16 & 1);
  // The sums: in out's memory (i32, or f32 once the epilogue made them
  // so), or, for a quantized result, in this thread's scratch (the
  // workers write it through `sums`).
  thread_local std::vector<int32_t> scratch;
  auto* sums = static_cast<int32_t*>(out.data());
  if (fused) {
    read_epilogue(what, c, p.data() + 2, 4, N, out.shape(), epilogue, true);
    const DType want = quantized ? (epilogue.q_signed ? DType::i(8) : DType::u(8)) : DType::f32();
    if (!(out.dtype() == want) || out.numel() != M * N)
      rt_fail(what, ": the output must hold ", M * N, " ", want.str(), ", got ", out.type_str());
    if (quantized) {
      scratch.resize(size_t(M * N));
      sums = scratch.data();
      epilogue.qout = out.data();
    }
  } else {
    check_i32_out(out, what, M * N);
  }
  c.flops = 2.0 * double(M) * double(N) * double(K);
  c.integer_ops = true;
  const QgemmDone done = [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    epilogue.apply_rows(reinterpret_cast<float*>(sums), m0 * N, N, m1 - m0, n0, n1);
  };
  qgemm_packed(M, N, K, qmatrix(a, what, "a", K), za.data(), int64_t(za.size()), static_cast<const uint8_t*>(bp.data()),
               sums, N, ThreadPool::global().get(), fused ? &done : nullptr);
}

// gemm.qmatmul(a, b, a_zp, b_zp, out): out (..., M, N) i32 = (a - a_zp)
// (b - b_zp), batch dims broadcast, for a (..., M, K) and b (..., K, N) of
// u8 or i8; a_zp one zero point or one per row of a (all of a's batches),
// b_zp one or one per column. B is packed on every call.
void qmatmul(BuiltinCall& c) {
  const char* what = "gemm.qmatmul";
  if (c.num_args != 5) rt_fail(what, ": takes 5 arguments, got ", c.num_args);
  const Tensor& a = c.arg(0).tensor("gemm.qmatmul a");
  const Tensor& b = c.arg(1).tensor("gemm.qmatmul b");
  const Tensor& azp = c.arg(2).tensor("gemm.qmatmul a_zp");
  const Tensor& bzp = c.arg(3).tensor("gemm.qmatmul b_zp");
  const Tensor& out = c.arg(4).tensor("gemm.qmatmul out");
  const std::vector<int64_t>&as = a.shape(), &bs = b.shape();
  if (as.size() < 2 || bs.size() < 2)
    rt_fail(what, ": operands must have rank >= 2, got ", a.type_str(), " and ", b.type_str());
  const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  if (bs[bs.size() - 2] != K) rt_fail(what, ": inner dims ", K, " and ", bs[bs.size() - 2], " differ");
  const MatmulBatch mb = matmul_batch(what, as, bs);
  const int64_t batch = mb.count;
  std::vector<int32_t> za = zero_points(azp, what, "a_zp", a.numel() / std::max<int64_t>(K, 1));
  std::vector<int32_t> zb = zero_points(bzp, what, "b_zp", N);
  check_i32_out(out, what, batch * M * N);
  c.flops = 2.0 * double(batch) * double(M) * double(N) * double(K);
  c.integer_ops = true;
  // Products too small to split (attention's, per batch and head) run
  // whole on the pool's threads, one product per worker at a time, each
  // packing its own B; larger ones one after another, each split.
  ThreadPool& pool = *ThreadPool::global();
  const bool across = batch > 1 && double(M) * double(N) * double(K) < double(1 << 17);
  const size_t packed_size = size_t(qgemm_packed_b_size(K, N));
  auto run = [&](int64_t i0, int64_t i1) {
    thread_local std::vector<uint8_t> packed;  // this thread's: each packs what it reads
    packed.resize(packed_size);
    int64_t packed_from = -1;  // the offset into b packed last (a broadcast b is packed once)
    for (int64_t i = i0; i < i1; ++i) {
      const auto [oa, obb] = mb.offsets(i);
      if (obb != packed_from)
        qgemm_pack_b(K, N, qmatrix(b, what, "b", N, size_t(obb)), zb.data(), int64_t(zb.size()), packed.data());
      packed_from = obb;
      const int32_t* zrow = za.size() == 1 ? za.data() : za.data() + oa / std::max<int64_t>(K, 1);
      qgemm_packed(M, N, K, qmatrix(a, what, "a", K, size_t(oa)), zrow, za.size() == 1 ? 1 : M, packed.data(),
                   static_cast<int32_t*>(out.data()) + i * M * N, N, across ? nullptr : &pool);
    }
  };
  for_items(pool, batch, across && c.flops >= double(1 << 17), run);
}

}  // namespace

void register_matmul_builtins() {
  register_builtin("blas.matmul", matmul);
  register_builtin("blas.matmul_view", matmul_view);
  register_builtin("gemm.matmul_pack", matmul_pack);
  register_builtin("gemm.matmul_packed", matmul_packed);
  register_builtin("gemm.qmatmul", qmatmul);
  register_builtin("gemm.qmatmul_pack", qmatmul_pack);
  register_builtin("gemm.qmatmul_packed", qmatmul_packed);
}

}  // namespace relax::rt
