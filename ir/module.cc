// IRModule: an ordered map from global names to functions, tensor programs
// and extern declarations.
#include "ir/module.h"

#include "ir/error.h"

namespace relax {

namespace {

template <typename T>
void put(std::vector<std::pair<std::string, IRModule::Item>>& items, std::map<std::string, size_t>& index,
         const std::string& name, T value) {
  auto it = index.find(name);
  if (it != index.end()) {
    items[it->second].second = std::move(value);
    return;
  }
  index.emplace(name, items.size());
  items.emplace_back(name, std::move(value));
}

}  // namespace

void IRModule::add_function(const std::string& name, Function f) {
  RELAX_CHECK(f, "add_function '", name, "' with a null function");
  put(items_, index_, name, std::move(f));
}

void IRModule::add_program(const std::string& name, tir::Program p) {
  RELAX_CHECK(p, "add_program '", name, "' with a null program");
  put(items_, index_, name, std::move(p));
}

void IRModule::add_extern(const std::string& name, StructInfo sinfo) {
  put(items_, index_, name, ExternDecl{name, std::move(sinfo)});
}

// Removing shifts the later items down by one: rebuild the index.
void IRModule::remove(const std::string& name) {
  auto it = index_.find(name);
  if (it == index_.end()) return;
  items_.erase(items_.begin() + long(it->second));
  index_.clear();
  for (size_t i = 0; i < items_.size(); ++i) index_.emplace(items_[i].first, i);
}

Function IRModule::function(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) return nullptr;
  auto f = std::get_if<Function>(&items_[it->second].second);
  return f ? *f : nullptr;
}

tir::Program IRModule::program(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) return nullptr;
  auto p = std::get_if<tir::Program>(&items_[it->second].second);
  return p ? *p : nullptr;
}

const ExternDecl* IRModule::extern_decl(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) return nullptr;
  return std::get_if<ExternDecl>(&items_[it->second].second);
}

std::vector<std::string> IRModule::function_names() const {
  std::vector<std::string> out;
  for (const auto& [name, item] : items_)
    if (std::holds_alternative<Function>(item)) out.push_back(name);
  return out;
}

std::vector<std::string> IRModule::program_names() const {
  std::vector<std::string> out;
  for (const auto& [name, item] : items_)
    if (std::holds_alternative<tir::Program>(item)) out.push_back(name);
  return out;
}

std::string IRModule::fresh_name(const std::string& hint) const {
  if (!contains(hint)) return hint;
  for (size_t i = 1;; ++i) {
    std::string name = cat(hint, "_", i);
    if (!contains(name)) return name;
  }
}

}  // namespace relax
