#include "backends/vulkan/glsl_printer.h"

#include <cmath>
#include <cstring>
#include <functional>

#include "ir/error.h"

namespace relax::vulkan {

using namespace tir;

namespace {

std::string hex32(uint32_t v) {
  std::ostringstream o;
  o << "0x" << std::hex << v << "u";
  return o.str();
}

}  // namespace

[[noreturn]] void StagePrinter::unsupported(const std::string& what) const {
  fail("vulkan codegen: prog @", prog_.name, ": ", what);
}

std::string StagePrinter::value_type(DataType t) {
  if (t.lanes != 1) unsupported(cat("vector dtype ", t));
  if (narrow_float(t)) return "float";  // computed in f32, stored in fewer bits
  if (sub_byte(t)) return t.is_int() ? "int" : "uint";
  switch (t.code) {
    case TypeCode::Bool:
      return "bool";
    case TypeCode::Float:
      if (t.bits == 32) return "float";
      if (t.bits == 16) {
        need(feat_.float16, "float16", "f16 arithmetic (shaderFloat16)");
        arith_ext_ = true;
        return "float16_t";
      }
      if (t.bits == 64) {
        need(feat_.float64, "float64", "f64 (shaderFloat64)");
        return "double";
      }
      break;
    case TypeCode::Int:
    case TypeCode::UInt: {
      bool u = t.code == TypeCode::UInt;
      if (t.bits == 32) return u ? "uint" : "int";
      if (t.bits == 64) need(feat_.int64, "int64", "64-bit integers (shaderInt64)");
      if (t.bits == 16) need(feat_.int16, "int16", "16-bit integers (shaderInt16)");
      if (t.bits == 8) need(feat_.int8, "int8", "8-bit integers (shaderInt8)");
      if (t.bits == 8 || t.bits == 16 || t.bits == 64) {
        arith_ext_ = true;
        return std::string(u ? "uint" : "int") + std::to_string(t.bits) + "_t";
      }
      break;
    }
    default:
      break;
  }
  unsupported(cat("dtype ", t, " has no Vulkan type here"));
}

std::string StagePrinter::storage_type(DataType t) {
  if (sub_byte(t)) return "uint";  // packed in 32-bit words, written atomically
  if (narrow_float(t)) {
    if (t.bits == 16) {
      need(feat_.storage16, "storage16", "16-bit storage buffers (storageBuffer16BitAccess), for bf16 tensors");
      need(feat_.int16, "int16", "16-bit integers (shaderInt16), for bf16 tensors");
      storage16_ = arith_ext_ = true;
      return "uint16_t";
    }
    need(feat_.storage8, "storage8", "8-bit storage buffers (storageBuffer8BitAccess), for float8 tensors");
    need(feat_.int8, "int8", "8-bit integers (shaderInt8), for float8 tensors");
    storage8_ = arith_ext_ = true;
    return "uint8_t";
  }
  if (t.is_bool()) {
    need(feat_.storage8, "storage8", "8-bit storage buffers (storageBuffer8BitAccess), for bool tensors");
    need(feat_.int8, "int8", "8-bit integers (shaderInt8), for bool tensors");
    storage8_ = arith_ext_ = true;
    return "uint8_t";
  }
  if (t.bits == 8) {
    need(feat_.storage8, "storage8", "8-bit storage buffers (storageBuffer8BitAccess)");
    storage8_ = true;
  }
  if (t.bits == 16) {
    need(feat_.storage16, "storage16", "16-bit storage buffers (storageBuffer16BitAccess)");
    storage16_ = true;
  }
  return value_type(t);
}

void StagePrinter::need(bool ok, const char* key, const std::string& what) {
  if (!ok) unsupported(cat("needs ", what, ", which the device lacks"));
  needs_.insert(key);
}

std::string StagePrinter::name_of(const SymExpr& v) {
  auto it = names_.find(v.get());
  if (it != names_.end()) return it->second;
  std::string n = "v_";
  for (char c : v.name()) n += isalnum(static_cast<unsigned char>(c)) ? c : '_';
  n += "_" + std::to_string(names_.size());
  names_[v.get()] = n;
  return n;
}

std::string StagePrinter::buffer_name(const Buffer& b) {
  auto it = buffers_.find(b.get());
  if (it != buffers_.end()) return it->second;
  std::string n = "b_";
  for (char c : b->name) n += isalnum(static_cast<unsigned char>(c)) ? c : '_';
  n += "_" + std::to_string(buffers_.size());
  buffers_[b.get()] = n;
  return n;
}

std::string StagePrinter::floor_helper(const std::string& type, bool mod) {
  std::string name = std::string(mod ? "fmod_" : "fdiv_") + type;
  if (helper_names_.insert(name).second) {
    helpers_ << type << " " << name << "(" << type << " a, " << type << " b) { " << type << " q = a / b; " << type
             << " r = a - q * b; if (r != " << type << "(0) && ((r < " << type << "(0)) != (b < " << type
             << "(0)))) { r += b; q -= " << type << "(1); } return " << (mod ? "r" : "q") << "; }\n";
  }
  return name;
}

std::string StagePrinter::sym(const SymExpr& e) {
  const SymNode& n = *e.get();
  switch (n.kind) {
    case SymKind::Const:
      return int_literal(n.value);
    case SymKind::Var: {
      auto it = names_.find(e.get());
      if (it == names_.end()) unsupported(cat("symbolic variable '", n.name, "' is not bound"));
      return it->second;
    }
    case SymKind::Sum: {
      std::string s = n.constant ? int_literal(n.constant) : "";
      for (const SymTerm& t : n.terms) {
        std::string term = t.coeff == 1 ? sym(t.term) : int_literal(t.coeff) + " * " + paren(sym(t.term));
        s += s.empty() ? term : " + " + term;
      }
      return s;
    }
    case SymKind::Mul: {
      std::string s;
      for (const SymExpr& f : n.operands) s += (s.empty() ? "" : " * ") + paren(sym(f));
      return s;
    }
    case SymKind::FloorDiv:
    case SymKind::FloorMod:
      return floor_helper("int", n.kind == SymKind::FloorMod) + "(" + sym(n.operands[0]) + ", " +
             sym(n.operands[1]) + ")";
    case SymKind::Min:
    case SymKind::Max:
      return std::string(n.kind == SymKind::Min ? "min(" : "max(") + sym(n.operands[0]) + ", " +
             sym(n.operands[1]) + ")";
  }
  unsupported("a symbolic expression of unknown kind");
}

std::string StagePrinter::int_literal(int64_t v) {
  if (v < INT32_MIN || v > INT32_MAX) unsupported(cat("the index constant ", v, " does not fit in 32 bits"));
  if (v == INT32_MIN) return "(-2147483647 - 1)";
  return v < 0 ? "(" + std::to_string(v) + ")" : std::to_string(v);
}

std::optional<std::string> StagePrinter::index(const TExpr& e) {
  if (const auto* s = as<SymNodeT>(e)) return sym(s->value);
  if (const auto* i = as<ImmNode>(e); i && i->dtype.is_integer() && i->int_value >= INT32_MIN &&
                                      i->int_value <= INT32_MAX)
    return int_literal(i->int_value);
  if (const auto* c = as<CastNode>(e); c && c->dtype.is_integer() && c->a->dtype.is_integer())
    return index(c->a);
  if (const auto* b = as<BinaryNode>(e); b && b->dtype.is_integer()) {
    std::optional<std::string> x = index(b->a), y = index(b->b);
    if (!x || !y) return std::nullopt;
    switch (b->op) {
      case BinOp::Add:
      case BinOp::Sub:
      case BinOp::Mul:
        return paren(*x + " " + binop_text(b->op) + " " + *y);
      case BinOp::Min:
        return "min(" + *x + ", " + *y + ")";
      case BinOp::Max:
        return "max(" + *x + ", " + *y + ")";
      case BinOp::FloorDiv:
      case BinOp::FloorMod:
        return floor_helper("int", b->op == BinOp::FloorMod) + "(" + *x + ", " + *y + ")";
      default:
        return std::nullopt;
    }
  }
  if (const auto* s = as<SelectNode>(e); s && s->dtype.is_integer()) {
    std::optional<std::string> x = index(s->a), y = index(s->b);
    if (!x || !y) return std::nullopt;
    return "(" + expr(s->cond) + " ? " + *x + " : " + *y + ")";
  }
  return std::nullopt;
}

std::string StagePrinter::as_index(const TExpr& e) {
  if (std::optional<std::string> i = index(e)) return *i;
  return "int(" + expr(e) + ")";
}

std::string StagePrinter::flat_index(const Buffer& b, const std::vector<TExpr>& idx) {
  if (idx.empty()) return "0";
  std::string s = as_index(idx[0]);
  for (size_t k = 1; k < idx.size(); ++k) s = paren(s) + " * " + paren(sym(b->shape[k])) + " + " + as_index(idx[k]);
  return s;
}

int64_t StagePrinter::chunks_of(const Buffer& b) const {
  size_t k = 0;
  for (const auto* list : {&prog_.inputs, &prog_.outputs})
    for (const Buffer& x : *list) {
      if (x == b) return k < chunks_.size() ? chunks_[k] : 1;
      ++k;
    }
  return 1;
}

std::string StagePrinter::access(const Buffer& b, const std::vector<TExpr>& idx) {
  if (b->scope == Scope::Global) {
    if (chunks_of(b) > 1) return "ld_" + buffer_name(b) + "(" + flat_index(b, idx) + ")";
    return buffer_name(b) + ".d[" + flat_index(b, idx) + "]";
  }
  if (scalars_.count(b.get())) return buffer_name(b);  // a one-element local: a plain variable
  return buffer_name(b) + "[" + flat_index(b, idx) + "]";
}

std::string StagePrinter::imm(const ImmNode& i) {
  DataType t = i.dtype;
  if (t.is_bool()) return i.int_value ? "true" : "false";
  if (t.is_float()) {
    if (t.bits == 64) {
      value_type(t);
      uint64_t bits;
      std::memcpy(&bits, &i.float_value, 8);
      return "packDouble2x32(uvec2(" + hex32(uint32_t(bits)) + ", " + hex32(uint32_t(bits >> 32)) + "))";
    }
    float f = float(i.float_value);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    std::string s = "uintBitsToFloat(" + hex32(bits) + ")";
    return t.bits == 32 ? s : value_type(t) + "(" + s + ")";
  }
  std::string type = value_type(t);
  if (t.bits == 32 && t.is_int()) return int_literal(i.int_value);
  if (t.bits == 32) return std::to_string(uint32_t(i.int_value)) + "u";
  if (t.bits == 64) {
    if (t.is_uint()) return std::to_string(uint64_t(i.int_value)) + "ul";
    if (i.int_value == INT64_MIN) return "(-9223372036854775807l - 1l)";
    return i.int_value < 0 ? "(" + std::to_string(i.int_value) + "l)" : std::to_string(i.int_value) + "l";
  }
  return type + "(" + std::to_string(i.int_value) + ")";
}

std::string StagePrinter::expr(const TExpr& e) {
  switch (e->kind) {
    case TKind::Sym:
      value_type(DataType::i64());
      return "int64_t(" + sym(as<SymNodeT>(e)->value) + ")";
    case TKind::Imm:
      return imm(*as<ImmNode>(e));
    case TKind::Load: {
      const auto* l = as<LoadNode>(e);
      DataType t = l->buffer->dtype;
      if (l->buffer->scope == Scope::Global && sub_byte(t)) return decode(t, packed_load(l->buffer, l->indices));
      std::string a = access(l->buffer, l->indices);
      if (auto it = hoisted_.find(a); it != hoisted_.end()) a = it->second;
      if (t.is_bool() && l->buffer->scope == Scope::Global) return "(" + a + " != uint8_t(0))";
      if (narrow_float(t) && l->buffer->scope == Scope::Global) return decode(t, "uint(" + a + ")");
      return a;
    }
    case TKind::Binary:
      return round_bf16(e->dtype, binary(*as<BinaryNode>(e)));
    case TKind::Unary: {
      const auto* u = as<UnaryNode>(e);
      std::string a = expr(u->a);
      if (u->op == UnOp::Neg) return "(-" + paren(a) + ")";
      if (u->op == UnOp::Not || u->a->dtype.is_bool()) return "(!" + paren(a) + ")";
      return "(~" + paren(a) + ")";
    }
    case TKind::Call:
      return round_bf16(e->dtype, call(*as<CallNodeT>(e)));
    case TKind::Cast: {
      const auto* c = as<CastNode>(e);
      DataType to = c->dtype, from = c->a->dtype;
      std::string a = expr(c->a);
      if (to == from) return a;
      if (narrow_float(to) && !from.is_bool()) {
        // Reached through f32 (an f64 through round-to-odd, so that one
        // rounding decides), then rounded to the format.
        std::string x = from.is_float() && from.bits == 64 ? use(glsl_f64_to_f32_odd()) + "(" + a + ")" : "float(" + a + ")";
        return round_narrow(to, x);
      }
      if (sub_byte(to) && !from.is_bool()) {
        int64_t b = to.bits;
        if (from.is_float()) {  // saturating, as the cpu backend's fptosi.sat
          std::string lo = to.is_int() ? std::to_string(-(int64_t(1) << (b - 1))) : "0";
          std::string hi = std::to_string(to.is_int() ? (int64_t(1) << (b - 1)) - 1 : (int64_t(1) << b) - 1);
          std::string f = "float(" + a + ")";
          return "(isnan(" + f + ") ? " + value_type(to) + "(0) : " + value_type(to) + "(clamp(" + f + ", " + lo +
                 ".0, " + hi + ".0)))";
        }
        if (to.is_int())  // the low bits, sign-extended
          return "((int(" + a + ") << " + std::to_string(32 - b) + ") >> " + std::to_string(32 - b) + ")";
        return "(uint(" + a + ") & " + std::to_string((1 << b) - 1) + "u)";
      }
      if (to.is_bool()) return "(" + a + " != " + value_type(from) + "(0))";
      if (from.is_bool()) return "(" + a + " ? " + value_type(to) + "(1) : " + value_type(to) + "(0))";
      if (to.is_int() && to.bits == 64 && from.is_int() && from.bits <= 32) {
        // Sign extension by arithmetic: lavapipe (Mesa 22.3) compares an
        // i32 widened by a plain conversion as if it were unsigned
        // (int64_t(-1) < 0 is false there).
        std::string i = from.bits == 32 ? a : "int(" + a + ")";
        return "(int64_t(uint(" + i + ")) - ((" + i + ") < 0 ? (int64_t(1) << 32) : int64_t(0)))";
      }
      return value_type(to) + "(" + a + ")";
    }
    case TKind::Select: {
      const auto* s = as<SelectNode>(e);
      return "(" + expr(s->cond) + " ? " + expr(s->a) + " : " + expr(s->b) + ")";
    }
  }
  unsupported("an expression of unknown kind");
}

std::string StagePrinter::binary(const BinaryNode& b) {
  DataType t = b.a->dtype;
  if (binop_is_compare(b.op)) {
    std::optional<std::string> x = index(b.a), y = index(b.b);
    if (x && y) return "(" + *x + " " + binop_text(b.op) + " " + *y + ")";
  }
  std::string x = expr(b.a), y = expr(b.b);
  auto infix = [&](const char* op) { return "(" + x + " " + op + " " + y + ")"; };
  switch (b.op) {
    case BinOp::Add:
    case BinOp::Sub:
    case BinOp::Mul:
    case BinOp::Div:
      return infix(binop_text(b.op));
    case BinOp::FloorDiv:
    case BinOp::FloorMod:
      if (t.is_float()) {
        std::string q = "floor(" + x + " / " + y + ")";
        return b.op == BinOp::FloorDiv ? q : "(" + x + " - " + y + " * " + q + ")";
      }
      if (t.bits == 8 || t.bits == 16) {  // in int, then back
        std::string type = value_type(t);
        return type + "(" + floor_helper("int", b.op == BinOp::FloorMod) + "(int(" + x + "), int(" + y + ")))";
      }
      return floor_helper(value_type(t), b.op == BinOp::FloorMod) + "(" + x + ", " + y + ")";
    case BinOp::Min:
    case BinOp::Max: {
      bool is_min = b.op == BinOp::Min;
      if (t.is_bool()) return infix(is_min ? "&&" : "||");
      if (!t.is_float()) {
        // GLSL.std.450's integer min/max wants 32 bits or more here: narrower ones compare in int.
        if (t.bits < 32)
          return value_type(t) + "(" + (is_min ? "min(int(" : "max(int(") + x + "), int(" + y + ")))";
        return std::string(is_min ? "min(" : "max(") + x + ", " + y + ")";
      }
      // NaN propagates, as the cpu backend's minimum / maximum.
      std::string type = value_type(t), name = std::string(is_min ? "fmin_" : "fmax_") + type;
      if (helper_names_.insert(name).second)
        helpers_ << type << " " << name << "(" << type << " a, " << type << " b) { return isnan(a) || isnan(b) ? a + b : "
                 << (is_min ? "min" : "max") << "(a, b); }\n";
      return name + "(" + x + ", " + y + ")";
    }
    case BinOp::EQ:
    case BinOp::NE:
    case BinOp::LT:
    case BinOp::LE:
    case BinOp::GT:
    case BinOp::GE:
      if (t.is_bool()) {
        x = "int(" + x + ")";
        y = "int(" + y + ")";
      }
      return infix(binop_text(b.op));
    case BinOp::And:
      return infix("&&");
    case BinOp::Or:
      return infix("||");
    case BinOp::BitAnd:
      return infix(t.is_bool() ? "&&" : "&");
    case BinOp::BitOr:
      return infix(t.is_bool() ? "||" : "|");
    case BinOp::BitXor:
      return infix(t.is_bool() ? "^^" : "^");
    case BinOp::Shl:
    case BinOp::Shr:
      return infix(binop_text(b.op));
  }
  unsupported("an unknown binary operator");
}

std::string StagePrinter::call(const CallNodeT& c) {
  DataType t = c.args[0]->dtype;
  std::vector<std::string> a;
  for (const TExpr& x : c.args) a.push_back(expr(x));
  if (c.fn == Intrinsic::abs && t.is_integer()) return "(" + a[0] + " < " + value_type(t) + "(0) ? -" + a[0] + " : " + a[0] + ")";
  if (c.fn == Intrinsic::popcount) return value_type(c.dtype) + "(bitCount(" + a[0] + "))";
  if (!t.is_float()) unsupported(cat("intrinsic ", intrinsic_name(c.fn), " on ", t));
  if (t.is_float() && t.bits == 64 && (c.fn == Intrinsic::sin || c.fn == Intrinsic::cos))
    return use(glsl_sincos_f64()) + "(" + a[0] + (c.fn == Intrinsic::sin ? ", 0)" : ", 1)");
  // Math in f32 (GLSL's f16 and f64 have few functions), back to the type.
  bool wide = t.bits != 32;
  for (std::string& s : a)
    if (wide) s = "float(" + s + ")";
  std::string x = a[0];
  std::string r;
  switch (c.fn) {
    case Intrinsic::exp: r = "exp(" + x + ")"; break;
    case Intrinsic::exp2: r = "exp2(" + x + ")"; break;
    case Intrinsic::log: r = "log(" + x + ")"; break;
    case Intrinsic::log2: r = "log2(" + x + ")"; break;
    case Intrinsic::log1p: r = use(glsl_log1p()) + "(" + x + ")"; break;
    case Intrinsic::expm1: r = use(glsl_expm1()) + "(" + x + ")"; break;
    case Intrinsic::sqrt: r = "sqrt(" + x + ")"; break;
    case Intrinsic::rsqrt: r = "(1.0 / sqrt(" + x + "))"; break;
    case Intrinsic::tanh: r = use(glsl_tanh()) + "(" + x + ")"; break;
    case Intrinsic::sigmoid: r = "(1.0 / (1.0 + exp(-" + x + ")))"; break;
    case Intrinsic::erf: r = use(glsl_erf()) + "(" + x + ")"; break;
    case Intrinsic::sin: r = "sin(" + x + ")"; break;
    case Intrinsic::cos: r = "cos(" + x + ")"; break;
    case Intrinsic::tan: r = "tan(" + x + ")"; break;
    case Intrinsic::asin: r = "asin(" + x + ")"; break;
    case Intrinsic::acos: r = "acos(" + x + ")"; break;
    case Intrinsic::atan: r = "atan(" + x + ")"; break;
    case Intrinsic::sinh: r = "sinh(" + x + ")"; break;
    case Intrinsic::cosh: r = "cosh(" + x + ")"; break;
    case Intrinsic::asinh: r = "asinh(" + x + ")"; break;
    case Intrinsic::acosh: r = "acosh(" + x + ")"; break;
    case Intrinsic::atanh: r = "atanh(" + x + ")"; break;
    case Intrinsic::abs: r = "abs(" + x + ")"; break;
    case Intrinsic::floor: r = "floor(" + x + ")"; break;
    case Intrinsic::ceil: r = "ceil(" + x + ")"; break;
    case Intrinsic::round: r = "roundEven(" + x + ")"; break;
    case Intrinsic::trunc: r = "trunc(" + x + ")"; break;
    case Intrinsic::isnan: return "isnan(" + x + ")";
    case Intrinsic::isinf: return "isinf(" + x + ")";
    case Intrinsic::isfinite: return "!(isnan(" + x + ") || isinf(" + x + "))";
    case Intrinsic::pow: r = use(glsl_pow()) + "(" + x + ", " + a[1] + ")"; break;
    case Intrinsic::atan2: r = "atan(" + x + ", " + a[1] + ")"; break;
    case Intrinsic::fmod: r = "(" + x + " - " + a[1] + " * trunc(" + x + " / " + a[1] + "))"; break;
    case Intrinsic::copysign:
      r = "((" + a[1] + " < 0.0 || (" + a[1] + " == 0.0 && 1.0 / " + a[1] + " < 0.0)) ? -abs(" + x + ") : abs(" + x + "))";
      break;
    case Intrinsic::fma: r = "fma(" + x + ", " + a[1] + ", " + a[2] + ")"; break;
    default: unsupported(cat("intrinsic ", intrinsic_name(c.fn)));
  }
  return wide ? value_type(c.dtype) + "(" + r + ")" : r;
}

std::string StagePrinter::hoist_loads(const Stmt& body) {
  std::vector<Stmt> stmts;
  if (const auto* q = as<SeqNode>(body))
    stmts = q->stmts;
  else
    stmts = {body};
  for (const Stmt& x : stmts)
    if (x->kind != SKind::Store) return "";
  std::map<std::string, std::pair<int, TExpr>> seen;  // a load's text -> its count, the load
  std::vector<std::string> order;
  std::function<void(const TExpr&)> walk = [&](const TExpr& e) {
    switch (e->kind) {
      case TKind::Load: {
        const auto* l = as<LoadNode>(e);
        bool input = false;
        for (const Buffer& b : prog_.inputs) input = input || b == l->buffer;
        DataType lt = l->buffer->dtype;
        if (!input || lt.is_bool() || narrow_float(lt) || sub_byte(lt)) return;
        std::string a = access(l->buffer, l->indices);
        auto [it, fresh] = seen.try_emplace(a, 0, e);
        if (fresh) order.push_back(a);
        ++it->second.first;
        return;
      }
      case TKind::Binary:
        walk(as<BinaryNode>(e)->a);
        walk(as<BinaryNode>(e)->b);
        return;
      case TKind::Unary:
        walk(as<UnaryNode>(e)->a);
        return;
      case TKind::Cast:
        walk(as<CastNode>(e)->a);
        return;
      case TKind::Call:
        for (const TExpr& a : as<CallNodeT>(e)->args) walk(a);
        return;
      case TKind::Select:  // both branches are evaluated (ir/tir.h): their loads are safe
        walk(as<SelectNode>(e)->cond);
        walk(as<SelectNode>(e)->a);
        walk(as<SelectNode>(e)->b);
        return;
      default:
        return;  // immediates, indices
    }
  };
  for (const Stmt& x : stmts) walk(as<StoreNode>(x)->value);
  std::ostringstream o;
  std::map<std::string, std::string> hoisted;
  for (const std::string& a : order) {
    const auto& [count, load] = seen[a];
    if (count < 2) continue;
    std::string name = "ld" + std::to_string(loads_++) + "_";
    o << pad() << value_type(load->dtype) << " " << name << " = " << expr(load)
      << ";\n";
    hoisted[a] = name;
  }
  hoisted_ = std::move(hoisted);
  return o.str();
}

std::string StagePrinter::packed_bit(const Buffer& b, const std::vector<TExpr>& idx) {
  return "(uint(" + flat_index(b, idx) + ") * " + std::to_string(b->dtype.bits) + "u)";
}

std::string StagePrinter::packed_load(const Buffer& b, const std::vector<TExpr>& idx) {
  std::string bit = packed_bit(b, idx);
  return "((" + buffer_name(b) + ".d[" + bit + " >> 5] >> (" + bit + " & 31u)) & " +
         std::to_string((1 << b->dtype.bits) - 1) + "u)";
}

std::string StagePrinter::packed_store(const Buffer& b, const std::vector<TExpr>& idx, const std::string& value) {
  DataType t = b->dtype;
  std::string mask = std::to_string((1 << t.bits) - 1) + "u";
  std::string field = t.code == TypeCode::Float4E2M1 ? encode(t, value) : "uint(" + value + ")";
  std::string numel = "1";
  for (const SymExpr& d : b->shape) numel += " * " + paren(sym(d));
  std::ostringstream o;
  o << pad() << "{\n";
  o << pad() << "  uint pb_ = " << packed_bit(b, idx) << ";\n";
  o << pad() << "  uint sh_ = pb_ & 31u;\n";
  o << pad() << "  uint clear_ = " << mask << " << sh_;\n";
  o << pad() << "  if (pb_ == uint(" << numel << " - 1) * " << int(t.bits)
    << "u) clear_ = ((1u << ((sh_ & ~7u) + 8u - sh_)) - 1u) << sh_;\n";
  o << pad() << "  atomicAnd(" << buffer_name(b) << ".d[pb_ >> 5], ~clear_);\n";
  o << pad() << "  atomicOr(" << buffer_name(b) << ".d[pb_ >> 5], ((" << field << ") & " << mask << ") << sh_);\n";
  o << pad() << "}\n";
  return o.str();
}

std::string StagePrinter::decode(DataType t, const std::string& bits) {
  if (t.is_uint() && sub_byte(t)) return bits;
  if (t.is_int()) return "(int(" + bits + " << " + std::to_string(32 - t.bits) + ") >> " + std::to_string(32 - t.bits) + ")";
  if (t.code == TypeCode::BFloat) return "uintBitsToFloat(" + bits + " << 16)";
  return use(glsl_narrow_codec(t.code, false)) + "(" + bits + ")";
}

std::string StagePrinter::encode(DataType t, const std::string& value) {
  return use(glsl_narrow_codec(t.code, true)) + "(" + value + ")";
}

std::string StagePrinter::round_narrow(DataType t, const std::string& value) {
  if (t.code == TypeCode::BFloat) return "uintBitsToFloat(" + encode(t, value) + " << 16)";
  return decode(t, encode(t, value));
}

std::string StagePrinter::round_bf16(DataType t, const std::string& value) {
  return t.code == TypeCode::BFloat ? round_narrow(t, value) : value;
}

std::string StagePrinter::use(const GlslFunction& f) {
  if (helper_names_.insert(f.name).second) helpers_ << f.definition;
  return f.name;
}

std::string StagePrinter::stmt(const Stmt& s) {
  std::ostringstream o;
  switch (s->kind) {
    case SKind::For: {
      const auto* f = as<ForNode>(s);
      if (f->loop_kind >= LoopKind::BlockX)
        unsupported(cat("loop '", f->var.name(), "' is already bound to ", loop_kind_text(f->loop_kind)));
      std::string v = name_of(f->var);
      o << pad() << "for (int " << v << " = 0; " << v << " < " << sym(f->extent) << "; ++" << v << ") {\n";
      ++ind_;
      o << hoist_loads(f->body);
      o << stmt(f->body);
      hoisted_.clear();
      --ind_;
      o << pad() << "}\n";
      return o.str();
    }
    case SKind::Store: {
      const auto* st = as<StoreNode>(s);
      std::string v = expr(st->value);
      DataType t = st->buffer->dtype;
      bool global = st->buffer->scope == Scope::Global;
      if (global && sub_byte(t)) return packed_store(st->buffer, st->indices, v);
      if (t.is_bool() && global) v = "(" + v + " ? uint8_t(1) : uint8_t(0))";
      if (narrow_float(t)) v = global ? storage_type(t) + "(" + encode(t, v) + ")" : round_narrow(t, v);
      o << pad() << access(st->buffer, st->indices) << " = " << v << ";\n";
      return o.str();
    }
    case SKind::Seq:
      for (const Stmt& x : as<SeqNode>(s)->stmts) o << stmt(x);
      return o.str();
    case SKind::IfThenElse: {
      const auto* i = as<IfThenElseNode>(s);
      o << pad() << "if (" << expr(i->cond) << ") {\n";
      ++ind_;
      o << stmt(i->then_case);
      --ind_;
      if (i->else_case) {
        o << pad() << "} else {\n";
        ++ind_;
        o << stmt(i->else_case);
        --ind_;
      }
      o << pad() << "}\n";
      return o.str();
    }
    case SKind::Allocate: {
      const auto* a = as<AllocateNode>(s);
      const Buffer& b = a->buffer;
      bool shared = b->scope == Scope::Shared && in_block_;
      if (b->scope != Scope::Local && !shared)
        unsupported(cat("buffer '", b->name, "' in ", scope_name(b->scope), " memory"));
      int64_t n = 1;
      for (const SymExpr& d : b->shape) {
        if (!d.is_const()) unsupported(cat(scope_name(b->scope), " buffer '", b->name, "' of symbolic size"));
        n *= d.const_value();
      }
      if (shared) {  // the workgroup's, declared at file scope
        shared_ << "shared " << value_type(b->dtype) << " " << buffer_name(b) << "[" << n << "];\n";
      } else if (n == 1) {
        scalars_.insert(b.get());
        o << pad() << value_type(b->dtype) << " " << buffer_name(b) << ";\n";
      } else {
        o << pad() << value_type(b->dtype) << " " << buffer_name(b) << "[" << std::max<int64_t>(n, 1) << "];\n";
      }
      o << stmt(a->body);
      return o.str();
    }
    case SKind::Barrier:
      if (!in_block_) unsupported("a barrier outside a workgroup schedule");
      return pad() + "barrier();\n";
  }
  unsupported("a statement of unknown kind");
}

}  // namespace relax::vulkan
