#include "ir/attrs.h"

#include "ir/error.h"

namespace relax {

AttrType attr_type_of(const AttrValue& v) { return AttrType(v.index()); }

const char* attr_type_name(AttrType t) {
  static const char* names[] = {"bool",       "int",         "float", "string",       "int list",
                                "float list", "string list", "dtype", "symbolic int", "symbolic int list"};
  return names[int(t)];
}

const AttrValue* Attrs::find(const std::string& name) const {
  for (const auto& [k, v] : items_)
    if (k == name) return &v;
  return nullptr;
}

void Attrs::set(const std::string& name, AttrValue v) {
  for (auto& [k, old] : items_) {
    if (k == name) {
      old = std::move(v);
      return;
    }
  }
  items_.emplace_back(name, std::move(v));
}

namespace {
template <typename T>
const T* typed(const Attrs& a, const std::string& name, AttrType want) {
  const AttrValue* v = a.find(name);
  if (!v) return nullptr;
  if (const T* t = std::get_if<T>(v)) return t;
  fail("attribute '", name, "' should be a ", attr_type_name(want), ", not a ", attr_type_name(attr_type_of(*v)));
}
}  // namespace

int64_t Attrs::get_int(const std::string& name, int64_t def) const {
  const AttrValue* v = find(name);
  if (v && std::holds_alternative<bool>(*v)) return std::get<bool>(*v);
  auto* t = typed<int64_t>(*this, name, AttrType::Int);
  return t ? *t : def;
}
double Attrs::get_float(const std::string& name, double def) const {
  const AttrValue* v = find(name);
  if (v && std::holds_alternative<int64_t>(*v)) return double(std::get<int64_t>(*v));
  auto* t = typed<double>(*this, name, AttrType::Float);
  return t ? *t : def;
}
bool Attrs::get_bool(const std::string& name, bool def) const {
  const AttrValue* v = find(name);
  if (v && std::holds_alternative<int64_t>(*v)) return std::get<int64_t>(*v) != 0;
  auto* t = typed<bool>(*this, name, AttrType::Bool);
  return t ? *t : def;
}
std::string Attrs::get_string(const std::string& name, const std::string& def) const {
  auto* t = typed<std::string>(*this, name, AttrType::String);
  return t ? *t : def;
}
std::vector<int64_t> Attrs::get_ints(const std::string& name, const std::vector<int64_t>& def) const {
  auto* t = typed<std::vector<int64_t>>(*this, name, AttrType::Ints);
  return t ? *t : def;
}
std::optional<std::vector<int64_t>> Attrs::get_ints_opt(const std::string& name) const {
  auto* t = typed<std::vector<int64_t>>(*this, name, AttrType::Ints);
  if (!t) return std::nullopt;
  return *t;
}
std::vector<double> Attrs::get_floats(const std::string& name) const {
  auto* t = typed<std::vector<double>>(*this, name, AttrType::Floats);
  return t ? *t : std::vector<double>{};
}
DataType Attrs::get_dtype(const std::string& name, DataType def) const {
  auto* t = typed<DataType>(*this, name, AttrType::DType);
  return t ? *t : def;
}

}  // namespace relax
