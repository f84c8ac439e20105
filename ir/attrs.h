// Typed attributes of calls, functions and tensor programs: an ordered list
// of (name, value). Ops declare the attributes they accept and their types
// in the op registry (ir/op.h); the parser reads a value by its declared type.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "ir/dtype.h"
#include "ir/sym.h"

namespace relax {

enum class AttrType : uint8_t { Bool, Int, Float, String, Ints, Floats, Strings, DType, Sym, Syms };

using AttrValue = std::variant<bool, int64_t, double, std::string, std::vector<int64_t>, std::vector<double>,
                               std::vector<std::string>, DataType, SymExpr, std::vector<SymExpr>>;

// The AttrType that matches the variant index of a value.
AttrType attr_type_of(const AttrValue& v);
const char* attr_type_name(AttrType t);

class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<std::string, AttrValue>> kv) : items_(kv) {}

  bool empty() const { return items_.empty(); }
  size_t size() const { return items_.size(); }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

  const AttrValue* find(const std::string& name) const;
  bool has(const std::string& name) const { return find(name) != nullptr; }
  // Replaces an existing value or appends a new one.
  void set(const std::string& name, AttrValue v);

  // Typed getters: the value, or `def` when absent. A present value of the
  // wrong type raises an Error naming the attribute.
  int64_t get_int(const std::string& name, int64_t def = 0) const;
  double get_float(const std::string& name, double def = 0) const;
  bool get_bool(const std::string& name, bool def = false) const;
  std::string get_string(const std::string& name, const std::string& def = "") const;
  std::vector<int64_t> get_ints(const std::string& name, const std::vector<int64_t>& def = {}) const;
  std::optional<std::vector<int64_t>> get_ints_opt(const std::string& name) const;
  std::vector<double> get_floats(const std::string& name) const;
  DataType get_dtype(const std::string& name, DataType def = {}) const;

  bool operator==(const Attrs& o) const { return items_ == o.items_; }

 private:
  std::vector<std::pair<std::string, AttrValue>> items_;
};

}  // namespace relax
