#include "backends/vulkan/glsl_lib.h"

#include <cmath>
#include <cstring>
#include <sstream>

#include "ir/error.h"

namespace relax::vulkan {
namespace {

std::string hex32(uint32_t v) {
  std::ostringstream o;
  o << "0x" << std::hex << v << "u";
  return o.str();
}

std::string f32_hex(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return "uintBitsToFloat(" + hex32(bits) + ")";
}

}  // namespace

// enc_<format>(float) -> uint bits, dec_<format>(uint) -> float.
GlslFunction glsl_narrow_codec(TypeCode code, bool enc) {
  struct F {
    const char* name;
    int man, bias;
    uint32_t max_code, sign;
    char overflow;  // n: NaN, i: inf, u: unsigned NaN, s: saturate
  };
  F f{};
  switch (code) {
    case TypeCode::BFloat: f = {"bf16", 7, 127, 0, 0, 0}; break;
    case TypeCode::Float8E8M0: f = {"e8m0", 0, 127, 0, 0, 0}; break;
    case TypeCode::Float8E4M3FN: f = {"e4m3fn", 3, 7, 0x7E, 0x80, 'n'}; break;
    case TypeCode::Float8E4M3FNUZ: f = {"e4m3fnuz", 3, 8, 0x7F, 0x80, 'u'}; break;
    case TypeCode::Float8E5M2: f = {"e5m2", 2, 15, 0x7B, 0x80, 'i'}; break;
    case TypeCode::Float8E5M2FNUZ: f = {"e5m2fnuz", 2, 16, 0x7F, 0x80, 'u'}; break;
    case TypeCode::Float4E2M1: f = {"f4e2m1", 1, 1, 0x7, 0x8, 's'}; break;
    default: fail("vulkan codegen: internal error: type code ", int(code), " is not a narrow float");
  }
  std::string name = std::string(enc ? "enc_" : "dec_") + f.name;
  std::ostringstream h;
  if (code == TypeCode::BFloat) {
    if (!enc) fail("vulkan codegen: internal error: bf16 decodes by a shift, not a function");
    h << "uint enc_bf16(float x) { uint b = floatBitsToUint(x); return isnan(x) ? ((b >> 16) | 0x40u) & 0xFFFFu : "
         "((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16) & 0xFFFFu; }\n";
  } else if (code == TypeCode::Float8E8M0) {
    if (enc)
      h << "uint enc_e8m0(float x) { uint b = floatBitsToUint(x); uint e = (b >> 23) & 0xFFu, m = b & 0x7FFFFFu; "
           "uint c = e + (e == 0u ? (m > 0x400000u ? 1u : 0u) : (m != 0u ? 1u : 0u)); "
           "return (e == 0xFFu || c > 0xFEu) ? 0xFFu : c; }\n";
    else
      h << "float dec_e8m0(uint b) { return b == 0xFFu ? uintBitsToFloat(0x7fc00000u) : ldexp(1.0, int(b) - 127); }\n";
  } else if (enc) {
    int shift = 23 - f.man;
    float tiny = std::ldexp(1.0f, 1 - f.bias), scale = std::ldexp(1.0f, f.bias + f.man - 1);
    std::string s = hex32(f.sign), mx = hex32(f.max_code);
    h << "uint " << name << "(float x) { uint b = floatBitsToUint(x); uint a = b & 0x7FFFFFFFu; "
      << "bool nan_ = a > 0x7F800000u; float af = uintBitsToFloat(a); uint c; "
      << "if (af < " << f32_hex(tiny) << ") c = uint(roundEven(af * " << f32_hex(scale) << ")); "
      << "else c = ((a + " << hex32((1u << (shift - 1)) - 1) << " + ((a >> " << shift << ") & 1u)) >> " << shift
      << ") - " << hex32(uint32_t(127 - f.bias) << f.man) << "; "
      << "bool over = !nan_ && c > " << mx << "; uint s = (b >> 31) != 0u ? " << s << " : 0u; ";
    switch (f.overflow) {
      case 'n': h << "return (nan_ || over ? 0x7Fu : c) | s; }\n"; break;
      case 'i': h << "return (nan_ ? 0x7Eu : over ? 0x7Cu : c) | s; }\n"; break;
      case 'u': h << "return nan_ || over ? 0x80u : (c == 0u ? 0u : c | s); }\n"; break;
      default: h << "return nan_ ? (" << s << " ^ s) : ((over ? " << mx << " : c) | s); }\n"; break;
    }
  } else {
    std::string s = hex32(f.sign);
    h << "float " << name << "(uint b) { uint mag = b & (" << s << " - 1u); bool neg = (b & " << s << ") != 0u; ";
    if (f.overflow == 'u') h << "if (b == 0x80u) return uintBitsToFloat(0x7fc00000u); ";
    if (f.overflow == 'n') h << "if (mag == 0x7Fu) return uintBitsToFloat(neg ? 0xffc00000u : 0x7fc00000u); ";
    if (f.overflow == 'i')
      h << "if (mag >= 0x7Cu) return uintBitsToFloat((neg ? 0x80000000u : 0u) | (mag == 0x7Cu ? 0x7f800000u : "
           "0x7fc00000u)); ";
    h << "uint e = mag >> " << f.man << ", m = mag & " << hex32((1u << f.man) - 1) << "; "
      << "float v = e == 0u ? ldexp(float(m), " << (1 - f.bias - f.man) << ") : ldexp(float(" << hex32(1u << f.man)
      << " + m), int(e) - " << (f.bias + f.man) << "); return neg ? -v : v; }\n";
  }
  return {name, h.str()};
}

GlslFunction glsl_f64_to_f32_odd() {
  return {"f64_odd_",
          "float f64_odd_(double d) { float f = float(d); if (isnan(f) || double(f) == d) return f; "
          "uint b = floatBitsToUint(f); if (abs(double(f)) > abs(d)) b -= 1u; return uintBitsToFloat(b | 1u); }\n"};
}

GlslFunction glsl_erf() {
  return {"erf_",
          "float erf_(float x) { float s = sign(x); x = abs(x); float t = 1.0 / (1.0 + 0.3275911 * x); "
          "float y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + "
          "0.254829592) * t * exp(-x * x); return s * y; }\n"};
}

GlslFunction glsl_pow() {
  return {"pow_",
          "float pow_(float x, float y) { if (y == 0.0 || x == 1.0) return 1.0; if (isnan(x) || isnan(y)) return x + y; "
          "float ax = abs(x); bool yint = floor(y) == y; if (x < 0.0 && !yint) return uintBitsToFloat(0x7fc00000u); "
          "bool odd = yint && abs(y) < 16777216.0 && mod(y, 2.0) == 1.0; float inf = uintBitsToFloat(0x7f800000u); "
          "float r; if (ax == 1.0) r = 1.0; else if (ax == 0.0) r = y < 0.0 ? inf : 0.0; "
          "else if (isinf(ax)) r = y < 0.0 ? 0.0 : inf; else if (isinf(y)) r = (ax < 1.0) == (y < 0.0) ? inf : 0.0; "
          "else r = exp2(y * log2(ax)); "
          "return odd && (x < 0.0 || (x == 0.0 && 1.0 / x < 0.0)) ? -r : r; }\n"};
}

GlslFunction glsl_tanh() {
  return {"tanh_",
          "float tanh_(float x) { float a = abs(x); if (a < 0.25) { float x2 = x * x; return x + x * x2 * "
          "(-0.33333333333 + x2 * (0.13333333333 + x2 * (-0.053968253968 + x2 * 0.021869488536))); } "
          "if (a > 15.0) return sign(x); float e = exp(-2.0 * a); return sign(x) * ((1.0 - e) / (1.0 + e)); }\n"};
}

GlslFunction glsl_log1p() {
  return {"log1p_",
          "float log1p_(float x) { float u = 1.0 + x; if (u == 1.0) return x; if (isinf(u)) return u; "
          "return log(u) * (x / (u - 1.0)); }\n"};
}

GlslFunction glsl_expm1() {
  return {"expm1_",
          "float expm1_(float x) { float u = exp(x); if (u == 1.0) return x; if (isinf(u)) return u; "
          "float um = u - 1.0; if (um == -1.0) return -1.0; return um * (x / log(u)); }\n"};
}

GlslFunction glsl_sincos_f64() {
  return {"sincos_f64_",
          "double sincos_f64_(double x, int shift) { if (isnan(x) || isinf(x)) return x - x; "
          "double k = roundEven(x * 0.63661977236758134308lf); "
          "double r = (x - k * 1.57079632673412561417lf) - k * 6.07710050650619224932e-11lf; double r2 = r * r; "
          "double s = r + r * r2 * (-1.0lf / 6.0lf + r2 * (1.0lf / 120.0lf + r2 * (-1.0lf / 5040.0lf + r2 * "
          "(1.0lf / 362880.0lf + r2 * (-1.0lf / 39916800.0lf + r2 * (1.0lf / 6227020800.0lf + r2 * "
          "(-1.0lf / 1307674368000.0lf + r2 * (1.0lf / 355687428096000.0lf)))))))); "
          "double c = 1.0lf + r2 * (-0.5lf + r2 * (1.0lf / 24.0lf + r2 * (-1.0lf / 720.0lf + r2 * (1.0lf / 40320.0lf + "
          "r2 * (-1.0lf / 3628800.0lf + r2 * (1.0lf / 479001600.0lf + r2 * (-1.0lf / 87178291200.0lf + r2 * "
          "(1.0lf / 20922789888000.0lf)))))))); "
          "int q = (int(k) + shift) & 3; return q == 0 ? s : q == 1 ? c : q == 2 ? -s : -c; }\n"};
}

}  // namespace relax::vulkan
