// The timing loop the C++ benchmark programs share.
#pragma once

#include <algorithm>
#include <chrono>

namespace relax::bench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Runs `f` until `budget` seconds have passed (at least 3 times after one
// warm-up) and returns the best time of one call; `before` runs untimed
// before each timed call (a cache flush, say).
template <typename F, typename B>
double best_time(F f, double budget, B before) {
  f();
  double best = 1e30;
  auto start = Clock::now();
  for (int i = 0; i < 3 || seconds_since(start) < budget; ++i) {
    before();
    auto t = Clock::now();
    f();
    best = std::min(best, seconds_since(t));
  }
  return best;
}
template <typename F>
double best_time(F f, double budget) {
  return best_time(f, budget, [] {});
}

}  // namespace relax::bench
