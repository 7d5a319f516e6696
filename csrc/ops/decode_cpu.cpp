// uint8 -> float32 decode of a batch on the CPU (the data pipeline's producer calls this).
#include "core/pixel.h"
#include "core/thread_pool.h"
#include "ops/decode.h"

namespace hpcnn::cpu {

void decode_u8(long long count, int channels, const uint8_t* x, float* y, const float* scale, const float* shift) {
  parallel_for(count / channels, [&](long long p0, long long p1, int) {
    for (long long p = p0; p < p1; ++p)
      for (int c = 0; c < channels; ++c) {
        long long i = p * channels + c;
        y[i] = pixel::decode_u8(x[i], scale[c], shift[c]);
      }
  }, 1 << 12);
}

}  // namespace hpcnn::cpu
