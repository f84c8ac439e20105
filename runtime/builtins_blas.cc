// Library kernels:
//  - blas.matmul, through OpenBLAS (cblas): the matmuls the matmul
//    legaliser sends here (f32 and f64). numpy matmul semantics: 1-D
//    operands are promoted and the extra axis dropped, batch axes
//    broadcast. blas.matmul_view: the same product of strided views of its
//    operands and result (passes/fold_matmul_views.cc).
//  - gemm.conv2d: 2-D f32 convolutions (passes/legalize/nn.cc), one matrix
//    product per image and group (runtime/gemm.h, whose results do not
//    depend on an element's position, as a loop nest's do not) over an
//    im2col matrix in a workspace the graph allocates (the call's second
//    output), so memory planning covers it; or directly
//    (runtime/conv_direct.h).
//  - gemm.conv_transpose2d: 2-D (and 1-D) f32 transposed convolutions, a
//    matrix product into a workspace and a scatter of its columns.
//  - gemm.qmatmul, gemm.qmatmul_pack, gemm.qmatmul_packed: 8-bit integer
//    products with zero points and an i32 result (matmul_integer,
//    runtime/qgemm.h), B packed once when it is a constant.
#include <cblas.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/conv_direct.h"
#include "runtime/epilogue.h"
#include "runtime/error.h"
#include "runtime/gemm.h"
#include "runtime/qgemm.h"
#include "runtime/thread_pool.h"
#include "runtime/vm.h"

// OpenBLAS's pthread builds export it (its fork handler); others may not.
extern "C" int blas_thread_shutdown_(void) __attribute__((weak));

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

// Column slices of a product with `cols` columns for `threads` workers:
// whole 16-column vector panels each, one slice when the product is too
// small to split. Each slice is one single-threaded BLAS call on the
// runtime's pool (OpenBLAS's own threads stay off: two pools spinning on
// two cores take turns instead of working).
struct Slices {
  int64_t count = 1, width = 0;
};
Slices column_slices(int64_t cols, int64_t wanted, double work) {
  Slices s;
  if (work >= double(1 << 17)) s.count = std::max<int64_t>(1, std::min(wanted, (cols + 15) / 16));
  s.width = ((cols + s.count - 1) / s.count + 15) / 16 * 16;
  s.count = s.width > 0 ? (cols + s.width - 1) / s.width : 1;
  return s;
}

// Runs body(begin, end) over [0, n) on the pool, or inline when one item
// or one thread would do.
template <typename F>
void for_items(ThreadPool& pool, int64_t n, bool split, F&& body) {
  if (split && n > 1 && pool.num_threads() > 1)
    pool.parallel_for(n, body);
  else
    body(0, n);
}

