// Inverted dropout on the CPU. The mask is ew::dropout_scale's: element i is kept when
// rng::uniform(seed, stream, i) >= rate. One Philox call yields the draws of 4 consecutive
// elements (uniform(i) is lane i & 3 of bits4(i >> 2)), so the loop walks blocks of 4 and makes
// one call per block instead of one per element: the same mask, 4x fewer Philox rounds. Threads
// split at multiples of 4, and the mask never depends on the thread count.
#include <algorithm>

#include "core/rng.h"
#include "core/thread_pool.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"

namespace hpcnn::cpu {

namespace {

// out[i] = in[i] * scale(i) for i in [0, count).
void apply_mask(long long count, const float* in, float* out, float rate, uint64_t seed, uint64_t stream) {
  const float keep_scale = 1.0f / (1.0f - rate);  // as ew::dropout_scale computes it
  const long long blocks = (count + 3) / 4;
  parallel_for(blocks, [&](long long b0, long long b1, int) {
    for (long long blk = b0; blk < b1; ++blk) {
      const rng::U32x4 r = rng::bits4(seed, stream, static_cast<uint64_t>(blk));
      const long long i0 = blk * 4;
      const int lanes = static_cast<int>(std::min<long long>(4, count - i0));
      for (int l = 0; l < lanes; ++l)
        out[i0 + l] = in[i0 + l] * (rng::to_unit_float(r.v[l]) >= rate ? keep_scale : 0.0f);
    }
  }, 1 << 11);
}

}  // namespace

void dropout_forward(long long count, const float* x, float* y, float rate, uint64_t seed, uint64_t stream) {
  apply_mask(count, x, y, rate, seed, stream);
}

void dropout_backward(long long count, const float* dy, float* dx, float rate, uint64_t seed, uint64_t stream) {
  apply_mask(count, dy, dx, rate, seed, stream);
}

}  // namespace hpcnn::cpu
