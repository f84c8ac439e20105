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
#include <optional>
#include <string>

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

// The most bytes the runtime's pools hold from the host heap at once, all
// pools of the process together (blocks in use and cached): a block that
// would pass it is refused with an rt::Error naming the bytes, before the
// system is asked, so that a run too large for the machine fails cleanly
// instead of being killed. Default: $RELAX_MAX_MEMORY (bytes, or with a K,
// M, G or T suffix) if set, else this machine's physical memory.
size_t memory_cap();
void set_memory_cap(size_t bytes);
// What the pools hold from the host heap now.
size_t memory_held();
// "8G", "512M", "1000" as bytes; nullopt when not a size.
std::optional<size_t> parse_bytes(const std::string& text);

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
