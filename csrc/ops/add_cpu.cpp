// Element-wise sums on the CPU: one pass, split over the pool's threads.
#include "core/thread_pool.h"
#include "ops/add.h"

namespace hpcnn::cpu {

void add(long long count, const float* a, const float* b, float* y) {
  parallel_for(count, [&](long long lo, long long hi, int) {
    for (long long i = lo; i < hi; ++i) y[i] = a[i] + b[i];
  }, 1 << 14);
}

void accumulate(long long count, float* dst, const float* src) {
  parallel_for(count, [&](long long lo, long long hi, int) {
    for (long long i = lo; i < hi; ++i) dst[i] += src[i];
  }, 1 << 14);
}

}  // namespace hpcnn::cpu
