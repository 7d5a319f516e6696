// Inverted dropout on the CPU; the mask comes from ew::dropout_scale (counter-based), so it is
// the same for any thread count and on the GPU.
#include "core/thread_pool.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"

namespace hpcnn::cpu {

void dropout_forward(long long count, const float* x, float* y, float rate, uint64_t seed, uint64_t stream) {
  parallel_for(count, [&](long long b, long long e, int) {
    for (long long i = b; i < e; ++i) y[i] = x[i] * ew::dropout_scale(seed, stream, i, rate);
  }, 1 << 13);
}

void dropout_backward(long long count, const float* dy, float* dx, float rate, uint64_t seed, uint64_t stream) {
  parallel_for(count, [&](long long b, long long e, int) {
    for (long long i = b; i < e; ++i) dx[i] = dy[i] * ew::dropout_scale(seed, stream, i, rate);
  }, 1 << 13);
}

}  // namespace hpcnn::cpu
