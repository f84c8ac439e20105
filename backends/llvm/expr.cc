// Expressions: index arithmetic, loads and stores in each storage format,
// arithmetic with the semantics ir/tir.h fixes, casts and intrinsics.
//
// Nothing here may trap or produce poison that a later instruction turns
// into undefined behaviour: integer division guards its divisor, shifts
// guard their amount, float-to-int conversions saturate.
#include <llvm/ADT/APFloat.h>
#include <llvm/IR/Intrinsics.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>

#include "backends/llvm/codegen.h"
#include "ir/analyzer.h"
#include "ir/error.h"
#include "ir/tir_functor.h"

namespace relax::llvmgen {

using llvm::Value;
namespace Intr = llvm::Intrinsic;

namespace {

bool is_sub_byte(DataType t) { return t.bits < 8; }

llvm::Type* like_lanes(llvm::Type* like, llvm::Type* elem) {
  if (auto* v = llvm::dyn_cast<llvm::VectorType>(like)) return llvm::VectorType::get(elem, v->getElementCount());
  return elem;
}

}  // namespace

// ---- Types ---------------------------------------------------------------------------------

llvm::Type* ProgramCodegen::compute_type(DataType t) {
  llvm::Type* s = nullptr;
  switch (t.code) {
    case TypeCode::Bool:
      s = b_.getInt1Ty();
      break;
    case TypeCode::Int:
    case TypeCode::UInt:
      s = b_.getIntNTy(t.bits);
      break;
    case TypeCode::Float:
      s = t.bits == 16 ? b_.getHalfTy() : t.bits == 32 ? b_.getFloatTy() : b_.getDoubleTy();
      break;
    case TypeCode::Void:
    case TypeCode::Handle:
      error(cat("values of dtype ", t, " cannot be computed on cpu"));
    default:
      s = b_.getFloatTy();
      break;
  }
  if (t.lanes == 1) return s;
  if (is_sub_byte(t) || (is_narrow_float(t) && t.code != TypeCode::BFloat))
    error(cat("vectors of ", t.element_of(), " are not supported on cpu"));
  return llvm::FixedVectorType::get(s, t.lanes);
}

llvm::Type* ProgramCodegen::storage_type(DataType t) {
  if (is_sub_byte(t)) return nullptr;
  switch (t.code) {
    case TypeCode::Bool:
      return b_.getInt8Ty();
    case TypeCode::BFloat:
      return b_.getInt16Ty();
    case TypeCode::Float:
    case TypeCode::Int:
    case TypeCode::UInt:
      return compute_type(t.element_of());
    default:
      return b_.getInt8Ty();  // the float8 kinds
  }
}

// ---- Index arithmetic ----------------------------------------------------------------------

Value* ProgramCodegen::emit_sym(const SymExpr& e) {
  const SymNode* n = e.get();
  switch (n->kind) {
    case SymKind::Const:
      return i64c(n->value);
    case SymKind::Var:
      for (auto it = vars_.rbegin(); it != vars_.rend(); ++it)
        if (it->first == e) return it->second;
      error(cat("variable '", e.name(), "' is bound by neither a buffer dim nor sym_params"));
    case SymKind::Sum: {
      Value* acc = i64c(n->constant);
      for (const SymTerm& t : n->terms) {
        Value* v = emit_sym(t.term);
        if (t.coeff == -1) {
          acc = b_.CreateNSWSub(acc, v);
          continue;
        }
        if (t.coeff != 1) v = b_.CreateNSWMul(v, i64c(t.coeff));
        acc = b_.CreateNSWAdd(acc, v);
      }
      return acc;
    }
    case SymKind::Mul: {
      Value* acc = emit_sym(n->operands[0]);
      for (size_t i = 1; i < n->operands.size(); ++i) acc = b_.CreateNSWMul(acc, emit_sym(n->operands[i]));
      return acc;
    }
    case SymKind::FloorDiv:
    case SymKind::FloorMod:
      return emit_int_div(n->kind == SymKind::FloorDiv ? tir::BinOp::FloorDiv : tir::BinOp::FloorMod,
                          emit_sym(n->operands[0]), emit_sym(n->operands[1]), true);
    case SymKind::Min:
      return b_.CreateBinaryIntrinsic(Intr::smin, emit_sym(n->operands[0]), emit_sym(n->operands[1]));
    case SymKind::Max:
      return b_.CreateBinaryIntrinsic(Intr::smax, emit_sym(n->operands[0]), emit_sym(n->operands[1]));
  }
  error("a malformed symbolic expression");
}

// Division never traps: a zero divisor is replaced by 1 (the result is
// unspecified) and x / -1 is computed as -x, which also covers INT_MIN / -1.
// FloorDiv and FloorMod round toward -inf.
Value* ProgramCodegen::emit_int_div(tir::BinOp op, Value* a, Value* b, bool is_signed) {
  llvm::Type* t = a->getType();
  Value* zero = llvm::Constant::getNullValue(t);
  Value* one = llvm::ConstantInt::get(t, 1);
  if (!is_signed) {
    Value* safe = b_.CreateSelect(b_.CreateICmpEQ(b, zero), one, b);
    return op == tir::BinOp::FloorMod ? b_.CreateURem(a, safe) : b_.CreateUDiv(a, safe);
  }
  Value* minus_one = b_.CreateICmpEQ(b, llvm::Constant::getAllOnesValue(t));
  Value* safe = b_.CreateSelect(b_.CreateOr(b_.CreateICmpEQ(b, zero), minus_one), one, b);
  Value* q = b_.CreateSelect(minus_one, b_.CreateSub(zero, a), b_.CreateSDiv(a, safe));
  Value* r = b_.CreateSRem(a, safe);  // 0 when b is -1
  if (op == tir::BinOp::Div) return q;
  Value* adjust = b_.CreateAnd(b_.CreateICmpNE(r, zero), b_.CreateICmpSLT(b_.CreateXor(r, b), zero));
  if (op == tir::BinOp::FloorDiv) return b_.CreateSelect(adjust, b_.CreateSub(q, one), q);
  return b_.CreateSelect(adjust, b_.CreateAdd(r, b), r);
}

// ---- Memory ---------------------------------------------------------------------------------

Value* ProgramCodegen::buffer_base(const tir::Buffer& buf) {
  for (auto it = buffers_.rbegin(); it != buffers_.rend(); ++it)
    if (it->first == buf.get()) return it->second;
  error(cat("buffer '", buf->name, "' is used outside its scope"));
}

Value* ProgramCodegen::to_index(const tir::TExpr& e) {
  Value* v = emit_expr(e);
  if (e->dtype.bits >= 64) return v;
  return e->dtype.is_int() ? b_.CreateSExt(v, b_.getInt64Ty()) : b_.CreateZExt(v, b_.getInt64Ty());
}

// Row-major: ((i0 * d1 + i1) * d2 + i2) ..., in elements. Where every
// index is an integer expression the offset is built and simplified as one
// (rewrites that hold for every value): a fused loop's
// [t // 192, t % 192, i, j] of a (n, 192, 2, 2) buffer is then t * 4 + i *
// 2 + j, affine in t, which LLVM can vectorise across t; dim by dim it
// kept a division and a remainder no pass undid.
Value* ProgramCodegen::element_offset(const tir::Buffer& buf, const std::vector<tir::TExpr>& indices) {
  if (indices.empty()) return i64c(0);
  if (std::all_of(indices.begin(), indices.end(), [](const tir::TExpr& e) { return tir::as<tir::SymNodeT>(e); })) {
    SymExpr off = tir::as<tir::SymNodeT>(indices[0])->value;
    for (size_t k = 1; k < indices.size(); ++k) off = off * buf->shape[k] + tir::as<tir::SymNodeT>(indices[k])->value;
    return emit_sym(Analyzer(Analyzer::Assume::Unbounded).simplify(off));
  }
  Value* off = to_index(indices[0]);
  for (size_t k = 1; k < indices.size(); ++k)
    off = b_.CreateNSWAdd(b_.CreateNSWMul(off, emit_sym(buf->shape[k])), to_index(indices[k]));
  return off;
}

Value* ProgramCodegen::emit_load(const tir::Buffer& buf, const std::vector<tir::TExpr>& indices) {
  DataType t = buf->dtype;
  llvm::Type* ct = compute_type(t);
  Value* base = buffer_base(buf);
  Value* off = element_offset(buf, indices);
  if (is_sub_byte(t)) {
    int per_byte = 8 / t.bits, log_per = per_byte == 2 ? 1 : per_byte == 4 ? 2 : 3;
    Value* byte =
        b_.CreateLoad(b_.getInt8Ty(), b_.CreateInBoundsGEP(b_.getInt8Ty(), base, b_.CreateLShr(off, log_per)));
    Value* shift = b_.CreateMul(b_.CreateTrunc(b_.CreateAnd(off, per_byte - 1), b_.getInt8Ty()), b_.getInt8(t.bits));
    Value* field = b_.CreateAnd(b_.CreateLShr(byte, shift), b_.getInt8((1 << t.bits) - 1));
    if (t.code == TypeCode::Float4E2M1) return emit_decode_narrow(t.code, field);
    return b_.CreateTrunc(field, ct);
  }
  llvm::Type* st = storage_type(t);
  if (t.lanes > 1) {
    st = llvm::FixedVectorType::get(st, t.lanes);
    off = b_.CreateNSWMul(off, i64c(t.lanes));
  }
  Value* ptr = b_.CreateInBoundsGEP(st->getScalarType(), base, off);
  llvm::LoadInst* raw = b_.CreateLoad(st, ptr, buf->name);
  annotate_access(raw, buf);
  switch (t.code) {
    case TypeCode::Bool:
      return b_.CreateICmpNE(raw, llvm::Constant::getNullValue(st));
    case TypeCode::BFloat:
      return b_.CreateBitCast(b_.CreateShl(b_.CreateZExt(raw, like_lanes(st, b_.getInt32Ty())), 16), ct);
    case TypeCode::Int:
    case TypeCode::UInt:
    case TypeCode::Float:
      return raw;
    default:
      return emit_decode_narrow(t.code, raw);
  }
}

void ProgramCodegen::emit_store(const tir::Buffer& buf, const std::vector<tir::TExpr>& indices, Value* value) {
  DataType t = buf->dtype;
  Value* base = buffer_base(buf);
  Value* off = element_offset(buf, indices);
  if (is_sub_byte(t)) {
    // Two writers may own the two halves of one byte (a parallel loop over
    // an i4 buffer), so the halves are cleared and set atomically. The last
    // element also clears the bits above it: the padding of the last byte is
    // zero, as ONNX packs it.
    int per_byte = 8 / t.bits, log_per = per_byte == 2 ? 1 : per_byte == 4 ? 2 : 3;
    Value* field = t.code == TypeCode::Float4E2M1 ? b_.CreateTrunc(emit_encode_narrow(t.code, value), b_.getInt8Ty())
                                                  : b_.CreateZExt(value, b_.getInt8Ty());
    uint8_t mask = uint8_t((1 << t.bits) - 1);
    field = b_.CreateAnd(field, b_.getInt8(mask));
    Value* ptr = b_.CreateInBoundsGEP(b_.getInt8Ty(), base, b_.CreateLShr(off, log_per));
    Value* shift = b_.CreateMul(b_.CreateTrunc(b_.CreateAnd(off, per_byte - 1), b_.getInt8Ty()), b_.getInt8(t.bits));
    Value* numel = i64c(1);
    for (const SymExpr& d : buf->shape) numel = b_.CreateNSWMul(numel, emit_sym(d));
    Value* last = b_.CreateICmpEQ(off, b_.CreateSub(numel, i64c(1)));
    Value* cleared = b_.CreateSelect(last, b_.getInt8(0xFF), b_.getInt8(mask));
    b_.CreateAtomicRMW(llvm::AtomicRMWInst::And, ptr, b_.CreateNot(b_.CreateShl(cleared, shift)), llvm::MaybeAlign(1),
                       llvm::AtomicOrdering::Monotonic);
    b_.CreateAtomicRMW(llvm::AtomicRMWInst::Or, ptr, b_.CreateShl(field, shift), llvm::MaybeAlign(1),
                       llvm::AtomicOrdering::Monotonic);
    return;
  }
  llvm::Type* st = storage_type(t);
  if (t.lanes > 1) {
    st = llvm::FixedVectorType::get(st, t.lanes);
    off = b_.CreateNSWMul(off, i64c(t.lanes));
  }
  Value* raw = value;
  switch (t.code) {
    case TypeCode::Bool:
      raw = b_.CreateZExt(value, st);
      break;
    case TypeCode::BFloat:
      raw = bf16_bits(value);
      break;
    case TypeCode::Int:
    case TypeCode::UInt:
    case TypeCode::Float:
      break;
    default:
      raw = b_.CreateTrunc(emit_encode_narrow(t.code, value), st);
      break;
  }
  annotate_access(b_.CreateStore(raw, b_.CreateInBoundsGEP(st->getScalarType(), base, off)), buf);
}

void ProgramCodegen::annotate_access(llvm::Instruction* access, const tir::Buffer& buf) {
  auto it = scopes_.find(buf.get());
  if (it == scopes_.end()) return;
  access->setMetadata(llvm::LLVMContext::MD_alias_scope, it->second.first);
  access->setMetadata(llvm::LLVMContext::MD_noalias, it->second.second);
}

// ---- Expressions -------------------------------------------------------------------------------

Value* ProgramCodegen::emit_expr(const tir::TExpr& e) {
  using tir::as;
  switch (e->kind) {
    case tir::TKind::Sym:
      return emit_sym(as<tir::SymNodeT>(e)->value);
    case tir::TKind::Imm:
      return emit_imm(*as<tir::ImmNode>(e));
    case tir::TKind::Load: {
      auto* l = as<tir::LoadNode>(e);
      return emit_load(l->buffer, l->indices);
    }
    case tir::TKind::Binary:
      return emit_binary(*as<tir::BinaryNode>(e));
    case tir::TKind::Unary:
      return emit_unary(*as<tir::UnaryNode>(e));
    case tir::TKind::Call:
      return emit_call(*as<tir::CallNodeT>(e));
    case tir::TKind::Cast: {
      auto* c = as<tir::CastNode>(e);
      return emit_cast(c->dtype, c->a->dtype, emit_expr(c->a));
    }
    case tir::TKind::Select: {
      auto* s = as<tir::SelectNode>(e);
      if (masked_vectors)
        if (Value* v = emit_guarded_select(*s)) return v;
      Value* cond = emit_expr(s->cond);
      return b_.CreateSelect(cond, emit_expr(s->a), emit_expr(s->b));
    }
  }
  error("an unknown expression kind");
}

// select(c, a, b) where c's conjuncts bound an index expression, e >= 0
// and e < n, and a reads at max(min(e, n - 1), 0): the clamp only keeps
// the read in bounds where c is false. Emitted as a branch reading at e
// (null when the pattern is absent). See masked_vectors.
Value* ProgramCodegen::emit_guarded_select(const tir::SelectNode& s) {
  if (!vector_var_.defined() || !s.cond->dtype.is_scalar()) return nullptr;
  std::vector<const tir::BinaryNode*> tests;  // the condition's conjuncts
  std::function<void(const tir::TExpr&)> conjuncts = [&](const tir::TExpr& c) {
    auto* b = tir::as<tir::BinaryNode>(c);
    if (!b) return;
    if (b->op == tir::BinOp::And) return conjuncts(b->a), conjuncts(b->b);
    tests.push_back(b);
  };
  conjuncts(s.cond);
  // e = v + rest for the vectorized loop's v, rest free of v.
  auto unit_step = [&](const SymExpr& e) {
    if (e.kind() != SymKind::Sum) return false;
    int ones = 0;
    for (const SymTerm& t : e->terms) {
      if (t.term == vector_var_ && t.coeff == 1)
        ++ones;
      else if (mentions(t.term, vector_var_))
        return false;
    }
    return ones == 1;
  };
  tir::Clamps clamps;
  for (const auto& c : tir::guarded_clamps(tests))
    if (unit_step(c.second)) clamps.push_back(c);
  if (clamps.empty()) return nullptr;
  bool changed = false;
  tir::TirRewriter r;
  r.sym = [&](const SymExpr& x) {
    SymExpr y = tir::unclamp(x, clamps);
    changed = changed || y != x;
    return y;
  };
  tir::TExpr a = r.expr(s.a);
  if (!changed) return nullptr;
  Value* cond = emit_expr(s.cond);
  auto* then_bb = llvm::BasicBlock::Create(ctx_, "guarded.read", fn_);
  auto* else_bb = llvm::BasicBlock::Create(ctx_, "guarded.pad", fn_);
  auto* merge = llvm::BasicBlock::Create(ctx_, "guarded.merge", fn_);
  b_.CreateCondBr(cond, then_bb, else_bb);
  b_.SetInsertPoint(then_bb);
  Value* va = emit_expr(a);
  llvm::BasicBlock* then_end = b_.GetInsertBlock();
  b_.CreateBr(merge);
  b_.SetInsertPoint(else_bb);
  Value* vb = emit_expr(s.b);
  llvm::BasicBlock* else_end = b_.GetInsertBlock();
  b_.CreateBr(merge);
  b_.SetInsertPoint(merge);
  llvm::PHINode* phi = b_.CreatePHI(va->getType(), 2);
  phi->addIncoming(va, then_end);
  phi->addIncoming(vb, else_end);
  return phi;
}

Value* ProgramCodegen::emit_imm(const tir::ImmNode& imm) {
  DataType t = imm.dtype.element_of();
  llvm::Constant* c = nullptr;
  if (t.is_bool()) {
    c = b_.getInt1(imm.int_value != 0);
  } else if (t.is_integer()) {
    c = llvm::ConstantInt::get(b_.getIntNTy(t.bits), uint64_t(imm.int_value));
  } else if (t.code == TypeCode::Float && t.bits == 16) {
    llvm::APFloat v(imm.float_value);
    bool lost = false;
    v.convert(llvm::APFloat::IEEEhalf(), llvm::APFloat::rmNearestTiesToEven, &lost);
    c = llvm::ConstantFP::get(ctx_, v);
  } else if (t.code == TypeCode::Float) {
    c = llvm::ConstantFP::get(compute_type(t), t.bits == 32 ? double(float(imm.float_value)) : imm.float_value);
  } else if (is_narrow_float(t)) {
    c = llvm::ConstantFP::get(b_.getFloatTy(), decode_narrow(t.code, encode_narrow(t.code, float(imm.float_value))));
  } else {
    error(cat("an immediate of dtype ", imm.dtype));
  }
  if (imm.dtype.lanes > 1) return llvm::ConstantVector::getSplat(llvm::ElementCount::getFixed(imm.dtype.lanes), c);
  return c;
}

Value* ProgramCodegen::round_result(DataType t, Value* v) {
  if (t.code != TypeCode::BFloat) return v;
  llvm::Type* i32 = like_lanes(v->getType(), b_.getInt32Ty());
  return b_.CreateBitCast(b_.CreateShl(b_.CreateZExt(bf16_bits(v), i32), 16), v->getType());
}

Value* ProgramCodegen::to_math(DataType t, Value* v) {
  if (t.code == TypeCode::Float && t.bits == 16) return b_.CreateFPExt(v, like_lanes(v->getType(), b_.getFloatTy()));
  return v;
}

Value* ProgramCodegen::from_math(DataType t, Value* v) {
  if (t.code == TypeCode::Float && t.bits == 16) return b_.CreateFPTrunc(v, compute_type(t));
  return round_result(t, v);
}

Value* ProgramCodegen::emit_binary(const tir::BinaryNode& n) {
  DataType t = n.a->dtype;
  Value* a = emit_expr(n.a);
  Value* b = emit_expr(n.b);
  if (tir::binop_is_compare(n.op)) {
    using P = llvm::CmpInst::Predicate;
    bool f = t.is_float(), s = t.is_int();
    P p;
    switch (n.op) {
      case tir::BinOp::EQ:
        p = f ? P::FCMP_OEQ : P::ICMP_EQ;
        break;
      case tir::BinOp::NE:
        p = f ? P::FCMP_UNE : P::ICMP_NE;
        break;
      case tir::BinOp::LT:
        p = f ? P::FCMP_OLT : s ? P::ICMP_SLT : P::ICMP_ULT;
        break;
      case tir::BinOp::LE:
        p = f ? P::FCMP_OLE : s ? P::ICMP_SLE : P::ICMP_ULE;
        break;
      case tir::BinOp::GT:
        p = f ? P::FCMP_OGT : s ? P::ICMP_SGT : P::ICMP_UGT;
        break;
      default:
        p = f ? P::FCMP_OGE : s ? P::ICMP_SGE : P::ICMP_UGE;
        break;
    }
    return b_.CreateCmp(p, a, b);
  }
  switch (n.op) {
    case tir::BinOp::And:
    case tir::BinOp::BitAnd:
      return b_.CreateAnd(a, b);
    case tir::BinOp::Or:
    case tir::BinOp::BitOr:
      return b_.CreateOr(a, b);
    case tir::BinOp::BitXor:
      return b_.CreateXor(a, b);
    case tir::BinOp::Shl:
    case tir::BinOp::Shr: {
      // An amount of at least the width (or negative) shifts everything
      // out: 0, or the sign for an arithmetic right shift.
      llvm::Type* ty = a->getType();
      Value* width = llvm::ConstantInt::get(ty, t.bits);
      Value* over = b_.CreateICmpUGE(b, width);
      Value* zero = llvm::Constant::getNullValue(ty);
      if (n.op == tir::BinOp::Shl) return b_.CreateSelect(over, zero, b_.CreateShl(a, b_.CreateSelect(over, zero, b)));
      if (t.is_int()) return b_.CreateAShr(a, b_.CreateSelect(over, llvm::ConstantInt::get(ty, t.bits - 1), b));
      return b_.CreateSelect(over, zero, b_.CreateLShr(a, b_.CreateSelect(over, zero, b)));
    }
    default:
      break;
  }
  if (t.is_float()) {
    a = to_math(t, a);
    b = to_math(t, b);
    Value* r = nullptr;
    switch (n.op) {
      case tir::BinOp::Add:
        r = b_.CreateFAdd(a, b);
        break;
      case tir::BinOp::Sub:
        r = b_.CreateFSub(a, b);
        break;
      case tir::BinOp::Mul:
        r = b_.CreateFMul(a, b);
        break;
      case tir::BinOp::Div:
        r = b_.CreateFDiv(a, b);
        break;
      case tir::BinOp::FloorDiv:
        r = b_.CreateUnaryIntrinsic(Intr::floor, b_.CreateFDiv(a, b));
        break;
      case tir::BinOp::FloorMod: {
        // fmod is exact; the result then takes the divisor's sign (Python).
        Value* m = b_.CreateFRem(a, b);
        Value* zero = llvm::ConstantFP::get(m->getType(), 0.0);
        Value* fix =
            b_.CreateAnd(b_.CreateFCmpONE(m, zero), b_.CreateXor(b_.CreateFCmpOLT(m, zero), b_.CreateFCmpOLT(b, zero)));
        r = b_.CreateSelect(fix, b_.CreateFAdd(m, b), m);
        break;
      }
      case tir::BinOp::Min:
      case tir::BinOp::Max: {
        // NaN in either operand gives NaN (ONNX Min/Max).
        Value* pick = n.op == tir::BinOp::Min ? b_.CreateFCmpOLT(a, b) : b_.CreateFCmpOGT(a, b);
        r = b_.CreateSelect(b_.CreateFCmpUNO(a, a), a, b_.CreateSelect(pick, a, b));
        break;
      }
      default:
        error(cat("binary '", tir::binop_text(n.op), "' on ", t));
    }
    return from_math(t, r);
  }
  bool s = t.is_int();
  switch (n.op) {
    case tir::BinOp::Add:
      return b_.CreateAdd(a, b);
    case tir::BinOp::Sub:
      return b_.CreateSub(a, b);
    case tir::BinOp::Mul:
      return b_.CreateMul(a, b);
    case tir::BinOp::Div:
    case tir::BinOp::FloorDiv:
    case tir::BinOp::FloorMod:
      return emit_int_div(n.op, a, b, s);
    case tir::BinOp::Min:
      return b_.CreateBinaryIntrinsic(s ? Intr::smin : Intr::umin, a, b);
    case tir::BinOp::Max:
      return b_.CreateBinaryIntrinsic(s ? Intr::smax : Intr::umax, a, b);
    default:
      error(cat("binary '", tir::binop_text(n.op), "' on ", t));
  }
}

Value* ProgramCodegen::emit_unary(const tir::UnaryNode& n) {
  Value* a = emit_expr(n.a);
  switch (n.op) {
    case tir::UnOp::Neg:
      return n.dtype.is_float() ? b_.CreateFNeg(a) : b_.CreateNeg(a);
    case tir::UnOp::Not:
    case tir::UnOp::BitNot:
      return b_.CreateNot(a);
  }
  error("an unknown unary operator");
}

// A libm function without an LLVM intrinsic: `name` is the double variant
// ("tanh"); f32 calls add the suffix ("tanhf"). Vectors call it per lane.
Value* ProgramCodegen::emit_libm(const char* name, DataType t, std::vector<Value*> args) {
  llvm::Type* ty = args[0]->getType();
  llvm::Type* scalar = ty->getScalarType();
  std::string fname = scalar->isDoubleTy() ? std::string(name) : std::string(name) + "f";
  std::vector<llvm::Type*> params(args.size(), scalar);
  llvm::FunctionCallee callee = mod_.getOrInsertFunction(fname, llvm::FunctionType::get(scalar, params, false));
  if (auto* f = llvm::dyn_cast<llvm::Function>(callee.getCallee())) {
    // errno is not observed, so the call is a pure function of its operands.
    f->setDoesNotAccessMemory();
    f->setDoesNotThrow();
    f->setWillReturn();
  }
  auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(ty);
  if (!vt) return b_.CreateCall(callee, args);
  Value* out = llvm::PoisonValue::get(ty);
  for (unsigned i = 0; i < vt->getNumElements(); ++i) {
    std::vector<Value*> lane;
    for (Value* a : args) lane.push_back(b_.CreateExtractElement(a, i));
    out = b_.CreateInsertElement(out, b_.CreateCall(callee, lane), i);
  }
  return out;
}

// e^x = 2^n e^r with n = round(x / ln 2) and r = x - n ln 2 (in two parts,
// |r| <= ln 2 / 2); e^r by its Taylor series to r^7 (truncation under 1e-8
// relative); 2^n built in the exponent field in two halves, so results that
// overflow to inf or underflow into subnormals come out as libm's do. x is
// clamped to [-104, 89] first, past which the result is 0 or inf anyway;
// NaN stays NaN.
Value* ProgramCodegen::emit_exp_f32(Value* x) {
  llvm::Type* ty = x->getType();
  llvm::Type* ity = like_lanes(ty, b_.getInt32Ty());
  auto c = [&](double v) { return llvm::ConstantFP::get(ty, v); };
  auto fma = [&](Value* a, Value* m, Value* add) { return b_.CreateIntrinsic(Intr::fma, {ty}, {a, m, add}); };
  Value* xc = b_.CreateBinaryIntrinsic(Intr::minnum, b_.CreateBinaryIntrinsic(Intr::maxnum, x, c(-104.0)), c(89.0));
  Value* n = b_.CreateUnaryIntrinsic(Intr::roundeven, b_.CreateFMul(xc, c(1.44269504088896341)));
  Value* r = fma(n, c(-0.693359375), xc);
  r = fma(n, c(2.12194440e-4), r);
  Value* p = c(1.0 / 5040);
  for (double k : {1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1.0, 1.0}) p = fma(p, r, c(k));
  Value* ni = b_.CreateFPToSI(n, ity);
  Value* n1 = b_.CreateAShr(ni, llvm::ConstantInt::get(ity, 1));
  Value* n2 = b_.CreateSub(ni, n1);
  auto pow2 = [&](Value* e) {
    return b_.CreateBitCast(b_.CreateShl(b_.CreateAdd(e, llvm::ConstantInt::get(ity, 127)), llvm::ConstantInt::get(ity, 23)),
                            ty);
  };
  Value* y = b_.CreateFMul(b_.CreateFMul(p, pow2(n1)), pow2(n2));
  return b_.CreateSelect(b_.CreateFCmpUNO(x, x), x, y);
}

// tanh x: for |x| < 0.5 its odd Taylor series to x^13 (truncation about
// 1e-7 relative at 0.5), else sign(x) (1 - 2 / (e^{2|x|} + 1)), which is
// 1 once e^{2|x|} overflows.
Value* ProgramCodegen::emit_tanh_f32(Value* x) {
  llvm::Type* ty = x->getType();
  auto c = [&](double v) { return llvm::ConstantFP::get(ty, v); };
  auto fma = [&](Value* a, Value* m, Value* add) { return b_.CreateIntrinsic(Intr::fma, {ty}, {a, m, add}); };
  Value* ax = b_.CreateUnaryIntrinsic(Intr::fabs, x);
  Value* x2 = b_.CreateFMul(x, x);
  Value* q = c(21844.0 / 6081075);
  for (double k : {-1382.0 / 155925, 62.0 / 2835, -17.0 / 315, 2.0 / 15, -1.0 / 3}) q = fma(q, x2, c(k));
  Value* small = fma(b_.CreateFMul(x, x2), q, x);
  Value* e = emit_exp_f32(b_.CreateFAdd(ax, ax));
  Value* t = b_.CreateFSub(c(1.0), b_.CreateFDiv(c(2.0), b_.CreateFAdd(e, c(1.0))));
  Value* large = b_.CreateBinaryIntrinsic(Intr::copysign, t, x);
  return b_.CreateSelect(b_.CreateFCmpOLT(ax, c(0.5)), small, large);
}

// erf x: for |x| < 1, x P(x^2) (degree 6); for 1 <= |x| < 3.92, a
// polynomial of degree 13 in |x| - 2.5; past 3.92 erf is 1 in f32. The
// coefficients are least-squares fits on Chebyshev nodes, made for this
// code; evaluated in f32 with fused multiply-adds they stay within 2 ulp of
// the double result over [-5, 5] (and down to subnormal x).
Value* ProgramCodegen::emit_erf_f32(Value* x) {
  llvm::Type* ty = x->getType();
  auto c = [&](double v) { return llvm::ConstantFP::get(ty, v); };
  auto fma = [&](Value* a, Value* m, Value* add) { return b_.CreateIntrinsic(Intr::fma, {ty}, {a, m, add}); };
  auto horner = [&](const std::vector<double>& k, Value* v) {
    Value* p = c(k.back());
    for (size_t i = k.size() - 1; i-- > 0;) p = fma(p, v, c(k[i]));
    return p;
  };
  static const std::vector<double> near0 = {1.128379166593154,     -0.3761262987767597,   0.11283625725085092,
                                            -0.02685539945206966,  0.005191218377404633,  -0.000803484665032328,
                                            7.933493888112597e-05};
  static const std::vector<double> far = {
      0.9995930699962846,     0.0021781225320301432,  -0.005446702525953472, 0.008352705839541232,
      -0.008615075911252401,  0.006105135230587443,   -0.0028185864513308404, 0.0005675091986707124,
      0.0002868025310243321,  -0.0002768129404038647, 6.180087422945216e-05,  2.031798841028575e-05,
      -9.117615911115404e-06, 9.481723419195627e-08};
  Value* ax = b_.CreateUnaryIntrinsic(Intr::fabs, x);
  Value* small = b_.CreateFMul(ax, horner(near0, b_.CreateFMul(ax, ax)));
  Value* large = horner(far, b_.CreateFSub(ax, c(2.5)));
  Value* r = b_.CreateSelect(b_.CreateFCmpOLT(ax, c(1.0)), small,
                             b_.CreateSelect(b_.CreateFCmpOLT(ax, c(3.92)), large, c(1.0)));
  // NaN: both comparisons are false, so r is 1; give back the NaN.
  return b_.CreateSelect(b_.CreateFCmpUNO(x, x), x, b_.CreateBinaryIntrinsic(Intr::copysign, r, x));
}

Value* ProgramCodegen::emit_shfl_xor(Value*, Value*) { error("shfl_xor: a warp shuffle outside a GPU kernel"); }

Value* ProgramCodegen::emit_call(const tir::CallNodeT& c) {
  DataType t = c.args[0]->dtype;
  std::vector<Value*> args;
  for (const tir::TExpr& a : c.args) args.push_back(emit_expr(a));
  if (c.fn == tir::Intrinsic::shfl_xor) return emit_shfl_xor(args[0], args[1]);
  if (t.is_integer()) {
    if (c.fn == tir::Intrinsic::popcount) return b_.CreateUnaryIntrinsic(Intr::ctpop, args[0]);
    if (c.fn == tir::Intrinsic::abs)
      return t.is_int() ? b_.CreateBinaryIntrinsic(Intr::abs, args[0], b_.getFalse()) : args[0];
    error(cat("intrinsic '", tir::intrinsic_name(c.fn), "' on ", t));
  }
  for (Value*& a : args) a = to_math(t, a);
  Value* x = args[0];
  llvm::Type* ty = x->getType();
  auto one = [&] { return llvm::ConstantFP::get(ty, 1.0); };
  auto unary = [&](Intr::ID id) { return b_.CreateUnaryIntrinsic(id, x); };
  auto inf = [&] { return llvm::ConstantFP::getInfinity(ty); };
  Value* r = nullptr;
  using I = tir::Intrinsic;
  // f32 exp, sigmoid and tanh inline where loops vectorise (GPU targets: their library's).
  const bool inline_f32 = vector_unit() && ty->getScalarType()->isFloatTy();
  auto exp_of = [&](Value* v) { return inline_f32 ? emit_exp_f32(v) : b_.CreateUnaryIntrinsic(Intr::exp, v); };
  switch (c.fn) {
    case I::exp:
      r = exp_of(x);
      break;
    case I::exp2:
      r = unary(Intr::exp2);
      break;
    case I::log:
      r = unary(Intr::log);
      break;
    case I::log2:
      r = unary(Intr::log2);
      break;
    case I::log1p:
      r = emit_libm("log1p", t, args);
      break;
    case I::expm1:
      r = emit_libm("expm1", t, args);
      break;
    case I::sqrt:
      r = unary(Intr::sqrt);
      break;
    case I::rsqrt:
      r = b_.CreateFDiv(one(), unary(Intr::sqrt));
      break;
    case I::tanh:
      r = inline_f32 ? emit_tanh_f32(x) : emit_libm("tanh", t, args);
      break;
    case I::sigmoid: {
      // e = e^{-|x|} never overflows: 1 / (1 + e) for x >= 0, e / (1 + e)
      // below, which keeps the tiny results 1 / (1 + e^{-x}) would lose to
      // inf. One division of the chosen numerator (a vector division takes
      // 10 to 16 cycles); a division still, not a refined reciprocal
      // estimate (2 ulp), which moved a GRU's (1 - z) * n + z * h past the
      // conformance tolerance where its terms cancel.
      Value* e = exp_of(b_.CreateFNeg(unary(Intr::fabs)));
      Value* num = b_.CreateSelect(b_.CreateFCmpOGE(x, llvm::ConstantFP::get(ty, 0.0)), one(), e);
      r = b_.CreateFDiv(num, b_.CreateFAdd(one(), e));
      break;
    }
    case I::erf:
      r = inline_f32 ? emit_erf_f32(x) : emit_libm("erf", t, args);
      break;
    case I::sin:
      r = unary(Intr::sin);
      break;
    case I::cos:
      r = unary(Intr::cos);
      break;
    case I::tan:
      r = emit_libm("tan", t, args);
      break;
    case I::asin:
      r = emit_libm("asin", t, args);
      break;
    case I::acos:
      r = emit_libm("acos", t, args);
      break;
    case I::atan:
      r = emit_libm("atan", t, args);
      break;
    case I::sinh:
      r = emit_libm("sinh", t, args);
      break;
    case I::cosh:
      r = emit_libm("cosh", t, args);
      break;
    case I::asinh:
      r = emit_libm("asinh", t, args);
      break;
    case I::acosh:
      r = emit_libm("acosh", t, args);
      break;
    case I::atanh:
      r = emit_libm("atanh", t, args);
      break;
    case I::abs:
      r = unary(Intr::fabs);
      break;
    case I::floor:
      r = unary(Intr::floor);
      break;
    case I::ceil:
      r = unary(Intr::ceil);
      break;
    case I::round:
      r = unary(Intr::roundeven);
      break;
    case I::trunc:
      r = unary(Intr::trunc);
      break;
    case I::isnan:
      return b_.CreateFCmpUNO(x, x);
    case I::isinf:
      return b_.CreateFCmpOEQ(unary(Intr::fabs), inf());
    case I::isfinite:
      return b_.CreateFCmpOLT(unary(Intr::fabs), inf());
    case I::popcount:
      error(cat("intrinsic 'popcount' on ", t));
    case I::pow:
      r = b_.CreateBinaryIntrinsic(Intr::pow, x, args[1]);
      break;
    case I::atan2:
      r = emit_libm("atan2", t, args);
      break;
    case I::fmod:
      r = b_.CreateFRem(x, args[1]);
      break;
    case I::copysign:
      r = b_.CreateBinaryIntrinsic(Intr::copysign, x, args[1]);
      break;
    case I::fma:
      r = b_.CreateIntrinsic(Intr::fma, {ty}, {x, args[1], args[2]});
      break;
    case I::shfl_xor:  // handled above
      break;
  }
  return from_math(t, r);
}

// f64 -> f32 rounded to odd, so that a second rounding to f16 gives the
// correctly rounded f16. x86 has no direct f64 -> f16 instruction and LLVM
// would otherwise call __truncdfhf2, which only newer libgcc_s provide.
Value* ProgramCodegen::f64_to_f32_odd(Value* d) {
  llvm::Type* f32 = like_lanes(d->getType(), b_.getFloatTy());
  llvm::Type* i32 = like_lanes(d->getType(), b_.getInt32Ty());
  Value* f = b_.CreateFPTrunc(d, f32);
  Value* back = b_.CreateFPExt(f, d->getType());
  Value* inexact = b_.CreateFCmpONE(back, d);
  Value* bits = b_.CreateBitCast(f, i32);
  // Truncation toward zero is one step below a result that rounded away.
  Value* away = b_.CreateFCmpOGT(b_.CreateUnaryIntrinsic(Intr::fabs, back), b_.CreateUnaryIntrinsic(Intr::fabs, d));
  Value* toward = b_.CreateSelect(away, b_.CreateSub(bits, llvm::ConstantInt::get(i32, 1)), bits);
  Value* odd = b_.CreateOr(toward, llvm::ConstantInt::get(i32, 1));
  return b_.CreateSelect(inexact, b_.CreateBitCast(odd, f32), f);
}

// float -> int as fptosi.sat / fptoui.sat: toward zero, saturating, NaN 0,
// but in compares and selects around a plain conversion of the in-range
// values, which vectorise. LLVM 16 expands the vector intrinsics on x86
// lane by lane with branches: a quantize loop's cast(i32, ..) ran scalar.
Value* ProgramCodegen::fp_to_int_sat(Value* x, bool is_signed, llvm::Type* dst) {
  llvm::Type* ft = x->getType();
  unsigned bits = dst->getScalarSizeInBits();
  // [lo, hi) holds every float that truncates into range; both are powers
  // of two (or 0), exact in any float type.
  double lo = is_signed ? -std::ldexp(1.0, int(bits) - 1) : 0.0;
  double hi = std::ldexp(1.0, is_signed ? int(bits) - 1 : int(bits));
  Value* flo = llvm::ConstantFP::get(ft, lo);
  Value* fhi = llvm::ConstantFP::get(ft, hi);
  Value* below = b_.CreateFCmpOLT(x, flo);
  Value* above = b_.CreateFCmpOGE(x, fhi);
  Value* inside = b_.CreateAnd(b_.CreateFCmpOGE(x, flo), b_.CreateFCmpOLT(x, fhi));
  Value* safe = b_.CreateSelect(inside, x, llvm::ConstantFP::get(ft, 0.0));  // NaN: 0
  Value* r = is_signed ? b_.CreateFPToSI(safe, dst) : b_.CreateFPToUI(safe, dst);
  llvm::APInt max = is_signed ? llvm::APInt::getSignedMaxValue(bits) : llvm::APInt::getMaxValue(bits);
  llvm::APInt min = is_signed ? llvm::APInt::getSignedMinValue(bits) : llvm::APInt::getMinValue(bits);
  r = b_.CreateSelect(above, llvm::ConstantInt::get(dst, max), r);
  return b_.CreateSelect(below, llvm::ConstantInt::get(dst, min), r);
}

// Casts: float -> int truncates toward zero and saturates (NaN gives 0);
// anything -> bool is != 0; narrow floats go through f32.
Value* ProgramCodegen::emit_cast(DataType to, DataType from, Value* v) {
  if (to == from) return v;
  if (from.lanes == 1 && to.lanes > 1) {
    Value* s = emit_cast(to.element_of(), from, v);
    return b_.CreateVectorSplat(to.lanes, s);
  }
  llvm::Type* dst = compute_type(to);
  bool from_f = from.is_float(), to_f = to.is_float();
  if (!from_f && !to_f) {
    if (to.is_bool()) return b_.CreateICmpNE(v, llvm::Constant::getNullValue(v->getType()));
    return b_.CreateIntCast(v, dst, from.is_int());
  }
  if (from_f && !to_f) {
    Value* x = to_math(from, v);
    if (to.is_bool()) return b_.CreateFCmpUNE(x, llvm::ConstantFP::get(x->getType(), 0.0));
    if (vector_unit()) return fp_to_int_sat(x, to.is_int(), dst);
    return b_.CreateIntrinsic(to.is_int() ? Intr::fptosi_sat : Intr::fptoui_sat, {dst, x->getType()}, {x});
  }
  // To a float. Narrow formats are reached from f32.
  bool narrow = is_narrow_float(to);
  llvm::Type* via = narrow ? like_lanes(dst, b_.getFloatTy()) : dst;
  Value* x;
  if (!from_f) {
    x = from.is_int() ? b_.CreateSIToFP(v, via) : b_.CreateUIToFP(v, via);
  } else {
    x = v;
    if (x->getType()->getScalarType()->isDoubleTy() && via->getScalarType()->isHalfTy()) x = f64_to_f32_odd(x);
    if (x->getType() != via) {
      unsigned fb = x->getType()->getScalarSizeInBits(), tb = via->getScalarSizeInBits();
      x = fb < tb ? b_.CreateFPExt(x, via) : b_.CreateFPTrunc(x, via);
    }
  }
  if (!narrow) return x;
  if (to.code == TypeCode::BFloat) return round_result(to, x);
  return emit_decode_narrow(to.code, emit_encode_narrow(to.code, x));
}

}  // namespace relax::llvmgen
