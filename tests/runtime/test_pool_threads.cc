// The pool allocator and the thread pool.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/allocator.h"
#include "runtime/error.h"
#include "runtime/thread_pool.h"

namespace relax::rt {

TEST_CASE("pool: size classes are 64-byte multiples with at most 25% waste") {
  CHECK(PoolAllocator::size_class(0) == 64);
  CHECK(PoolAllocator::size_class(1) == 64);
  CHECK(PoolAllocator::size_class(64) == 64);
  CHECK(PoolAllocator::size_class(65) == 128);
  CHECK(PoolAllocator::size_class(1024) == 1024);
  CHECK(PoolAllocator::size_class(1025) == 1280);
  for (size_t n = 1; n < (1 << 22); n = n * 3 / 2 + 7) {
    size_t c = PoolAllocator::size_class(n);
    CHECK(c >= n);
    CHECK(c % 64 == 0);
    if (n > 256) CHECK(c <= n + n / 4 + 64);
  }
}

TEST_CASE("pool: sizes parse; a block past the memory cap is refused, naming the bytes") {
  CHECK(parse_bytes("1000") == size_t(1000));
  CHECK(parse_bytes("8K") == size_t(8) << 10);
  CHECK(parse_bytes("512m") == size_t(512) << 20);
  CHECK(parse_bytes("2GB") == size_t(2) << 30);
  CHECK(parse_bytes("1T") == size_t(1) << 40);
  for (const char* bad : {"", "G", "12X", "1.5G", "-1", "99999999999999999999", "20000000000T", "1GG"})
    CHECK_MESSAGE(!parse_bytes(bad), bad);

  const size_t old_cap = memory_cap(), before = memory_held();
  set_memory_cap(before + (1 << 20));
  {
    PoolAllocator pool;
    Tensor a = Tensor::empty(DType::f32(), {1 << 17}, &pool);  // 512 KiB: inside
    CHECK(memory_held() == before + PoolAllocator::size_class(1 << 19));
    CHECK_THROWS_WITH_AS(Tensor::empty(DType::f32(), {1 << 18}, &pool),
                         doctest::Contains("1048576 bytes more would take the runtime's tensors to"), Error);
    CHECK(pool.stats().bytes_in_use == PoolAllocator::size_class(1 << 19));
    a = Tensor();  // cached: still held, and released for the next request that needs the room
    CHECK(memory_held() == before + PoolAllocator::size_class(1 << 19));
    Tensor b = Tensor::empty(DType::f32(), {3 << 16}, &pool);  // 768 KiB: fits once the cached block goes
    CHECK(memory_held() == before + PoolAllocator::size_class(3 << 18));
  }
  CHECK(memory_held() == before);
  set_memory_cap(old_cap);
}

TEST_CASE("pool: freed blocks are reused and counted") {
  PoolAllocator pool;
  void* first = nullptr;
  {
    Tensor a = Tensor::empty(DType::f32(), {1000}, &pool);
    first = a.data();
    CHECK(reinterpret_cast<uintptr_t>(first) % 64 == 0);
    PoolStats s = pool.stats();
    CHECK(s.bytes_in_use == PoolAllocator::size_class(4000));
    CHECK(s.num_allocations == 1);
    CHECK(s.num_reused == 0);
  }
  PoolStats s = pool.stats();
  CHECK(s.bytes_in_use == 0);
  CHECK(s.bytes_cached == PoolAllocator::size_class(4000));
  // 3990 bytes fall in the same class: the same block comes back.
  Tensor b = Tensor::empty(DType::u(8), {3990}, &pool);
  CHECK(b.data() == first);
  s = pool.stats();
  CHECK(s.num_allocations == 2);
  CHECK(s.num_reused == 1);
  CHECK(s.bytes_cached == 0);
  Tensor c = Tensor::empty(DType::u(8), {3990}, &pool);  // the class's list is empty now
  CHECK(c.data() != first);
  s = pool.stats();
  CHECK(s.peak_bytes_in_use == 2 * PoolAllocator::size_class(4000));
  CHECK(s.num_reused == 1);
  b = Tensor();
  c = Tensor();
  CHECK(pool.stats().bytes_cached == 2 * PoolAllocator::size_class(4000));
  pool.release_cached();
  CHECK(pool.stats().bytes_cached == 0);
}

TEST_CASE("pool: cache limit, thread safety, storage outliving the pool") {
  {
    PoolAllocator pool(/*max_cached_bytes=*/0);
    { Tensor a = Tensor::empty(DType::f32(), {16}, &pool); }
    CHECK(pool.stats().bytes_cached == 0);
  }
  PoolAllocator pool;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&pool, t] {
      for (int i = 0; i < 500; ++i) {
        Tensor a = Tensor::empty(DType::u(8), {64 * (1 + (i + t) % 7)}, &pool);
        static_cast<uint8_t*>(a.data())[0] = uint8_t(i);
      }
    });
  for (auto& th : threads) th.join();
  PoolStats s = pool.stats();
  CHECK(s.num_allocations == 2000);
  CHECK(s.bytes_in_use == 0);
  CHECK(s.num_reused >= 2000 - 4 * 7);

  Tensor survivor;
  {
    PoolAllocator short_lived;
    survivor = Tensor::empty(DType::f32(), {8}, &short_lived);
  }
  survivor.data_as<float>()[7] = 1.0f;  // still valid; freed when `survivor` goes
}

