// Builtins of the list ops (ir/ops/list.cc): ONNX sequences. A list is a
// VM tuple of tensors; each builtin returns a new tuple, so lists are
// values like any other.
//
//   relax.list_at(l, i)                         -> l[i]
//   relax.list_insert(l, t[, i])                -> l with a copy of t before i (at the end without i)
//   relax.list_erase(l[, i])                    -> l without l[i] (the last without i)
//   relax.list_length(l)                        -> i64 scalar tensor
//   relax.list_split(x, axis, keepdims[, split]) -> the parts of x along axis
//   relax.list_concat(l, axis, new_axis)        -> the tensors joined (or stacked) along axis
//
// Positions count from the end when negative. A tensor put into a list is
// copied: the list outlives the storage the memory plan gave the tensor.
#include <cstring>
#include <numeric>

#include "runtime/builtin_util.h"

namespace relax::rt {
namespace {

// Position argument i in [0, size) (or [0, size] when `end_ok`), from the end when negative.
size_t position(const BuiltinCall& c, size_t i, size_t size, bool end_ok, const char* what) {
  int64_t p = scalar_int(c.arg(i), what);
  int64_t n = int64_t(size), q = p < 0 ? p + n : p;
  if (q < 0 || q > n || (q == n && !end_ok))
    rt_fail(what, ": position ", p, " is out of range for a sequence of length ", n);
  return size_t(q);
}

void list_at(BuiltinCall& c) {
  const std::vector<Value>& l = c.arg(0).tuple("SequenceAt's sequence");
  c.out = l[position(c, 1, l.size(), false, "SequenceAt")];
}

void list_insert(BuiltinCall& c) {
  std::vector<Value> l = c.arg(0).tuple("SequenceInsert's sequence");
  const Tensor& t = c.arg(1).tensor("SequenceInsert's tensor");
  if (!l.empty() && !(l[0].tensor().dtype() == t.dtype()))
    rt_fail("SequenceInsert: a ", t.dtype().str(), " tensor into a sequence of ", l[0].tensor().dtype().str());
  size_t at = c.num_args > 2 ? position(c, 2, l.size(), true, "SequenceInsert") : l.size();
  l.insert(l.begin() + std::ptrdiff_t(at), Value(t.clone(c.vm.pool())));
  c.out = make_tuple(std::move(l));
}

void list_erase(BuiltinCall& c) {
  std::vector<Value> l = c.arg(0).tuple("SequenceErase's sequence");
  if (l.empty()) rt_fail("SequenceErase: the sequence is empty");
  size_t at = c.num_args > 1 ? position(c, 1, l.size(), false, "SequenceErase") : l.size() - 1;
  l.erase(l.begin() + std::ptrdiff_t(at));
  c.out = make_tuple(std::move(l));
}

void list_length(BuiltinCall& c) {
  const std::vector<Value>& l = c.arg(0).tuple("SequenceLength's sequence");
  Tensor n = Tensor::empty(DType::i64(), {}, c.vm.pool());
  n.data_as<int64_t>()[0] = int64_t(l.size());
  c.out = n;
}

void list_split(BuiltinCall& c) {
  const Tensor& x = c.arg(0).tensor("SplitToSequence's input");
  int axis = normalize_axis(scalar_int(c.arg(1), "SplitToSequence's axis"), x.ndim(), "SplitToSequence");
  bool keepdims = scalar_int(c.arg(2), "SplitToSequence's keepdims") != 0;
  AxisSplit v = split_at(x.shape(), axis);
  std::vector<int64_t> lengths;
  bool has_split = c.num_args > 3, drop = !keepdims;
  if (!has_split) {
    lengths.assign(size_t(v.len), 1);
  } else {
    const Tensor& s = c.arg(3).tensor("SplitToSequence's split");
    if (s.ndim() == 0) {
      int64_t k = element_as_int64(s, 0);
      if (k <= 0) rt_fail("SplitToSequence: split ", k, " must be positive");
      if (drop && k != 1) rt_fail("SplitToSequence: keepdims 0 with a split of ", k, ", not 1");
      for (int64_t at = 0; at < v.len; at += lengths.back()) lengths.push_back(std::min(k, v.len - at));
    } else {
      drop = false;  // keepdims applies to a scalar split only
      for (int64_t i = 0; i < s.numel(); ++i) lengths.push_back(element_as_int64(s, i));
      int64_t sum = 0;
      for (int64_t n : lengths) {
        if (n < 0) rt_fail("SplitToSequence: split has a negative length ", n);
        if (n > v.len - sum) rt_fail("SplitToSequence: split sums past the axis' length ", v.len);
        sum += n;
      }
      if (sum != v.len) rt_fail("SplitToSequence: split sums to ", sum, " but the axis has length ", v.len);
    }
  }
  size_t eb = elem_bytes(x, "SplitToSequence");
  const char* src = static_cast<const char*>(x.data());
  std::vector<Value> parts;
  int64_t start = 0;
  for (int64_t n : lengths) {
    std::vector<int64_t> shape = x.shape();
    shape[size_t(axis)] = n;
    if (drop) shape.erase(shape.begin() + axis);
    Tensor p = Tensor::empty(x.dtype(), shape, c.vm.pool());
    char* dst = static_cast<char*>(p.data());
    size_t chunk = size_t(n * v.inner) * eb;
    for (int64_t o = 0; o < v.outer; ++o)
      if (chunk) std::memcpy(dst + size_t(o) * chunk, src + size_t((o * v.len + start) * v.inner) * eb, chunk);
    parts.emplace_back(std::move(p));
    start += n;
  }
  c.out = make_tuple(std::move(parts));
}

void list_concat(BuiltinCall& c) {
  const std::vector<Value>& l = c.arg(0).tuple("ConcatFromSequence's sequence");
  bool new_axis = scalar_int(c.arg(2), "ConcatFromSequence's new_axis") != 0;
  if (l.empty()) rt_fail("ConcatFromSequence: the sequence is empty");
  const Tensor& first = l[0].tensor("a sequence's element");
  int rank = first.ndim() + (new_axis ? 1 : 0);
  int axis = normalize_axis(scalar_int(c.arg(1), "ConcatFromSequence's axis"), rank, "ConcatFromSequence");
  // Each part as a tensor of the result's rank (a unit axis inserted when stacking).
  std::vector<int64_t> shape = first.shape();
  if (new_axis) shape.insert(shape.begin() + axis, 1);
  int64_t total = 0;
  for (const Value& e : l) {
    const Tensor& t = e.tensor("a sequence's element");
    std::vector<int64_t> s = t.shape();
    if (new_axis) s.insert(s.begin() + axis, 1);
    bool fits = t.dtype() == first.dtype() && s.size() == shape.size();
    for (size_t i = 0; fits && i < s.size(); ++i) fits = int(i) == axis || s[i] == shape[i];
    if (!fits)
      rt_fail("ConcatFromSequence: elements ", first.type_str(), " and ", t.type_str(), " cannot be joined along axis ",
              axis);
    total += s[size_t(axis)];
  }
  std::vector<int64_t> out_shape = shape;
  out_shape[size_t(axis)] = total;
  Tensor out = Tensor::empty(first.dtype(), out_shape, c.vm.pool());
  AxisSplit ov = split_at(out_shape, axis);
  size_t eb = elem_bytes(first, "ConcatFromSequence");
  char* dst = static_cast<char*>(out.data());
  int64_t start = 0;
  for (const Value& e : l) {
    const Tensor& t = e.tensor();
    int64_t n = new_axis ? 1 : t.dim(axis);
    size_t chunk = size_t(n * ov.inner) * eb;
    const char* src = static_cast<const char*>(t.data());
    for (int64_t o = 0; o < ov.outer; ++o)
      if (chunk) std::memcpy(dst + size_t((o * ov.len + start) * ov.inner) * eb, src + size_t(o) * chunk, chunk);
    start += n;
  }
  c.out = out;
}

}  // namespace

void register_list_builtins() {
  // Positions may be tensors a kernel wrote: these read data.
  register_builtin("relax.list_at", list_at);
  register_builtin("relax.list_insert", list_insert);
  register_builtin("relax.list_erase", list_erase);
  register_builtin("relax.list_length", list_length, /*touches_data=*/false);
  register_builtin("relax.list_split", list_split);
  register_builtin("relax.list_concat", list_concat);
}

}  // namespace relax::rt
