// Row copies between pitches on the CPU, split over the pool's threads by rows (or, for a few
// long rows, by row segments), each a memcpy.
#include <algorithm>
#include <cstring>

#include "core/thread_pool.h"
#include "ops/concat.h"

namespace hpcnn::cpu {

void copy_rows(long long rows, long long width, const float* src, long long src_pitch, float* dst,
               long long dst_pitch) {
  if (rows <= 0 || width <= 0) return;
  constexpr long long kMinPerThread = 1 << 15;  // elements: below this a thread costs more than it copies
  if (rows >= get_num_threads() || width < kMinPerThread) {
    parallel_for(rows, [&](long long lo, long long hi, int) {
      for (long long r = lo; r < hi; ++r)
        std::memcpy(dst + r * dst_pitch, src + r * src_pitch, sizeof(float) * static_cast<size_t>(width));
    }, std::max(1LL, kMinPerThread / width));
    return;
  }
  for (long long r = 0; r < rows; ++r) {  // few long rows (a whole tensor as one row): split each
    const float* s = src + r * src_pitch;
    float* d = dst + r * dst_pitch;
    parallel_for(width, [&](long long lo, long long hi, int) {
      std::memcpy(d + lo, s + lo, sizeof(float) * static_cast<size_t>(hi - lo));
    }, kMinPerThread);
  }
}

}  // namespace hpcnn::cpu