namespace {

// Counts how often each index is visited.
void count_body(int64_t begin, int64_t end, void* ctx) {
  auto* hits = static_cast<std::vector<std::atomic<int>>*>(ctx);
  for (int64_t i = begin; i < end; ++i) (*hits)[size_t(i)].fetch_add(1);
}

}  // namespace

TEST_CASE("threads: parallel_for covers [0, n) exactly once") {
  for (int threads : {1, 2, 3, 4, 8}) {
    ThreadPool pool(threads);
    CHECK(pool.num_threads() == threads);
    for (int64_t n : {0, 1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 100, 1001, 4096}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.parallel_for(n, count_body, &hits);
      bool once = true;
      for (auto& h : hits) once &= h.load() == 1;
      CHECK_MESSAGE(once, "threads=", threads, " n=", n);
    }
  }
}

TEST_CASE("threads: chunks are contiguous and near-equal, at most kChunksPerThread per thread") {
  ThreadPool pool(2);
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  pool.parallel_for(100, [&](int64_t b, int64_t e) {
    std::lock_guard lock(mu);
    ranges.emplace_back(b, e);
  });
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<int64_t, int64_t>> want;  // 8 chunks of 13, the last 9
  for (int64_t b = 0; b < 100; b += 13) want.emplace_back(b, std::min<int64_t>(100, b + 13));
  CHECK(ThreadPool::kChunksPerThread == 4);
  CHECK(ranges == want);
}

TEST_CASE("threads: back-to-back small jobs run every chunk exactly once") {
  // A worker late for one job must not claim a chunk of it with the next
  // job's fields (a chunk ran twice, one in ten thousand jobs, before the
  // chunk count moved into the claimed word).
  ThreadPool pool(2);
  std::vector<std::atomic<int>> hits(17);
  bool once = true;
  for (int rep = 0; rep < 100000 && once; ++rep) {
    int64_t n = 2 + rep % 16;
    pool.parallel_for(n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[size_t(i)].fetch_add(1);
    });
    for (int64_t i = 0; i < n; ++i) once &= hits[size_t(i)].exchange(0) == 1;
  }
  CHECK(once);
}

TEST_CASE("threads: the caller runs the chunks a worker has not claimed, without waiting for it") {
  // A worker's first chunk blocks until every other chunk is done: the
  // caller must run them all (a static split would leave the worker's
  // share waiting on itself until the timeout).
  ThreadPool pool(2);
  const auto caller = std::this_thread::get_id();
  for (int rep = 0; rep < 20; ++rep) {
    std::atomic<int> done{0};
    std::atomic<bool> timed_out{false};
    pool.parallel_for(8, [&](int64_t b, int64_t e) {
      if (std::this_thread::get_id() != caller) {
        auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (done.load() < 8 - int(e - b) && !timed_out)
          if (std::chrono::steady_clock::now() > until) timed_out = true;
      }
      done += int(e - b);
    });
    CHECK(done.load() == 8);
    REQUIRE_FALSE(timed_out.load());
  }
}

