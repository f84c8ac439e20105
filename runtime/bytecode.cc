#include "runtime/bytecode.h"

#include <cstring>
#include <sstream>

#include "runtime/error.h"

namespace relax::rt {
namespace {

// Format 2 added the kernel signatures.
constexpr char kMagic[8] = {'R', 'X', 'B', 'C', 'O', 'D', 'E', '2'};
constexpr char kMagicV1[8] = {'R', 'X', 'B', 'C', 'O', 'D', 'E', '1'};

class Writer {
 public:
  void u8(uint8_t v) { out_.push_back(char(v)); }
  void i64(int64_t v) { out_.append(reinterpret_cast<const char*>(&v), 8); }
  void f64(double v) { out_.append(reinterpret_cast<const char*>(&v), 8); }
  void str(const std::string& s) {
    i64(int64_t(s.size()));
    out_ += s;
  }
  void raw(const char* p, size_t n) { out_.append(p, n); }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view b) : b_(b) {}
  void need(size_t n) {
    if (b_.size() - pos_ < n) throw Error("bytecode: truncated at byte " + std::to_string(pos_));
  }
  uint8_t u8() {
    need(1);
    return uint8_t(b_[pos_++]);
  }
  int64_t i64() {
    need(8);
    int64_t v;
    std::memcpy(&v, b_.data() + pos_, 8);
    pos_ += 8;
    return v;
  }
  double f64() {
    need(8);
    double v;
    std::memcpy(&v, b_.data() + pos_, 8);
    pos_ += 8;
    return v;
  }
  // A count of items each at least `min_item` bytes long: bounded by what is left.
  size_t count(size_t min_item) {
    int64_t n = i64();
    if (n < 0 || uint64_t(n) > (b_.size() - pos_) / std::max<size_t>(min_item, 1))
      throw Error("bytecode: bad count " + std::to_string(n) + " at byte " + std::to_string(pos_ - 8));
    return size_t(n);
  }
  std::string str() {
    size_t n = count(1);
    std::string s(b_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  std::string_view raw(size_t n) {
    need(n);
    auto v = b_.substr(pos_, n);
    pos_ += n;
    return v;
  }
  bool done() const { return pos_ == b_.size(); }

 private:
  std::string_view b_;
  size_t pos_ = 0;
};

const char* callee_kind_name(CalleeKind k) {
  switch (k) {
    case CalleeKind::Function:
      return "fn";
    case CalleeKind::Kernel:
      return "kernel";
    case CalleeKind::Builtin:
      return "builtin";
  }
  return "?";
}

}  // namespace

bool KernelSignature::takes_syms() const {
  int64_t dims = 0;
  for (int64_t r : ranks) dims += r;
  return num_shape_args > dims;
}

int Executable::find_function(std::string_view name) const {
  for (size_t i = 0; i < functions.size(); ++i)
    if (functions[i].name == name) return int(i);
  return -1;
}

std::string Executable::serialize() const {
  Writer w;
  w.raw(kMagic, 8);
  w.i64(int64_t(constants.size()));
  for (const Constant& c : constants) {
    w.u8(uint8_t(c.kind));
    w.i64(c.i);
    w.f64(c.f);
    w.str(c.s);
    w.i64(int64_t(c.list.size()));
    for (int64_t v : c.list) w.i64(v);
  }
  for (const auto* names : {&kernels, &builtins}) {
    w.i64(int64_t(names->size()));
    for (const std::string& n : *names) w.str(n);
  }
  for (const KernelSignature& k : kernel_signatures) {
    w.i64(int64_t(k.dtypes.size()));
    for (size_t i = 0; i < k.dtypes.size(); ++i) {
      w.i64(k.dtypes[i]);
      w.i64(k.ranks[i]);
    }
    w.i64(k.num_shape_args);
  }
  w.i64(int64_t(functions.size()));
  for (const Function& f : functions) {
    w.str(f.name);
    w.i64(int64_t(f.params.size()));
    for (const std::string& p : f.params) w.str(p);
    w.i64(f.num_registers);
    w.i64(f.heap_size);
    w.i64(int64_t(f.code.size()));
    for (const Instr& in : f.code) {
      w.u8(uint8_t(in.op));
      w.i64(in.dst);
      w.u8(uint8_t(in.callee_kind));
      w.i64(in.callee);
      w.i64(in.offset);
      w.i64(int64_t(in.args.size()));
      for (const Arg& a : in.args) {
        w.u8(uint8_t(a.kind));
        w.i64(a.value);
      }
    }
  }
  return w.take();
}

namespace {

// What is wrong with shape pattern `pat` for a function of `heap_size`
// slots (`match`: relax.match_shape's, else make_shape's); empty when whole.
std::string pattern_problem(const std::vector<int64_t>& pat, bool match, int64_t heap_size) {
  namespace P = ShapePattern;
  if (pat.empty()) return "empty shape pattern";
  int64_t ndim = pat[0];
  if (ndim < -2 || ndim > kMaxShapeLength)
    return "shape pattern of rank " + std::to_string(ndim) + " (at most " + std::to_string(kMaxShapeLength) + ")";
  if (ndim == -1) return match ? (pat.size() == 1 ? "" : "trailing words in a shape pattern") : "make_shape of any rank";
  size_t k = 1;
  for (int64_t i = 0, n = ndim == -2 ? 1 : ndim; i < n; ++i) {
    if (k >= pat.size()) return "shape pattern ends early";
    int64_t tag = pat[k];
    if (match && tag == P::kAny) {
      k += 1;
    } else if (match && tag == P::kBind) {
      if (k + 4 > pat.size()) return "shape pattern ends early";
      if (pat[k + 1] < 0 || pat[k + 1] >= heap_size) return "shape pattern binds a slot out of range";
      k += 4;
    } else if (tag == P::kExpr) {
      if (k + 2 > pat.size()) return "shape pattern ends early";
      int64_t len = pat[k + 1];
      if (len < 1 || size_t(len) > pat.size() - k - 2) return "shape code length out of range";
      // The stack discipline and the slots, as eval_shape_code runs it.
      int64_t depth = 0;
      for (size_t j = k + 2, end = k + 2 + size_t(len); j < end; ++j) {
        int64_t op = pat[j];
        if (op == P::kPushConst || op == P::kPushSlot) {
          if (++j >= end) return "shape code ends inside an operand";
          if (op == P::kPushSlot && (pat[j] < 0 || pat[j] >= heap_size)) return "shape code reads a slot out of range";
          if (++depth > kMaxShapeCodeDepth)
            return "shape code too deep (more than " + std::to_string(kMaxShapeCodeDepth) + " values on its stack)";
        } else if (op >= P::kAdd && op <= P::kMax) {
          if (depth-- < 2) return "shape code pops an empty stack";
        } else {
          return "shape code has bad op " + std::to_string(op);
        }
      }
      if (depth != 1) return "shape code leaves " + std::to_string(depth) + " values";
      k += 2 + size_t(len);
    } else {
      return "shape pattern has bad tag " + std::to_string(tag);
    }
  }
  return k == pat.size() ? "" : "trailing words in a shape pattern";
}

}  // namespace

Executable Executable::deserialize(std::string_view bytes) {
  Reader r(bytes);
  std::string_view magic = r.raw(8);
  if (magic == std::string_view(kMagicV1, 8))
    throw Error("bytecode: format 1, from an older relax (this runtime reads format 2); build the package again");
  if (magic != std::string_view(kMagic, 8)) throw Error("bytecode: bad magic (not a relax VM program)");
  Executable e;
  e.constants.resize(r.count(25));
  for (Constant& c : e.constants) {
    uint8_t k = r.u8();
    if (k > uint8_t(Constant::Kind::DType)) throw Error("bytecode: bad constant kind " + std::to_string(k));
    c.kind = Constant::Kind(k);
    c.i = r.i64();
    c.f = r.f64();
    c.s = r.str();
    c.list.resize(r.count(8));
    for (int64_t& v : c.list) v = r.i64();
  }
  for (auto* names : {&e.kernels, &e.builtins}) {
    names->resize(r.count(8));
    for (std::string& n : *names) n = r.str();
  }
  e.kernel_signatures.resize(e.kernels.size());
  for (size_t k = 0; k < e.kernels.size(); ++k) {
    KernelSignature& sig = e.kernel_signatures[k];
    size_t n = r.count(16);
    sig.dtypes.resize(n);
    sig.ranks.resize(n);
    int64_t dims = 0;
    for (size_t i = 0; i < n; ++i) {
      sig.dtypes[i] = r.i64();
      sig.ranks[i] = r.i64();
      if (sig.ranks[i] < 0 || sig.ranks[i] > kMaxRank)
        throw Error("bytecode: kernel " + e.kernels[k] + ": buffer " + std::to_string(i) + " of rank " +
                    std::to_string(sig.ranks[i]) + " (at most " + std::to_string(kMaxRank) + ")");
      dims += sig.ranks[i];
    }
    sig.num_shape_args = r.i64();
    if (sig.num_shape_args < dims || sig.num_shape_args > dims + 4096)
      throw Error("bytecode: kernel " + e.kernels[k] + ": bad shape argument count");
  }
  e.functions.resize(r.count(8));
  for (Function& f : e.functions) {
    f.name = r.str();
    f.params.resize(r.count(8));
    for (std::string& p : f.params) p = r.str();
    f.num_registers = int32_t(r.i64());
    f.heap_size = int32_t(r.i64());
    if (f.num_registers < 0 || f.heap_size < 0) throw Error("bytecode: negative frame size in " + f.name);
    f.code.resize(r.count(34));
    for (Instr& in : f.code) {
      uint8_t op = r.u8();
      if (op < 1 || op > 4) throw Error("bytecode: bad opcode " + std::to_string(op) + " in " + f.name);
      in.op = Opcode(op);
      in.dst = int32_t(r.i64());
      uint8_t ck = r.u8();
      if (ck > 2) throw Error("bytecode: bad callee kind in " + f.name);
      in.callee_kind = CalleeKind(ck);
      in.callee = int32_t(r.i64());
      in.offset = r.i64();
      in.args.resize(r.count(9));
      for (Arg& a : in.args) {
        uint8_t ak = r.u8();
        if (ak > 2) throw Error("bytecode: bad argument kind in " + f.name);
        a.kind = ArgKind(ak);
        a.value = r.i64();
      }
    }
  }
  if (!r.done()) throw Error("bytecode: trailing bytes");

  // Every index in range, so the VM need not check again while running.
  auto bad = [](const Function& f, size_t pc, const std::string& what) { throw BytecodeError(f.name, pc, what); };
  for (const Function& f : e.functions) {
    for (size_t pc = 0; pc < f.code.size(); ++pc) {
      const Instr& in = f.code[pc];
      auto check_reg = [&](int64_t r, bool allow_none) {
        if ((r == -1 && allow_none) || (r >= 0 && r < f.num_registers)) return;
        bad(f, pc, "register " + std::to_string(r) + " out of range");
      };
      switch (in.op) {
        case Opcode::Call: {
          check_reg(in.dst, true);
          size_t limit = in.callee_kind == CalleeKind::Function ? e.functions.size()
                         : in.callee_kind == CalleeKind::Kernel ? e.kernels.size()
                                                                : e.builtins.size();
          if (in.callee < 0 || size_t(in.callee) >= limit) bad(f, pc, "callee out of range");
          for (const Arg& a : in.args) {
            if (a.kind == ArgKind::Register) check_reg(a.value, false);
            if (a.kind == ArgKind::Const && (a.value < 0 || size_t(a.value) >= e.constants.size()))
              bad(f, pc, "constant out of range");
          }
          if (in.callee_kind == CalleeKind::Builtin) {
            // The shape builtins' patterns: every slot and code checked here.
            const std::string& b = e.builtins[size_t(in.callee)];
            bool match = b == "relax.match_shape";
            size_t at = match ? 1 : 0;
            if ((match || b == "relax.make_shape" || b == "relax.make_prim") && at < in.args.size()) {
              const Arg& a = in.args[at];
              if (a.kind != ArgKind::Const || e.constants[size_t(a.value)].kind != Constant::Kind::IntList)
                bad(f, pc, b + "'s pattern is not a list constant");
              std::string why = pattern_problem(e.constants[size_t(a.value)].list, match, f.heap_size);
              if (!why.empty()) bad(f, pc, b + ": " + why);
            }
          }
          if (in.callee_kind == CalleeKind::Kernel) {
            const KernelSignature& sig = e.kernel_signatures[size_t(in.callee)];
            size_t want = sig.dtypes.size() + (sig.takes_syms() ? 1 : 0);
            if (in.args.size() != want)
              bad(f, pc, "kernel " + e.kernels[size_t(in.callee)] + " takes " + std::to_string(want) +
                             " arguments, the call passes " + std::to_string(in.args.size()));
          }
          break;
        }
        case Opcode::Ret:
          check_reg(in.dst, false);
          break;
        case Opcode::If:
          check_reg(in.dst, false);
          [[fallthrough]];
        case Opcode::Goto: {
          int64_t target = int64_t(pc) + in.offset;
          if (target < 0 || target > int64_t(f.code.size())) bad(f, pc, "jump out of range");
          break;
        }
      }
    }
  }
  return e;
}

std::string Executable::dump() const {
  std::ostringstream os;
  auto arg = [&](const Arg& a) {
    switch (a.kind) {
      case ArgKind::Register:
        os << "%" << a.value;
        break;
      case ArgKind::Imm:
        os << a.value;
        break;
      case ArgKind::Const: {
        const Constant& c = constants[size_t(a.value)];
        switch (c.kind) {
          case Constant::Kind::Int:
            os << c.i;
            break;
          case Constant::Kind::Float:
            os << c.f;
            break;
          case Constant::Kind::String:
            os << '"' << c.s << '"';
            break;
          case Constant::Kind::Weight:
            os << "const(\"" << c.s << "\")";
            break;
          case Constant::Kind::DType:
            os << "dtype(" << c.i << ")";
            break;
          case Constant::Kind::IntList: {
            os << "[";
            for (size_t i = 0; i < c.list.size(); ++i) os << (i ? " " : "") << c.list[i];
            os << "]";
            break;
          }
        }
        break;
      }
    }
  };
  for (const Function& f : functions) {
    os << "fn " << f.name << "(";
    for (size_t i = 0; i < f.params.size(); ++i) os << (i ? ", " : "") << f.params[i];
    os << ") registers=" << f.num_registers << " heap=" << f.heap_size << "\n";
    for (size_t pc = 0; pc < f.code.size(); ++pc) {
      const Instr& in = f.code[pc];
      os << "  " << pc << ": ";
      switch (in.op) {
        case Opcode::Call: {
          if (in.dst >= 0) os << "%" << in.dst << " = ";
          const std::string& name = in.callee_kind == CalleeKind::Function ? functions[in.callee].name
                                    : in.callee_kind == CalleeKind::Kernel ? kernels[in.callee]
                                                                           : builtins[in.callee];
          os << "call " << callee_kind_name(in.callee_kind) << " " << name << "(";
          for (size_t i = 0; i < in.args.size(); ++i) {
            if (i) os << ", ";
            arg(in.args[i]);
          }
          os << ")";
          break;
        }
        case Opcode::Ret:
          os << "ret %" << in.dst;
          break;
        case Opcode::Goto:
          os << "goto " << int64_t(pc) + in.offset;
          break;
        case Opcode::If:
          os << "if !%" << in.dst << " goto " << int64_t(pc) + in.offset;
          break;
      }
      os << "\n";
    }
  }
  return os.str();
}

int64_t eval_shape_code(const int64_t* code, int64_t len, const int64_t* heap, int64_t heap_size) {
  namespace P = ShapePattern;
  int64_t stack[kMaxShapeCodeDepth];
  int sp = 0;
  for (int64_t i = 0; i < len; ++i) {
    int64_t op = code[i];
    if (op == P::kPushConst || op == P::kPushSlot) {
      if (i + 1 >= len || sp == kMaxShapeCodeDepth) throw Error("shape code: malformed");
      int64_t v = code[++i];
      if (op == P::kPushSlot) {
        if (v < 0 || v >= heap_size) throw Error("shape code: slot out of range");
        v = heap[v];
      }
      stack[sp++] = v;
      continue;
    }
    if (sp < 2) throw Error("shape code: stack underflow");
    int64_t b = stack[--sp], a = stack[sp - 1], r = 0;
    bool overflow = false;
    switch (op) {
      case P::kAdd:
        overflow = __builtin_add_overflow(a, b, &r);
        break;
      case P::kSub:
        overflow = __builtin_sub_overflow(a, b, &r);
        break;
      case P::kMul:
        overflow = __builtin_mul_overflow(a, b, &r);
        break;
      case P::kFloorDiv:
      case P::kFloorMod: {
        if (b == 0) throw Error("shape computation divides by zero");
        if (a == INT64_MIN && b == -1) throw Error("shape computation overflows int64");
        int64_t q = a / b, m = a % b;
        if (m != 0 && ((m < 0) != (b < 0))) {
          q -= 1;
          m += b;
        }
        r = op == P::kFloorDiv ? q : m;
        break;
      }
      case P::kMin:
        r = std::min(a, b);
        break;
      case P::kMax:
        r = std::max(a, b);
        break;
      default:
        throw Error("shape code: bad op " + std::to_string(op));
    }
    if (overflow) throw Error("shape computation overflows int64");
    stack[sp - 1] = r;
  }
  if (sp != 1) throw Error("shape code: malformed");
  return stack[0];
}

}  // namespace relax::rt
