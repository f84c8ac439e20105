// An IRModule holds graph functions, tensor programs and extern
// declarations side by side, each under a global name: the cross-level
// abstraction that lets one pass see a graph function and the loops it
// calls. Modules are values: passes build new ones; the functions and
// programs inside are shared, immutable nodes.
#pragma once

#include <map>
#include <string>
#include <variant>
#include <vector>

#include "ir/expr.h"
#include "ir/tir.h"

namespace relax {

// A symbol provided outside the module: a library kernel or runtime helper.
struct ExternDecl {
  std::string name;  // the name calls use (call_library's first argument)
  StructInfo sinfo;  // a FuncSI, or null when untyped
  bool operator==(const ExternDecl& o) const { return name == o.name && sinfo == o.sinfo; }
};

class IRModule {
 public:
  using Item = std::variant<Function, tir::Program, ExternDecl>;

  // Adds or replaces an item; insertion order is kept for printing.
  void add_function(const std::string& name, Function f);
  void add_program(const std::string& name, tir::Program p);
  void add_extern(const std::string& name, StructInfo sinfo = nullptr);
  void remove(const std::string& name);

  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  Function function(const std::string& name) const;     // nullptr if absent or another kind
  tir::Program program(const std::string& name) const;  // nullptr if absent or another kind
  const ExternDecl* extern_decl(const std::string& name) const;

  // All items in order, as (name, item).
  const std::vector<std::pair<std::string, Item>>& items() const { return items_; }
  std::vector<std::string> function_names() const;
  std::vector<std::string> program_names() const;

  // A name not used in the module, built from `hint` ("fused_add", "fused_add_1", ...).
  std::string fresh_name(const std::string& hint) const;

  Attrs attrs;  // module-level attributes (e.g. the weight file)

 private:
  std::vector<std::pair<std::string, Item>> items_;
  std::map<std::string, size_t> index_;
};

}  // namespace relax
