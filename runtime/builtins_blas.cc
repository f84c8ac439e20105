// Library convolutions (the products are runtime/builtins_matmul.cc):
//  - gemm.conv2d: 2-D f32 convolutions (passes/legalize/nn.cc), one matrix
//    product per image and group (runtime/gemm.h, whose results do not
//    depend on an element's position, as a loop nest's do not) over an
//    im2col matrix in a workspace the graph allocates (the call's second
//    output), so memory planning covers it; or directly
//    (runtime/conv_direct.h).
//  - gemm.conv_transpose2d: 2-D (and 1-D) f32 transposed convolutions, a
//    matrix product into a workspace and a scatter of its columns.
//  - gemm.qconv2d_pack, gemm.qconv2d_packed: 8-bit integer convolutions
//    with zero points and an i32 result (conv_integer, runtime/qgemm.h).
#include <cblas.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/conv_blocked.h"
#include "runtime/conv_direct.h"
#include "runtime/cpu_isa.h"
#include "runtime/epilogue.h"
#include "runtime/error.h"
#include "runtime/gemm.h"
#include "runtime/library_util.h"
#include "runtime/qgemm.h"
#include "runtime/thread_pool.h"
#include "runtime/vm.h"

// OpenBLAS's pthread builds export it (its fork handler); others may not.
extern "C" int blas_thread_shutdown_(void) __attribute__((weak));

