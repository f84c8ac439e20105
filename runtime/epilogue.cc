#include "runtime/epilogue.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "runtime/cpu_isa.h"
#include "runtime/error.h"
#include "runtime/thread_pool.h"
#include "runtime/vm.h"

namespace relax::rt {
namespace {

// The polynomials, shared by the vector and scalar forms.
//
// exp(x): x = n ln2 + r, |r| <= ln2 / 2 (n = round(x log2 e), ln2 in two
// parts), e^r by Cephes' degree-6 polynomial, times 2^n; x clamped to
// [-87.3, 88] (n in [-126, 127]: the power of two is a normal float).
// About 1 ulp.
constexpr float kExpMin = -87.3f, kExpMax = 88.0f, kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
constexpr float kExpPoly[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                               4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
// tanh(x) for |x| < 0.5: x + x^3 q(x^2), q's coefficients from the highest
// (the code generator's, backends/llvm/expr.cc emit_tanh_f32); else
// sign(x) (1 - 2 / (e^{2|x|} + 1)).
constexpr float kTanhPoly[6] = {float(21844.0 / 6081075), float(-1382.0 / 155925), float(62.0 / 2835),
                                float(-17.0 / 315),       float(2.0 / 15),         float(-1.0 / 3)};
// erf(x) (backends/llvm/expr.cc emit_erf_f32): |x| < 1: x P(x^2); below
// 3.92 a polynomial in |x| - 2.5; past it 1. Coefficients from the highest.
constexpr float kErfNear[7] = {7.933493888112597e-05f, -0.000803484665032328f, 0.005191218377404633f,
                               -0.02685539945206966f,  0.11283625725085092f,   -0.3761262987767597f,
                               1.128379166593154f};
constexpr float kErfFar[14] = {9.481723419195627e-08f, -9.117615911115404e-06f, 2.031798841028575e-05f,
                               6.180087422945216e-05f, -0.0002768129404038647f, 0.0002868025310243321f,
                               0.0005675091986707124f, -0.0028185864513308404f, 0.006105135230587443f,
                               -0.008615075911252401f, 0.008352705839541232f,   -0.005446702525953472f,
                               0.0021781225320301432f, 0.9995930699962846f};

float erf_scalar(float x) {
  const float ax = std::fabs(x);
  float r;
  if (ax < 1.0f) {
    float p = kErfNear[0];
    for (int k = 1; k < 7; ++k) p = std::fma(p, ax * ax, kErfNear[k]);
    r = ax * p;
  } else if (ax < 3.92f) {
    float p = kErfFar[0];
    for (int k = 1; k < 14; ++k) p = std::fma(p, ax - 2.5f, kErfFar[k]);
    r = p;
  } else {
    r = 1.0f;
  }
  return std::isnan(x) ? x : std::copysign(r, x);
}

float act_scalar(const Epilogue& e, float v) {
  switch (e.act) {
    case Epilogue::Act::none:
      return v;
    case Epilogue::Act::silu:
      return v / (1.0f + std::exp(-v));
    case Epilogue::Act::leaky:
      return v < e.leak_at ? v * e.slope : v;
    case Epilogue::Act::tanh:
      return std::tanh(v);
    case Epilogue::Act::gelu:
      return v * (erf_scalar(e.gelu_div ? v / e.k1 : v * e.k1) + e.k2) * e.k3;
    case Epilogue::Act::hardswish:
      return v * std::min(std::max(e.k1 * v + e.k2, e.lo), e.hi);
  }
  return v;
}

#ifdef RELAX_X86_KERNELS
__attribute__((target("avx512f"), always_inline)) inline __m512 exp_avx512(__m512 x) {
  const __mmask16 all = 0xffff;
  x = _mm512_maskz_min_ps(all, _mm512_maskz_max_ps(all, x, _mm512_set1_ps(kExpMin)), _mm512_set1_ps(kExpMax));
  const __m512 n = _mm512_maskz_roundscale_ps(all, _mm512_mul_ps(x, _mm512_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), r);
  __m512 p = _mm512_set1_ps(kExpPoly[0]);
  for (int k = 1; k < 6; ++k) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpPoly[k]));
  const __m512 e = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_maskz_scalef_ps(all, e, n);
}
// 1 / d for the SiLU's d = 1 + e^-v (at least 1): the 14-bit estimate and
// one Newton step, r + r (1 - d r), within an ulp or so; a division cost as
// much as the rest of the epilogue (EfficientNet-B0's SiLU epilogues, 20%
// of its time).
__attribute__((target("avx512f"), always_inline)) inline __m512 reciprocal_avx512(__m512 d) {
  const __m512 r = _mm512_maskz_rcp14_ps(0xffff, d);
  return _mm512_fmadd_ps(r, _mm512_fnmadd_ps(d, r, _mm512_set1_ps(1.0f)), r);
}
__attribute__((target("avx512f"), always_inline)) inline __m512 tanh_avx512(__m512 x) {
  const __m512 ax = _mm512_abs_ps(x), x2 = _mm512_mul_ps(x, x), one = _mm512_set1_ps(1.0f);
  __m512 q = _mm512_set1_ps(kTanhPoly[0]);
  for (int k = 1; k < 6; ++k) q = _mm512_fmadd_ps(q, x2, _mm512_set1_ps(kTanhPoly[k]));
  const __m512 small = _mm512_fmadd_ps(_mm512_mul_ps(x, x2), q, x);
  const __m512 e = exp_avx512(_mm512_add_ps(ax, ax));
  const __m512 t = _mm512_sub_ps(one, _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, one)));
  // copysign(t, x): t's magnitude, x's sign bit.
  const __m512i sign = _mm512_set1_epi32(int(0x80000000u));
  const __m512 large =
      _mm512_castsi512_ps(_mm512_ternarylogic_epi32(sign, _mm512_castps_si512(x), _mm512_castps_si512(t), 0xca));
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(ax, _mm512_set1_ps(0.5f), _CMP_LT_OQ), large, small);
}
__attribute__((target("avx512f"), always_inline)) inline __m512 erf_avx512(__m512 x) {
  const __m512 ax = _mm512_abs_ps(x), a2 = _mm512_mul_ps(ax, ax), u = _mm512_sub_ps(ax, _mm512_set1_ps(2.5f));
  __m512 p = _mm512_set1_ps(kErfNear[0]);
  for (int k = 1; k < 7; ++k) p = _mm512_fmadd_ps(p, a2, _mm512_set1_ps(kErfNear[k]));
  __m512 f = _mm512_set1_ps(kErfFar[0]);
  for (int k = 1; k < 14; ++k) f = _mm512_fmadd_ps(f, u, _mm512_set1_ps(kErfFar[k]));
  __m512 r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(ax, _mm512_set1_ps(3.92f), _CMP_LT_OQ), _mm512_set1_ps(1.0f), f);
  r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(ax, _mm512_set1_ps(1.0f), _CMP_LT_OQ), r, _mm512_mul_ps(ax, p));
  const __m512i sign = _mm512_set1_epi32(int(0x80000000u));
  r = _mm512_castsi512_ps(_mm512_ternarylogic_epi32(sign, _mm512_castps_si512(x), _mm512_castps_si512(r), 0xca));
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), r, x);
}

