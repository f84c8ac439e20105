// The runtime's pool allocator. Tensors of one model run come and go in the
// same few sizes, so a freed block is kept on a free list for its size class
// and handed out again instead of going back to the system.
//
// Size classes: 64-byte multiples, rounded up so that each power-of-two range
// has four classes (at most 25% waste). Blocks are 64-byte aligned. The pool
// is thread-safe. Storage from the pool may outlive the PoolAllocator object:
// its block then goes back to the system when the last tensor lets go.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "runtime/tensor.h"

namespace relax::rt {

struct PoolStats {
  size_t bytes_in_use = 0;       // class sizes of blocks held by tensors
  size_t peak_bytes_in_use = 0;  // the most bytes_in_use has been
  size_t bytes_cached = 0;       // class sizes of blocks on the free lists
  uint64_t num_allocations = 0;  // allocate() calls
  uint64_t num_reused = 0;       // ... of which a free list served
};

// Where a pool's blocks come from when not from the host heap (device
// memory the host maps, runtime/vulkan.h). Thread-safe.
class BlockSource {
 public:
  virtual ~BlockSource() = default;
  // A 64-byte aligned block of `bytes`, or nullptr: the pool then takes the
  // block from the host heap.
  virtual void* allocate(size_t bytes) = 0;
  // Gives back a block allocate() returned.
  virtual void release(void* block) = 0;
};

class PoolAllocator {
 public:
  // Blocks freed beyond `max_cached_bytes` on the free lists go back to the
  // system (or the source) at once. Blocks come from `source` when given
  // and it has them, else from the host heap.
  explicit PoolAllocator(size_t max_cached_bytes = SIZE_MAX, std::shared_ptr<BlockSource> source = nullptr);
  ~PoolAllocator();
  PoolAllocator(const PoolAllocator&) = delete;
  PoolAllocator& operator=(const PoolAllocator&) = delete;

  // A block of at least `nbytes` bytes; it returns to the pool when the
  // storage is destroyed.
  std::shared_ptr<Storage> allocate(size_t nbytes);
  PoolStats stats() const;
  // Returns every cached block to the system.
  void release_cached();

  // The block size a request of `nbytes` gets.
  static size_t size_class(size_t nbytes);

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace relax::rt
