// The runtime's thread pool: compiled kernels run their outer `parallel`
// loops on it through the RelaxRuntimeHooks::parallel_for callback
// (docs/runtime_abi.md, section 2).
//
// A pool of N threads is the caller plus N - 1 workers (N = 1: no threads).
// parallel_for(n, body, ctx) splits [0, n) into at most kChunksPerThread *
// N contiguous chunks of near-equal size, which the caller and the workers
// claim one at a time until none is left, and returns when all are done.
// Thread t (the caller is 0) owns the t-th run of near-equal runs of
// chunks: it claims its own from the front, and when they are gone takes
// the others' from their back. Kernels split their outputs the same way
// from one call to the next, so a thread mostly reads what it wrote: on a
// machine whose cores are far apart (a cache line between them cost 200
// ns on a cloud VM), taking chunks first come first served made a small
// CNN at two threads 1.6 times slower than at one.
// The caller does not wait for a worker to wake: on a shared machine,
// where a worker's CPU may be taken for milliseconds, the caller runs the
// chunks itself and waits only for those a worker has started (a static
// split waited for every worker's share, and a 2-thread run of a small CNN
// took 11 ms where one thread took 2). A parallel_for that starts while
// the pool is busy (a kernel calling back from inside a body, or a second
// thread using the same pool) runs its whole range serially on its own
// thread instead of waiting, so nesting can never deadlock.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace relax::rt {

class ThreadPool {
 public:
  using Body = void (*)(int64_t begin, int64_t end, void* ctx);

  // num_threads <= 0: default_num_threads().
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // At most this many chunks per thread: a late or slow thread leaves
  // the others at most a quarter of its share to wait for.
  static constexpr int kChunksPerThread = 4;

  void parallel_for(int64_t n, Body body, void* ctx);
  // The same with a callable f(begin, end); an exception thrown by any chunk
  // is rethrown here (the first one, once all chunks have finished).
  template <class F>
  void parallel_for(int64_t n, F&& f);

  // The process-wide pool the C hook uses; created on first use with
  // default_num_threads().
  static std::shared_ptr<ThreadPool> global();
  // Replaces the process-wide pool; the old one lives on until its last
  // user lets go.
  static void set_global_num_threads(int num_threads);
  // $RELAX_NUM_THREADS if set, else the CPUs this process may run on.
  static int default_num_threads();

 private:
  void worker_loop(int home);
  // Claims and runs chunks of job `generation` until none is left, its
  // own run (`home`) first.
  void work(uint32_t generation, int home);
  // Claims a chunk of run r: its first unclaimed one or, from_back, its
  // last. -1 when none is left or the job is no longer `generation`.
  int64_t claim(uint32_t generation, int r, bool from_back);

  int num_threads_;
  std::vector<std::thread> workers_;
  std::mutex run_mu_;  // held by the parallel_for that owns the workers

  // The current job, written by its owner before it publishes the job's
  // generation in claim_. Atomics: a worker late for one job may read
  // them while the next is written (its claim then fails and it drops
  // what it read).
  std::atomic<int64_t> n_{0}, chunk_{0};
  std::atomic<Body> body_{nullptr};
  std::atomic<void*> ctx_{nullptr};
  // Per thread's run of chunks, on its own cache line: the job's
  // generation (high 32 bits), the end and the start of the run's
  // unclaimed chunks (16 bits each). A chunk is claimed by one
  // compare-and-swap, which fails once the job has changed.
  struct alignas(64) Run {
    std::atomic<uint64_t> claim{0};
  };
  std::unique_ptr<Run[]> runs_;
  std::atomic<uint32_t> generation_{0};  // the current job's, published last
  std::atomic<uint32_t> parts_{0};       // chunks of the current job
  std::atomic<uint32_t> done_{0};        // chunks of the current job finished
  std::atomic<bool> stop_{false};
  std::mutex wake_mu_;
  std::condition_variable wake_cv_;
  std::mutex done_mu_;
  std::condition_variable done_cv_;
};

template <class F>
void ThreadPool::parallel_for(int64_t n, F&& f) {
  struct Ctx {
    std::remove_reference_t<F>* f;
    std::mutex mu;
    std::exception_ptr error;
  } ctx{&f, {}, {}};
  Body body = [](int64_t begin, int64_t end, void* p) {
    auto* c = static_cast<Ctx*>(p);
    try {
      (*c->f)(begin, end);
    } catch (...) {
      std::lock_guard lock(c->mu);
      if (!c->error) c->error = std::current_exception();
    }
  };
  parallel_for(n, body, &ctx);
  if (ctx.error) std::rethrow_exception(ctx.error);
}

}  // namespace relax::rt

// The C-ABI adapter kernels get as RelaxRuntimeHooks::parallel_for: runs on
// ThreadPool::global().
extern "C" void relax_rt_parallel_for(int64_t n, void (*body)(int64_t, int64_t, void*), void* ctx);
