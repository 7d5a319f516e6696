// Zero padding and its crop on the CPU: row copies (an image row of w*c floats is contiguous in
// NHWC), threads over output rows.
#include <cstring>

#include "core/thread_pool.h"
#include "ops/pad2d.h"

namespace hpcnn::cpu {

void pad2d_forward(const Pad2dGeometry& g, const float* x, float* y) {
  const int oh = g.oh(), ow = g.ow();
  const size_t out_row = sizeof(float) * ow * g.c;
  parallel_for((long long)g.n * oh, [&](long long r0, long long r1, int) {
    for (long long r = r0; r < r1; ++r) {
      const long long n = r / oh;
      const int oy = static_cast<int>(r % oh), iy = oy - g.top;
      float* out = y + r * ow * g.c;
      if (iy < 0 || iy >= g.h) {
        std::memset(out, 0, out_row);
        continue;
      }
      std::memset(out, 0, sizeof(float) * g.left * g.c);
      std::memcpy(out + (long long)g.left * g.c, x + ((n * g.h + iy) * (long long)g.w) * g.c, sizeof(float) * g.w * g.c);
      std::memset(out + (long long)(g.left + g.w) * g.c, 0, sizeof(float) * g.right * g.c);
    }
  }, 16);
}

void pad2d_backward(const Pad2dGeometry& g, const float* dy, float* dx) {
  const int oh = g.oh(), ow = g.ow();
  parallel_for((long long)g.n * g.h, [&](long long r0, long long r1, int) {
    for (long long r = r0; r < r1; ++r) {
      const long long n = r / g.h;
      const int iy = static_cast<int>(r % g.h);
      std::memcpy(dx + r * g.w * g.c, dy + ((n * oh + iy + g.top) * (long long)ow + g.left) * g.c,
                  sizeof(float) * g.w * g.c);
    }
  }, 16);
}

}  // namespace hpcnn::cpu