// The indices i of [0, count) whose position i * stride + off lies in
// [0, limit): [lo, hi) (hi = lo when none does).
std::pair<int64_t, int64_t> inside(int64_t off, int64_t stride, int64_t limit, int64_t count) {
  int64_t lo = off >= 0 ? 0 : std::min(count, (-off + stride - 1) / stride);
  int64_t hi = limit - 1 - off < 0 ? lo : std::clamp((limit - 1 - off) / stride + 1, lo, count);
  return {lo, hi};
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
  // Work items: each output matrix, in column slices when there are fewer
  // matrices than threads.
  std::shared_ptr<ThreadPool> pool = ThreadPool::global();
  double work = double(batch) * double(M) * double(N) * double(K);
  int64_t threads = pool->num_threads();
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
    else if (d == DType::f32())
      cblas_sgemm(CblasRowMajor, ta, tb, blasint(M), blasint(nj), blasint(K), 1.0f, reinterpret_cast<const float*>(pa),
                  blasint(la->ld), reinterpret_cast<const float*>(pb), blasint(lb->ld), 0.0f,
                  reinterpret_cast<float*>(pc), blasint(lc->ld));
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

// The operands of a library convolution: x, w, the parameters and y, all
// of rank 4 or all of rank 3 (a 1-D convolution, read as height 1).
struct ConvArgs {
  const Tensor *x, *w, *y;
  std::vector<int64_t> xs, ws, ys;  // as rank 4
  int64_t sh, sw, ph, pw, dh, dw, groups;
};
// labels: the call's name, then its x, w, parameters and y as errors name them.
ConvArgs conv_args(BuiltinCall& c, const std::array<const char*, 5>& labels, DType dtype) {
  const char* what = labels[0];
  ConvArgs a{&c.arg(0).tensor(labels[1]),
             &c.arg(1).tensor(labels[2]),
             &c.arg(3).tensor(labels[4]),
             {},
             {},
             {},
             0,
             0,
             0,
             0,
             0,
             0,
             0};
  const std::vector<int64_t>& p = c.arg(2).shape(labels[3]);
  size_t rank = a.x->shape().size();
  for (const Tensor* t : {a.x, a.w, a.y})
    if (!(t->dtype() == dtype) || t->shape().size() != rank || (rank != 4 && rank != 3))
      rt_fail(what, ": needs ", dtype.str(), " tensors all of rank 4 (or 3: a 1-D convolution), got ", t->type_str());
  if (p.size() != 7) rt_fail(what, ": needs 7 parameters, got ", p.size());
  auto as4 = [rank](const std::vector<int64_t>& s) {
    return rank == 4 ? s : std::vector<int64_t>{s[0], s[1], 1, s[2]};
  };
  a.xs = as4(a.x->shape()), a.ws = as4(a.w->shape()), a.ys = as4(a.y->shape());
  a.sh = p[0], a.sw = p[1], a.ph = p[2], a.pw = p[3], a.dh = p[4], a.dw = p[5], a.groups = p[6];
  if (a.groups < 1 || a.xs[0] != a.ys[0] || a.xs[1] % a.groups != 0)
    rt_fail(what, ": x ", a.x->type_str(), ", w ", a.w->type_str(), " and y ", a.y->type_str(),
            " do not agree (groups ", a.groups, ")");
  return a;
}

// Direct convolution (runtime/conv_direct.h) where the im2col matrix
// would cost more than it saves: kernels wider than 1x1 with at least 8
// output channels per group and a reduction shorter than 4096 (past it the
// GEMM's cache blocking wins), and 1x1 ones over at most one tile of
// positions. relax-bench-conv, ResNet-50's layers, one thread: 3x3 convs of
// 64 to 256 channels ran 1.1x to 1.7x faster direct; 1x1 ones 1.4x to 2.2x
// faster as a product (the direct kernel rereads each weight block from L2
// per 6 positions), down to 7x7 positions; under 8 positions (1x1 and 2x2
// planes) direct, any kernel and reduction (EfficientNet-like 1x1 layers
// over 1x1 planes: 1.7 GFLOP/s as a product); and wider kernels with 4 to
// 7 outputs per group too. 1x1 kernels with a stride (ResNet's
// downsampling) over at most 128 channels in and out: direct, where the
// im2col matrix is a strided copy as large as the product's input (16 to
// 128 channels, 3x3 to 28x28 outputs: 1.1x to 9x faster direct; 64 or
// more channels in and 256 out: 1.4x to 1.8x faster as a product).
// RELAX_CONV=direct|im2col forces one or the other.
bool use_direct(int64_t KH, int64_t KW, int64_t Og, int64_t K, int64_t P, bool strided) {
  static const int forced = [] {
    const char* e = std::getenv("RELAX_CONV");
    return !e ? -1 : std::string(e) == "direct" ? 1 : std::string(e) == "im2col" ? 0 : -1;
  }();
  if (!conv2d_direct_available()) return false;
  if (forced >= 0) return forced;
  if (Og < 4) return false;
  const bool wide = KH > 1 || KW > 1;
  // 4 to 7 outputs per group: the 8-channel tiles, half empty, still beat
  // building the im2col matrix for so few rows (3x3 layers of 4 outputs
  // 2.6x to 7x faster, from 9x13 to 56x56 planes).
  if (Og < 8) return wide && K < 4096;
  // Fewer than 8 output positions: the direct kernel's block tiles keep
  // many output channels' sums in flight, where the GEMM's tiles would be
  // mostly padding, whatever the reduction.
  if (P < 8) return true;
  if (!wide && strided) return K <= 128 && Og <= 128;
  // A 1x1 kernel without a stride is a plain product for the GEMM.
  return K < 4096 && wide;
}

}  // namespace

bool conv2d_prefers_direct(const Conv2dGeometry& g) {
  const int64_t Og = g.O / g.groups;
  return use_direct(g.KH, g.KW, Og, g.C / g.groups * g.KH * g.KW, g.OH * g.OW, g.sh > 1 || g.sw > 1);
}

