// Activation memory of a graph function: which tensors its top-level
// bindings create, how many bytes each takes (a symbolic expression), and
// from which binding to which binding each must live. static-plan-memory
// plans storage from it; the build writes it into the package manifest so
// relax-inspect can evaluate the plan for given sizes.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/analyzer.h"
#include "ir/module.h"

namespace relax {

struct ActivationTensor {
  std::string name;    // the binding's variable ("qkv" or "qkv.1" for a tuple's field)
  size_t binding = 0;  // index of the defining binding in MemoryAnalysis::bindings
  size_t field = 0;    // which output of the call
  DataType dtype;
  std::vector<SymExpr> shape;
  SymExpr nbytes;        // null for sub-byte dtypes (not planned)
  size_t last_use = 0;   // the last binding that reads it or an alias of it (>= binding)
  bool escapes = false;  // reaches the function's result: the caller owns it
  int storage = -1;      // for alloc_tensor: the storage (index into storages); else -1
};

struct PlannedStorage {
  size_t binding = 0;  // the alloc_storage binding
  SymExpr nbytes;
  bool escapes = false;  // holds only escaping tensors: the caller's memory, not an activation's
};

struct MemoryAnalysis {
  std::vector<Binding> bindings;  // the function body's top-level bindings, in order
  // The outputs of call_tir / call_library (fresh tensors the VM allocates)
  // and the tensors of alloc_tensor (planned), in order of definition.
  std::vector<ActivationTensor> tensors;
  std::vector<PlannedStorage> storages;  // alloc_storage bindings
};

// Lifetimes are alias-aware: a binding that is not a kernel call (a tuple,
// a builtin, a function call, an If, a closure) may hand out its operands,
// so its result joins their alias set and keeps them alive; whatever the
// function returns escapes.
MemoryAnalysis analyze_memory(const Function& f);

// A call_tir / call_library `c` in destination-passing style, writing
// `dests` (call_tir_dps / call_library_dps, the symbolic arguments kept).
Expr to_dps(const CallNode& c, std::vector<Expr> dests);

// Bytes of a tensor (numel * element bytes); null for sub-byte dtypes.
SymExpr tensor_nbytes(DataType dtype, const std::vector<SymExpr>& shape);

// Upper bounds recorded on a function: attribute sym_bounds = ["n=1..4096",
// ...], as relax-build --bound writes them.
std::map<std::string, Interval> function_bounds(const Function& f);
std::vector<std::string> bounds_attr(const std::map<std::string, Interval>& bounds);
// Parses "NAME=LO..HI"; Error naming `what` when malformed.
std::pair<std::string, Interval> parse_bound(const std::string& s, const std::string& what = "--bound");

}  // namespace relax
