// GLSL functions the generated shaders call, each defined once per shader
// that uses it (codegen_glsl.cc): the narrow float formats' codecs, f64 to
// f32 rounding to odd, erf.
//
// The codecs follow the cpu backend's algorithms (backends/cpu/
// codegen_narrow.cc) so both targets store the same bits: encoding rounds
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

}  // namespace relax::vulkan