namespace {

// The im2col matrix of one image and group: row (c, kh, kw) holds the
// input under that tap at every output position, zeros in the padding.
void im2col(const Conv2dGeometry& g, const float* img, float* col, ThreadPool* pool) {
  const int64_t Cg = g.C / g.groups, K = Cg * g.KH * g.KW, P = g.OH * g.OW;
  const int64_t H = g.H, W = g.W, KH = g.KH, KW = g.KW, OH = g.OH, OW = g.OW;
  auto rows = [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      int64_t ci = r / (KH * KW), kh = r / KW % KH, kw = r % KW;
      const float* plane = img + ci * H * W;
      float* row = col + r * P;
      // Output columns [lo, hi) read inside the row: iw = ow * sw + off.
      int64_t off = kw * g.dw - g.pw;
      auto [lo, hi] = inside(off, g.sw, W, OW);
      for (int64_t oh = 0; oh < OH; ++oh) {
        int64_t ih = oh * g.sh + kh * g.dh - g.ph;
        float* out = row + oh * OW;
        if (ih < 0 || ih >= H) {
          std::memset(out, 0, size_t(OW) * sizeof(float));
          continue;
        }
        const float* in = plane + ih * W + off;
        // Plain loops: rows are often a few elements long, where a call
        // to memcpy costs more than the copy.
        for (int64_t ow = 0; ow < lo; ++ow) out[ow] = 0.0f;
        if (g.sw == 1)
          for (int64_t ow = lo; ow < hi; ++ow) out[ow] = in[ow];
        else
          for (int64_t ow = lo; ow < hi; ++ow) out[ow] = in[ow * g.sw];
        for (int64_t ow = hi; ow < OW; ++ow) out[ow] = 0.0f;
      }
    }
  };
  if (pool)
    pool->parallel_for(K, rows);
  else
    rows(0, K);
}

// y = conv(x, w) as, per image and group, im2col into `col` (none for a
// plain product) and the runtime's GEMM, from the weights w (O, K) or
// from them packed per group (gemm_pack_a), whichever is given.
void im2col_gemm(const Conv2dGeometry& g, const float* x, const float* w, const float* packed, float* y, float* col,
                 ThreadPool* pool) {
  const int64_t Cg = g.C / g.groups, Og = g.O / g.groups, K = Cg * g.KH * g.KW, P = g.OH * g.OW;
  const bool plain = conv2d_is_product(g);
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t gi = 0; gi < g.groups; ++gi) {
      const float* b = x + (n * g.C + gi * Cg) * g.H * g.W;
      if (!plain) {
        im2col(g, b, col, pool);
        b = col;
      }
      float* yg = y + (n * g.O + gi * Og) * P;
      if (packed)
        gemm_f32_packed_a(Og, P, K, packed + gi * gemm_packed_a_size(Og, K), b, P, yg, P, pool);
      else
        gemm_f32(Og, P, K, w + gi * Og * K, K, b, P, yg, P, pool);
    }
}

}  // namespace

void conv2d_f32(const Conv2dGeometry& g, const float* x, const float* w, float* y, float* col, ThreadPool* pool,
                ConvMethod method) {
  const int64_t Cg = g.C / g.groups, Og = g.O / g.groups, K = Cg * g.KH * g.KW, P = g.OH * g.OW;
  if (g.N == 0 || g.O == 0 || P == 0) return;
  if (Cg == 1 && Og < 8) return conv2d_depthwise_f32(g, x, w, y, pool);
  if (K == 0) {
    std::fill(y, y + g.N * g.O * P, 0.0f);
    return;
  }
  if (method == ConvMethod::direct ||
      (method == ConvMethod::automatic && use_direct(g.KH, g.KW, Og, K, P, g.sh > 1 || g.sw > 1))) {
    thread_local std::vector<float> scratch;
    return conv2d_direct_f32(g, x, w, y, scratch, pool);
  }
  im2col_gemm(g, x, w, nullptr, y, col, pool);
}

