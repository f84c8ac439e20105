#include "runtime/vm.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <unordered_map>

#include "runtime/compare.h"
#include "runtime/error.h"

namespace relax::rt {

// ---- Values -------------------------------------------------------------------

const char* Value::kind_name() const {
  static const char* names[] = {"nothing", "tensor", "shape", "int", "float", "string", "tuple", "function"};
  return names[v.index()];
}

const Tensor& Value::tensor(const char* what) const {
  if (auto* t = std::get_if<Tensor>(&v)) return *t;
  rt_fail(what, ": expected a tensor, got ", kind_name());
}
const std::vector<int64_t>& Value::shape(const char* what) const {
  if (auto* s = std::get_if<Shape>(&v)) return **s;
  rt_fail(what, ": expected a shape, got ", kind_name());
}
int64_t Value::int_value(const char* what) const {
  if (auto* i = std::get_if<int64_t>(&v)) return *i;
  rt_fail(what, ": expected an integer, got ", kind_name());
}
double Value::float_value(const char* what) const {
  if (auto* f = std::get_if<double>(&v)) return *f;
  if (auto* i = std::get_if<int64_t>(&v)) return double(*i);
  rt_fail(what, ": expected a number, got ", kind_name());
}
const std::string& Value::str(const char* what) const {
  if (auto* s = std::get_if<std::string>(&v)) return *s;
  rt_fail(what, ": expected a string, got ", kind_name());
}
const std::vector<Value>& Value::tuple(const char* what) const {
  if (auto* t = std::get_if<Tuple>(&v)) return **t;
  rt_fail(what, ": expected a tuple, got ", kind_name());
}

Shape make_shape(std::vector<int64_t> dims) { return std::make_shared<const std::vector<int64_t>>(std::move(dims)); }
Tuple make_tuple(std::vector<Value> fields) { return std::make_shared<const std::vector<Value>>(std::move(fields)); }

const Value& BuiltinCall::arg(size_t i) const {
  if (i >= num_args) rt_fail("builtin: argument ", i, " is missing (", num_args, " given)");
  return *args[i];
}

// ---- The builtin table ----------------------------------------------------------

void register_core_builtins();  // runtime/builtins.cc

namespace {
struct BuiltinEntry {
  Builtin fn;
  bool touches_data;
};
std::unordered_map<std::string, BuiltinEntry>& builtin_map() {
  static auto* m = new std::unordered_map<std::string, BuiltinEntry>;
  return *m;
}
std::mutex& builtin_mutex() {
  static auto* m = new std::mutex;
  return *m;
}
}  // namespace

void register_builtin(const std::string& name, Builtin fn, bool touches_data) {
  std::lock_guard lock(builtin_mutex());
  builtin_map()[name] = {fn, touches_data};
}

namespace {
const BuiltinEntry* find_entry(const std::string& name) {
  static std::once_flag core;
  std::call_once(core, [] { register_core_builtins(); });
  std::lock_guard lock(builtin_mutex());
  auto it = builtin_map().find(name);
  return it == builtin_map().end() ? nullptr : &it->second;
}
}  // namespace

const Builtin* find_builtin(const std::string& name) {
  const BuiltinEntry* e = find_entry(name);
  return e ? &e->fn : nullptr;
}

bool builtin_touches_data(const std::string& name) {
  const BuiltinEntry* e = find_entry(name);
  return !e || e->touches_data;
}

// ---- The machine ------------------------------------------------------------------

VirtualMachine::VirtualMachine(Executable exe, const std::function<Tensor(const std::string&)>& weights,
                               const Kernels* kernels, std::shared_ptr<PoolAllocator> pool)
    : exe_(std::move(exe)), pool_(pool ? std::move(pool) : std::make_shared<PoolAllocator>()) {
  for (const Constant& c : exe_.constants) {
    switch (c.kind) {
      case Constant::Kind::Int:
        consts_.emplace_back(c.i);
        break;
      case Constant::Kind::Float:
        consts_.emplace_back(c.f);
        break;
      case Constant::Kind::String:
        consts_.emplace_back(c.s);
        break;
      case Constant::Kind::IntList:
        consts_.emplace_back(make_shape(c.list));
        break;
      case Constant::Kind::DType:
        consts_.emplace_back(c.i);
        break;
      case Constant::Kind::Weight: {
        Tensor t = weights(c.s);
        if (!t.defined()) rt_fail("the package has no weight '", c.s, "'");
        consts_.emplace_back(std::move(t));
        break;
      }
    }
  }
  for (const Function& f : exe_.functions) memo_.emplace_back(f.code.size());
  kernel_source_ = kernels;
  if (exe_.kernel_signatures.size() != exe_.kernels.size())
    rt_fail("the program lists ", exe_.kernels.size(), " kernels but ", exe_.kernel_signatures.size(), " signatures");
  for (const std::string& k : exe_.kernels) {
    if (!kernels) rt_fail("the program calls kernel ", k, " but the package has no kernels");
    kernels_.push_back(kernels->kernel_call(k));
  }
  for (const std::string& b : exe_.builtins) {
    const Builtin* fn = find_builtin(b);
    if (!fn) rt_fail("this runtime has no builtin '", b, "' (the package needs a newer runtime)");
    builtins_.push_back(*fn);
    builtin_syncs_.push_back(builtin_touches_data(b));
  }
}

void VirtualMachine::set_profiling(bool on) {
  profiling_ = on;
  kernel_times_.assign(exe_.kernels.size(), CallTime{});
  builtin_times_.assign(exe_.builtins.size(), CallTime{});
  for (size_t k = 0; k < exe_.kernels.size(); ++k)
    kernel_times_[k].name = exe_.kernels[k], kernel_times_[k].kernel = true;
  for (size_t b = 0; b < exe_.builtins.size(); ++b) builtin_times_[b].name = exe_.builtins[b];
}

std::vector<VirtualMachine::CallTime> VirtualMachine::profile() const {
  std::vector<CallTime> out;
  for (const auto* list : {&kernel_times_, &builtin_times_})
    for (const CallTime& ct : *list)
      if (ct.calls) out.push_back(ct);
  std::sort(out.begin(), out.end(), [](const CallTime& a, const CallTime& b) { return a.ms > b.ms; });
  return out;
}

Value VirtualMachine::invoke(const std::string& name, std::vector<Value> args) {
  int f = exe_.find_function(name);
  if (f < 0) rt_fail("the package has no function '", name, "'");
  return invoke(f, std::move(args));
}

Value VirtualMachine::invoke(int function, std::vector<Value> args, bool wait) {
  if (function < 0 || size_t(function) >= exe_.functions.size()) rt_fail("no function #", function);
  const Function& f = exe_.functions[size_t(function)];
  if (args.size() != f.params.size()) rt_fail(f.name, " takes ", f.params.size(), " inputs, got ", args.size());
  std::vector<Value> regs(size_t(f.num_registers));
  for (size_t i = 0; i < args.size(); ++i) regs[i] = std::move(args[i]);
  Value r = run(function, regs);
  if (kernel_source_ && wait) kernel_source_->synchronize();
  if (wait && !statuses_.empty()) check_status();
  return r;
}

void VirtualMachine::watch_status(Tensor status, std::string what) {
  statuses_.push_back({std::move(status), std::move(what)});
}

void VirtualMachine::check_status() {
  std::string error;
  for (auto& [t, what] : statuses_) {
    auto* s = static_cast<int64_t*>(t.data());
    if (s[0] == 0 || !error.empty()) continue;
    int64_t value = s[1], size = s[2], axis = s[3];
    error = rt_str(what, ": index ", value, " is out of range for axis ", axis, " of size ", size,
                   " (valid: ", -size, " to ", size - 1, ")");
  }
  if (error.empty()) return;
  for (auto& [t, what] : statuses_) std::fill_n(static_cast<int64_t*>(t.data()), 4, 0);
  throw Error(error);
}

Value VirtualMachine::call(const Value& closure, std::vector<Value> args, bool wait) {
  const auto* c = std::get_if<Closure>(&closure.v);
  if (!c) rt_fail("expected a function value, got ", closure.kind_name());
  std::vector<Value> all = (*c)->captured;
  for (Value& a : args) all.push_back(std::move(a));
  return invoke((*c)->function, std::move(all), wait);
}

namespace {

bool truthy(const Value& v) {
  if (auto* i = std::get_if<int64_t>(&v.v)) return *i != 0;
  if (auto* t = std::get_if<Tensor>(&v.v)) return scalar_truth(*t, "a condition");
  rt_fail("a condition must be a tensor or an integer, got ", v.kind_name());
}

}  // namespace

const std::string& VirtualMachine::callee_name(const Instr& in) const {
  return in.callee_kind == CalleeKind::Function ? exe_.functions[size_t(in.callee)].name
         : in.callee_kind == CalleeKind::Kernel ? exe_.kernels[size_t(in.callee)]
                                                : exe_.builtins[size_t(in.callee)];
}

Value VirtualMachine::run(int function, std::vector<Value>& regs) {
  const Function& f = exe_.functions[size_t(function)];
  std::vector<int64_t> heap(size_t(f.heap_size), 0);
  std::vector<const Value*> argp;
  std::vector<Value> imms;
  std::vector<void*> buffers;
  std::vector<int64_t> shape_args;
  size_t pc = 0;
  while (pc < f.code.size()) {
    const Instr& in = f.code[pc];
    switch (in.op) {
      case Opcode::Ret:
        return std::move(regs[size_t(in.dst)]);
      case Opcode::Goto:
        pc = size_t(int64_t(pc) + in.offset);
        continue;
      case Opcode::If:
        if (kernel_source_ && regs[size_t(in.dst)].is_tensor()) kernel_source_->synchronize();
        pc = truthy(regs[size_t(in.dst)]) ? pc + 1 : size_t(int64_t(pc) + in.offset);
        continue;
      case Opcode::Call:
        break;
    }
    // Resolve the arguments without copying registers or constants.
    argp.clear();
    imms.clear();
    imms.reserve(in.args.size());
    for (const Arg& a : in.args) {
      switch (a.kind) {
        case ArgKind::Register:
          argp.push_back(&regs[size_t(a.value)]);
          break;
        case ArgKind::Const:
          argp.push_back(&consts_[size_t(a.value)]);
          break;
        case ArgKind::Imm:
          imms.emplace_back(a.value);
          argp.push_back(&imms.back());
          break;
      }
    }
    try {
      switch (in.callee_kind) {
        case CalleeKind::Builtin: {
          Value out;
          BuiltinCall call{*this, heap, argp.data(), argp.size(), out};
          call.memo = &memo_[size_t(function)][pc];
          bool data = builtin_syncs_[size_t(in.callee)];
          if (kernel_source_ && data) kernel_source_->synchronize();
          auto t0 = profiling_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
          builtins_[size_t(in.callee)](call);
          if (profiling_ && data) {
            CallTime& ct = builtin_times_[size_t(in.callee)];
            ct.ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            ++ct.calls;
            ct.flops += call.flops;
            ct.integer_ops |= call.integer_ops;
            for (const Value* a : argp)
              if (const auto* t = std::get_if<Tensor>(&a->v)) ct.bytes += double(t->nbytes());
            if (const auto* t = std::get_if<Tensor>(&out.v)) ct.bytes += double(t->nbytes());
          }
          if (in.dst >= 0) regs[size_t(in.dst)] = std::move(out);
          break;
        }
        case CalleeKind::Kernel: {
          // The signature's buffers, then its symbolic parameters as one
          // shape (the bytecode verifier checked the count).
          const KernelSignature& sig = exe_.kernel_signatures[size_t(in.callee)];
          buffers.clear();
          shape_args.clear();
          for (size_t i = 0; i < sig.dtypes.size(); ++i) {
            const auto* t = std::get_if<Tensor>(&argp[i]->v);
            if (!t) rt_fail("kernel argument ", i, " must be a tensor, got ", argp[i]->kind_name());
            if (t->dtype().pack() != sig.dtypes[i] || int64_t(t->ndim()) != sig.ranks[i])
              rt_fail("kernel argument ", i, " is ", t->type_str(), ", the kernel takes ",
                      DType::unpack(sig.dtypes[i]).str(), " of rank ", sig.ranks[i]);
            buffers.push_back(t->data());
            shape_args.insert(shape_args.end(), t->shape().begin(), t->shape().end());
          }
          if (argp.size() > sig.dtypes.size()) {  // the verifier allowed it: the kernel takes_syms()
            const Value* syms = argp.back();
            if (!syms->is_shape()) rt_fail("the kernel's last argument must be a shape, got ", syms->kind_name());
            shape_args.insert(shape_args.end(), syms->shape().begin(), syms->shape().end());
          }
          if (int64_t(shape_args.size()) != sig.num_shape_args)
            rt_fail("the kernel takes ", sig.num_shape_args, " shape values, the call gives ", shape_args.size());
          auto t0 = profiling_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
          int32_t rc = kernels_[size_t(in.callee)](buffers.data(), shape_args.data());
          if (rc == 2) rt_fail("returned error code 2: its arguments' dims disagree with its declaration");
          if (rc != 0) rt_fail("returned error code ", rc);
          if (profiling_) {
            CallTime& ct = kernel_times_[size_t(in.callee)];
            ct.ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            ++ct.calls;
            for (const Value* a : argp)
              if (const auto* t = std::get_if<Tensor>(&a->v)) ct.bytes += double(t->nbytes());
          }
          break;
        }
        case CalleeKind::Function: {
          const Function& g = exe_.functions[size_t(in.callee)];
          if (argp.size() != g.params.size()) rt_fail("takes ", g.params.size(), " arguments, got ", argp.size());
          std::vector<Value> callee_regs(size_t(g.num_registers));
          for (size_t i = 0; i < argp.size(); ++i) callee_regs[i] = *argp[i];
          Value r = run(in.callee, callee_regs);
          if (in.dst >= 0) regs[size_t(in.dst)] = std::move(r);
          break;
        }
      }
    } catch (const Error& e) {
      const std::string& callee = callee_name(in);
      std::string msg = e.what();
      // Shape checks already say where they are; others get the place.
      if (in.callee_kind == CalleeKind::Builtin && callee == "relax.match_shape") throw;
      throw Error(rt_str("in ", f.name, " at ", pc, " (", callee, "): ", msg));
    } catch (const std::bad_alloc&) {
      throw Error(rt_str("in ", f.name, " at ", pc, " (", callee_name(in), "): out of memory"));
    } catch (const std::exception& e) {
      // A builtin's bounds check (vector::at) on arguments no compiler
      // output has: a damaged program.
      throw Error(rt_str("in ", f.name, " at ", pc, " (", callee_name(in), "): malformed call: ", e.what()));
    }
    ++pc;
  }
  rt_fail(f.name, ": fell off the end of the code");
}

}  // namespace relax::rt
