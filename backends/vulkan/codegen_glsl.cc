#include "backends/vulkan/codegen_glsl.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

#include "backends/common/gpu_schedule.h"
#include "backends/vulkan/glsl_lib.h"
#include "ir/error.h"

namespace relax::vulkan {
namespace {

using namespace tir;

std::string hex32(uint32_t v) {
  std::ostringstream o;
  o << "0x" << std::hex << v << "u";
  return o.str();
}

class StagePrinter {
 public:
  StagePrinter(const ProgramNode& p, const GlslFeatures& f, const std::vector<SymExpr>& push_vars, uint32_t block)
      : prog_(p), feat_(f), push_vars_(push_vars), block_(block) {}

  std::string print(const GpuStage& st) {
    for (const SymExpr& v : push_vars_) name_of(v);
    std::ostringstream body;
    ind_ = 1;
    for (size_t k = 0; k < push_vars_.size(); ++k)
      body << "  int " << name_of(push_vars_[k]) << " = pc.p" << k << ";\n";
    if (st.vars.empty()) {
      body << "  if (gl_GlobalInvocationID.x == 0u) {\n";
      ind_ = 2;
      body << stmt(st.body);
      body << "  }\n";
    } else {
      std::string total;
      for (const SymExpr& e : st.extents) total += (total.empty() ? "" : " * ") + paren(sym(e));
      body << "  int total_ = " << total << ";\n";
      body << "  for (int flat_ = int(gl_GlobalInvocationID.x); flat_ < total_; flat_ += int(gl_NumWorkGroups.x) * "
           << block_ << ") {\n";
      ind_ = 2;
      body << unflatten("flat_", st.vars, st.extents);
      body << stmt(st.body);
      body << "  }\n";
    }
    return finish(body.str());
  }

  // One row per workgroup (gpu_rows): the row's loops split over the
  // workgroup's threads; reductions combine through shared memory.
  std::string print_rows(const GpuStage& st, const GpuRows& rows) {
    for (const SymExpr& v : push_vars_) name_of(v);
    std::ostringstream body;
    ind_ = 1;
    for (size_t k = 0; k < push_vars_.size(); ++k)
      body << "  int " << name_of(push_vars_[k]) << " = pc.p" << k << ";\n";
    std::string total;
    for (const SymExpr& e : st.extents) total += (total.empty() ? "" : " * ") + paren(sym(e));
    body << "  int lid_ = int(gl_LocalInvocationID.x);\n";
    body << "  int rows_ = " << total << ";\n";
    body << "  for (int row_ = int(gl_WorkGroupID.x); row_ < rows_; row_ += int(gl_NumWorkGroups.x)) {\n";
    ind_ = 2;
    body << unflatten("row_", st.vars, st.extents);
    for (const Buffer& b : rows.locals) {
      scalars_.insert(b.get());
      body << pad() << value_type(b->dtype) << " " << buffer_name(b) << ";\n";
    }
    for (const GpuRowStep& step : rows.steps) {
      switch (step.kind) {
        case GpuRowStep::Kind::Serial:
          body << stmt(step.stmt);
          break;
        case GpuRowStep::Kind::Global:
          body << pad() << "if (lid_ == 0) {\n";
          ++ind_;
          body << stmt(step.stmt);
          --ind_;
          body << pad() << "}\n";
          break;
        case GpuRowStep::Kind::Spread:
          body << strided(*as<ForNode>(step.stmt));
          break;
        case GpuRowStep::Kind::Reduce:
          body << reduce(step);
          break;
      }
      if (step.barrier_after) body << pad() << "memoryBarrierBuffer();\n" << pad() << "barrier();\n";
    }
    body << "  }\n";
    return finish(body.str());
  }

 private:
  // Declares `vars` (row-major over `extents`, the last fastest) from the
  // flat index `flat`.
  std::string unflatten(const std::string& flat, const std::vector<SymExpr>& vars,
                        const std::vector<SymExpr>& extents) {
    std::ostringstream o;
    o << pad() << "int rest_ = " << flat << ";\n";
    for (size_t k = vars.size(); k-- > 0;) {
      std::string e = paren(sym(extents[k]));
      o << pad() << "int " << name_of(vars[k]) << " = rest_ % " << e << ";\n";
      if (k > 0) o << pad() << "rest_ /= " << e << ";\n";
    }
    return o.str();
  }