namespace {

// gemm.conv2d(x, w, shape(sh, sw, ph, pw, dh, dw, groups), y[, ws]):
// y = conv(x, w) for x (N, C, H, W), w (O, C / groups, KH, KW), y (N, O,
// OH, OW), or all of rank 3 without H (a 1-D convolution, as height 1);
// the ends of the padding follow from OH and OW. f32, or i32 (the
// integer convolutions' widened operands: always the direct kernel, no
// workspace), and depthwise ones (one input channel per group, fewer
// than 8 outputs each: their own kernel, no workspace). ws holds the
// im2col matrix of one image and group, (C / groups * KH * KW) x (OH * OW);
// it is absent when the convolution is a plain product (1x1 kernel, stride
// 1, no padding), which reads x directly.
void conv2d(BuiltinCall& c) {
  if (c.num_args != 4 && c.num_args != 5) rt_fail("gemm.conv2d: takes 4 or 5 arguments, got ", c.num_args);
  const bool i32 = c.arg(0).tensor("gemm.conv2d x").dtype() == DType::i32();
  ConvArgs a =
      conv_args(c, {"gemm.conv2d", "gemm.conv2d x", "gemm.conv2d w", "gemm.conv2d parameters", "gemm.conv2d y"},
                i32 ? DType::i32() : DType::f32());
  const Tensor &x = *a.x, &w = *a.w, &y = *a.y;
  const Tensor* ws = c.num_args == 5 ? &c.arg(4).tensor("gemm.conv2d workspace") : nullptr;
  int64_t sh = a.sh, sw = a.sw, ph = a.ph, pw = a.pw, dh = a.dh, dw = a.dw, groups = a.groups;
  int64_t N = a.xs[0], C = a.xs[1], H = a.xs[2], W = a.xs[3];
  int64_t O = a.ws[0], Cg = a.ws[1], KH = a.ws[2], KW = a.ws[3];
  int64_t OH = a.ys[2], OW = a.ys[3];
  if (C != Cg * groups || O % groups != 0 || a.ys[1] != O)
    rt_fail("gemm.conv2d: x ", x.type_str(), ", w ", w.type_str(), " and y ", y.type_str(), " do not agree (groups ",
            groups, ")");
  int64_t Og = O / groups, K = Cg * KH * KW, P = OH * OW;
  c.flops = 2.0 * double(N) * double(O) * double(P) * double(K);
  const Conv2dGeometry geometry{N, C, H, W, O, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw, groups};
  const bool plain = conv2d_is_product(geometry);
  if (i32) {  // no im2col form: always direct, and no workspace
    thread_local std::vector<int32_t> scratch;
    if (N && O && P)
      conv2d_direct_i32({N, C, H, W, O, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw, groups},
                        static_cast<const int32_t*>(x.data()), static_cast<const int32_t*>(w.data()),
                        static_cast<int32_t*>(y.data()), scratch, ThreadPool::global().get());
    return;
  }
  if (N == 0 || O == 0 || P == 0) return;
  const bool depthwise = Cg == 1 && Og < 8;
  if (!plain && !depthwise && K > 0 && (!ws || ws->nbytes() < size_t(K * P) * sizeof(float)))
    rt_fail("gemm.conv2d: the workspace must hold ", K * P, " f32, got ", ws ? ws->type_str() : "none");
  const float* xd = static_cast<const float*>(x.data());
  const float* wd = static_cast<const float*>(w.data());
  float* yd = static_cast<float*>(y.data());
  conv2d_f32(geometry, xd, wd, yd, ws ? static_cast<float*>(ws->data()) : nullptr, ThreadPool::global().get());
}

// The packed weights' layouts: the direct kernel's, per group the GEMM's
// A (runtime/gemm.h gemm_pack_a), or a depthwise convolution's channel
// blocks (conv2d_depthwise_pack_f32), and their sizes in floats.
enum PackedLayout : int64_t { kDirectLayout = 0, kGemmLayout = 1, kDepthwiseLayout = 2 };
bool known_layout(int64_t layout) { return layout >= kDirectLayout && layout <= kDepthwiseLayout; }
int64_t packed_weights_size(int64_t O, int64_t groups, int64_t K, int64_t layout) {
  if (layout == kDepthwiseLayout) return conv2d_depthwise_packed_size(O, K);
  return layout == kDirectLayout ? conv2d_packed_size(O, groups, K) : groups * gemm_packed_a_size(O / groups, K);
}

// gemm.conv2d_pack(w, shape(groups, layout), out): a convolution's weights
// packed once for gemm.conv2d_packed; w (O, C / groups, KH, KW) or (O, C /
// groups, KW); layout 0: the direct kernel's (runtime/conv_direct.h), 1:
// per group the GEMM's A (runtime/gemm.h), 2: a depthwise convolution's
// channel blocks (one input channel and one output per group); out f32 of
// the layout's size.
// A build runs it once, folding the result into the package.
void conv2d_pack(BuiltinCall& c) {
  const char* what = "gemm.conv2d_pack";
  if (c.num_args != 3) rt_fail(what, ": takes 3 arguments, got ", c.num_args);
  const Tensor& w = c.arg(0).tensor("gemm.conv2d_pack w");
  const std::vector<int64_t>& p = c.arg(1).shape("gemm.conv2d_pack parameters");
  const Tensor& out = c.arg(2).tensor("gemm.conv2d_pack out");
  const std::vector<int64_t>& ws = w.shape();
  if (!(w.dtype() == DType::f32()) || (ws.size() != 4 && ws.size() != 3))
    rt_fail(what, ": needs f32 weights of rank 4 (or 3), got ", w.type_str());
  if (p.size() != 2 || p[0] < 1 || ws[0] % p[0] != 0 || !known_layout(p[1]))
    rt_fail(what, ": needs a number of groups dividing ", ws[0], " and a layout (0, 1 or 2), got ", shape_str(p));
  if (p[1] == kDepthwiseLayout && (p[0] != ws[0] || ws[1] != 1))
    rt_fail(what, ": layout 2 needs one input channel and one output per group, got ", w.type_str(), " in ", p[0],
            " groups");
  int64_t O = ws[0], groups = p[0], K = 1;
  for (size_t k = 1; k < ws.size(); ++k) K *= ws[k];
  int64_t size = packed_weights_size(O, groups, K, p[1]);
  if (!(out.dtype() == DType::f32()) || out.numel() != size)
    rt_fail(what, ": the output must hold ", size, " f32, got ", out.type_str());
  const float* wd = static_cast<const float*>(w.data());
  float* od = static_cast<float*>(out.data());
  if (p[1] == kDirectLayout) return conv2d_pack_weights_f32(wd, O, groups, K, od, ThreadPool::global().get());
  if (p[1] == kDepthwiseLayout) return conv2d_depthwise_pack_f32(wd, O, K, od);
  const int64_t Og = O / groups;
  for (int64_t g = 0; g < groups; ++g) gemm_pack_a(Og, K, wd + g * Og * K, K, od + g * gemm_packed_a_size(Og, K));
}

// The geometry of a convolution from packed weights: x and y of rank 4
// (or both 3: a 1-D convolution, height 1) checked by the caller, p the
// call's parameters (sh, sw, ph, pw, dh, dw, groups, KH, KW, ...).
Conv2dGeometry packed_geometry(const char* what, const Tensor& x, const Tensor& y, const std::vector<int64_t>& p) {
  const size_t rank = x.shape().size();
  auto as4 = [rank](const std::vector<int64_t>& s) {
    return rank == 4 ? s : std::vector<int64_t>{s[0], s[1], 1, s[2]};
  };
  const std::vector<int64_t> xs = as4(x.shape()), ys = as4(y.shape());
  const Conv2dGeometry g{xs[0], xs[1], xs[2], xs[3], ys[1], p[7], p[8], ys[2],
                         ys[3], p[0],  p[1],  p[2],  p[3],  p[4], p[5], p[6]};
  if (g.groups < 1 || g.C % g.groups != 0 || g.O % g.groups != 0 || xs[0] != ys[0] || g.KH < 1 || g.KW < 1)
    rt_fail(what, ": x ", x.type_str(), " and y ", y.type_str(), " do not agree (groups ", g.groups, ")");
  return g;
}

// gemm.conv2d_packed(x, wp, shape(sh, sw, ph, pw, dh, dw, groups, KH, KW,
// layout), y[, ws]): y = conv(x, w) for x (N, C, H, W) and y (N, O, OH, OW)
// (or both of rank 3: a 1-D convolution, KH 1), from w packed by
// gemm.conv2d_pack: layout 0 by the direct kernel; 1 as im2col into ws
// (absent for a plain product) and the runtime's GEMM per image and group;
// 2 by the channels-in-lanes depthwise kernel. With six parameters more
// (an epilogue fused from the elementwise kernel after it,
// passes/fuse_library_epilogues.cc: its flags, bounds and constants,
// runtime/epilogue.h read_epilogue), its tensors come after the
// parameters: biases of O elements, a residual of y's shape, one-element
// scalars.
void conv2d_packed(BuiltinCall& c) {
  const char* what = "gemm.conv2d_packed";
  const std::vector<int64_t>& p = c.arg(2).shape("gemm.conv2d_packed parameters");
  const size_t fused = 10 + kEpilogueParams;
  if ((p.size() != 10 && p.size() != fused) || !known_layout(p[9]) ||
      (p.size() == fused && (epilogue_tensors(p[10]) < 0 || p[10] >> 14)))  // no i32 sums nor quantized results
    rt_fail(what, ": needs 10 parameters, the last a layout (0, 1 or 2), or ", fused, " with an epilogue, got ",
            shape_str(p));
  const size_t extra = p.size() == fused ? size_t(epilogue_tensors(p[10])) : 0;
  if (c.num_args != 4 + extra && c.num_args != 5 + extra)
    rt_fail(what, ": takes ", 4 + extra, " or ", 5 + extra, " arguments, got ", c.num_args);
  const Tensor& x = c.arg(0).tensor("gemm.conv2d_packed x");
  const Tensor& wp = c.arg(1).tensor("gemm.conv2d_packed weights");
  const Tensor& y = c.arg(3 + extra).tensor("gemm.conv2d_packed y");
  const Tensor* ws = c.num_args == 5 + extra ? &c.arg(4 + extra).tensor("gemm.conv2d_packed workspace") : nullptr;
  size_t rank = x.shape().size();
  for (const Tensor* t : {&x, &wp, &y})
    if (!(t->dtype() == DType::f32())) rt_fail(what, ": needs f32 tensors, got ", t->type_str());
  if ((rank != 4 && rank != 3) || y.shape().size() != rank)
    rt_fail(what, ": needs x and y of rank 4 (or 3), got ", x.type_str(), " and ", y.type_str());
  const Conv2dGeometry g = packed_geometry(what, x, y, p);
  Epilogue epilogue;
  if (p.size() == fused) read_epilogue(what, c, p.data() + 10, 3, g.O, y.shape(), epilogue);
  const Epilogue* ep = p.size() == fused ? &epilogue : nullptr;
  const int64_t K = g.C / g.groups * g.KH * g.KW, P = g.OH * g.OW;
  const int64_t size = packed_weights_size(g.O, g.groups, K, p[9]);
  if (wp.numel() != size) rt_fail(what, ": the packed weights must hold ", size, " f32, got ", wp.type_str());
  const bool plain = conv2d_is_product(g);
  if (p[9] == kGemmLayout && !plain && (!ws || ws->nbytes() < size_t(K * P) * sizeof(float)))
    rt_fail(what, ": the workspace must hold ", K * P, " f32, got ", ws ? ws->type_str() : "none");
  c.flops = 2.0 * double(g.N) * double(g.O) * double(P) * double(K);
  if (g.N == 0 || g.O == 0 || P == 0) return;
  const float* xd = static_cast<const float*>(x.data());
  const float* wd = static_cast<const float*>(wp.data());
  float* yd = static_cast<float*>(y.data());
  ThreadPool* pool = ThreadPool::global().get();
  if (p[9] == kDirectLayout) {
    thread_local std::vector<float> scratch;
    conv2d_direct_packed_f32(g, xd, wd, yd, scratch, pool);
  } else if (p[9] == kDepthwiseLayout) {
    if (g.groups != g.C || g.O != g.C)
      rt_fail(what, ": layout 2 needs one input channel and one output per group, got x ", x.type_str(), " and y ",
              y.type_str(), " in ", g.groups, " groups");
    thread_local std::vector<float> scratch;
    conv2d_depthwise_packed_f32(g, xd, wd, yd, scratch, pool);
  } else {
    im2col_gemm(g, xd, nullptr, wd, yd, ws ? static_cast<float*>(ws->data()) : nullptr, pool);
  }
  if (ep) ep->apply_all(yd, g.N, g.O, P, pool);
}

// gemm.conv_transpose2d(x, w, shape(sh, sw, ph, pw, dh, dw, groups), y, ws):
// y = conv_transpose(x, w) for x (N, C, H, W), w (C, O / groups, KH, KW),
// y (N, O, OH, OW) (or all of rank 3 without H: a 1-D one, as height 1):
// per image and group one product cols = w^T x, (O/g * KH * KW) x (H * W)
// in the workspace ws, then each column scattered into y: input (ih, iw)
// through tap (kh, kw) lands at (ih * sh - ph + kh * dh, iw * sw - pw + kw * dw);
// output padding and the padding's ends follow from OH and OW.
void conv_transpose2d(BuiltinCall& c) {
  const char* what = "gemm.conv_transpose2d";
  if (c.num_args != 5) rt_fail(what, ": takes 5 arguments, got ", c.num_args);
  ConvArgs a = conv_args(c,
                         {what, "gemm.conv_transpose2d x", "gemm.conv_transpose2d w",
                          "gemm.conv_transpose2d parameters", "gemm.conv_transpose2d y"},
                         DType::f32());
  const Tensor &ws = c.arg(4).tensor("gemm.conv_transpose2d workspace"), &y = *a.y;
  int64_t sh = a.sh, sw = a.sw, ph = a.ph, pw = a.pw, dh = a.dh, dw = a.dw, groups = a.groups;
  int64_t N = a.xs[0], C = a.xs[1], H = a.xs[2], W = a.xs[3];
  int64_t Og = a.ws[1], KH = a.ws[2], KW = a.ws[3], OH = a.ys[2], OW = a.ys[3];
  if (a.ws[0] != C || a.ys[1] != Og * groups)
    rt_fail(what, ": x ", a.x->type_str(), ", w ", a.w->type_str(), " and y ", y.type_str(), " do not agree (groups ",
            groups, ")");
  int64_t Cg = C / groups, O = Og * groups, M = Og * KH * KW, P = H * W;
  if (ws.nbytes() < size_t(M * P) * sizeof(float))
    rt_fail(what, ": the workspace must hold ", M * P, " f32, got ", ws.type_str());
  c.flops = 2.0 * double(N) * double(groups) * double(M) * double(P) * double(Cg);
  float* yd = static_cast<float*>(y.data());
  if (y.numel() == 0) return;
  std::memset(yd, 0, y.nbytes());
  if (P == 0 || Cg == 0) return;
  const float* xd = static_cast<const float*>(a.x->data());
  const float* wd = static_cast<const float*>(a.w->data());
  float* cols = static_cast<float*>(ws.data());
  std::shared_ptr<ThreadPool> pool = ThreadPool::global();
  const double work = double(M) * double(P) * double(Cg);
  const Slices sl = column_slices(P, pool->num_threads(), work);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t g = 0; g < groups; ++g) {
      const float* wg = wd + g * Cg * M;  // (Cg, M): cols = wg^T b
      const float* b = xd + (n * C + g * Cg) * P;
      // The product in column slices over the pool.
      for_items(*pool, sl.count, true, [&](int64_t s0, int64_t s1) {
        for (int64_t s = s0; s < s1; ++s) {
          int64_t j0 = s * sl.width, nj = std::min(sl.width, P - j0);
          cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, blasint(M), blasint(nj), blasint(Cg), 1.0f, wg,
                      blasint(M), b + j0, blasint(P), 0.0f, cols + j0, blasint(P));
        }
      });
      // Scatter: each output channel's plane is written by its own rows of cols.
      auto scatter = [&](int64_t o0, int64_t o1) {
        for (int64_t o = o0; o < o1; ++o) {
          float* plane = yd + (n * O + g * Og + o) * OH * OW;
          for (int64_t kh = 0; kh < KH; ++kh)
            for (int64_t kw = 0; kw < KW; ++kw) {
              const float* row = cols + ((o * KH + kh) * KW + kw) * P;
              // Inputs iw whose output column lies inside: ow = iw * sw + off in [0, OW).
              int64_t off = kw * dw - pw;
              auto [lo, hi] = inside(off, sw, OW, W);
              for (int64_t ih = 0; ih < H; ++ih) {
                int64_t oh = ih * sh - ph + kh * dh;
                if (oh < 0 || oh >= OH) continue;
                float* out = plane + oh * OW;
                const float* in = row + ih * W;
                if (sw == 1)
                  for (int64_t iw = lo; iw < hi; ++iw) out[iw + off] += in[iw];
                else
                  for (int64_t iw = lo; iw < hi; ++iw) out[iw * sw + off] += in[iw];
              }
            }
        }
      };
      for_items(*pool, Og, work >= double(1 << 17), scatter);
    }
  }
}

