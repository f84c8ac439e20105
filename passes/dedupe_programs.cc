// dedupe-programs: tensor programs equal but for their names and their
// buffers' names become one. Fusion names a program's buffers after the
// graph values it reads and writes, so each layer of a transformer (each
// block of a CNN stage) gets its own copy of the same kernel; compiling
// one copy instead of six is most of a 6-layer model's compile time. The
// calls of a removed copy go to the first of its equals in name order.
#include <unordered_map>

#include "ir/mutator.h"
#include "ir/printer.h"
#include "ir/tir_functor.h"
#include "passes/passes.h"

namespace relax {
namespace {

// The program's text with its name and every buffer's name replaced by
// its position (inputs, outputs, then the others as the body meets them):
// equal texts compute the same thing.
std::string canonical_text(const tir::Program& p) {
  std::unordered_map<const tir::BufferNode*, std::string> names;
  auto name = [&](const tir::Buffer& b, const std::string& prefix) {
    names.emplace(b.get(), prefix + std::to_string(names.size()));
  };
  for (const tir::Buffer& b : p->inputs) name(b, "in");
  for (const tir::Buffer& b : p->outputs) name(b, "out");
  tir::TirRewriter rename;
  rename.buffer = [&](const tir::Buffer& b) {
    auto it = names.find(b.get());
    std::string n = it != names.end() ? it->second : "buf" + std::to_string(names.size());
    if (it == names.end()) names.emplace(b.get(), n);
    return tir::make_buffer(n, b->dtype, b->shape, b->scope);
  };
  std::vector<tir::Buffer> inputs, outputs;
  for (const tir::Buffer& b : p->inputs) inputs.push_back(rename.buf(b));
  for (const tir::Buffer& b : p->outputs) outputs.push_back(rename.buf(b));
  tir::Stmt body = rename.stmt(p->body);
  return print_program("_", tir::make_program("_", inputs, outputs, p->sym_params, body, p->attrs));
}

}  // namespace

IRModule dedupe_programs(const IRModule& mod) {
  std::unordered_map<std::string, std::string> first;  // canonical text -> the program kept
  std::unordered_map<std::string, std::string> alias;  // a removed program -> the one kept
  for (const std::string& name : mod.program_names()) {
    auto [it, inserted] = first.emplace(canonical_text(mod.program(name)), name);
    if (!inserted) alias.emplace(name, it->second);
  }
  if (alias.empty()) return mod;
  struct Redirect : ExprMutator {
    using ExprMutator::ExprMutator;
    const std::unordered_map<std::string, std::string>* alias = nullptr;
    Expr visit_leaf(const Expr& e) override {
      if (const auto* g = as<GlobalVarNode>(e))
        if (auto it = alias->find(g->name); it != alias->end()) return make_global_var(it->second);
      return e;
    }
  } redirect(&mod);
  redirect.alias = &alias;
  IRModule out = mod;
  for (const std::string& name : mod.function_names()) {
    Function f = mod.function(name);
    SeqExpr body = redirect.visit_seq(f->body);
    if (body != f->body) out.add_function(name, make_function(f->params, body, f->ret, f->attrs));
  }
  for (const auto& [name, kept] : alias) out.remove(name);
  return out;
}

}  // namespace relax