  // A loop whose iterations are split over the workgroup's threads.
  std::string strided(const ForNode& f) {
    std::ostringstream o;
    std::string v = name_of(f.var);
    o << pad() << "for (int " << v << " = lid_; " << v << " < " << sym(f.extent) << "; " << v << " += " << block_
      << ") {\n";
    ++ind_;
    o << stmt(f.body);
    --ind_;
    o << pad() << "}\n";
    return o.str();
  }

  // A perfect nest of loops flattened into one index space split over the
  // workgroup's threads (a reduction over several axes).
  std::string strided_nest(const ForNode& f) {
    std::vector<const ForNode*> chain{&f};
    while (const auto* g = as<ForNode>(chain.back()->body)) chain.push_back(g);
    if (chain.size() == 1) return strided(f);
    std::ostringstream o;
    std::string total;
    for (const ForNode* c : chain) total += (total.empty() ? "" : " * ") + paren(sym(c->extent));
    std::string flat = "nest" + std::to_string(loads_++) + "_";
    o << pad() << "for (int " << flat << " = lid_; " << flat << " < " << total << "; " << flat << " += " << block_
      << ") {\n";
    ++ind_;
    std::vector<SymExpr> vars, extents;
    for (const ForNode* c : chain) {
      vars.push_back(c->var);
      extents.push_back(c->extent);
    }
    o << unflatten(flat, vars, extents);
    o << stmt(chain.back()->body);
    --ind_;
    o << pad() << "}\n";
    return o.str();
  }

  // acc = op(acc, reduction over the nest), every thread getting the result.
  std::string reduce(const GpuRowStep& step) {
    const Buffer& acc = step.acc;
    DataType t = acc->dtype;
    std::string ty = value_type(t);
    // The shared array for this value type, declared once.
    std::string red = "red_" + std::to_string(reductions_.size());
    if (auto it = reductions_.find(ty); it != reductions_.end())
      red = it->second;
    else
      reductions_[ty] = red;
    // op on two scalars, printed as the body prints it (NaN-propagating min/max).
    auto a = make_buffer("ra", t, {SymExpr(int64_t(1))}, Scope::Local);
    auto b = make_buffer("rb", t, {SymExpr(int64_t(1))}, Scope::Local);
    scalars_.insert(a.get());
    scalars_.insert(b.get());
    buffers_[a.get()] = "ra_";
    buffers_[b.get()] = "rb_";
    keep_.push_back(a);
    keep_.push_back(b);
    std::string combine = expr(tir::binary(step.op, tir::load(a, {tir::sym(SymExpr(int64_t(0)))}), tir::load(b, {tir::sym(SymExpr(int64_t(0)))})));
    std::string identity;
    switch (step.op) {
      case BinOp::Add: identity = ty + "(0)"; break;
      case BinOp::Mul: identity = ty + "(1)"; break;
      case BinOp::Max:
      case BinOp::Min: {
        bool mx = step.op == BinOp::Max;
        if (t.is_float())
          identity = ty + "(uintBitsToFloat(" + std::string(mx ? "0xff800000u" : "0x7f800000u") + "))";
        else if (t.is_uint())
          identity = mx ? ty + "(0)" : ty + "(~" + ty + "(0))";
        else
          identity = mx ? ty + "(" + ty + "(1) << " + std::to_string(t.bits - 1) + ")"
                        : ty + "(~(" + ty + "(1) << " + std::to_string(t.bits - 1) + "))";
        break;
      }
      default:
        unsupported("a reduction of this kind in a workgroup");
    }
    std::string accv = buffer_name(acc);
    std::ostringstream o;
    o << pad() << "{\n";
    ++ind_;
    o << pad() << ty << " init_ = " << accv << ";\n";
    o << pad() << accv << " = " << identity << ";\n";
    o << strided_nest(*as<ForNode>(step.stmt));
    if (use_subgroups_ && t.bits == 32 && t.lanes == 1) {
      // Each subgroup combines its lanes (subgroup arithmetic), the
      // subgroups' partials meet in shared memory, and every thread
      // combines those: two barriers instead of a tree's log2(block).
      subgroup_ = true;
      const char* fn = step.op == BinOp::Add ? "subgroupAdd" : step.op == BinOp::Mul ? "subgroupMul"
                       : step.op == BinOp::Max ? "subgroupMax" : "subgroupMin";
      std::string part = std::string(fn) + "(" + accv + ")";
      if (t.is_float() && (step.op == BinOp::Max || step.op == BinOp::Min))  // NaN wins, as in the tree
        part = "(subgroupAny(isnan(" + accv + ")) ? uintBitsToFloat(0x7fc00000u) : " + part + ")";
      o << pad() << ty << " part_ = " << part << ";\n";
      o << pad() << "if (gl_SubgroupInvocationID == 0u) " << red << "[gl_SubgroupID] = part_;\n";
      o << pad() << "barrier();\n";
      o << pad() << "{ " << ty << " ra_ = init_; for (uint g_ = 0u; g_ < gl_NumSubgroups; ++g_) { " << ty
        << " rb_ = " << red << "[g_]; ra_ = " << combine << "; } " << accv << " = ra_; }\n";
      o << pad() << "barrier();\n";
      --ind_;
      o << pad() << "}\n";
      return o.str();
    }
    o << pad() << red << "[lid_] = " << accv << ";\n";
    o << pad() << "barrier();\n";
    o << pad() << "for (int s_ = " << block_ / 2 << "; s_ > 0; s_ >>= 1) {\n";
    o << pad() << "  if (lid_ < s_) { " << ty << " ra_ = " << red << "[lid_]; " << ty << " rb_ = " << red
      << "[lid_ + s_]; " << red << "[lid_] = " << combine << "; }\n";
    o << pad() << "  barrier();\n";
    o << pad() << "}\n";
    o << pad() << "{ " << ty << " ra_ = init_; " << ty << " rb_ = " << red << "[0]; " << accv << " = " << combine
      << "; }\n";
    o << pad() << "barrier();\n";
    --ind_;
    o << pad() << "}\n";
    return o.str();
  }

