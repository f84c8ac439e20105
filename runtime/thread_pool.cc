#include "runtime/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <string>

namespace relax::rt {
namespace {

// True on a thread while it runs a chunk: a parallel_for from there is nested.
thread_local bool t_in_parallel = false;

// Spin iterations a thread polls before it sleeps: kernels call parallel_for
// back to back, and a condition-variable wake-up costs tens of microseconds.
constexpr int kSpin = 4000;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

std::mutex g_pool_mu;
std::shared_ptr<ThreadPool> g_pool;

}  // namespace

int ThreadPool::default_num_threads() {
  if (const char* env = std::getenv("RELAX_NUM_THREADS")) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  unsigned hw = std::thread::hardware_concurrency();
  return hw ? int(hw) : 1;
}

namespace {
// Run::claim: generation (bits 32-63), end of the unclaimed chunks (16-31), their start (0-15).
constexpr uint32_t generation_of(uint64_t claim) { return uint32_t(claim >> 32); }
constexpr uint32_t end_of(uint64_t claim) { return uint32_t(claim >> 16) & 0xffff; }
constexpr uint32_t start_of(uint64_t claim) { return uint32_t(claim) & 0xffff; }
}  // namespace

ThreadPool::ThreadPool(int num_threads)
    : num_threads_(num_threads > 0 ? num_threads : default_num_threads()), runs_(new Run[size_t(num_threads_)]) {
  workers_.reserve(size_t(num_threads_ - 1));
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(wake_mu_);
    stop_.store(true, std::memory_order_release);
    generation_.store(generation_.load() + 1, std::memory_order_release);
  }
  wake_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

int64_t ThreadPool::claim(uint32_t generation, int r, bool from_back) {
  std::atomic<uint64_t>& word = runs_[size_t(r)].claim;
  uint64_t c = word.load(std::memory_order_acquire);
  for (;;) {
    if (generation_of(c) != generation || start_of(c) >= end_of(c)) return -1;
    uint64_t next = from_back ? c - (uint64_t(1) << 16) : c + 1;
    if (word.compare_exchange_weak(c, next, std::memory_order_acq_rel))
      return from_back ? int64_t(end_of(c)) - 1 : int64_t(start_of(c));
  }
}

void ThreadPool::work(uint32_t generation, int home) {
  for (int r = home, tried = 0; tried < num_threads_;) {
    const int64_t index = claim(generation, r, r != home);
    if (index < 0) {
      // This run is done: the next one's last chunks.
      r = r + 1 == num_threads_ ? 0 : r + 1, ++tried;
      continue;
    }
    // Claimed: the job cannot finish (nor its fields change) before this chunk does.
    const uint32_t parts = parts_.load(std::memory_order_relaxed);
    const int64_t chunk = chunk_.load(std::memory_order_relaxed), begin = index * chunk;
    const int64_t end = std::min(n_.load(std::memory_order_relaxed), begin + chunk);
    bool outer = t_in_parallel;
    t_in_parallel = true;
    body_.load(std::memory_order_relaxed)(begin, end, ctx_.load(std::memory_order_relaxed));
    t_in_parallel = outer;
    if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == parts) {
      std::lock_guard lock(done_mu_);
      done_cv_.notify_one();
    }
  }
}

void ThreadPool::worker_loop(int home) {
  uint32_t seen = 0;
  for (;;) {
    uint32_t g = generation_.load(std::memory_order_acquire);
    for (int i = 0; g == seen && i < kSpin; ++i) {
      cpu_relax();
      g = generation_.load(std::memory_order_acquire);
    }
    if (g == seen) {
      std::unique_lock lock(wake_mu_);
      wake_cv_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      g = generation_.load(std::memory_order_acquire);
    }
    seen = g;
    if (stop_.load(std::memory_order_acquire)) return;
    work(g, home);
  }
}

void ThreadPool::parallel_for(int64_t n, Body body, void* ctx) {
  if (n <= 0) return;
  std::unique_lock run(run_mu_, std::defer_lock);
  if (num_threads_ == 1 || n == 1 || t_in_parallel || !run.try_lock()) {
    // Serial: no workers, nothing to split, or the workers are taken.
    bool outer = t_in_parallel;
    t_in_parallel = true;
    body(0, n, ctx);
    t_in_parallel = outer;
    return;
  }
  const int64_t most = std::min<int64_t>({n, int64_t(kChunksPerThread) * num_threads_, 0xffff});
  const int64_t chunk = (n + most - 1) / most;
  const uint32_t parts = uint32_t((n + chunk - 1) / chunk);
  n_.store(n, std::memory_order_relaxed);
  chunk_.store(chunk, std::memory_order_relaxed);
  body_.store(body, std::memory_order_relaxed);
  ctx_.store(ctx, std::memory_order_relaxed);
  parts_.store(parts, std::memory_order_relaxed);
  done_.store(0, std::memory_order_relaxed);
  const uint32_t generation = generation_.load(std::memory_order_relaxed) + 1;
  for (int r = 0; r < num_threads_; ++r) {
    const uint64_t start = uint64_t(parts) * uint64_t(r) / uint64_t(num_threads_);
    const uint64_t end = uint64_t(parts) * uint64_t(r + 1) / uint64_t(num_threads_);
    runs_[size_t(r)].claim.store(uint64_t(generation) << 32 | end << 16 | start, std::memory_order_relaxed);
  }
  {
    std::lock_guard lock(wake_mu_);
    generation_.store(generation, std::memory_order_release);
  }
  wake_cv_.notify_all();
  work(generation, 0);
  // Every chunk is claimed; wait for the ones workers are still running.
  for (int i = 0; done_.load(std::memory_order_acquire) != parts && i < kSpin; ++i) cpu_relax();
  if (done_.load(std::memory_order_acquire) != parts) {
    std::unique_lock lock(done_mu_);
    done_cv_.wait(lock, [&] { return done_.load(std::memory_order_acquire) == parts; });
  }
}

std::shared_ptr<ThreadPool> ThreadPool::global() {
  std::lock_guard lock(g_pool_mu);
  if (!g_pool) g_pool = std::make_shared<ThreadPool>(default_num_threads());
  return g_pool;
}

void ThreadPool::set_global_num_threads(int num_threads) {
  auto pool = std::make_shared<ThreadPool>(num_threads);
  std::lock_guard lock(g_pool_mu);
  g_pool.swap(pool);
  // `pool` (the old one) is released after the lock, and destroyed once its
  // last user, e.g. a running relax_rt_parallel_for, lets go.
}

}  // namespace relax::rt

extern "C" void relax_rt_parallel_for(int64_t n, void (*body)(int64_t, int64_t, void*), void* ctx) {
  relax::rt::ThreadPool::global()->parallel_for(n, body, ctx);
}