__attribute__((target("avx2,fma"), always_inline)) inline __m256 exp_avx2(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(kExpMin)), _mm256_set1_ps(kExpMax));
  const __m256 n =
      _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), r);
  __m256 p = _mm256_set1_ps(kExpPoly[0]);
  for (int k = 1; k < 6; ++k) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpPoly[k]));
  const __m256 e = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i two_n = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(e, _mm256_castsi256_ps(two_n));
}
// As reciprocal_avx512, from the 12-bit estimate.
__attribute__((target("avx2,fma"), always_inline)) inline __m256 reciprocal_avx2(__m256 d) {
  const __m256 r = _mm256_rcp_ps(d);
  return _mm256_fmadd_ps(r, _mm256_fnmadd_ps(d, r, _mm256_set1_ps(1.0f)), r);
}
__attribute__((target("avx2,fma"), always_inline)) inline __m256 copysign_avx2(__m256 mag, __m256 sgn) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  return _mm256_or_ps(_mm256_andnot_ps(sign, mag), _mm256_and_ps(sign, sgn));
}
__attribute__((target("avx2,fma"), always_inline)) inline __m256 tanh_avx2(__m256 x) {
  const __m256 ax = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x), x2 = _mm256_mul_ps(x, x), one = _mm256_set1_ps(1.0f);
  __m256 q = _mm256_set1_ps(kTanhPoly[0]);
  for (int k = 1; k < 6; ++k) q = _mm256_fmadd_ps(q, x2, _mm256_set1_ps(kTanhPoly[k]));
  const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(x, x2), q, x);
  const __m256 e = exp_avx2(_mm256_add_ps(ax, ax));
  const __m256 t = _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, one)));
  return _mm256_blendv_ps(copysign_avx2(t, x), small, _mm256_cmp_ps(ax, _mm256_set1_ps(0.5f), _CMP_LT_OQ));
}
__attribute__((target("avx2,fma"), always_inline)) inline __m256 erf_avx2(__m256 x) {
  const __m256 ax = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x), a2 = _mm256_mul_ps(ax, ax),
               u = _mm256_sub_ps(ax, _mm256_set1_ps(2.5f));
  __m256 p = _mm256_set1_ps(kErfNear[0]);
  for (int k = 1; k < 7; ++k) p = _mm256_fmadd_ps(p, a2, _mm256_set1_ps(kErfNear[k]));
  __m256 f = _mm256_set1_ps(kErfFar[0]);
  for (int k = 1; k < 14; ++k) f = _mm256_fmadd_ps(f, u, _mm256_set1_ps(kErfFar[k]));
  __m256 r = _mm256_blendv_ps(_mm256_set1_ps(1.0f), f, _mm256_cmp_ps(ax, _mm256_set1_ps(3.92f), _CMP_LT_OQ));
  r = _mm256_blendv_ps(r, _mm256_mul_ps(ax, p), _mm256_cmp_ps(ax, _mm256_set1_ps(1.0f), _CMP_LT_OQ));
  return _mm256_blendv_ps(copysign_avx2(r, x), x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

// The epilogue over y[0, n): where e.scale is set, y holds i32 sums, each
// taken as f32 times s[i] (a row of scales, else sc); + b[i] where there
// is a row of biases (else + bc), + r[i] where there is a residual, the
// activation, the clamps.
//
// Its forms are instantiated per activation A, scaled sums S, residual R
// and kind of bias B (0: the constant bc, 1: a row, 2: 16 biases repeated,
// a blocked layout's) so that the loop is straight-line code: tested per
// vector, the branches and the activation's jump cost as much as the
// arithmetic (MobileNetV3-Large's epilogues, 11.5% of its time).
template <Epilogue::Act A, bool S, bool R, int B>
__attribute__((target("avx512f"))) void run_avx512(float* y, const float* s, float sc, const float* b, float bc,
                                                   const float* r, const Epilogue& e, int64_t n) {
  const __m512 vsc = _mm512_set1_ps(sc), vbc = _mm512_set1_ps(bc), vlo = _mm512_set1_ps(e.lo),
               vhi = _mm512_set1_ps(e.hi), one = _mm512_set1_ps(1.0f);
  const __m512 at = _mm512_set1_ps(e.leak_at), slope = _mm512_set1_ps(e.slope);
  const __m512 k1 = _mm512_set1_ps(e.k1), k2 = _mm512_set1_ps(e.k2), k3 = _mm512_set1_ps(e.k3);
  const __mmask16 all = 0xffff;  // (GCC 12 warns of the unmasked min and max's undefined source)
  const __m512 vb16 = B == 2 ? _mm512_loadu_ps(b) : vbc;
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
    __m512 v = S ? _mm512_mul_ps(_mm512_maskz_cvtepi32_ps(all, _mm512_maskz_loadu_epi32(m, y + i)),
                                 s ? _mm512_maskz_loadu_ps(m, s + i) : vsc)
                 : _mm512_maskz_loadu_ps(m, y + i);
    v = _mm512_add_ps(v, B == 2 ? vb16 : B == 1 ? _mm512_maskz_loadu_ps(m, b + i) : vbc);
    if constexpr (R) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, r + i));
    switch (A) {
      case Epilogue::Act::none:
        break;
      case Epilogue::Act::silu:
        v = _mm512_mul_ps(v, reciprocal_avx512(_mm512_add_ps(one, exp_avx512(_mm512_sub_ps(_mm512_setzero_ps(), v)))));
        break;
      case Epilogue::Act::leaky:
        v = _mm512_mask_mul_ps(v, _mm512_cmp_ps_mask(v, at, _CMP_LT_OQ), v, slope);
        break;
      case Epilogue::Act::tanh:
        v = tanh_avx512(v);
        break;
      case Epilogue::Act::gelu: {
        const __m512 arg = e.gelu_div ? _mm512_div_ps(v, k1) : _mm512_mul_ps(v, k1);
        v = _mm512_mul_ps(_mm512_mul_ps(v, _mm512_add_ps(erf_avx512(arg), k2)), k3);
        break;
      }
      case Epilogue::Act::hardswish:  // the bounds clamp the gate, not the result
        v = _mm512_mul_ps(
            v, _mm512_maskz_min_ps(all, _mm512_maskz_max_ps(all, _mm512_add_ps(_mm512_mul_ps(k1, v), k2), vlo), vhi));
        break;
    }
    if constexpr (A != Epilogue::Act::hardswish) v = _mm512_maskz_min_ps(m, _mm512_maskz_max_ps(m, v, vlo), vhi);
    _mm512_mask_storeu_ps(y + i, m, v);
  }
}
template <Epilogue::Act A, bool S, bool R, int B>
__attribute__((target("avx2,fma"))) void run_avx2(float* y, const float* s, float sc, const float* b, float bc,
                                                  const float* r, const Epilogue& e, int64_t n) {
  const __m256 vsc = _mm256_set1_ps(sc), vbc = _mm256_set1_ps(bc), vlo = _mm256_set1_ps(e.lo),
               vhi = _mm256_set1_ps(e.hi), one = _mm256_set1_ps(1.0f);
  const __m256 at = _mm256_set1_ps(e.leak_at), slope = _mm256_set1_ps(e.slope);
  const __m256 k1 = _mm256_set1_ps(e.k1), k2 = _mm256_set1_ps(e.k2), k3 = _mm256_set1_ps(e.k3);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(int(std::min<int64_t>(n - i, 8))), lane);
    __m256 v = S ? _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_maskload_epi32(reinterpret_cast<const int*>(y + i), m)),
                                 s ? _mm256_maskload_ps(s + i, m) : vsc)
                 : _mm256_maskload_ps(y + i, m);
    v = _mm256_add_ps(v, B ? _mm256_maskload_ps(b + (B == 2 ? i & 15 : i), m) : vbc);
    if constexpr (R) v = _mm256_add_ps(v, _mm256_maskload_ps(r + i, m));
    switch (A) {
      case Epilogue::Act::none:
        break;
      case Epilogue::Act::silu:
        v = _mm256_mul_ps(v, reciprocal_avx2(_mm256_add_ps(one, exp_avx2(_mm256_sub_ps(_mm256_setzero_ps(), v)))));
        break;
      case Epilogue::Act::leaky:
        v = _mm256_blendv_ps(v, _mm256_mul_ps(v, slope), _mm256_cmp_ps(v, at, _CMP_LT_OQ));
        break;
      case Epilogue::Act::tanh:
        v = tanh_avx2(v);
        break;
      case Epilogue::Act::gelu: {
        const __m256 arg = e.gelu_div ? _mm256_div_ps(v, k1) : _mm256_mul_ps(v, k1);
        v = _mm256_mul_ps(_mm256_mul_ps(v, _mm256_add_ps(erf_avx2(arg), k2)), k3);
        break;
      }
      case Epilogue::Act::hardswish:  // the bounds clamp the gate, not the result
        v = _mm256_mul_ps(v, _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(_mm256_mul_ps(k1, v), k2), vlo), vhi));
        break;
    }
    if constexpr (A != Epilogue::Act::hardswish) v = _mm256_min_ps(_mm256_max_ps(v, vlo), vhi);
    _mm256_maskstore_ps(y + i, m, v);
  }
}