TEST_CASE("threads: each thread starts on its own run of chunks and takes the others' from their back") {
  // The caller's first chunk waits until every worker has started one; a
  // worker's first chunk waits until all other chunks are done. The
  // workers then hold the fronts of their runs (4 chunks each), and the
  // caller, after its own run, takes the rest of each run from its back.
  for (int threads : {2, 4}) {
    ThreadPool pool(threads);
    const auto caller = std::this_thread::get_id();
    const int n = 4 * threads, workers = threads - 1;
    std::mutex mu;
    std::vector<int64_t> caller_order, worker_first;
    std::atomic<int> started{0}, done{0};
    std::atomic<bool> timed_out{false};
    auto wait_for = [&](std::atomic<int>& count, int want) {
      auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (count.load() < want && !timed_out)
        if (std::chrono::steady_clock::now() > until) timed_out = true;
    };
    pool.parallel_for(n, [&](int64_t b, int64_t e) {
      REQUIRE(e == b + 1);
      if (std::this_thread::get_id() == caller) {
        if (b == 0) wait_for(started, workers);
        std::lock_guard lock(mu);
        caller_order.push_back(b);
      } else {
        {
          std::lock_guard lock(mu);
          worker_first.push_back(b);
        }
        ++started;
        wait_for(done, n - workers);
      }
      ++done;
    });
    REQUIRE_FALSE(timed_out.load());
    std::vector<int64_t> want_caller{0, 1, 2, 3}, want_workers;
    for (int r = 1; r < threads; ++r) {
      want_workers.push_back(4 * r);
      for (int k = 3; k >= 1; --k) want_caller.push_back(4 * r + k);
    }
    std::sort(worker_first.begin(), worker_first.end());
    CHECK_MESSAGE(caller_order == want_caller, "threads=", threads);
    CHECK_MESSAGE(worker_first == want_workers, "threads=", threads);
  }
}

TEST_CASE("threads: nested and concurrent calls run, serially where needed") {
  ThreadPool pool(4);
  for (int rep = 0; rep < 50; ++rep) {
    std::vector<std::atomic<int>> hits(64 * 64);
    pool.parallel_for(64, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        pool.parallel_for(64, [&](int64_t jb, int64_t je) {
          for (int64_t j = jb; j < je; ++j) hits[size_t(i * 64 + j)].fetch_add(1);
        });
    });
    bool once = true;
    for (auto& h : hits) once &= h.load() == 1;
    REQUIRE(once);
  }
  // Two outside threads sharing the pool.
  std::atomic<int64_t> total{0};
  std::vector<std::thread> users;
  for (int t = 0; t < 3; ++t)
    users.emplace_back([&] {
      for (int rep = 0; rep < 200; ++rep) pool.parallel_for(100, [&](int64_t b, int64_t e) { total.fetch_add(e - b); });
    });
  for (auto& u : users) u.join();
  CHECK(total.load() == 3 * 200 * 100);
}

TEST_CASE("threads: an exception in a chunk reaches the caller") {
  ThreadPool pool(3);
  CHECK_THROWS_WITH(pool.parallel_for(30,
                                      [](int64_t b, int64_t) {
                                        if (b > 0) throw std::runtime_error("chunk failed");
                                      }),
                    "chunk failed");
  std::atomic<int64_t> total{0};
  auto add = [&](int64_t b, int64_t e) { total += e - b; };
  pool.parallel_for(30, add);  // still works; an lvalue callable
  CHECK(total.load() == 30);
}

TEST_CASE("threads: the C hook runs on the global pool") {
  ThreadPool::set_global_num_threads(3);
  CHECK(ThreadPool::global()->num_threads() == 3);
  std::vector<std::atomic<int>> hits(1000);
  relax_rt_parallel_for(1000, count_body, &hits);
  bool once = true;
  for (auto& h : hits) once &= h.load() == 1;
  CHECK(once);
  ThreadPool::set_global_num_threads(0);
  CHECK(ThreadPool::global()->num_threads() == ThreadPool::default_num_threads());
}

}  // namespace relax::rt
