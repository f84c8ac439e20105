#include "runtime/tensor.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "runtime/allocator.h"
#include "runtime/error.h"

namespace relax::rt {

std::shared_ptr<Storage> Storage::allocate(size_t size) {
  // aligned_alloc wants a multiple of the alignment; round up (at least one
  // line so that an empty tensor still has a distinct, valid pointer).
  size_t rounded = (size + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded == 0) rounded = kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (!p) rt_fail("out of memory allocating ", size, " bytes");
  std::shared_ptr<void> owner(p, [](void* q) { std::free(q); });
  return std::make_shared<Storage>(p, size, std::move(owner));
}

std::shared_ptr<Storage> Storage::wrap(const void* data, size_t size, std::shared_ptr<const void> owner) {
  // Mapped package sections are read-only; the const is dropped here because
  // kernels take void* for every buffer, and the VM never passes a weight as
  // an output.
  return std::make_shared<Storage>(const_cast<void*>(data), size, std::move(owner));
}

int64_t shape_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) rt_fail("negative dimension ", d, " in shape ", shape_str(shape));
    // (A multiply with an overflow check: a division per dim was a visible
    // share of small models' runs, one per tensor made.)
    if (__builtin_mul_overflow(n, d, &n)) rt_fail("shape ", shape_str(shape), " has too many elements");
  }
  return n;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Tensor::Tensor(std::shared_ptr<Storage> storage, DType dtype, std::vector<int64_t> shape, size_t byte_offset)
    : storage_(std::move(storage)), dtype_(dtype), shape_(std::move(shape)), offset_(byte_offset) {
  if (!storage_) rt_fail("tensor ", type_str(), " has no storage");
  size_t need = size_t(dtype_.storage_bytes(shape_numel(shape_)));
  if (offset_ > storage_->size() || need > storage_->size() - offset_)
    rt_fail("tensor ", type_str(), " at byte ", offset_, " needs ", need, " bytes; its storage has ", storage_->size());
}

Tensor Tensor::empty(DType dtype, std::vector<int64_t> shape, PoolAllocator* pool) {
  size_t n = size_t(dtype.storage_bytes(shape_numel(shape)));
  auto storage = pool ? pool->allocate(n) : Storage::allocate(n);
  return Tensor(std::move(storage), dtype, std::move(shape));
}

Tensor Tensor::zeros(DType dtype, std::vector<int64_t> shape, PoolAllocator* pool) {
  Tensor t = empty(dtype, std::move(shape), pool);
  std::memset(t.data(), 0, t.nbytes());
  return t;
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;  // validated at construction
  return n;
}

Tensor Tensor::reshape(std::vector<int64_t> shape) const {
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1 && infer < 0) {
      infer = int(i);
      continue;
    }
    if (shape[i] < 0) rt_fail("reshape of ", type_str(), " to ", shape_str(shape), ": bad dimension");
    known *= shape[i];
  }
  if (infer >= 0) {
    if (known == 0 || numel() % known != 0)
      rt_fail("reshape of ", type_str(), " to ", shape_str(shape), ": cannot infer the -1 dimension");
    shape[size_t(infer)] = numel() / known;
  }
  if (shape_numel(shape) != numel())
    rt_fail("reshape of ", type_str(), " to ", shape_str(shape), ": element counts differ");
  return Tensor(storage_, dtype_, std::move(shape), offset_);
}

Tensor Tensor::view(DType dtype, std::vector<int64_t> shape, size_t byte_offset) const {
  if (!defined()) rt_fail("view of an undefined tensor");
  return Tensor(storage_, dtype, std::move(shape), offset_ + byte_offset);
}

Tensor Tensor::clone(PoolAllocator* pool) const {
  Tensor t = empty(dtype_, shape_, pool);
  if (nbytes()) std::memcpy(t.data(), data(), nbytes());
  return t;
}

std::string Tensor::type_str() const { return dtype_.str() + shape_str(shape_); }

}  // namespace relax::rt
