// The core builtins the VM lowering emits: shape checks and binding, shape
// values, allocation, tuples. Data-dependent ops and library kernels
// register their own (runtime/builtins_*.cc).
#include <cstring>

#include "runtime/compare.h"
#include "runtime/error.h"
#include "runtime/vm.h"

namespace relax::rt {
namespace {

namespace P = ShapePattern;

std::vector<std::string> split_names(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t end = s.find('\x1f', start);
    out.push_back(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

bool is_number(const std::string& s) { return !s.empty() && s.find_first_not_of("-0123456789") == std::string::npos; }

// raise(message): stops the run with the message (a branch that the
// compiler could not build for these shapes, taken: convert_control.cc).
void raise_b(BuiltinCall& c) { rt_fail(c.arg(0).str()); }

// match_shape(value, pattern, context, dim names, dtype)
void match_shape(BuiltinCall& c) {
  const Value& value = c.arg(0);
  const std::vector<int64_t>& pat = c.arg(1).shape("match_shape pattern");
  const std::string& ctx = c.arg(2).str();
  int64_t ndim = pat.at(0);
  std::vector<int64_t> dims;
  if (const auto* t = std::get_if<Tensor>(&value.v)) {
    DType want = DType::unpack(c.arg(4).int_value());
    if (!want.is_void() && !(t->dtype() == want))
      rt_fail(ctx, ": has dtype ", t->dtype().str(), ", expected ", want.str());
    dims = t->shape();
  } else if (value.is_shape()) {
    dims = value.shape();
  } else if (value.is_int()) {
    dims = {value.int_value()};
  } else if (ndim == -2) {
    rt_fail(ctx, ": expected an integer, got a ", value.kind_name());
  } else {
    rt_fail(ctx, ": expected a tensor or a shape, got a ", value.kind_name());
  }
  if (ndim == -1) return;
  if (ndim >= 0 && int64_t(dims.size()) != ndim)
    rt_fail(ctx, ": has rank ", dims.size(), ", expected ", ndim, " (got shape ", shape_str(dims), ")");
  std::vector<std::string> names = split_names(c.arg(3).str());
  auto dim_label = [&](size_t i) {
    std::string n = i < names.size() ? names[i] : "?";
    return ndim == -2 ? std::string("the value") : rt_str("dim ", i, is_number(n) ? "" : " (" + n + ")");
  };
  // Binds first, then the expressions that may use them.
  for (int pass = 0; pass < 2; ++pass) {
    size_t k = 1;
    for (size_t i = 0; i < dims.size(); ++i) {
      int64_t tag = pat.at(k);
      if (tag == P::kAny) {
        k += 1;
      } else if (tag == P::kBind) {
        int64_t slot = pat.at(k + 1), lo = pat.at(k + 2), hi = pat.at(k + 3);
        k += 4;
        if (pass != 0) continue;
        if (dims[i] < lo || dims[i] > hi) {
          std::string n = i < names.size() ? names[i] : "?";
          rt_fail(ctx, ": ", dim_label(i), " is ", dims[i], ", outside the bounds of ", n, " [", lo, ", ",
                  hi == INT64_MAX ? std::string("inf") : std::to_string(hi), "]");
        }
        c.heap.at(size_t(slot)) = dims[i];
      } else if (tag == P::kExpr) {
        int64_t len = pat.at(k + 1);
        if (k + 2 + size_t(len) > pat.size()) rt_fail("match_shape: malformed pattern");
        const int64_t* code = pat.data() + k + 2;
        k += 2 + size_t(len);
        if (pass != 1) continue;
        int64_t want = eval_shape_code(code, len, c.heap.data(), int64_t(c.heap.size()));
        if (dims[i] != want) {
          std::string n = i < names.size() ? names[i] : "?";
          rt_fail(ctx, ": ", dim_label(i), " is ", dims[i], ", expected ",
                  is_number(n) ? std::to_string(want) : rt_str(n, " = ", want));
        }
      } else {
        rt_fail("match_shape: malformed pattern");
      }
    }
  }
}

std::vector<int64_t> eval_pattern(BuiltinCall& c, const std::vector<int64_t>& pat) {
  std::vector<int64_t> out;
  size_t k = 1;
  int64_t n = pat.at(0) == -2 ? 1 : pat.at(0);
  if (n > 0 && size_t(n) <= pat.size()) out.reserve(size_t(n));
  for (int64_t i = 0; i < n; ++i) {
    if (pat.at(k) != P::kExpr) rt_fail("make_shape: malformed pattern");
    int64_t len = pat.at(k + 1);
    if (k + 2 + size_t(len) > pat.size()) rt_fail("make_shape: malformed pattern");
    out.push_back(eval_shape_code(pat.data() + k + 2, len, c.heap.data(), int64_t(c.heap.size())));
    k += 2 + size_t(len);
  }
  return out;
}

// make_shape(pattern): the dims the pattern's shape code computes from the
// heap. A call site keeps its last result with the heap it came from
// (BuiltinCall::memo): the next run with the same shapes gets the same
// value again without evaluating or allocating (a model of 100 kernels
// makes about 60 shapes a run).
struct ShapeMemo {
  const void* pattern = nullptr;
  std::vector<int64_t> heap;
  Value shape;
};
void make_shape_b(BuiltinCall& c) {
  const std::vector<int64_t>& pat = c.arg(0).shape("make_shape pattern");
  auto* memo = c.memo ? static_cast<ShapeMemo*>(c.memo->get()) : nullptr;
  if (memo && memo->pattern == pat.data() && memo->heap == c.heap) {
    c.out = memo->shape;
    return;
  }
  c.out = make_shape(eval_pattern(c, pat));
  if (!c.memo) return;
  if (!memo) {
    auto fresh = std::make_shared<ShapeMemo>();
    memo = fresh.get();
    *c.memo = std::move(fresh);
  }
  memo->pattern = pat.data(), memo->heap = c.heap, memo->shape = c.out;
}

void make_prim(BuiltinCall& c) { c.out = eval_pattern(c, c.arg(0).shape("make_prim pattern")).at(0); }

// A tensor from the VM's pool; a refusal (the memory cap, the system)
// names it: argument `name_at`, where the package gives its name.
Tensor alloc_named(BuiltinCall& c, DType dtype, const std::vector<int64_t>& shape, size_t name_at, const char* what) {
  try {
    return Tensor::empty(dtype, shape, c.vm.pool());
  } catch (const Error& e) {
    const std::string name = c.num_args > name_at ? c.arg(name_at).str("a name") : "";
    rt_fail(what, name.empty() ? "" : " '" + name + "'", " ", dtype.str(), shape_str(shape), ": ", e.what());
  }
}

// alloc_tensor(shape, dtype[, name]).
void alloc_tensor(BuiltinCall& c) {
  const std::vector<int64_t>& shape = c.arg(0).shape("alloc_tensor shape");
  for (int64_t d : shape)
    if (d < 0) rt_fail("cannot allocate a tensor of shape ", shape_str(shape), ": a dim is negative");
  c.out = alloc_named(c, DType::unpack(c.arg(1).int_value()), shape, 2, "tensor");
}

// alloc_storage(shape(nbytes)[, name]): a planned block, held as a u8 tensor.
void alloc_storage(BuiltinCall& c) {
  const std::vector<int64_t>& size = c.arg(0).shape("alloc_storage size");
  if (size.size() != 1 || size[0] < 0) rt_fail("alloc_storage: bad size ", shape_str(size));
  c.out = alloc_named(c, DType::u(8), {size[0]}, 1, "planned storage");
}

// alloc_storage_persistent(size, site): the block this site got last while
// it is big enough, else a new one that is kept.
void alloc_storage_persistent(BuiltinCall& c) {
  const std::vector<int64_t>& size = c.arg(0).shape("alloc_storage size");
  if (size.size() != 1 || size[0] < 0) rt_fail("alloc_storage: bad size ", shape_str(size));
  Tensor& kept = c.vm.persistent_storage(c.arg(1).str("alloc_storage site"));
  if (!kept.defined() || kept.numel() < size[0]) {
    kept = Tensor();  // the old block back to the pool first
    kept = Tensor::empty(DType::u(8), {size[0]}, c.vm.pool());
  }
  c.out = kept;
}

// alloc_tensor_in(storage, shape, dtype): a tensor over the storage's first
// bytes; an error (not an overrun) when the plan's storage is too small.
void alloc_tensor_in(BuiltinCall& c) {
  const Tensor& storage = c.arg(0).tensor("alloc_tensor storage");
  const std::vector<int64_t>& shape = c.arg(1).shape("alloc_tensor shape");
  for (int64_t d : shape)
    if (d < 0) rt_fail("cannot allocate a tensor of shape ", shape_str(shape), ": a dim is negative");
  DType dtype = DType::unpack(c.arg(2).int_value());
  int64_t need = dtype.storage_bytes(shape_numel(shape));
  if (need > storage.numel())
    rt_fail("planned memory: a ", dtype.str(), shape_str(shape), " tensor needs ", need,
            " bytes but its storage holds ", storage.numel(),
            " (a symbolic dim beyond the bound the package was built with?)");
  c.out = storage.view(dtype, shape);
}

// kernel_status(what): this call site's status tensor (VirtualMachine::
// watch_status), made zero once per VM and kept; kernels that check their
// input write it, the VM reads it when the run's kernels have finished.
void kernel_status(BuiltinCall& c) {
  if (c.memo && *c.memo) {
    c.out = *static_cast<Tensor*>(c.memo->get());
    return;
  }
  Tensor t = Tensor::empty(DType::i64(), {4}, c.vm.pool());
  std::fill_n(static_cast<int64_t*>(t.data()), 4, 0);
  c.vm.watch_status(t, c.arg(0).str("kernel_status message"));
  if (c.memo) *c.memo = std::make_shared<Tensor>(t);
  c.out = t;
}

void make_tuple_b(BuiltinCall& c) {
  std::vector<Value> fields;
  for (size_t i = 0; i < c.num_args; ++i) fields.push_back(*c.args[i]);
  c.out = make_tuple(std::move(fields));
}

void tuple_get(BuiltinCall& c) {
  const std::vector<Value>& t = c.arg(0).tuple("tuple_get");
  int64_t i = c.arg(1).int_value();
  if (i < 0 || size_t(i) >= t.size()) rt_fail("tuple index ", i, " out of range for a tuple of ", t.size());
  c.out = t[size_t(i)];
}

void move(BuiltinCall& c) { c.out = c.arg(0); }

void shape_of(BuiltinCall& c) { c.out = make_shape(c.arg(0).tensor("shape_of").shape()); }

void tensor_to_shape(BuiltinCall& c) {
  const Tensor& t = c.arg(0).tensor("tensor_to_shape");
  if (t.ndim() != 1) rt_fail("tensor_to_shape: expected a 1-D tensor, got ", t.type_str());
  if (!(t.dtype() == DType::i64() || t.dtype() == DType::i32()))
    rt_fail("tensor_to_shape: expected an i64 or i32 tensor, got ", t.type_str());
  std::vector<int64_t> dims(size_t(t.numel()));
  for (size_t i = 0; i < dims.size(); ++i) dims[i] = element_as_int64(t, int64_t(i));
  c.out = make_shape(std::move(dims));
}

void shape_to_tensor(BuiltinCall& c) {
  const std::vector<int64_t>& s = c.arg(0).shape("shape_to_tensor");
  Tensor t = Tensor::empty(DType::i64(), {int64_t(s.size())}, c.vm.pool());
  if (!s.empty()) std::memcpy(t.data(), s.data(), s.size() * 8);
  c.out = std::move(t);
}

// reinterpret(x, packed dtype): x's bytes as another dtype of the same width.
void reinterpret(BuiltinCall& c) {
  const Tensor& x = c.arg(0).tensor("reinterpret");
  DType d = DType::unpack(c.arg(1).int_value());
  if (d.storage_bits() != x.dtype().storage_bits())
    rt_fail("reinterpret: ", x.dtype().str(), " and ", d.str(), " differ in width");
  c.out = x.view(d, x.shape());
}

}  // namespace

void register_control_builtins();  // runtime/builtins_control.cc
void register_blas_builtins();     // runtime/builtins_blas.cc (and builtins_matmul.cc)
void register_pool_builtins();     // runtime/builtins_pool.cc
void register_layout_builtins();   // runtime/builtins_layout.cc
void register_image_builtins();    // runtime/builtins_image.cc
void register_data_builtins();     // runtime/builtins_data.cc
void register_shape_builtins();    // runtime/builtins_shape.cc
void register_list_builtins();     // runtime/builtins_list.cc
void register_cuda_builtins();     // runtime/cuda.cc

void register_core_builtins() {
  register_control_builtins();
  register_blas_builtins();
  register_pool_builtins();
  register_layout_builtins();
  register_image_builtins();
  register_data_builtins();
  register_shape_builtins();
  register_list_builtins();
  register_cuda_builtins();
  register_builtin("relax.match_shape", match_shape, /*touches_data=*/false);
  register_builtin("relax.raise", raise_b, /*touches_data=*/false);
  register_builtin("relax.make_shape", make_shape_b, /*touches_data=*/false);
  register_builtin("relax.make_prim", make_prim, /*touches_data=*/false);
  register_builtin("relax.alloc_tensor", alloc_tensor, /*touches_data=*/false);
  register_builtin("relax.alloc_storage", alloc_storage, /*touches_data=*/false);
  register_builtin("relax.alloc_storage_persistent", alloc_storage_persistent, /*touches_data=*/false);
  register_builtin("relax.alloc_tensor_in", alloc_tensor_in, /*touches_data=*/false);
  register_builtin("relax.make_tuple", make_tuple_b, /*touches_data=*/false);
  register_builtin("relax.kernel_status", kernel_status, /*touches_data=*/false);
  register_builtin("relax.tuple_get", tuple_get, /*touches_data=*/false);
  register_builtin("relax.move", move, /*touches_data=*/false);
  register_builtin("relax.shape_of", shape_of, /*touches_data=*/false);
  register_builtin("relax.tensor_to_shape", tensor_to_shape);
  register_builtin("relax.shape_to_tensor", shape_to_tensor);
  register_builtin("relax.reinterpret", reinterpret, /*touches_data=*/false);
}

}  // namespace relax::rt