// The form of run_avx512 (Isa 0) or run_avx2 (Isa 1) for these operands.
using RunFn = void (*)(float*, const float*, float, const float*, float, const float*, const Epilogue&, int64_t);
template <int Isa, Epilogue::Act A, bool S, bool R>
RunFn run_form(int bias) {
  if constexpr (Isa == 0) return bias == 2 ? run_avx512<A, S, R, 2> : bias == 1 ? run_avx512<A, S, R, 1> : run_avx512<A, S, R, 0>;
  return bias == 2 ? run_avx2<A, S, R, 2> : bias == 1 ? run_avx2<A, S, R, 1> : run_avx2<A, S, R, 0>;
}
template <int Isa, Epilogue::Act A>
RunFn run_form(bool scaled, bool residual, int bias) {
  if (scaled) return residual ? run_form<Isa, A, true, true>(bias) : run_form<Isa, A, true, false>(bias);
  return residual ? run_form<Isa, A, false, true>(bias) : run_form<Isa, A, false, false>(bias);
}
template <int Isa>
RunFn run_form(const Epilogue& e, bool residual, int bias) {
  using Act = Epilogue::Act;
  const bool scaled = e.scale != nullptr;
  switch (e.act) {
    case Act::silu:
      return run_form<Isa, Act::silu>(scaled, residual, bias);
    case Act::leaky:
      return run_form<Isa, Act::leaky>(scaled, residual, bias);
    case Act::tanh:
      return run_form<Isa, Act::tanh>(scaled, residual, bias);
    case Act::gelu:
      return run_form<Isa, Act::gelu>(scaled, residual, bias);
    case Act::hardswish:
      return run_form<Isa, Act::hardswish>(scaled, residual, bias);
    case Act::none:
      break;
  }
  return run_form<Isa, Act::none>(scaled, residual, bias);
}
#endif

