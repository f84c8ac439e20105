#include "runtime/allocator.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <cctype>
#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "runtime/error.h"

namespace relax::rt {
namespace {

std::atomic<size_t> g_held{0};

constexpr size_t kHugePage = size_t(2) << 20;

// A block from the host heap. One of 2 MiB or more is aligned to 2 MiB and
// asks for transparent huge pages (where the system leaves them to
// madvise): a kernel streaming a large tensor then misses the TLB once per
// 2 MiB instead of once per 4 KiB, which on a virtual machine's nested page
// tables is the difference between Whisper-base's encoder in 0.62 s and in
// 1.2 s (a copy of the weights in huge pages gained nothing measurable on
// GPT-2-small's decode step, and would cost every process its own copy).
// std::free releases either kind.
void* host_block(size_t bytes) {
  if (bytes < kHugePage) return std::aligned_alloc(Storage::kAlignment, bytes);
  size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* p = std::aligned_alloc(kHugePage, rounded);
  if (p) madvise(p, rounded, MADV_HUGEPAGE);
  return p;
}

size_t default_cap() {
  if (const char* env = std::getenv("RELAX_MAX_MEMORY"))
    if (auto b = parse_bytes(env)) return *b;
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? size_t(pages) * size_t(page) : SIZE_MAX;
}

std::atomic<size_t>& cap() {
  static std::atomic<size_t> c{default_cap()};
  return c;
}

}  // namespace

size_t memory_cap() { return cap().load(std::memory_order_relaxed); }
void set_memory_cap(size_t bytes) { cap().store(bytes, std::memory_order_relaxed); }
size_t memory_held() { return g_held.load(std::memory_order_relaxed); }

std::optional<size_t> parse_bytes(const std::string& text) {
  size_t i = 0, v = 0;
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
    if (__builtin_mul_overflow(v, size_t(10), &v) || __builtin_add_overflow(v, size_t(text[i] - '0'), &v))
      return std::nullopt;
  }
  if (i == 0) return std::nullopt;
  int shift = 0;
  if (i < text.size()) {
    const char u = char(std::toupper(static_cast<unsigned char>(text[i++])));
    shift = u == 'K' ? 10 : u == 'M' ? 20 : u == 'G' ? 30 : u == 'T' ? 40 : -1;
    if (shift < 0) return std::nullopt;
    if (i < text.size() && (text[i] == 'B' || text[i] == 'b')) ++i;  // "8GB"
  }
  if (i != text.size() || (shift && v > (SIZE_MAX >> shift))) return std::nullopt;
  return v << shift;
}

struct PoolAllocator::State {
  struct Block {
    void* p;
    bool from_source;
  };
  std::mutex mu;
  std::unordered_map<size_t, std::vector<Block>> free_lists;
  PoolStats stats;
  size_t max_cached = SIZE_MAX;
  std::shared_ptr<BlockSource> source;
  bool closed = false;  // the PoolAllocator is gone: free blocks at once

  void free_block(Block b, size_t cls) {
    if (b.from_source) {
      source->release(b.p);
    } else {
      std::free(b.p);
      g_held.fetch_sub(cls, std::memory_order_relaxed);
    }
  }

  void give_back(Block b, size_t cls) {
    std::lock_guard lock(mu);
    stats.bytes_in_use -= cls;
    if (closed || stats.bytes_cached + cls > max_cached) {
      free_block(b, cls);
      return;
    }
    free_lists[cls].push_back(b);
    stats.bytes_cached += cls;
  }

  void release_all() {
    for (auto& [cls, list] : free_lists)
      for (Block b : list) free_block(b, cls);
    free_lists.clear();
    stats.bytes_cached = 0;
  }
};

namespace {

// The storage's owner: returns the block to the pool's state (kept alive by
// this reference even when the PoolAllocator itself is destroyed first).
struct PoolBlock {
  std::shared_ptr<PoolAllocator::State> state;
  size_t cls;
  bool from_source;
  void operator()(void* p) const { state->give_back({p, from_source}, cls); }
};

}  // namespace

PoolAllocator::PoolAllocator(size_t max_cached_bytes, std::shared_ptr<BlockSource> source)
    : state_(std::make_shared<State>()) {
  state_->max_cached = max_cached_bytes;
  state_->source = std::move(source);
}

PoolAllocator::~PoolAllocator() {
  std::lock_guard lock(state_->mu);
  state_->closed = true;
  state_->release_all();
}

size_t PoolAllocator::size_class(size_t nbytes) {
  constexpr size_t kMin = Storage::kAlignment;
  if (nbytes <= kMin) return kMin;
  // nbytes is in (2^k, 2^(k+1)]: round up to a multiple of 2^(k-2), and of 64.
  int k = std::bit_width(nbytes - 1) - 1;
  size_t step = k >= 8 ? size_t(1) << (k - 2) : kMin;
  return (nbytes + step - 1) / step * step;
}

std::shared_ptr<Storage> PoolAllocator::allocate(size_t nbytes) {
  size_t cls = size_class(nbytes);
  void* p = nullptr;
  bool from_source = false;
  {
    std::lock_guard lock(state_->mu);
    PoolStats& s = state_->stats;
    ++s.num_allocations;
    auto it = state_->free_lists.find(cls);
    if (it != state_->free_lists.end() && !it->second.empty()) {
      p = it->second.back().p;
      from_source = it->second.back().from_source;
      it->second.pop_back();
      s.bytes_cached -= cls;
      ++s.num_reused;
    }
    s.bytes_in_use += cls;
    if (s.bytes_in_use > s.peak_bytes_in_use) s.peak_bytes_in_use = s.bytes_in_use;
  }
  if (!p && state_->source) {
    p = state_->source->allocate(cls);
    from_source = p != nullptr;
  }
  if (!p) {
    // Within the cap (this pool's cached blocks go back first when they
    // would pass it), then from the system.
    const size_t limit = memory_cap();
    size_t held = g_held.fetch_add(cls, std::memory_order_relaxed) + cls;
    if (held > limit || held < cls) {
      g_held.fetch_sub(cls, std::memory_order_relaxed);
      {
        std::lock_guard lock(state_->mu);
        state_->release_all();
      }
      held = g_held.fetch_add(cls, std::memory_order_relaxed) + cls;
    }
    if (held <= limit && held >= cls) p = host_block(cls);
    if (!p) {
      g_held.fetch_sub(cls, std::memory_order_relaxed);
      std::lock_guard lock(state_->mu);
      state_->stats.bytes_in_use -= cls;
      if (held > limit || held < cls)
        rt_fail("out of memory: ", nbytes, " bytes more would take the runtime's tensors to ", held - cls + nbytes,
                " bytes, past the cap of ", limit,
                " (relax-run --max-memory, RELAX_MAX_MEMORY or relax_set_max_memory; by default this machine's "
                "memory)");
      rt_fail("out of memory: the system refused ", nbytes, " bytes (the runtime's tensors hold ", held - cls, ")");
    }
  }
  std::shared_ptr<void> owner(p, PoolBlock{state_, cls, from_source});
  return std::make_shared<Storage>(p, nbytes, std::move(owner));
}

PoolStats PoolAllocator::stats() const {
  std::lock_guard lock(state_->mu);
  return state_->stats;
}

void PoolAllocator::release_cached() {
  std::lock_guard lock(state_->mu);
  state_->release_all();
}

}  // namespace relax::rt
