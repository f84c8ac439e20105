// The cpu target's f32 linear and cubic resize over the last two axes
// (image.resize2d): separable, from the tap tables the resize_taps
// program computes (passes/legalize/image.cc). Per plane, each input row
// a tap reads is interpolated along its columns once (a row of the
// output's width), then each output row is the weighted sum of its taps'
// rows, whole rows of contiguous multiply-adds. A loop nest per output
// element gathered its T x S taps with vector gathers: UNet's bilinear
// 2x upsampling over 16 planes of 15x23 took 0.14 ms, a fifth of the
// model's time.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "runtime/cpu_isa.h"
#include "runtime/error.h"
#include "runtime/thread_pool.h"
#include "runtime/vm.h"

#ifdef RELAX_X86_KERNELS
#include <immintrin.h>
#endif

namespace relax::rt {
namespace {

struct Taps {
  const int64_t* at;  // (count, n): tap k of position i at at[k * n + i]
  const float* weight;
  int64_t count, n;
};

// The column taps as the interpolation reads them: tap k of output j at
// at[k * n + j], i32. Per block b of `lanes` outputs (16 with AVX-512, 8
// with AVX2, 1 else) and tap k, base[k * blocks + b] >= 0 when the block's
// taps all lie in [base, base + lanes): at is then relative to base, and
// the block reads them with one load and a permute (upsampling: 16 outputs
// read at most 9 inputs); -1 when they do not: at is x's column, read by
// a gather.
struct Cols {
  const float* weight;  // (count, n)
  std::vector<int32_t> at, base;
  int64_t count, n, lanes, blocks, W;
};
Cols make_cols(const Taps& t, int64_t W, int64_t lanes) {
  Cols c{t.weight, std::vector<int32_t>(t.at, t.at + t.count * t.n), {}, t.count, t.n, lanes, (t.n + lanes - 1) / lanes,
         W};
  c.base.assign(size_t(c.count * c.blocks), -1);
  if (lanes == 1) return c;
  for (int64_t k = 0; k < c.count; ++k)
    for (int64_t b = 0; b < c.blocks; ++b) {
      int32_t* at = c.at.data() + k * c.n + b * lanes;
      const int64_t m = std::min(lanes, c.n - b * lanes);
      const auto [lo, hi] = std::minmax_element(at, at + m);
      if (*hi - *lo >= lanes) continue;
      c.base[size_t(k * c.blocks + b)] = *lo;
      const int32_t base = *lo;
      for (int64_t l = 0; l < m; ++l) at[l] -= base;
    }
  return c;
}

// u = row `in` interpolated along its columns: u[j] = sum over k of
// weight[k, j] * in[tap k of j], the first product then fused
// multiply-adds. out = w * u, or out += w * u (fused), over n elements.
void interp_portable(const float* in, const Cols& cols, float* u) {
  const int64_t n = cols.n;
  for (int64_t j = 0; j < n; ++j) u[j] = cols.weight[j] * in[cols.at[size_t(j)]];
  for (int64_t k = 1; k < cols.count; ++k)
    for (int64_t j = 0; j < n; ++j) u[j] = std::fma(cols.weight[k * n + j], in[cols.at[size_t(k * n + j)]], u[j]);
}
void axpy_portable(float* out, float w, const float* u, int64_t n, bool first) {
  if (first)
    for (int64_t j = 0; j < n; ++j) out[j] = w * u[j];
  else
    for (int64_t j = 0; j < n; ++j) out[j] = std::fma(w, u[j], out[j]);
}
#ifdef RELAX_X86_KERNELS
__attribute__((target("avx512f"))) void interp_avx512(const float* in, const Cols& cols, float* u) {
  const int64_t n = cols.n;
  for (int64_t j = 0, b = 0; j < n; j += 16, ++b) {
    const __mmask16 m = n - j >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - j)) - 1);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t k = 0; k < cols.count; ++k) {
      const __m512i at = _mm512_maskz_loadu_epi32(m, cols.at.data() + k * n + j);
      const int64_t base = cols.base[size_t(k * cols.blocks + b)];
      __m512 x;
      if (base >= 0) {  // inputs base .. base + 15 (those inside the row), permuted
        const int64_t inside = cols.W - base;
        const __mmask16 lm = inside >= 16 ? __mmask16(0xffff) : __mmask16((1u << inside) - 1);
        x = _mm512_maskz_permutexvar_ps(m, at, _mm512_maskz_loadu_ps(lm, in + base));
      } else {
        x = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, at, in, 4);
      }
      const __m512 w = _mm512_maskz_loadu_ps(m, cols.weight + k * n + j);
      acc = k == 0 ? _mm512_mul_ps(w, x) : _mm512_fmadd_ps(w, x, acc);
    }
    _mm512_mask_storeu_ps(u + j, m, acc);
  }
}
__attribute__((target("avx512f"))) void axpy_avx512(float* out, float w, const float* u, int64_t n, bool first) {
  const __m512 wv = _mm512_set1_ps(w);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = n - j >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - j)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(m, u + j);
    _mm512_mask_storeu_ps(out + j, m,
                          first ? _mm512_mul_ps(wv, v) : _mm512_fmadd_ps(wv, v, _mm512_maskz_loadu_ps(m, out + j)));
  }
}
__attribute__((target("avx2,fma"))) __m256i lanes_below(int64_t count) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(std::min<int64_t>(count, 8))),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
__attribute__((target("avx2,fma"))) void interp_avx2(const float* in, const Cols& cols, float* u) {
  const int64_t n = cols.n;
  for (int64_t j = 0, b = 0; j < n; j += 8, ++b) {
    const __m256i m = lanes_below(n - j);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t k = 0; k < cols.count; ++k) {
      const __m256i at = _mm256_maskload_epi32(cols.at.data() + k * n + j, m);
      const int64_t base = cols.base[size_t(k * cols.blocks + b)];
      __m256 x;
      if (base >= 0) {  // inputs base .. base + 7 (those inside the row), permuted
        const __m256 v = _mm256_maskload_ps(in + base, lanes_below(cols.W - base));
        x = _mm256_and_ps(_mm256_permutevar8x32_ps(v, at), _mm256_castsi256_ps(m));
      } else {
        x = _mm256_mask_i32gather_ps(_mm256_setzero_ps(), in, at, _mm256_castsi256_ps(m), 4);
      }
      const __m256 w = _mm256_maskload_ps(cols.weight + k * n + j, m);
      acc = k == 0 ? _mm256_mul_ps(w, x) : _mm256_fmadd_ps(w, x, acc);
    }
    _mm256_maskstore_ps(u + j, m, acc);
  }
}
__attribute__((target("avx2,fma"))) void axpy_avx2(float* out, float w, const float* u, int64_t n, bool first) {
  const __m256 wv = _mm256_set1_ps(w);
  for (int64_t j = 0; j < n; j += 8) {
    const __m256i m = lanes_below(n - j);
    const __m256 v = _mm256_maskload_ps(u + j, m);
    _mm256_maskstore_ps(out + j, m,
                        first ? _mm256_mul_ps(wv, v) : _mm256_fmadd_ps(wv, v, _mm256_maskload_ps(out + j, m)));
  }
}
#endif