#ifdef RELAX_X86_KERNELS
// quantize_run's whole vectors: how many it did.
__attribute__((target("avx512f"))) int64_t quantize_avx512(const float* v, uint8_t* q, float s, float z, float lo,
                                                           float hi, int64_t n) {
  const __m512 vs = _mm512_set1_ps(s), vz = _mm512_set1_ps(z), vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  const __mmask16 all = 0xffff;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 x = _mm512_div_ps(_mm512_loadu_ps(v + i), vs);
    x = _mm512_add_ps(_mm512_maskz_roundscale_ps(all, x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), vz);
    x = _mm512_maskz_min_ps(all, _mm512_maskz_max_ps(all, x, vlo), vhi);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i),
                     _mm512_maskz_cvtepi32_epi8(all, _mm512_maskz_cvtps_epi32(all, x)));
  }
  return i;
}
#endif

// v[0, n) quantized into q: saturate(round_half_even(v / s) + z), as the
// quantize legaliser computes it (passes/legalize/quant.cc).
void quantize_run(const float* v, void* q, const Epilogue& e, int64_t n) {
  const float lo = e.q_signed ? -128.0f : 0.0f, hi = e.q_signed ? 127.0f : 255.0f;
  auto* out = static_cast<uint8_t*>(q);
  int64_t i = 0;
#ifdef RELAX_X86_KERNELS
  if (kernel_isa() == KernelIsa::avx512) i = quantize_avx512(v, out, e.q_scale, e.q_zero, lo, hi, n);
#endif
  for (; i < n; ++i) {
    const float x = std::min(std::max(std::nearbyint(v[i] / e.q_scale) + e.q_zero, lo), hi);
    out[i] = uint8_t(int32_t(x));
  }
}