// ---- 8-bit integer products -------------------------------------------------------------

bool is_8bit(const Tensor& t) { return (t.dtype().is_int() || t.dtype().is_uint()) && t.dtype().bits == 8; }

QMatrix qmatrix(const Tensor& t, const char* what, const char* name, int64_t ld, size_t offset = 0) {
  if (!is_8bit(t)) rt_fail(what, ": ", name, " must be u8 or i8, got ", t.type_str());
  return {static_cast<const uint8_t*>(t.data()) + offset, t.dtype().is_int(), ld};
}

// A zero point's values as i32: `count` of them (1, or `many`).
std::vector<int32_t> zero_points(const Tensor& zp, const char* what, const char* name, int64_t many) {
  if (!is_8bit(zp) || (zp.numel() != 1 && zp.numel() != many))
    rt_fail(what, ": ", name, " must be u8 or i8 with 1 or ", many, " elements, got ", zp.type_str());
  std::vector<int32_t> v(size_t(zp.numel()));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = zp.dtype().is_int() ? int32_t(static_cast<const int8_t*>(zp.data())[i])
                               : int32_t(static_cast<const uint8_t*>(zp.data())[i]);
  return v;
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
  const bool fused = p.size() == 2 + size_t(kEpilogueParams);
  if ((p.size() != 2 && !fused) || p[0] < 0 || p[1] < 0)
    rt_fail(what, ": needs the parameters (K, N), or (K, N) and an epilogue's ", kEpilogueParams, ", got ",
            shape_str(p));
  if (fused && (epilogue_tensors(p[2]) < 0 || !(p[2] >> 14 & 1)))
    rt_fail(what, ": ", p[2], " is not the flags of an epilogue of scaled sums");
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

// gemm.qconv2d_pack(w, w_zp, shape(groups), out): a convolution's 8-bit
// weights (O, C / groups, KH, KW) (or rank 3) and their zero point (one,
// or one per output channel) packed per group for gemm.qconv2d_packed
// (u8, qconv2d_packed_size bytes). A build runs it once.
void qconv2d_pack(BuiltinCall& c) {
  const char* what = "gemm.qconv2d_pack";
  if (c.num_args != 4) rt_fail(what, ": takes 4 arguments, got ", c.num_args);
  const Tensor& w = c.arg(0).tensor("gemm.qconv2d_pack w");
  const Tensor& zp = c.arg(1).tensor("gemm.qconv2d_pack w_zp");
  const std::vector<int64_t>& p = c.arg(2).shape("gemm.qconv2d_pack parameters");
  const Tensor& out = c.arg(3).tensor("gemm.qconv2d_pack out");
  const std::vector<int64_t>& ws = w.shape();
  if (!is_8bit(w) || (ws.size() != 4 && ws.size() != 3))
    rt_fail(what, ": needs u8 or i8 weights of rank 4 (or 3), got ", w.type_str());
  if (p.size() != 1 || p[0] < 1 || ws[0] % p[0] != 0)
    rt_fail(what, ": needs a number of groups dividing ", ws[0], ", got ", shape_str(p));
  const int64_t O = ws[0], K = O ? w.numel() / O : 0;
  std::vector<int32_t> zw = zero_points(zp, what, "w_zp", O);
  const int64_t size = qconv2d_packed_size(O, p[0], K);
  if (!(out.dtype() == DType::u(8)) || out.numel() != size)
    rt_fail(what, ": the output must hold ", size, " u8, got ", out.type_str());
  const int64_t taps = ws.size() == 4 ? ws[2] * ws[3] : ws[2];
  qconv2d_pack_weights(w.data(), w.dtype().is_int(), O, p[0], K, taps, zw.data(), int64_t(zw.size()),
                       static_cast<uint8_t*>(out.data()));
}

// gemm.qconv2d_packed(x, wp, x_zp, shape(sh, sw, ph, pw, dh, dw, groups, KH,
// KW), y): y (N, O, OH, OW) i32 = conv(x - x_zp, w - w_zp) for 8-bit x (N,
// C, H, W) (or all of rank 3: a 1-D convolution, KH 1), the padding
// reading as x_zp, from w packed by gemm.qconv2d_pack (runtime/qgemm.h).
void qconv2d_packed(BuiltinCall& c) {
  const char* what = "gemm.qconv2d_packed";
  if (c.num_args != 5) rt_fail(what, ": takes 5 arguments, got ", c.num_args);
  const Tensor& x = c.arg(0).tensor("gemm.qconv2d_packed x");
  const Tensor& wp = c.arg(1).tensor("gemm.qconv2d_packed weights");
  const Tensor& zp = c.arg(2).tensor("gemm.qconv2d_packed x_zp");
  const std::vector<int64_t>& p = c.arg(3).shape("gemm.qconv2d_packed parameters");
  const Tensor& y = c.arg(4).tensor("gemm.qconv2d_packed y");
  const size_t rank = x.shape().size();
  if (!is_8bit(x) || (rank != 4 && rank != 3) || y.shape().size() != rank || !(y.dtype() == DType::i32()))
    rt_fail(what, ": needs 8-bit x and i32 y of rank 4 (or 3), got ", x.type_str(), " and ", y.type_str());
  if (p.size() != 9) rt_fail(what, ": needs 9 parameters, got ", shape_str(p));
  const Conv2dGeometry g = packed_geometry(what, x, y, p);
  const int64_t K = g.C / g.groups * g.KH * g.KW;
  if (!(wp.dtype() == DType::u(8)) || wp.numel() != qconv2d_packed_size(g.O, g.groups, K))
    rt_fail(what, ": the packed weights must hold ", qconv2d_packed_size(g.O, g.groups, K), " u8, got ", wp.type_str());
  std::vector<int32_t> zx = zero_points(zp, what, "x_zp", 1);
  c.flops = 2.0 * double(g.N) * double(g.O) * double(g.OH * g.OW) * double(K);
  c.integer_ops = true;
  qconv2d(g, x.data(), x.dtype().is_int(), zx[0], static_cast<const uint8_t*>(wp.data()),
          static_cast<int32_t*>(y.data()), ThreadPool::global().get());
}

}  // namespace

void register_blas_builtins() {
  // Every product runs single-threaded inside the runtime's own pool, and
  // OpenBLAS's idle server threads are stopped: they poll with sched_yield
  // for 2^28 rounds before sleeping, taking a core from the pool's workers.
  openblas_set_num_threads(1);
  if (blas_thread_shutdown_) blas_thread_shutdown_();
  register_builtin("blas.matmul", matmul);
  register_builtin("blas.matmul_view", matmul_view);
  register_builtin("gemm.conv2d", conv2d);
  register_builtin("gemm.conv2d_pack", conv2d_pack);
  register_builtin("gemm.conv2d_packed", conv2d_packed);
  register_builtin("gemm.conv_transpose2d", conv_transpose2d);
  register_builtin("gemm.qmatmul", qmatmul);
  register_builtin("gemm.qmatmul_pack", qmatmul_pack);
  register_builtin("gemm.qmatmul_packed", qmatmul_packed);
  register_builtin("gemm.qconv2d_pack", qconv2d_pack);
  register_builtin("gemm.qconv2d_packed", qconv2d_packed);
}

}  // namespace relax::rt