// Rows of one plane along its columns, computed on demand and kept in
// 2 * T slots (an output row reads T rows; consecutive ones mostly the
// same), replaced oldest first.
class RowCache {
 public:
  using Interp = void (*)(const float* in, const Cols& cols, float* u);
  RowCache(const Cols& cols, int64_t slots, std::vector<float>& buf, Interp interp)
      : cols_(cols), buf_(buf), interp_(interp) {
    row_.assign(size_t(slots), -1);
    buf_.resize(std::max(buf_.size(), size_t(slots * cols.n)));
  }
  void reset() { std::fill(row_.begin(), row_.end(), -1); }
  // x's row r (W wide) interpolated along the columns.
  const float* get(const float* x, int64_t W, int64_t r) {
    for (size_t s = 0; s < row_.size(); ++s)
      if (row_[s] == r) return buf_.data() + int64_t(s) * cols_.n;
    const size_t s = next_++ % row_.size();
    row_[s] = r;
    float* u = buf_.data() + int64_t(s) * cols_.n;
    interp_(x + r * W, cols_, u);
    return u;
  }

 private:
  const Cols& cols_;
  std::vector<float>& buf_;
  Interp interp_;
  std::vector<int64_t> row_;
  size_t next_ = 0;
};

void resize2d_f32(const float* x, int64_t planes, int64_t H, int64_t W, const Taps& rows, const Taps& cols, float* y,
                  ThreadPool* pool) {
  const int64_t OH = rows.n, OW = cols.n;
  // The ISA's kernels, and its vectors' lanes, the blocks the column taps
  // are grouped in (as i32: read_taps checked them against W).
  RowCache::Interp interp = interp_portable;
  void (*combine)(float*, float, const float*, int64_t, bool) = axpy_portable;
  int64_t lanes = 1;
#ifdef RELAX_X86_KERNELS
  if (kernel_isa() == KernelIsa::avx512)
    interp = interp_avx512, combine = axpy_avx512, lanes = 16;
  else if (kernel_isa() == KernelIsa::avx2)
    interp = interp_avx2, combine = axpy_avx2, lanes = 8;
#endif
  const Cols c = make_cols(cols, W, lanes);
  auto body = [&](int64_t p0, int64_t p1) {
    thread_local std::vector<float> buf;
    RowCache cache(c, 2 * rows.count, buf, interp);
    for (int64_t p = p0; p < p1; ++p) {
      const float* xp = x + p * H * W;
      cache.reset();
      for (int64_t i = 0; i < OH; ++i) {
        float* out = y + (p * OH + i) * OW;
        for (int64_t k = 0; k < rows.count; ++k) {
          const float w = rows.weight[k * OH + i];
          combine(out, w, cache.get(xp, W, rows.at[k * OH + i]), OW, k == 0);
        }
      }
    }
  };
  const double work = double(planes) * double(OH) * double(OW) * double(rows.count + cols.count);
  if (pool && pool->num_threads() > 1 && planes > 1 && work >= double(1 << 15))
    pool->parallel_for(planes, body);
  else
    body(0, planes);
}

