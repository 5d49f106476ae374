// Minimal dynamic-scheduling parallel loop on std::thread (no OpenMP dependency).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace sharpo {

// Threads to use: `requested` if > 0, else the hardware count; never more than `work_items`.
inline int pick_threads(int requested, int64_t work_items) {
  int n = requested > 0 ? requested : static_cast<int>(std::thread::hardware_concurrency());
  n = std::max(n, 1);
  return static_cast<int>(std::min<int64_t>(n, std::max<int64_t>(work_items, 1)));
}

// Threads for `tokens` of work split into `work_items`: one per kTokensPerThread tokens at
// most (a thread costs ~50 us to start, and on a machine whose cores are busy a started
// thread may wait a scheduler time slice, ~4 ms, for a core while the caller waits in
// join(); 2M tokens are ~2-6 ms of work for one thread, so the slice costs at most ~1.5x
// even then), never more than pick_threads(requested, work_items).
constexpr int64_t kTokensPerThread = int64_t(1) << 21;
inline int threads_for_work(int requested, int64_t work_items, int64_t tokens) {
  const int64_t by_work = std::max<int64_t>(tokens / kTokensPerThread, 1);
  return static_cast<int>(std::min<int64_t>(pick_threads(requested, work_items), by_work));
}

// Calls fn(i) for i in [0, n) on `threads` threads; items are claimed `chunk` at a time.
// Waiting threads block in join() (no spin-wait): a thread that has no core costs the
// others nothing but the wait for the items it claimed.
template <class Fn>
void parallel_for(int64_t n, int threads, int64_t chunk, Fn&& fn) {
  if (threads <= 1 || n <= chunk) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<int64_t> next{0};
  auto worker = [&]() {
    for (;;) {
      const int64_t begin = next.fetch_add(chunk);
      if (begin >= n) return;
      const int64_t end = std::min(n, begin + chunk);
      for (int64_t i = begin; i < end; ++i) fn(i);
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  for (int k = 1; k < threads; ++k) pool.emplace_back(worker);
  worker();
  for (auto& th : pool) th.join();
}

}  // namespace sharpo
