// The operator registry. Each op declares its name, a few sentences of
// semantics, its arguments, its attributes with their types and defaults,
// its purity, its struct-info deduction rule, and how it is lowered below
// the graph: nothing else. Its legalisation to a tensor program lives in
// passes/legalize/, one file per family.
//
// Ops are defined in ir/ops/*.cc, one file per family, and listed once in
// ir/ops/ops.cc.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ir/analyzer.h"
#include "ir/attrs.h"
#include "ir/expr.h"

namespace relax {

class IRModule;

struct AttrSpec {
  std::string name;
  AttrType type;
  std::optional<AttrValue> default_value;  // nullopt: required
};

// What a deduction rule sees. `ana` knows the bounds of the variables in
// scope; `mod` resolves GlobalVars (may be null).
struct InferContext {
  const Analyzer& ana;
  const IRModule* mod = nullptr;
};

// Returns the struct info of the call's result. Raises an Error for a
// mismatch it can prove ("matmul: inner dims 768 and 512 differ"); answers
// with a coarser struct info for what it cannot.
using InferFn = std::function<StructInfo(const CallNode& call, const InferContext& ctx)>;

// How a call of the op leaves the graph level:
//   TensorProgram  a legaliser (passes/legalize/) turns it into a tensor
//                  program called with call_tir, or into a library call;
//                  the VM never sees it (the default);
//   Library        it is itself a call into a kernel library or a runtime
//                  builtin (call_library, call_builtin, ...): the VM lowering
//                  calls the named function;
//   VM             the VM lowering implements it (kernel calls, shape values,
//                  allocation, loop and scan).
// Legalisation leaves Library and VM ops alone, and the VM lowering
// (backends/vm/) implements exactly those.
enum class OpLowering { TensorProgram, Library, VM };

struct OpInfo {
  std::string name;
  std::string doc;
  int min_args = 0;
  int max_args = 0;  // -1: variadic
  std::vector<AttrSpec> attrs;
  bool pure = true;
  OpLowering lowering = OpLowering::TensorProgram;
  InferFn infer;

  // Whether the VM lowering handles calls of the op (Library or VM).
  bool lowered_by_vm() const { return lowering != OpLowering::TensorProgram; }

  const AttrSpec* find_attr(const std::string& attr) const;
};

// Looks an op up by name; nullptr when unknown.
const OpInfo* find_op(std::string_view name);
// Every registered op, sorted by name.
std::vector<const OpInfo*> all_ops();

// Registration, used by ir/ops/*.cc. Fluent:
//   reg.add("relu").doc("max(x, 0)").args(1).infer(infer_unary);
class OpRegistry {
 public:
  class Builder {
   public:
    explicit Builder(OpInfo* op) : op_(op) {}
    Builder& doc(std::string d);
    Builder& args(int n) { return args(n, n); }
    Builder& args(int min, int max);
    Builder& attr(std::string name, AttrType type, std::optional<AttrValue> def = std::nullopt);
    Builder& impure();
    Builder& lowering(OpLowering how);
    Builder& infer(InferFn fn);

   private:
    OpInfo* op_;
  };
  Builder add(const std::string& name);
};

// Checks a call's arity and attributes against the op's declaration, fills
// in defaults, and returns the completed attributes. Errors name the op and
// the attribute.
Attrs check_op_attrs(const OpInfo& op, const Attrs& given, size_t num_args);

}  // namespace relax
