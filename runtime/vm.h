// The virtual machine that runs a package's bytecode (runtime/bytecode.h).
//
// A frame holds registers (Values) and the shape heap (the function's
// symbolic variables, bound on entry and by match_cast). Calls go to VM
// functions, to compiled kernels (through the ABI of docs/runtime_abi.md)
// or to builtins, which do everything else: shape checks, allocation,
// tuples, shape values, library kernels, data-dependent ops.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "runtime/allocator.h"
#include "runtime/bytecode.h"
#include "runtime/kernel_library.h"
#include "runtime/tensor.h"

namespace relax::rt {

struct Value;
struct ClosureObj;
using Shape = std::shared_ptr<const std::vector<int64_t>>;
using Tuple = std::shared_ptr<const std::vector<Value>>;
using Closure = std::shared_ptr<const ClosureObj>;

struct Value {
  std::variant<std::monostate, Tensor, Shape, int64_t, double, std::string, Tuple, Closure> v;

  Value() = default;
  Value(Tensor t) : v(std::move(t)) {}       // NOLINT
  Value(Shape s) : v(std::move(s)) {}        // NOLINT
  Value(int64_t i) : v(i) {}                 // NOLINT
  Value(double f) : v(f) {}                  // NOLINT
  Value(std::string s) : v(std::move(s)) {}  // NOLINT
  Value(Tuple t) : v(std::move(t)) {}        // NOLINT
  Value(Closure c) : v(std::move(c)) {}      // NOLINT

  bool is_tensor() const { return std::holds_alternative<Tensor>(v); }
  bool is_shape() const { return std::holds_alternative<Shape>(v); }
  bool is_int() const { return std::holds_alternative<int64_t>(v); }
  bool is_tuple() const { return std::holds_alternative<Tuple>(v); }
  // Each accessor throws rt::Error naming `what` when the value is of another kind.
  const Tensor& tensor(const char* what = "value") const;
  const std::vector<int64_t>& shape(const char* what = "value") const;
  int64_t int_value(const char* what = "value") const;
  double float_value(const char* what = "value") const;  // ints convert
  const std::string& str(const char* what = "value") const;
  const std::vector<Value>& tuple(const char* what = "value") const;
  const char* kind_name() const;
};

// A VM function with the values it captured, which come before the
// arguments of a call (loop and scan bodies, nested functions).
struct ClosureObj {
  int function = 0;
  std::vector<Value> captured;
};

Shape make_shape(std::vector<int64_t> dims);
Tuple make_tuple(std::vector<Value> fields);

class VirtualMachine;

// What a builtin sees: the VM (its allocator), the frame's shape heap, and
// its arguments; it writes its result (if any) to `out`.
struct BuiltinCall {
  VirtualMachine& vm;
  std::vector<int64_t>& heap;
  const Value* const* args;
  size_t num_args;
  Value& out;
  const Value& arg(size_t i) const;  // throws when missing
  // Floating-point operations the call did (a multiply-add counts 2), set
  // by library kernels for --profile's GFLOP/s; 0 when not counted.
  double flops = 0;
  // Set with `flops` when they are integer operations (8-bit products):
  // --profile prints them as GOP/s, not as a share of the FMA peak.
  bool integer_ops = false;
  // A slot of this call site's, kept between calls by the VM (null for a
  // call from elsewhere): a builtin whose result depends only on its
  // constant arguments and the heap keeps the last one there
  // (relax.make_shape), so that a run with the same shapes reuses it.
  std::shared_ptr<void>* memo = nullptr;
};
using Builtin = void (*)(BuiltinCall& call);

// The process-wide table of builtins, by name ("relax.match_shape", ...).
const Builtin* find_builtin(const std::string& name);
// `touches_data`: the builtin reads or writes tensor elements on the host,
// so kernel calls recorded before it (a device's command buffer) must have
// finished (Kernels::synchronize). False only for builtins that handle
// shapes, allocation, views and tuples.
void register_builtin(const std::string& name, Builtin fn, bool touches_data = true);
// Whether builtin `name` touches tensor data (true when unknown).
bool builtin_touches_data(const std::string& name);

class VirtualMachine {
 public:
  // `weights` resolves the executable's Weight constants by name; `kernels`
  // holds the compiled kernels the executable calls (may be null when it
  // calls none). Throws rt::Error for an unknown builtin, a missing weight
  // or kernel.
  VirtualMachine(Executable exe, const std::function<Tensor(const std::string&)>& weights, const Kernels* kernels,
                 std::shared_ptr<PoolAllocator> pool = nullptr);

  // Runs function `name` (default: the first, @main). Kernel calls have
  // finished when it returns, unless `wait` is false (a CUDA graph's
  // region, run while its kernels are captured).
  Value invoke(const std::string& name, std::vector<Value> args);
  Value invoke(int function, std::vector<Value> args, bool wait = true);
  // Calls a closure value with `args` after its captured values.
  Value call(const Value& closure, std::vector<Value> args, bool wait = true);

  const Executable& exe() const { return exe_; }
  // The package's kernels (null when it has none).
  const Kernels* kernels() const { return kernel_source_; }
  // The storage an alloc_storage(persistent=site) got last (undefined at
  // first): kept between calls so that its address stays the same.
  Tensor& persistent_storage(const std::string& site) { return persistent_[site]; }
  PoolAllocator* pool() const { return pool_.get(); }

  // The time each kernel and each builtin that touches tensor data took,
  // summed over the calls since set_profiling(true) (relax-run --profile
  // for cpu packages; a device's kernels are timed by its Kernels). `bytes`:
  // of the tensors each call read and wrote.
  struct CallTime {
    std::string name;
    bool kernel = false;
    uint64_t calls = 0;
    double ms = 0, bytes = 0, flops = 0;  // flops: 0 when the callee does not count them
    bool integer_ops = false;             // flops are integer operations
  };
  void set_profiling(bool on);

  // The status tensor of a call site of relax.kernel_status: four i64,
  // zero until a kernel finds its input invalid (an index out of range) and
  // writes 1, the value, the dim's size and the axis. The VM reads every
  // site's when a run's kernels have finished (invoke with `wait`) and
  // fails the run naming `what` (the node) when one is set.
  void watch_status(Tensor status, std::string what);
  // By total time, most first; calls never made are left out.
  std::vector<CallTime> profile() const;

 private:
  Value run(int function, std::vector<Value>& regs);
  // Throws rt::Error for the first status set (and clears them all).
  void check_status();
  const std::string& callee_name(const Instr& in) const;

  Executable exe_;
  std::vector<Value> consts_;
  std::vector<std::vector<std::shared_ptr<void>>> memo_;  // [function][pc]: BuiltinCall::memo
  const Kernels* kernel_source_ = nullptr;
  std::vector<KernelCall> kernels_;
  std::vector<Builtin> builtins_;
  std::vector<bool> builtin_syncs_;  // reads or writes tensor data on the host: wait for the kernels first
  std::shared_ptr<PoolAllocator> pool_;
  std::map<std::string, Tensor> persistent_;
  bool profiling_ = false;
  std::vector<std::pair<Tensor, std::string>> statuses_;  // watch_status
  std::vector<CallTime> kernel_times_, builtin_times_;  // by callee index
};

}  // namespace relax::rt