// A tap table (count, n) i64 and its weights (count, n) f32, every tap
// inside [0, size).
Taps read_taps(const char* what, const Tensor& at, const Tensor& weight, int64_t n, int64_t size, const char* axis) {
  if (!(at.dtype() == DType::i64()) || !(weight.dtype() == DType::f32()) || at.shape().size() != 2 ||
      at.shape() != weight.shape() || at.shape()[1] != n || at.shape()[0] < 1)
    rt_fail(what, ": the ", axis, " taps must be i64 and f32 tables of one shape (taps, ", n, "), got ", at.type_str(),
            " and ", weight.type_str());
  Taps t{static_cast<const int64_t*>(at.data()), static_cast<const float*>(weight.data()), at.shape()[0], n};
  for (int64_t i = 0; i < t.count * n; ++i)
    if (t.at[i] < 0 || t.at[i] >= size)
      rt_fail(what, ": ", axis, " tap ", t.at[i], " at ", i, " lies outside the input's ", size, " ", axis);
  return t;
}

// image.resize2d(x, row_taps, row_weights, col_taps, col_weights, y): y
// (..., OH, OW) = sum over k, l of row_weights[k, i] * col_weights[l, j] *
// x[..., row_taps[k, i], col_taps[l, j]] for x (..., H, W), f32, the
// leading dims equal; the tables i64 and f32 of (taps, OH) and (taps, OW).
// The sums go along the columns first, then the rows, in f32.
void resize2d(BuiltinCall& c) {
  const char* what = "image.resize2d";
  if (c.num_args != 6) rt_fail(what, ": takes 6 arguments, got ", c.num_args);
  const Tensor& x = c.arg(0).tensor("image.resize2d x");
  const Tensor& y = c.arg(5).tensor("image.resize2d y");
  const std::vector<int64_t>&xs = x.shape(), &ys = y.shape();
  const size_t rank = xs.size();
  if (!(x.dtype() == DType::f32()) || !(y.dtype() == DType::f32()) || rank < 2 || ys.size() != rank ||
      !std::equal(xs.begin(), xs.end() - 2, ys.begin()))
    rt_fail(what, ": needs f32 x and y of one rank (2 or more), equal but in the last two dims, got ", x.type_str(),
            " and ", y.type_str());
  const int64_t H = xs[rank - 2], W = xs[rank - 1], OH = ys[rank - 2], OW = ys[rank - 1];
  if (y.numel() == 0) return;
  if (x.numel() == 0) rt_fail(what, ": x ", x.type_str(), " is empty, y ", y.type_str(), " is not");
  if (W > std::numeric_limits<int32_t>::max())
    rt_fail(what, ": x ", x.type_str(), " has rows of more than 2^31 - 1 elements");
  const Taps rows = read_taps(what, c.arg(1).tensor("image.resize2d row taps"),
                              c.arg(2).tensor("image.resize2d row weights"), OH, H, "rows");
  const Taps cols = read_taps(what, c.arg(3).tensor("image.resize2d column taps"),
                              c.arg(4).tensor("image.resize2d column weights"), OW, W, "columns");
  resize2d_f32(static_cast<const float*>(x.data()), x.numel() / (H * W), H, W, rows, cols,
               static_cast<float*>(y.data()), ThreadPool::global().get());
}

}  // namespace

void register_image_builtins() { register_builtin("image.resize2d", resize2d); }

}  // namespace relax::rt