  std::string finish(const std::string& body) {
    std::ostringstream decls;
    int binding = 0;
    for (const auto* list : {&prog_.inputs, &prog_.outputs})
      for (const Buffer& b : *list) {
        bool input = list == &prog_.inputs;
        decls << "layout(std430, set = 0, binding = " << binding << ") " << (input ? "readonly " : "") << "buffer B"
              << binding << " { " << storage_type(b->dtype) << " d[]; } " << buffer_name(b) << ";\n";
        ++binding;
      }
    if (!push_vars_.empty()) {
      decls << "layout(push_constant) uniform Push {";
      for (size_t k = 0; k < push_vars_.size(); ++k) decls << " int p" << k << ";";
      decls << " } pc;\n";
    }
    // The extensions the types above and in the body need.
    std::ostringstream out;
    out << "#version 450\n";
    if (arith_ext_) out << "#extension GL_EXT_shader_explicit_arithmetic_types : require\n";
    if (storage8_) out << "#extension GL_EXT_shader_8bit_storage : require\n";
    if (storage16_) out << "#extension GL_EXT_shader_16bit_storage : require\n";
    if (subgroup_) out << "#extension GL_KHR_shader_subgroup_arithmetic : require\n#extension GL_KHR_shader_subgroup_vote : require\n";
    out << "layout(local_size_x = " << block_ << ") in;\n";
    out << decls.str();
    for (const auto& [ty, name] : reductions_) out << "shared " << ty << " " << name << "[" << block_ << "];\n";
    out << helpers_.str();
    out << "void main() {\n" << body << "}\n";
    return out.str();
  }

  [[noreturn]] void unsupported(const std::string& what) const {
    fail("vulkan codegen: prog @", prog_.name, ": ", what);
  }

