#include "runtime/thread_pool.h"

#include <sched.h>

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

ThreadPool::ThreadPool(int num_threads) : num_threads_(num_threads > 0 ? num_threads : default_num_threads()) {
  workers_.reserve(size_t(num_threads_ - 1));
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(wake_mu_);
    stop_.store(true, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_chunk(int index) {
  int64_t begin = index * chunk_;
  int64_t end = std::min(n_, begin + chunk_);
  bool outer = t_in_parallel;
  t_in_parallel = true;
  body_(begin, end, ctx_);
  t_in_parallel = outer;
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t g = generation_.load(std::memory_order_acquire);
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
    // Every worker acknowledges every job, even one with fewer chunks than
    // threads: the owner may only write the next job once no worker can
    // still be reading this one.
    if (index < parts_) run_chunk(index);
    if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard lock(done_mu_);
      done_cv_.notify_one();
    }
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
  n_ = n;
  chunk_ = (n + num_threads_ - 1) / num_threads_;
  parts_ = int((n + chunk_ - 1) / chunk_);
  body_ = body;
  ctx_ = ctx;
  remaining_.store(num_threads_ - 1, std::memory_order_relaxed);
  {
    std::lock_guard lock(wake_mu_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_cv_.notify_all();
  run_chunk(0);
  for (int i = 0; remaining_.load(std::memory_order_acquire) != 0 && i < kSpin; ++i) cpu_relax();
  if (remaining_.load(std::memory_order_acquire) != 0) {
    std::unique_lock lock(done_mu_);
    done_cv_.wait(lock, [&] { return remaining_.load(std::memory_order_acquire) == 0; });
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
