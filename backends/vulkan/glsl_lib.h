// GLSL functions the generated shaders call, each defined once per shader
// that uses it (codegen_glsl.cc): the narrow float formats' codecs, f64 to
// f32 rounding to odd, and math GLSL lacks or computes loosely (erf, pow,
// tanh, log1p, expm1, f64 sin and cos).
//
// The codecs follow the cpu backend's algorithms (backends/cpu/
// backends/llvm/narrow.cc) so both targets store the same bits: encoding rounds
// to nearest even on the f32 bit pattern (multiples of the smallest step
// below the normal range), then applies the format's overflow rule
// (e4m3fn: NaN; e5m2: inf; the fnuz kinds: their one NaN; f4e2m1:
// saturate); e8m0 rounds up, as ONNX's default.
#pragma once

#include <string>

#include "ir/dtype.h"

namespace relax::vulkan {

struct GlslFunction {
  std::string name;        // what calls use
  std::string definition;  // GLSL source, ending in a newline
};

// enc_<format>(float) -> uint (the storage bits) when `encode`, else
// dec_<format>(uint) -> float. bf16 has only an encoder (decoding is a
// shift).
GlslFunction glsl_narrow_codec(TypeCode code, bool encode);
// float f64_odd_(double): round to odd, so that a later rounding to a narrow
// format is the only rounding of the f64 value.
GlslFunction glsl_f64_to_f32_odd();
// float erf_(float): Abramowitz and Stegun 7.1.26, error below 1.5e-7.
GlslFunction glsl_erf();
// float pow_(float, float): C's pow, where GLSL's is undefined: negative
// bases with integral exponents (the sign of odd ones), zeros, infinities,
// pow(1, y) and pow(x, 0) = 1; exp2(y * log2(|x|)) elsewhere.
GlslFunction glsl_pow();
// float tanh_(float): its odd series below 0.25 (the exponential form
// cancels there), (1 - e^-2|x|) / (1 + e^-2|x|) with the sign above,
// +-1 beyond 15.
GlslFunction glsl_tanh();
// float log1p_(float), float expm1_(float): accurate near 0 (Kahan's
// forms: log(u) * x / (u - 1) with u = 1 + x, and (u - 1) * x / log(u)
// with u = e^x).
GlslFunction glsl_log1p();
GlslFunction glsl_expm1();
// double sincos_f64_(double x, int shift): sin(x) for shift 0, cos(x) for
// shift 1, in f64 (GLSL has no f64 sin or cos): x reduced by pi/2 in two
// parts (Cody and Waite), then sin or cos of the rest by their series to
// r^17 and r^16 (|r| <= pi/4: below 1e-17), by quadrant.
GlslFunction glsl_sincos_f64();

}  // namespace relax::vulkan
