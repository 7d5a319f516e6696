// A parallel loop whose iterations are handed out on demand (an atomic counter, `grain`
// iterations at a time) instead of thread_pool.h's static split. For work whose result does not
// depend on which thread does which piece -- the data pipeline's chunk inflation and row copies
// give the same bytes whichever thread does them -- so it does not need the static split's
// reproducibility; it needs robustness: when another process (or the producer's own I/O thread)
// takes a core, the other threads finish the work instead of waiting for the slowed one's share.
#pragma once

#include <algorithm>
#include <atomic>

#include "core/thread_pool.h"

namespace hpcnn {

template <typename Fn>  // fn(begin, end)
void dynamic_for(long long n, long long grain, const Fn& fn) {
  if (n <= 0) return;
  grain = std::max(1LL, grain);
  std::atomic<long long> next{0};
  const long long pieces = (n + grain - 1) / grain;
  parallel_region(
      [&](int, int) {
        for (;;) {
          long long b = next.fetch_add(grain);
          if (b >= n) break;
          fn(b, std::min(n, b + grain));
        }
      },
      static_cast<int>(std::min<long long>(pieces, 1 << 30)));
}

}  // namespace hpcnn
