#include "ir/op.h"

#include <map>
#include <memory>
#include <mutex>

#include "ir/error.h"
#include "ir/ops/common.h"

namespace relax {
namespace {

using OpTable = std::map<std::string, std::unique_ptr<OpInfo>, std::less<>>;

OpTable& table() {
  static OpTable ops;
  return ops;
}

// Registers every op on first use. The core is a static library, so ops are
// listed in ir/ops/ops.cc and registered here, never by static initializers.
const OpTable& registered() {
  static std::once_flag once;
  std::call_once(once, [] {
    OpRegistry reg;
    register_all_ops(reg);
  });
  return table();
}

// `v` read as `want`: Int widens to Float and Sym, Ints to Floats and Syms,
// an empty list fits any list type. nullopt when it does not fit.
std::optional<AttrValue> convert(const AttrValue& v, AttrType want) {
  AttrType have = attr_type_of(v);
  if (have == want) return v;
  if (have == AttrType::Int) {
    int64_t i = std::get<int64_t>(v);
    if (want == AttrType::Float) return AttrValue(double(i));
    if (want == AttrType::Sym) return AttrValue(SymExpr(i));
    return std::nullopt;
  }
  if (have == AttrType::Ints) {
    const auto& is = std::get<std::vector<int64_t>>(v);
    if (want == AttrType::Floats) return AttrValue(std::vector<double>(is.begin(), is.end()));
    if (want == AttrType::Syms) {
      std::vector<SymExpr> out;
      for (int64_t i : is) out.push_back(SymExpr(i));
      return AttrValue(std::move(out));
    }
    if (want == AttrType::Strings && is.empty()) return AttrValue(std::vector<std::string>{});
  }
  return std::nullopt;
}

// "a bool", "an int list".
std::string with_article(const char* noun) {
  return std::string(std::string_view("aeiou").find(noun[0]) == std::string_view::npos ? "a " : "an ") + noun;
}

std::string arity_text(const OpInfo& op) {
  auto plural = [](int n) { return n == 1 ? " argument" : " arguments"; };
  if (op.max_args < 0) return cat("at least ", op.min_args, plural(op.min_args));
  if (op.min_args == op.max_args) return cat(op.min_args, plural(op.min_args));
  if (op.max_args == op.min_args + 1) return cat(op.min_args, " or ", op.max_args, " arguments");
  return cat(op.min_args, " to ", op.max_args, " arguments");
}

}  // namespace

const AttrSpec* OpInfo::find_attr(const std::string& attr) const {
  for (const AttrSpec& spec : attrs)
    if (spec.name == attr) return &spec;
  return nullptr;
}

const OpInfo* find_op(std::string_view name) {
  const OpTable& ops = registered();
  auto it = ops.find(name);
  return it == ops.end() ? nullptr : it->second.get();
}

std::vector<const OpInfo*> all_ops() {
  std::vector<const OpInfo*> out;
  for (const auto& [name, op] : registered()) out.push_back(op.get());
  return out;
}

OpRegistry::Builder OpRegistry::add(const std::string& name) {
  auto& slot = table()[name];
  RELAX_CHECK(!slot, "op '", name, "' registered twice");
  slot = std::make_unique<OpInfo>();
  slot->name = name;
  return Builder(slot.get());
}

OpRegistry::Builder& OpRegistry::Builder::lowering(OpLowering how) {
  op_->lowering = how;
  return *this;
}

OpRegistry::Builder& OpRegistry::Builder::doc(std::string d) {
  op_->doc = std::move(d);
  return *this;
}

OpRegistry::Builder& OpRegistry::Builder::args(int min, int max) {
  op_->min_args = min;
  op_->max_args = max;
  return *this;
}

OpRegistry::Builder& OpRegistry::Builder::attr(std::string name, AttrType type, std::optional<AttrValue> def) {
  RELAX_CHECK(!op_->find_attr(name), "op '", op_->name, "' declares attribute '", name, "' twice");
  if (def) {
    def = convert(*def, type);
    RELAX_CHECK(def, "op '", op_->name, "': default of '", name, "' is not a ", attr_type_name(type));
  }
  op_->attrs.push_back(AttrSpec{std::move(name), type, std::move(def)});
  return *this;
}

OpRegistry::Builder& OpRegistry::Builder::impure() {
  op_->pure = false;
  return *this;
}

OpRegistry::Builder& OpRegistry::Builder::infer(InferFn fn) {
  op_->infer = std::move(fn);
  return *this;
}

Attrs check_op_attrs(const OpInfo& op, const Attrs& given, size_t num_args) {
  int n = int(num_args);
  if (n < op.min_args || (op.max_args >= 0 && n > op.max_args))
    fail("op '", op.name, "' takes ", arity_text(op), ", got ", n);
  for (const auto& [name, value] : given) {
    const AttrSpec* spec = op.find_attr(name);
    if (!spec) fail("op '", op.name, "' has no attribute '", name, "'");
    if (!convert(value, spec->type))
      fail("op '", op.name, "': attribute '", name, "' should be ", with_article(attr_type_name(spec->type)), ", not ",
           with_article(attr_type_name(attr_type_of(value))));
  }
  Attrs out;
  for (const AttrSpec& spec : op.attrs) {
    if (const AttrValue* v = given.find(spec.name)) {
      out.set(spec.name, *convert(*v, spec.type));
    } else if (spec.default_value) {
      out.set(spec.name, *spec.default_value);
    } else {
      fail("op '", op.name, "' requires attribute '", spec.name, "' (", attr_type_name(spec.type), ")");
    }
  }
  return out;
}

}  // namespace relax