// One run of n outputs (see run_avx512), on the widest ISA the kernels use.
// b16: b holds 16 biases, repeated along the run (a blocked layout's
// channel block, runtime/conv_blocked.h; n a multiple of 16).
void run(float* y, const float* s, float sc, const float* b, float bc, const float* r, const Epilogue& e, int64_t n,
         bool b16 = false) {
#ifdef RELAX_X86_KERNELS
  const int bias = b16 ? 2 : b ? 1 : 0;
  if (kernel_isa() == KernelIsa::avx512) return run_form<0>(e, r != nullptr, bias)(y, s, sc, b, bc, r, e, n);
  if (kernel_isa() == KernelIsa::avx2) return run_form<1>(e, r != nullptr, bias)(y, s, sc, b, bc, r, e, n);
#endif
  for (int64_t i = 0; i < n; ++i) {
    float sum = y[i];
    if (e.scale) {
      int32_t acc;
      std::memcpy(&acc, y + i, sizeof acc);
      sum = float(acc) * (s ? s[i] : sc);
    }
    const float v = act_scalar(e, sum + (b ? b[b16 ? i & 15 : i] : bc) + (r ? r[i] : 0.0f));
    y[i] = e.act == Epilogue::Act::hardswish ? v : std::min(std::max(v, e.lo), e.hi);
  }
}

