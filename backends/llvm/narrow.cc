// The narrow float formats: bf16, the ONNX float8 kinds and f4e2m1.
//
// Their values are computed in f32. Decoding (bits -> f32) is a table
// lookup built here from the format's definition; encoding (f32 -> bits)
// rounds to nearest even on the f32 bit pattern, which is exact for every
// format whose mantissa is shorter than f32's. The host functions and the
// emitted code follow one algorithm, so immediates and run-time casts agree.
#include <bit>
#include <cmath>

#include "backends/llvm/codegen.h"
#include "ir/error.h"

namespace relax::llvmgen {

using llvm::Value;

namespace {

// What a value beyond the largest finite one becomes (ONNX saturate=0;
// f4e2m1 has no NaN or inf and always saturates). NaNs keep their sign where
// the format has signed NaNs, as in the ONNX reference (ml_dtypes): e4m3fn's
// NaN is 0x7F, e5m2's quiet NaN 0x7E, the fnuz kinds' 0x80; f4e2m1 writes a
// NaN as the code of -0 (0x8), negated (+0) for a negative NaN.
enum class Overflow { NaN, Inf, UnsignedNaN, Saturate };

constexpr uint32_t kE5M2QuietNaN = 0x7E;

struct Format {
  int man_bits;
  int bias;
  uint32_t max_code;  // the largest finite magnitude
  uint32_t sign_bit;
  Overflow overflow;
};

Format format_of(TypeCode c) {
  switch (c) {
    case TypeCode::Float8E4M3FN:
      return {3, 7, 0x7E, 0x80, Overflow::NaN};
    case TypeCode::Float8E4M3FNUZ:
      return {3, 8, 0x7F, 0x80, Overflow::UnsignedNaN};
    case TypeCode::Float8E5M2:
      return {2, 15, 0x7B, 0x80, Overflow::Inf};
    case TypeCode::Float8E5M2FNUZ:
      return {2, 16, 0x7F, 0x80, Overflow::UnsignedNaN};
    case TypeCode::Float4E2M1:
      return {1, 1, 0x7, 0x8, Overflow::Saturate};
    default:
      fail("cpu codegen: internal error: ", int(c), " is not a float8/f4 format");
  }
}

uint32_t rne_shift(uint32_t bits, int shift) {
  return (bits + ((1u << (shift - 1)) - 1) + ((bits >> shift) & 1)) >> shift;
}

}  // namespace

bool is_narrow_float(DataType t) { return t.is_float() && t.code != TypeCode::Float; }

uint32_t encode_narrow(TypeCode code, float x) {
  uint32_t bits = std::bit_cast<uint32_t>(x);
  uint32_t sign = bits >> 31, a = bits & 0x7FFFFFFF;
  bool nan = a > 0x7F800000;
  if (code == TypeCode::BFloat) return nan ? ((bits >> 16) | 0x40) : rne_shift(bits, 16);
  if (code == TypeCode::Float8E8M0) {
    // A power of two, no sign: ONNX's default rounding mode, "up".
    uint32_t e = (bits >> 23) & 0xFF, m = bits & 0x7FFFFF;
    uint32_t c = e + (e == 0 ? m > 0x400000 : m != 0);
    return e == 0xFF || c > 0xFE ? 0xFF : c;
  }
  Format f = format_of(code);
  float af = std::bit_cast<float>(a);
  uint32_t c;
  if (af < std::ldexp(1.0f, 1 - f.bias))  // subnormal in the target: a multiple of its smallest step
    c = uint32_t(std::nearbyint(af * std::ldexp(1.0f, f.bias + f.man_bits - 1)));
  else
    c = rne_shift(a, 23 - f.man_bits) - (uint32_t(127 - f.bias) << f.man_bits);
  bool over = !nan && c > f.max_code;
  uint32_t s = sign ? f.sign_bit : 0;
  switch (f.overflow) {
    case Overflow::NaN:
      return (nan || over ? 0x7F : c) | s;
    case Overflow::Inf:
      return (nan ? kE5M2QuietNaN : over ? 0x7C : c) | s;
    case Overflow::UnsignedNaN:
      return nan || over ? 0x80 : c == 0 ? 0 : c | s;
    case Overflow::Saturate:
      return nan ? f.sign_bit ^ s : (over ? f.max_code : c) | s;
  }
  return 0;
}

float decode_narrow(TypeCode code, uint32_t bits) {
  if (code == TypeCode::BFloat) return std::bit_cast<float>(bits << 16);
  if (code == TypeCode::Float8E8M0) return bits == 0xFF ? NAN : std::ldexp(1.0f, int(bits) - 127);
  Format f = format_of(code);
  uint32_t mag = bits & (f.sign_bit - 1);
  bool neg = bits & f.sign_bit;
  if (f.overflow == Overflow::UnsignedNaN && bits == 0x80) return NAN;
  float sign = neg ? -1.0f : 1.0f;
  if (f.overflow == Overflow::NaN && mag == 0x7F) return std::copysign(NAN, sign);
  if (f.overflow == Overflow::Inf && mag >= 0x7C) return std::copysign(mag == 0x7C ? INFINITY : NAN, sign);
  uint32_t e = mag >> f.man_bits, m = mag & ((1u << f.man_bits) - 1);
  float v = e == 0 ? std::ldexp(float(m), 1 - f.bias - f.man_bits)
                   : std::ldexp(float((1u << f.man_bits) + m), int(e) - f.bias - f.man_bits);
  return neg ? -v : v;
}

// ---- Emitted conversions ----------------------------------------------------------------

namespace {

// `elem`, or a vector of it with as many lanes as `like`.
llvm::Type* like_lanes(llvm::Type* like, llvm::Type* elem) {
  if (auto* v = llvm::dyn_cast<llvm::VectorType>(like)) return llvm::VectorType::get(elem, v->getElementCount());
  return elem;
}

}  // namespace

Value* ProgramCodegen::bf16_bits(Value* x) {
  llvm::Type* i32 = like_lanes(x->getType(), b_.getInt32Ty());
  auto c = [&](uint32_t v) { return llvm::ConstantInt::get(i32, v); };
  Value* bits = b_.CreateBitCast(x, i32);
  Value* hi = b_.CreateLShr(bits, c(16));
  Value* rounded = b_.CreateLShr(b_.CreateAdd(b_.CreateAdd(bits, c(0x7FFF)), b_.CreateAnd(hi, c(1))), c(16));
  // A NaN stays a NaN: rounding its payload could carry it into inf.
  Value* r = b_.CreateSelect(b_.CreateFCmpUNO(x, x), b_.CreateOr(hi, c(0x40)), rounded);
  return b_.CreateTrunc(r, like_lanes(x->getType(), b_.getInt16Ty()));
}

Value* ProgramCodegen::emit_encode_narrow(TypeCode code, Value* x) {
  if (code == TypeCode::BFloat) return b_.CreateZExt(bf16_bits(x), b_.getInt32Ty());
  auto c = [&](uint32_t v) { return b_.getInt32(v); };
  Value* bits = b_.CreateBitCast(x, b_.getInt32Ty());
  if (code == TypeCode::Float8E8M0) {
    Value* e = b_.CreateAnd(b_.CreateLShr(bits, c(23)), c(0xFF));
    Value* m = b_.CreateAnd(bits, c(0x7FFFFF));
    Value* up = b_.CreateSelect(b_.CreateICmpEQ(e, c(0)), b_.CreateICmpUGT(m, c(0x400000)), b_.CreateICmpNE(m, c(0)));
    Value* r = b_.CreateAdd(e, b_.CreateZExt(up, b_.getInt32Ty()));
    return b_.CreateSelect(b_.CreateOr(b_.CreateICmpEQ(e, c(0xFF)), b_.CreateICmpUGT(r, c(0xFE))), c(0xFF), r);
  }
  Format f = format_of(code);
  Value* sign = b_.CreateLShr(bits, c(31));
  Value* a = b_.CreateAnd(bits, c(0x7FFFFFFF));
  Value* af = b_.CreateBitCast(a, b_.getFloatTy());
  Value* nan = b_.CreateICmpUGT(a, c(0x7F800000));
  Value* scaled = b_.CreateFMul(af, llvm::ConstantFP::get(b_.getFloatTy(), std::ldexp(1.0, f.bias + f.man_bits - 1)));
  Value* sub = b_.CreateIntrinsic(llvm::Intrinsic::fptoui_sat, {b_.getInt32Ty(), b_.getFloatTy()},
                                  {b_.CreateUnaryIntrinsic(llvm::Intrinsic::roundeven, scaled)});
  int shift = 23 - f.man_bits;
  Value* rounded = b_.CreateLShr(
      b_.CreateAdd(b_.CreateAdd(a, c((1u << (shift - 1)) - 1)), b_.CreateAnd(b_.CreateLShr(a, c(shift)), c(1))),
      c(shift));
  Value* normal = b_.CreateSub(rounded, c(uint32_t(127 - f.bias) << f.man_bits));
  Value* is_sub = b_.CreateFCmpOLT(af, llvm::ConstantFP::get(b_.getFloatTy(), std::ldexp(1.0, 1 - f.bias)));
  Value* code_v = b_.CreateSelect(is_sub, sub, normal);
  Value* over = b_.CreateAnd(b_.CreateNot(nan), b_.CreateICmpUGT(code_v, c(f.max_code)));
  Value* s = b_.CreateSelect(b_.CreateICmpNE(sign, c(0)), c(f.sign_bit), c(0));
  switch (f.overflow) {
    case Overflow::NaN:
      return b_.CreateOr(b_.CreateSelect(b_.CreateOr(nan, over), c(0x7F), code_v), s);
    case Overflow::Inf:
      return b_.CreateOr(b_.CreateSelect(nan, c(kE5M2QuietNaN), b_.CreateSelect(over, c(0x7C), code_v)), s);
    case Overflow::UnsignedNaN:
      return b_.CreateSelect(b_.CreateOr(nan, over), c(0x80),
                             b_.CreateSelect(b_.CreateICmpEQ(code_v, c(0)), c(0), b_.CreateOr(code_v, s)));
    case Overflow::Saturate:
      return b_.CreateSelect(nan, b_.CreateXor(c(f.sign_bit), s),
                             b_.CreateOr(b_.CreateSelect(over, c(f.max_code), code_v), s));
  }
  return nullptr;
}

Value* ProgramCodegen::emit_decode_narrow(TypeCode code, Value* bits) {
  if (code == TypeCode::BFloat)
    return b_.CreateBitCast(b_.CreateShl(b_.CreateZExt(bits, b_.getInt32Ty()), 16), b_.getFloatTy());
  int entries = code == TypeCode::Float4E2M1 ? 16 : 256;
  std::string name = "relax.decode." + DataType(code, entries == 16 ? 4 : 8).str();
  auto* table_type = llvm::ArrayType::get(b_.getFloatTy(), entries);
  llvm::GlobalVariable* table = mod_.getNamedGlobal(name);
  if (!table) {
    std::vector<llvm::Constant*> values;
    for (int i = 0; i < entries; ++i)
      values.push_back(llvm::ConstantFP::get(b_.getFloatTy(), decode_narrow(code, uint32_t(i))));
    table = new llvm::GlobalVariable(mod_, table_type, true, llvm::GlobalValue::PrivateLinkage,
                                     llvm::ConstantArray::get(table_type, values), name);
    table->setUnnamedAddr(llvm::GlobalValue::UnnamedAddr::Global);
  }
  Value* idx = b_.CreateZExt(bits, b_.getInt64Ty());
  return b_.CreateLoad(b_.getFloatTy(), b_.CreateInBoundsGEP(table_type, table, {b_.getInt64(0), idx}));
}

}  // namespace relax::llvmgen