  // ---- types ----
  std::string value_type(DataType t) {
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
  std::string storage_type(DataType t) {
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
  void need(bool ok, const char* key, const std::string& what) {
    if (!ok) unsupported(cat("needs ", what, ", which the device lacks"));
    needs_.insert(key);
  }

 public:
  std::set<std::string> needs_;  // the device features the stage uses

 private:

  // ---- names ----
  std::string name_of(const SymExpr& v) {
    auto it = names_.find(v.get());
    if (it != names_.end()) return it->second;
    std::string n = "v_";
    for (char c : v.name()) n += isalnum(static_cast<unsigned char>(c)) ? c : '_';
    n += "_" + std::to_string(names_.size());
    names_[v.get()] = n;
    return n;
  }
  std::string buffer_name(const Buffer& b) {
    auto it = buffers_.find(b.get());
    if (it != buffers_.end()) return it->second;
    std::string n = "b_";
    for (char c : b->name) n += isalnum(static_cast<unsigned char>(c)) ? c : '_';
    n += "_" + std::to_string(buffers_.size());
    buffers_[b.get()] = n;
    return n;
  }
  static std::string paren(const std::string& s) { return "(" + s + ")"; }

  // ---- integer helpers (floor division and modulo, Python's) ----
  std::string floor_helper(const std::string& type, bool mod) {
    std::string name = std::string(mod ? "fmod_" : "fdiv_") + type;
    if (helper_names_.insert(name).second) {
      helpers_ << type << " " << name << "(" << type << " a, " << type << " b) { " << type << " q = a / b; " << type
               << " r = a - q * b; if (r != " << type << "(0) && ((r < " << type << "(0)) != (b < " << type
               << "(0)))) { r += b; q -= " << type << "(1); } return " << (mod ? "r" : "q") << "; }\n";
    }
    return name;
  }

  // ---- symbolic integers, as 32-bit ints ----
  std::string sym(const SymExpr& e) {
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
  std::string int_literal(int64_t v) {
    if (v < INT32_MIN || v > INT32_MAX) unsupported(cat("the index constant ", v, " does not fit in 32 bits"));
    if (v == INT32_MIN) return "(-2147483647 - 1)";
    return v < 0 ? "(" + std::to_string(v) + ")" : std::to_string(v);
  }

  // The expression as a 32-bit index when it is made of symbolic values
  // and integer immediates only.
  std::optional<std::string> index(const TExpr& e) {
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
  std::string as_index(const TExpr& e) {
    if (std::optional<std::string> i = index(e)) return *i;
    return "int(" + expr(e) + ")";
  }
  std::string flat_index(const Buffer& b, const std::vector<TExpr>& idx) {
    if (idx.empty()) return "0";
    std::string s = as_index(idx[0]);
    for (size_t k = 1; k < idx.size(); ++k) s = paren(s) + " * " + paren(sym(b->shape[k])) + " + " + as_index(idx[k]);
    return s;
  }
  std::string access(const Buffer& b, const std::vector<TExpr>& idx) {
    if (b->scope == Scope::Global) return buffer_name(b) + ".d[" + flat_index(b, idx) + "]";
    if (scalars_.count(b.get())) return buffer_name(b);  // a one-element local: a plain variable
    return buffer_name(b) + "[" + flat_index(b, idx) + "]";
  }

  // ---- scalar expressions, each of its dtype's value type ----
  std::string imm(const ImmNode& i) {
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

  std::string expr(const TExpr& e) {
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
        return value_type(to) + "(" + a + ")";
      }
      case TKind::Select: {
        const auto* s = as<SelectNode>(e);
        return "(" + expr(s->cond) + " ? " + expr(s->a) + " : " + expr(s->b) + ")";
      }
    }
    unsupported("an expression of unknown kind");
  }

  std::string binary(const BinaryNode& b) {
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

  std::string call(const CallNodeT& c) {
    DataType t = c.args[0]->dtype;
    std::vector<std::string> a;
    for (const TExpr& x : c.args) a.push_back(expr(x));
    if (c.fn == Intrinsic::abs && t.is_integer()) return "(" + a[0] + " < " + value_type(t) + "(0) ? -" + a[0] + " : " + a[0] + ")";
    if (c.fn == Intrinsic::popcount) return value_type(c.dtype) + "(bitCount(" + a[0] + "))";
    if (!t.is_float()) unsupported(cat("intrinsic ", intrinsic_name(c.fn), " on ", t));
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
      case Intrinsic::log1p: r = "(abs(" + x + ") < 1e-4 ? " + x + " - 0.5 * " + x + " * " + x + " : log(1.0 + " + x + "))"; break;
      case Intrinsic::expm1: r = "(abs(" + x + ") < 1e-4 ? " + x + " + 0.5 * " + x + " * " + x + " : exp(" + x + ") - 1.0)"; break;
      case Intrinsic::sqrt: r = "sqrt(" + x + ")"; break;
      case Intrinsic::rsqrt: r = "(1.0 / sqrt(" + x + "))"; break;
      case Intrinsic::tanh: r = "tanh(clamp(" + x + ", -15.0, 15.0))"; break;
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
      case Intrinsic::pow: r = "pow(" + x + ", " + a[1] + ")"; break;
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
  // erf(x) with the rational approximation of Abramowitz and Stegun 7.1.26
  // (absolute error below 1.5e-7).

  // A loop body of stores only (a register tile's jammed copies) reads
  // the same input element many times: each such load is read once into a
  // variable at the top of the body. Only loads of inputs (read-only) that
  // every iteration makes qualify (a select evaluates both branches).
  std::string hoist_loads(const Stmt& body) {
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

  // ---- narrow types: the float8 kinds, f4e2m1 and bf16 computed in f32;
  // 2- and 4-bit integers in 32-bit ints. All stored as the cpu backend
  // stores them (backends/cpu/codegen_narrow.cc, same algorithms). ----
  static bool narrow_float(DataType t) { return t.is_float() && t.code != TypeCode::Float; }
  static bool sub_byte(DataType t) { return t.bits < 8 && !t.is_bool(); }

  // Word and bit of element `flat` of a packed buffer.
  std::string packed_bit(const Buffer& b, const std::vector<TExpr>& idx) {
    return "(uint(" + flat_index(b, idx) + ") * " + std::to_string(b->dtype.bits) + "u)";
  }
  std::string packed_load(const Buffer& b, const std::vector<TExpr>& idx) {
    std::string bit = packed_bit(b, idx);
    return "((" + buffer_name(b) + ".d[" + bit + " >> 5] >> (" + bit + " & 31u)) & " +
           std::to_string((1 << b->dtype.bits) - 1) + "u)";
  }
  // Two threads may own fields of one word: each clears and sets its own
  // bits atomically. The last element also clears the rest of its byte
  // (ONNX packs the padding as zero).
  std::string packed_store(const Buffer& b, const std::vector<TExpr>& idx, const std::string& value) {
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

  // Storage bits (a uint expression) to the value type, and back.
  std::string decode(DataType t, const std::string& bits) {
    if (t.is_uint() && sub_byte(t)) return bits;
    if (t.is_int()) return "(int(" + bits + " << " + std::to_string(32 - t.bits) + ") >> " + std::to_string(32 - t.bits) + ")";
    if (t.code == TypeCode::BFloat) return "uintBitsToFloat(" + bits + " << 16)";
    return use(glsl_narrow_codec(t.code, false)) + "(" + bits + ")";
  }
  std::string encode(DataType t, const std::string& value) {
    return use(glsl_narrow_codec(t.code, true)) + "(" + value + ")";
  }
  std::string round_narrow(DataType t, const std::string& value) {
    if (t.code == TypeCode::BFloat) return "uintBitsToFloat(" + encode(t, value) + " << 16)";
    return decode(t, encode(t, value));
  }
  std::string round_bf16(DataType t, const std::string& value) {
    return t.code == TypeCode::BFloat ? round_narrow(t, value) : value;
  }


  // A library function (glsl_lib.h), defined once per shader.
  std::string use(const GlslFunction& f) {
    if (helper_names_.insert(f.name).second) helpers_ << f.definition;
    return f.name;
  }

  // ---- statements ----
  std::string pad() const { return std::string(size_t(ind_) * 2, ' '); }
  std::string stmt(const Stmt& s) {
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
        if (b->scope != Scope::Local) unsupported(cat("buffer '", b->name, "' in ", scope_name(b->scope), " memory"));
        int64_t n = 1;
        for (const SymExpr& d : b->shape) {
          if (!d.is_const()) unsupported(cat("local buffer '", b->name, "' of symbolic size"));
          n *= d.const_value();
        }
        if (n == 1) {
          scalars_.insert(b.get());
          o << pad() << value_type(b->dtype) << " " << buffer_name(b) << ";\n";
        } else {
          o << pad() << value_type(b->dtype) << " " << buffer_name(b) << "[" << std::max<int64_t>(n, 1) << "];\n";
        }
        o << stmt(a->body);
        return o.str();
      }
      case SKind::Barrier:
        unsupported("a barrier outside a workgroup schedule");
    }
    unsupported("a statement of unknown kind");
  }

  const ProgramNode& prog_;
  const GlslFeatures& feat_;
  const std::vector<SymExpr>& push_vars_;
  uint32_t block_;
  int ind_ = 1;
  bool arith_ext_ = false, storage8_ = false, storage16_ = false;
  std::unordered_map<const SymNode*, std::string> names_;
  std::unordered_map<const BufferNode*, std::string> buffers_;
  std::set<const BufferNode*> scalars_;
  std::map<std::string, std::string> reductions_;  // value type -> its shared array
  std::map<std::string, std::string> hoisted_;     // a load's text -> the variable holding it
 public:
  bool use_subgroups_ = false;  // reductions in a workgroup may use subgroup arithmetic
  bool subgroup_ = false;       // ... and one did
 private:
  int loads_ = 0;
  std::vector<Buffer> keep_;                       // buffers made while printing
  std::set<std::string> helper_names_;
  std::ostringstream helpers_;
};

}  // namespace

GlslProgram glsl_program(const tir::Program& p, const GlslFeatures& features, uint32_t block,
                         const GlslSchedule& schedule) {
  GlslProgram out;
  out.block = block;
  // Push constants: plain variable dims of the parameters, then sym params.
  std::set<const SymNode*> seen;
  for (const auto* list : {&p->inputs, &p->outputs})
    for (const tir::Buffer& b : *list)
      for (const SymExpr& d : b->shape)
        if (d.is_var() && seen.insert(d.get()).second) out.push_vars.push_back(d);
  for (const SymExpr& s : p->sym_params)
    if (seen.insert(s.get()).second) out.push_vars.push_back(s);
  std::vector<GpuStage> stages = gpu_stages(p);
  for (size_t k = 0; k < stages.size(); ++k) {
    GlslStage st;
    st.name = stages.size() == 1 ? p->name : p->name + "_s" + std::to_string(k);
    // A thread per row, with a register tile of rows where that shares loads.
    std::optional<GpuStage> tiled = gpu_register_tile(stages[k], schedule.tile_rows, schedule.tile_cols);
    const GpuStage& per_thread = tiled ? *tiled : stages[k];
    StagePrinter printer(*p, features, out.push_vars, block);
    st.source = printer.print(per_thread);
    st.extents = per_thread.extents;
    if (tiled) {
      StagePrinter pp(*p, features, out.push_vars, block);
      st.plain_source = pp.print(stages[k]);
      st.plain_extents = stages[k].extents;
      st.tile = schedule.tile_rows * schedule.tile_cols;
    }
    out.needs.insert(printer.needs_.begin(), printer.needs_.end());
    // The workgroup schedule, unless its rows are known to be short: the
    // runtime would never pick it (it wants 256 iterations or more).
    std::optional<GpuRows> rows = gpu_rows(stages[k]);
    if (rows && rows->work.is_const() && rows->work.const_value() < schedule.min_row_work) rows.reset();
    if (rows) {
      StagePrinter rp(*p, features, out.push_vars, block);
      rp.use_subgroups_ = features.subgroup_arithmetic;
      st.rows_source = rp.print_rows(stages[k], *rows);
      if (rp.subgroup_) st.rows_needs.insert("subgroup_arithmetic");
      st.rows_work = rows->work;
      st.rows_extents = stages[k].extents;
      out.needs.insert(rp.needs_.begin(), rp.needs_.end());
    }
    out.stages.push_back(std::move(st));
  }
  return out;
}

}  // namespace relax::vulkan