// Operations an output of the activation costs, for the parallel split
// (an exponential or a polynomial counts 16, as the code generator's
// estimate does).
double act_cost(Epilogue::Act a) {
  return a == Epilogue::Act::none || a == Epilogue::Act::leaky || a == Epilogue::Act::hardswish ? 1.0 : 16.0;
}

}  // namespace

void Epilogue::apply_all(float* y, int64_t N, int64_t O, int64_t P, ThreadPool* pool) const {
  auto channel_bias = [&](int64_t o) { return (bias[0] ? bias[0][o] : 0.0f) + (bias[1] ? bias[1][o] : 0.0f); };
  // Planes of fewer than 64 outputs take the biases spread over an image's
  // (O, P) outputs, so that a run of outputs is one vector loop across
  // channels (plane by plane, EfficientNet's 2x2 and 1x1 planes of 144 to
  // 288 channels ran a 16-lane vector for 4 or 1 outputs); longer planes
  // add their channel's bias as a constant (spreading would write as much
  // again as the output).
  const int64_t L = O * P;
  const bool spread_bias = (bias[0] || bias[1]) && P < 64;
  // Kept per calling thread; the workers read it through `spread_at` (a
  // thread_local named inside the lambda would be each worker's own).
  thread_local std::vector<float> spread;
  if (spread_bias) {
    spread.resize(size_t(L));
    for (int64_t o = 0; o < O; ++o) std::fill(spread.begin() + o * P, spread.begin() + (o + 1) * P, channel_bias(o));
  }
  const float* spread_at = spread.data();
  // [begin, end) of the flat (N, O, P) outputs, by runs within an image
  // (spread biases) or within a plane (a constant bias).
  auto body = [&](int64_t begin, int64_t end) {
    while (begin < end) {
      const int64_t len_max = spread_bias ? L : P, j = begin % len_max, len = std::min(end - begin, len_max - j);
      run(y + begin, nullptr, 0.0f, spread_bias ? spread_at + j : nullptr,
          spread_bias ? 0.0f : channel_bias(begin / P % O), residual ? residual + begin : nullptr, *this, len);
      begin += len;
    }
  };
  // Over the pool in runs of 1,024 outputs where there is the work for it
  // (backends/cpu/codegen.h kParallelMinWork: 2^15).
  const int64_t total = N * L, runs = (total + 1023) / 1024;
  if (pool && pool->num_threads() > 1 && runs > 1 && double(total) * act_cost(act) >= double(1 << 15))
    pool->parallel_for(runs, [&](int64_t r0, int64_t r1) { body(r0 * 1024, std::min(total, r1 * 1024)); });
  else
    body(0, total);
}

