// Inverted dropout on the CPU. The mask is ew::dropout_scale's: element i is kept when
// rng::uniform(seed, stream, offset + i) >= rate. One Philox call yields the draws of 4
// consecutive counters (uniform(c) is lane c & 3 of bits4(c >> 2)), so the loop walks the counter
// range in aligned blocks of 4 and makes one call per block instead of one per element: the same
// mask, 4x fewer Philox rounds. Threads split at block boundaries, and the mask never depends on
// the thread count (nor on `offset` being a multiple of 4: the first and last blocks are partial).
#include <algorithm>

#include "core/rng.h"
#include "core/thread_pool.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"

namespace hpcnn::cpu {

namespace {

// out[i] = in[i] * scale(offset + i) for i in [0, count).
void apply_mask(long long count, const float* in, float* out, float rate, uint64_t seed, uint64_t stream,
                uint64_t offset) {
  if (count <= 0) return;
  const float keep_scale = 1.0f / (1.0f - rate);  // as ew::dropout_scale computes it
  const uint64_t first = offset, last = offset + static_cast<uint64_t>(count);  // counters [first, last)
  const uint64_t block0 = first >> 2;
  const long long blocks = static_cast<long long>(((last + 3) >> 2) - block0);
  parallel_for(blocks, [&](long long b0, long long b1, int) {
    for (long long b = b0; b < b1; ++b) {
      const uint64_t blk = block0 + static_cast<uint64_t>(b);
      const rng::U32x4 r = rng::bits4(seed, stream, blk);
      const uint64_t c0 = std::max(blk * 4, first), c1 = std::min(blk * 4 + 4, last);
      for (uint64_t c = c0; c < c1; ++c) {
        const uint64_t i = c - first;
        out[i] = in[i] * (rng::to_unit_float(r.v[c & 3]) >= rate ? keep_scale : 0.0f);
      }
    }
  }, 1 << 11);
}

}  // namespace

void dropout_forward(long long count, const float* x, float* y, float rate, uint64_t seed, uint64_t stream,
                     uint64_t offset) {
  apply_mask(count, x, y, rate, seed, stream, offset);
}

void dropout_backward(long long count, const float* dy, float* dx, float rate, uint64_t seed, uint64_t stream,
                      uint64_t offset) {
  apply_mask(count, dy, dx, rate, seed, stream, offset);
}

}  // namespace hpcnn::cpu