namespace relax::rt {
namespace {

// The indices i of [0, count) whose position i * stride + off lies in
// [0, limit): [lo, hi) (hi = lo when none does).
std::pair<int64_t, int64_t> inside(int64_t off, int64_t stride, int64_t limit, int64_t count) {
  int64_t lo = off >= 0 ? 0 : std::min(count, (-off + stride - 1) / stride);
  int64_t hi = limit - 1 - off < 0 ? lo : std::clamp((limit - 1 - off) / stride + 1, lo, count);
  return {lo, hi};
}

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

// conv2d_direct_pays for this CPU, unless RELAX_CONV=direct|im2col forces one or the other.
bool use_direct(const Conv2dGeometry& g) {
  static const int forced = [] {
    const char* e = std::getenv("RELAX_CONV");
    return !e ? -1 : std::string(e) == "direct" ? 1 : std::string(e) == "im2col" ? 0 : -1;
  }();
  if (!conv2d_direct_available()) return false;
  if (forced >= 0) return forced;
  return conv2d_direct_pays(g.KH, g.KW, g.O / g.groups, g.C / g.groups * g.KH * g.KW, g.OH * g.OW, g.sh, g.sw,
                            kernel_isa() == KernelIsa::avx512);
}

}  // namespace

bool conv2d_prefers_direct(const Conv2dGeometry& g) { return use_direct(g); }

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
  if (method == ConvMethod::direct || (method == ConvMethod::automatic && use_direct(g))) {
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
// A (runtime/gemm.h gemm_pack_a), a depthwise convolution's channel
// blocks (conv2d_depthwise_pack_f32), or a depthwise convolution's
// weights as they are (its plane-wise kernel reads them so; packed only
// so that the call takes an epilogue), and their sizes in floats.
// Layout 4: the blocked channel layout's (runtime/conv_blocked.h), x and y
// of rank 5.
enum PackedLayout : int64_t {
  kDirectLayout = 0,
  kGemmLayout = 1,
  kDepthwiseLayout = 2,
  kPlaneWiseLayout = 3,
  kBlockedLayout = 4
};
bool known_layout(int64_t layout) { return layout >= kDirectLayout && layout <= kBlockedLayout; }
int64_t packed_weights_size(int64_t O, int64_t groups, int64_t K, int64_t layout) {
  if (layout == kDepthwiseLayout) return conv2d_depthwise_packed_size(O, K);
  if (layout == kPlaneWiseLayout) return O * K;
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
    rt_fail(what, ": needs a number of groups dividing ", ws[0], " and a layout (0 to 4), got ", shape_str(p));
  if (p[1] == kBlockedLayout) {
    const int64_t KH = ws.size() == 4 ? ws[2] : 1, KW = ws.back();
    const int64_t size = conv2d_blocked_packed_size(ws[0], ws[1], p[0], KH, KW);
    if (size < 0)
      rt_fail(what, ": layout 4 needs groups 1 or one input channel and one output per group, got ", w.type_str(),
              " in ", p[0], " groups");
    if (!(out.dtype() == DType::f32()) || out.numel() != size)
      rt_fail(what, ": the output must hold ", size, " f32, got ", out.type_str());
    return conv2d_blocked_pack_f32(static_cast<const float*>(w.data()), ws[0], ws[1], p[0], KH, KW,
                                   static_cast<float*>(out.data()));
  }
  if (p[1] == kDepthwiseLayout && (p[0] != ws[0] || ws[1] != 1))
    rt_fail(what, ": layout 2 needs one input channel and one output per group, got ", w.type_str(), " in ", p[0],
            " groups");
  if (p[1] == kPlaneWiseLayout && (ws[1] != 1 || ws[0] / p[0] >= 8))
    rt_fail(what, ": layout 3 needs one input channel and fewer than 8 outputs per group, got ", w.type_str(), " in ",
            p[0], " groups");
  int64_t O = ws[0], groups = p[0], K = 1;
  for (size_t k = 1; k < ws.size(); ++k) K *= ws[k];
  int64_t size = packed_weights_size(O, groups, K, p[1]);
  if (!(out.dtype() == DType::f32()) || out.numel() != size)
    rt_fail(what, ": the output must hold ", size, " f32, got ", out.type_str());
  const float* wd = static_cast<const float*>(w.data());
  float* od = static_cast<float*>(out.data());
  if (p[1] == kDirectLayout) return conv2d_pack_weights_f32(wd, O, groups, K, od, ThreadPool::global().get());
  if (p[1] == kDepthwiseLayout) return conv2d_depthwise_pack_f32(wd, O, K, od);
  if (p[1] == kPlaneWiseLayout) return void(std::copy(wd, wd + O * K, od));
  const int64_t Og = O / groups;
  for (int64_t g = 0; g < groups; ++g) gemm_pack_a(Og, K, wd + g * Og * K, K, od + g * gemm_packed_a_size(Og, K));
}

// The geometry of a convolution from packed weights: x and y of rank 4
// (or both 3: a 1-D convolution, height 1) checked by the caller, p the
// call's parameters (sh, sw, ph, pw, dh, dw, groups, KH, KW, ...).
// `x_shape`: x's (the parts' together, for x in parts), `x_str` x as
// messages name it.
Conv2dGeometry packed_geometry(const char* what, const std::vector<int64_t>& x_shape, const std::string& x_str,
                               const Tensor& y, const std::vector<int64_t>& p) {
  const size_t rank = x_shape.size();
  auto as4 = [rank](const std::vector<int64_t>& s) {
    return rank == 4 ? s : std::vector<int64_t>{s[0], s[1], 1, s[2]};
  };
  const std::vector<int64_t> xs = as4(x_shape), ys = as4(y.shape());
  const Conv2dGeometry g{xs[0], xs[1], xs[2], xs[3], ys[1], p[7], p[8], ys[2],
                         ys[3], p[0],  p[1],  p[2],  p[3],  p[4], p[5], p[6]};
  if (g.groups < 1 || g.C % g.groups != 0 || g.O % g.groups != 0 || xs[0] != ys[0] || g.KH < 1 || g.KW < 1)
    rt_fail(what, ": x ", x_str, " and y ", y.type_str(), " do not agree (groups ", g.groups, ")");
  // The kernels size their padded copy of x to hold every tap of every
  // output: with these bounds no size they compute overflows.
  constexpr int64_t kStep = 1 << 16, kPad = 1 << 20, kKernel = 1 << 16;
  if (g.sh < 1 || g.sw < 1 || g.dh < 1 || g.dw < 1 || g.sh > kStep || g.sw > kStep || g.dh > kStep ||
      g.dw > kStep || g.ph < 0 || g.pw < 0 || g.ph > kPad || g.pw > kPad || g.KH > kKernel || g.KW > kKernel)
    rt_fail(what, ": strides ", g.sh, "x", g.sw, ", dilations ", g.dh, "x", g.dw, ", padding ", g.ph, "x", g.pw,
            " or kernel ", g.KH, "x", g.KW, " out of range");
  __int128 hp = std::max<__int128>(g.H + g.ph, __int128(g.OH - 1) * g.sh + __int128(g.KH - 1) * g.dh + 1);
  __int128 wp = std::max<__int128>(g.W + g.pw, __int128(g.OW - 1) * g.sw + __int128(g.KW - 1) * g.dw + 1);
  const __int128 limit = __int128(1) << 40;
  if (__int128(g.N) * g.C * hp * wp > limit || __int128(g.C) * g.KH * g.KW * g.OH * g.OW > limit)
    rt_fail(what, ": x ", x_str, " and y ", y.type_str(), " with a ", g.KH, "x", g.KW,
            " kernel need a padded input or an im2col matrix of more than 2^40 elements");
  return g;
}
Conv2dGeometry packed_geometry(const char* what, const Tensor& x, const Tensor& y, const std::vector<int64_t>& p) {
  return packed_geometry(what, x.shape(), x.type_str(), y, p);
}

// x of gemm.conv2d_packed given as a tuple: its parts along the channels
// (dim 1), each f32 of y's rank with x's other dims. Their shape together
// and their types, as messages name them.
struct XParts {
  ChannelParts parts;
  std::vector<int64_t> shape;
  std::string str;
};
XParts x_parts(const char* what, const std::vector<Value>& fields, size_t rank) {
  if (fields.empty()) rt_fail(what, ": x as a tuple of no parts");
  XParts x;
  for (const Value& v : fields) {
    const Tensor& t = v.tensor("gemm.conv2d_packed x part");
    x.str += (x.str.empty() ? "(" : ", ") + t.type_str();
    if (!(t.dtype() == DType::f32()) || t.shape().size() != rank)
      rt_fail(what, ": the parts of x must be f32 tensors of rank ", rank, ", got ", t.type_str());
    if (x.shape.empty()) {
      x.shape = t.shape();
      x.shape[1] = 0;
    }
    for (size_t d = 0; d < rank; ++d)
      if (d != 1 && t.shape()[d] != x.shape[d])
        rt_fail(what, ": the parts of x must agree but in dim 1, got ", t.type_str(), " after ", x.str);
    x.shape[1] += t.shape()[1];
    x.parts.data.push_back(static_cast<const float*>(t.data()));
    x.parts.channels.push_back(t.shape()[1]);
  }
  x.str += ")";
  return x;
}

// gemm.conv2d_packed in the blocked layout (4): x (N, C / 16, H, W, 16)
// and y (N, O / 16, OH, OW, 16) f32, the parameters' groups 1 or C (the
// padded channels: depthwise), no workspace; the epilogue's biases of O
// elements (channel block * 16 + lane).
void conv2d_blocked(BuiltinCall& c, const std::vector<int64_t>& p, const Tensor& wp, const Tensor& y,
                    const Tensor* ws) {
  const char* what = "gemm.conv2d_packed";
  if (c.arg(0).is_tuple()) rt_fail(what, ": x in parts needs layout 0 (direct), got layout 4");
  const Tensor& x = c.arg(0).tensor("gemm.conv2d_packed x");
  const std::vector<int64_t>&xs = x.shape(), &ys = y.shape();
  const bool plain_x = xs.size() == 4;  // a dense convolution from a plain x
  if (!(x.dtype() == DType::f32()) || (xs.size() != 5 && !plain_x) || ys.size() != 5 ||
      (!plain_x && xs[4] != kChannelBlock) || ys[4] != kChannelBlock || ws)
    rt_fail(what, ": layout 4 needs x f32 of rank 5 (or 4: plain) and y of rank 5, blocks of ", kChannelBlock,
            " channels last, and no workspace, got ", x.type_str(), " and ", y.type_str());
  // The geometry over the padded channel counts (a plain x's own), as rank-4 shapes.
  const Tensor y4 = y.reshape({ys[0], ys[1] * kChannelBlock, ys[2], ys[3]});
  const Conv2dGeometry g = packed_geometry(
      what, plain_x ? xs : std::vector<int64_t>{xs[0], xs[1] * kChannelBlock, xs[2], xs[3]}, x.type_str(), y4, p);
  if ((g.groups != 1 && !(g.groups == g.C && g.O == g.C)) || (plain_x && g.groups != 1))
    rt_fail(what, ": layout 4 needs groups 1 or one input channel and one output per group (blocked x), got x ",
            x.type_str(), " and y ", y.type_str(), " in ", g.groups, " groups");
  const int64_t size = conv2d_blocked_packed_size(g.O, g.C / g.groups, g.groups, g.KH, g.KW);
  if (wp.numel() != size) rt_fail(what, ": the packed weights must hold ", size, " f32, got ", wp.type_str());
  Epilogue epilogue;
  const bool fused = p.size() == 10 + kEpilogueParams;
  if (fused) read_epilogue(what, c, p.data() + 10, 3, g.O, y.shape(), epilogue);
  c.flops = 2.0 * double(g.N) * double(g.O) * double(g.OH * g.OW) * double(g.C / g.groups * g.KH * g.KW);
  thread_local std::vector<float> scratch;
  conv2d_blocked_f32(g, static_cast<const float*>(x.data()), static_cast<const float*>(wp.data()),
                     static_cast<float*>(y.data()), fused ? &epilogue : nullptr, scratch, ThreadPool::global().get(),
                     true, plain_x);
}

// gemm.conv2d_packed(x, wp, shape(sh, sw, ph, pw, dh, dw, groups, KH, KW,
// layout), y[, ws]): y = conv(x, w) for x (N, C, H, W) and y (N, O, OH, OW)
// (or both of rank 3: a 1-D convolution, KH 1), from w packed by
// gemm.conv2d_pack: layout 0 by the direct kernel; 1 as im2col into ws
// (absent for a plain product) and the runtime's GEMM per image and group;
// 2 by the channels-in-lanes depthwise kernel; 3 by the plane-wise
// depthwise kernel, w as it was. With six parameters more
// (an epilogue fused from the elementwise kernel after it,
// passes/fuse_library_epilogues.cc: its flags, bounds and constants,
// runtime/epilogue.h read_epilogue), its tensors come after the
// parameters: biases of O elements, a residual of y's shape, one-element
// scalars. In layout 0, x may be a tuple of tensors: x's parts along its
// channels, read where the kernel copies x (its padding) instead of being
// concatenated first.
void conv2d_packed(BuiltinCall& c) {
  const char* what = "gemm.conv2d_packed";
  const std::vector<int64_t>& p = c.arg(2).shape("gemm.conv2d_packed parameters");
  const size_t fused = 10 + kEpilogueParams;
  if ((p.size() != 10 && p.size() != fused) || !known_layout(p[9]) ||
      (p.size() == fused && (epilogue_tensors(p[10]) < 0 || p[10] >> 14)))  // no i32 sums nor quantized results
    rt_fail(what, ": needs 10 parameters, the last a layout (0 to 3), or ", fused, " with an epilogue, got ",
            shape_str(p));
  const size_t extra = p.size() == fused ? size_t(epilogue_tensors(p[10])) : 0;
  if (c.num_args != 4 + extra && c.num_args != 5 + extra)
    rt_fail(what, ": takes ", 4 + extra, " or ", 5 + extra, " arguments, got ", c.num_args);
  const Tensor& wp = c.arg(1).tensor("gemm.conv2d_packed weights");
  const Tensor& y = c.arg(3 + extra).tensor("gemm.conv2d_packed y");
  const Tensor* ws = c.num_args == 5 + extra ? &c.arg(4 + extra).tensor("gemm.conv2d_packed workspace") : nullptr;
  const size_t rank = y.shape().size();
  for (const Tensor* t : {&wp, &y})
    if (!(t->dtype() == DType::f32())) rt_fail(what, ": needs f32 tensors, got ", t->type_str());
  if (p[9] == kBlockedLayout) return conv2d_blocked(c, p, wp, y, ws);
  if (rank != 4 && rank != 3) rt_fail(what, ": needs y of rank 4 (or 3), got ", y.type_str());
  // x: a tensor, or a tuple of its parts along the channels (a concat
  // read in place, passes/fuse_concat_into_conv.cc), direct layout only.
  const Tensor* x = nullptr;
  std::optional<XParts> parts;
  if (c.arg(0).is_tuple()) {
    parts = x_parts(what, c.arg(0).tuple(), rank);
    if (p[9] != kDirectLayout) rt_fail(what, ": x in parts needs layout 0 (direct), got layout ", p[9]);
  } else {
    x = &c.arg(0).tensor("gemm.conv2d_packed x");
    if (!(x->dtype() == DType::f32()) || x->shape().size() != rank)
      rt_fail(what, ": needs x and y f32 of one rank, 4 (or 3), got ", x->type_str(), " and ", y.type_str());
  }
  const Conv2dGeometry g =
      parts ? packed_geometry(what, parts->shape, parts->str, y, p) : packed_geometry(what, *x, y, p);
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
  const float* xd = x ? static_cast<const float*>(x->data()) : nullptr;
  const float* wd = static_cast<const float*>(wp.data());
  float* yd = static_cast<float*>(y.data());
  ThreadPool* pool = ThreadPool::global().get();
  if (p[9] == kDirectLayout) {
    thread_local std::vector<float> scratch;
    if (parts)
      conv2d_direct_packed_parts_f32(g, parts->parts, wd, yd, scratch, pool);
    else
      conv2d_direct_packed_f32(g, xd, wd, yd, scratch, pool);
  } else if (p[9] == kDepthwiseLayout) {
    if (g.groups != g.C || g.O != g.C)
      rt_fail(what, ": layout 2 needs one input channel and one output per group, got x ", x->type_str(), " and y ",
              y.type_str(), " in ", g.groups, " groups");
    thread_local std::vector<float> scratch;
    conv2d_depthwise_packed_f32(g, xd, wd, yd, scratch, pool);
  } else if (p[9] == kPlaneWiseLayout) {
    if (g.C != g.groups || g.O / g.groups >= 8)
      rt_fail(what, ": layout 3 needs one input channel and fewer than 8 outputs per group, got x ", x->type_str(),
              " and y ", y.type_str(), " in ", g.groups, " groups");
    conv2d_f32(g, xd, wd, yd, nullptr, pool);
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
          gemm_f32_strided(M, nj, Cg, wg, 1, M, b + j0, P, 1, cols + j0, P, nullptr);
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

// ---- 8-bit integer convolutions ---------------------------------------------------------

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

void register_matmul_builtins();  // runtime/builtins_matmul.cc

void register_blas_builtins() {
  // Every product runs single-threaded inside the runtime's own pool, and
  // OpenBLAS's idle server threads are stopped: they poll with sched_yield
  // for 2^28 rounds before sleeping, taking a core from the pool's workers.
  openblas_set_num_threads(1);
  if (blas_thread_shutdown_) blas_thread_shutdown_();
  register_matmul_builtins();
  register_builtin("gemm.conv2d", conv2d);
  register_builtin("gemm.conv2d_pack", conv2d_pack);
  register_builtin("gemm.conv2d_packed", conv2d_packed);
  register_builtin("gemm.conv_transpose2d", conv_transpose2d);
  register_builtin("gemm.qconv2d_pack", qconv2d_pack);
  register_builtin("gemm.qconv2d_packed", qconv2d_packed);
}

}  // namespace relax::rt