void Epilogue::apply_rows(float* out, int64_t at, int64_t ld, int64_t rows, int64_t c0, int64_t c1) const {
  if (c1 <= c0) return;
  // Two biases: their sum over the columns once, on this thread.
  const float* b = bias[0] ? bias[0] : bias[1];
  thread_local std::vector<float> sum;
  if (bias[0] && bias[1]) {
    sum.resize(size_t(c1));
    for (int64_t c = c0; c < c1; ++c) sum[size_t(c)] = bias[0][c] + bias[1][c];
    b = sum.data();
  }
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t o = at + i * ld + c0;
    run(out + o, scale && scale_columns ? scale + c0 : nullptr, scale_value, b ? b + c0 : nullptr, 0.0f,
        residual ? residual + o : nullptr, *this, c1 - c0);
    if (qout) quantize_run(out + o, static_cast<uint8_t*>(qout) + o, *this, c1 - c0);
  }
}

void Epilogue::apply_blocked(float* y, int64_t at, int64_t n, int64_t block) const {
  float b[16];
  for (int64_t l = 0; l < 16; ++l) {
    const int64_t c = block * 16 + l;
    b[l] = (bias[0] ? bias[0][c] : 0.0f) + (bias[1] ? bias[1][c] : 0.0f);
  }
  run(y + at, nullptr, 0.0f, b, 0.0f, residual ? residual + at : nullptr, *this, n, /*b16=*/true);
}

int epilogue_tensors(int64_t flags) {
  if (flags < 0 || flags >= (1 << 17) || (flags & 3) == 3 || ((flags >> 15 & 1) && !(flags >> 14 & 1))) return -1;
  // At most one activation; k1 and k2 for GELU or hardswish, k3 and the
  // division for GELU.
  const bool gelu = flags >> 8 & 1, hardswish = flags >> 13 & 1;
  const int acts = int(flags >> 3 & 1) + int(flags >> 6 & 1) + int(flags >> 7 & 1) + int(gelu) + int(hardswish);
  if (acts > 1 || (!gelu && (flags & (0x9 << 9))) || (!gelu && !hardswish && (flags & (0x3 << 10)))) return -1;
  return int(flags >> 14 & 1) + int(flags >> 15 & 1) + 2 * int(flags >> 16 & 1) + int(flags & 3) + int(flags >> 2 & 1) +
         int(flags >> 4 & 1) + int(flags >> 5 & 1) + 2 * int(flags >> 6 & 1) + int(flags >> 10 & 1) +
         int(flags >> 11 & 1) + int(flags >> 12 & 1);
}

