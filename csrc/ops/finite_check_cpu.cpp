#include "ops/finite_check.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/thread_pool.h"

namespace hpcnn::cpu {

namespace {

constexpr uint32_t kExponentBits = 0x7f800000u;  // all ones: infinity or NaN

// Whether p[0, n) holds a non-finite value: an OR over "exponent all ones" with no early exit,
// which the compiler vectorizes (an early-exit loop on std::isfinite does not).
bool any_non_finite(const float* p, long long n) {
  uint32_t bad = 0;
  for (long long i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, p + i, sizeof u);
    bad |= static_cast<uint32_t>((u & kExponentBits) == kExponentBits);
  }
  return bad != 0;
}

}  // namespace

long long first_non_finite(const float* p, long long n) {
  // Blocks scanned in parallel; only a block that holds a bad value is searched element by element,
  // and the lowest such block wins, so the index is the first one whatever the threads' order.
  constexpr long long kBlock = 1 << 14;
  const long long blocks = (n + kBlock - 1) / kBlock;
  std::atomic<long long> first_bad_block{blocks};
  parallel_for(blocks, [&](long long b0, long long b1, int) {
    for (long long b = b0; b < b1 && b < first_bad_block.load(std::memory_order_relaxed); ++b) {
      const long long lo = b * kBlock, len = std::min(kBlock, n - lo);
      if (!any_non_finite(p + lo, len)) continue;
      long long cur = first_bad_block.load();
      while (b < cur && !first_bad_block.compare_exchange_weak(cur, b)) {
      }
      break;
    }
  }, 4);
  const long long b = first_bad_block.load();
  if (b == blocks) return -1;
  for (long long i = b * kBlock; i < n; ++i)
    if (!std::isfinite(p[i])) return i;
  return -1;  // not reached: block b holds one
}

}  // namespace hpcnn::cpu
