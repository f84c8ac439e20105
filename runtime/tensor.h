// Run-time tensors: a dtype, a shape and a byte offset into shared,
// reference-counted storage. Copying a Tensor copies the reference, not the
// data; reshape() and view() make new tensors over the same bytes, so a
// weight mapped from a package or a block of the pool is never copied.
//
// Tensors are dense and row-major (docs/runtime_abi.md). Storage the runtime
// allocates is 64-byte aligned, as kernels assume; storage wrapped around
// someone else's memory (an mmapped weight) keeps its owner alive.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/dtype.h"

namespace relax::rt {

class PoolAllocator;

class Storage {
 public:
  static constexpr size_t kAlignment = 64;

  // `data` stays valid as long as `owner` lives; the storage holds `owner`.
  Storage(void* data, size_t size, std::shared_ptr<const void> owner)
      : data_(data), size_(size), owner_(std::move(owner)) {}

  // Fresh 64-byte aligned memory of `size` bytes (uninitialised; never null,
  // even for size 0).
  static std::shared_ptr<Storage> allocate(size_t size);
  // Memory owned elsewhere, e.g. a span of a mapped package: `owner` is
  // whatever keeps it valid.
  static std::shared_ptr<Storage> wrap(const void* data, size_t size, std::shared_ptr<const void> owner);

  void* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void* data_;
  size_t size_;
  std::shared_ptr<const void> owner_;
};

class Tensor {
 public:
  Tensor() = default;  // undefined: no storage
  // A tensor over existing storage; throws rt::Error when the bytes do not
  // fit in the storage.
  Tensor(std::shared_ptr<Storage> storage, DType dtype, std::vector<int64_t> shape, size_t byte_offset = 0);

  // New uninitialised storage (from `pool` when given).
  static Tensor empty(DType dtype, std::vector<int64_t> shape, PoolAllocator* pool = nullptr);
  static Tensor zeros(DType dtype, std::vector<int64_t> shape, PoolAllocator* pool = nullptr);

  bool defined() const { return storage_ != nullptr; }
  void* data() const { return static_cast<char*>(storage_->data()) + offset_; }
  template <class T>
  T* data_as() const {
    return static_cast<T*>(data());
  }
  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int ndim() const { return int(shape_.size()); }
  int64_t dim(int i) const { return shape_.at(size_t(i < 0 ? i + ndim() : i)); }
  int64_t numel() const;
  // Bytes of the elements (sub-byte types packed: 5 x i4 is 3 bytes).
  size_t nbytes() const { return size_t(dtype_.storage_bytes(numel())); }
  size_t byte_offset() const { return offset_; }
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  // The same bytes with another shape (one dim may be -1); no copy. Throws
  // when the element counts differ.
  Tensor reshape(std::vector<int64_t> shape) const;
  // Any dtype and shape over this tensor's storage, starting `byte_offset`
  // bytes after this tensor's first byte; throws when it does not fit.
  Tensor view(DType dtype, std::vector<int64_t> shape, size_t byte_offset = 0) const;
  // A deep copy into fresh storage.
  Tensor clone(PoolAllocator* pool = nullptr) const;

  // "f32[2, 3]", for messages.
  std::string type_str() const;

 private:
  std::shared_ptr<Storage> storage_;
  DType dtype_;
  std::vector<int64_t> shape_;
  size_t offset_ = 0;
};

// The element count of a shape; throws on a negative dim or on overflow.
int64_t shape_numel(const std::vector<int64_t>& shape);
// "[2, 3]".
std::string shape_str(const std::vector<int64_t>& shape);

}  // namespace relax::rt