size_t read_epilogue(const char* what, BuiltinCall& c, const int64_t* p, size_t first, int64_t channels,
                     const std::vector<int64_t>& y_shape, Epilogue& e, bool integer) {
  const int64_t flags = p[0];
  const int count = epilogue_tensors(flags);
  if (count < 0) rt_fail(what, ": ", flags, " is not an epilogue's flags");
  if (!integer && flags >> 14)
    rt_fail(what, ": an epilogue of i32 sums or a quantized result needs an integer product");
  auto as_float = [](int64_t bits) {
    const uint32_t u = uint32_t(bits);
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  };
  e = Epilogue{};
  e.lo = as_float(p[1]), e.hi = as_float(p[2]);
  e.k1 = as_float(p[3]), e.k2 = as_float(p[4]), e.k3 = as_float(p[5]);
  if (flags >> 3 & 1) e.act = Epilogue::Act::silu;
  if (flags >> 6 & 1) e.act = Epilogue::Act::leaky;
  if (flags >> 7 & 1) e.act = Epilogue::Act::tanh;
  if (flags >> 8 & 1) e.act = Epilogue::Act::gelu, e.gelu_div = (flags >> 9 & 1) != 0;
  if (flags >> 13 & 1) e.act = Epilogue::Act::hardswish;
  const int64_t biases = flags & 3, residuals = flags >> 2 & 1;
  size_t at = first;
  if (flags >> 14 & 1) {  // i32 sums and their scales
    const Tensor& t = c.arg(at++).tensor("epilogue scale");
    const bool product = flags >> 15 & 1;
    if (!(t.dtype() == DType::f32()) || (t.numel() != 1 && (product || t.numel() != channels)))
      rt_fail(what, ": the sums' scale must be one f32", product ? "" : rt_str(" or ", channels), ", got ",
              t.type_str());
    e.scale = static_cast<const float*>(t.data());
    e.scale_columns = t.numel() == channels && channels != 1;
    e.scale_value = e.scale[0];
    if (product) {  // (s0 * s1), rounded as the kernel did
      const Tensor& t1 = c.arg(at++).tensor("epilogue scale");
      if (!(t1.dtype() == DType::f32()) || t1.numel() != 1)
        rt_fail(what, ": the sums' second scale must be one f32, got ", t1.type_str());
      e.scale_value = e.scale[0] * *static_cast<const float*>(t1.data());
    }
  }
  for (int64_t k = 0; k < biases + residuals; ++k, ++at) {
    const bool is_bias = k < biases;
    const Tensor& t = c.arg(at).tensor(is_bias ? "epilogue bias" : "epilogue residual");
    const bool ok = t.dtype() == DType::f32() && (is_bias ? t.numel() == channels : t.shape() == y_shape);
    if (!ok)
      rt_fail(what, ": ",
              is_bias ? rt_str("a bias must hold ", channels, " f32")
                      : rt_str("the residual must be f32", shape_str(y_shape)),
              ", got ", t.type_str());
    (is_bias ? e.bias[k] : e.residual) = static_cast<const float*>(t.data());
  }
  // The scalars, in order: the bounds, the leaky ReLU's threshold and
  // slope, GELU's k1, k2 and k3.
  float* slots[7];
  size_t n = 0;
  if (flags >> 4 & 1) slots[n++] = &e.lo;
  if (flags >> 5 & 1) slots[n++] = &e.hi;
  if (flags >> 6 & 1) slots[n++] = &e.leak_at, slots[n++] = &e.slope;
  if (flags >> 10 & 1) slots[n++] = &e.k1;
  if (flags >> 11 & 1) slots[n++] = &e.k2;
  if (flags >> 12 & 1) slots[n++] = &e.k3;
  for (size_t k = 0; k < n; ++k, ++at) {
    const Tensor& t = c.arg(at).tensor("epilogue scalar");
    if (!(t.dtype() == DType::f32()) || t.numel() != 1)
      rt_fail(what, ": an epilogue's bound, threshold, slope or constant must be one f32, got ", t.type_str());
    *slots[k] = *static_cast<const float*>(t.data());
  }
  if (flags >> 16 & 1) {  // the quantized result's scale and zero point
    const Tensor& s = c.arg(at++).tensor("epilogue quantization scale");
    const Tensor& z = c.arg(at++).tensor("epilogue zero point");
    if (!(s.dtype() == DType::f32()) || s.numel() != 1)
      rt_fail(what, ": the quantization's scale must be one f32, got ", s.type_str());
    if (!(z.dtype() == DType::u(8) || z.dtype() == DType::i(8)) || z.numel() != 1)
      rt_fail(what, ": the quantization's zero point must be one u8 or i8, got ", z.type_str());
    e.q_scale = *static_cast<const float*>(s.data());
    e.q_signed = z.dtype() == DType::i(8);
    e.q_zero =
        e.q_signed ? float(*static_cast<const int8_t*>(z.data())) : float(*static_cast<const uint8_t*>(z.data()));
  }
  return at - first;
}

}  // namespace relax::rt
