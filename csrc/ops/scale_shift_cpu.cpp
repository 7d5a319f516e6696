// Per-channel affine map on the CPU: rows split over threads, channels innermost (vectorized).
#include "core/thread_pool.h"
#include "ops/elementwise.h"
#include "ops/scale_shift.h"

namespace hpcnn::cpu {

void scale_shift_forward(long long rows, int c, const float* x, const float* scale, const float* offset, float* y) {
  parallel_for(rows, [&](long long r0, long long r1, int) {
    for (long long r = r0; r < r1; ++r)
      for (int j = 0; j < c; ++j) y[r * c + j] = ew::scale_shift(x[r * c + j], scale[j], offset[j]);
  }, 1024);
}

void scale_shift_backward(long long rows, int c, const float* dy, const float* scale, float* dx) {
  parallel_for(rows, [&](long long r0, long long r1, int) {
    for (long long r = r0; r < r1; ++r)
      for (int j = 0; j < c; ++j) dx[r * c + j] = dy[r * c + j] * scale[j];
  }, 1024);
}

void normalization_constants(int c, const float* mean, const float* var, float eps, float* scale, float* offset) {
  for (int j = 0; j < c; ++j) {
    scale[j] = ew::normalization_scale(var[j], eps);
    offset[j] = -mean[j] * scale[j];
  }
}

}  // namespace hpcnn::cpu
