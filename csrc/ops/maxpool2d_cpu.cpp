// Max pooling on the CPU, NHWC: for each output pixel, the max over the window's in-bounds
// positions, computed for all channels at once (channel runs are contiguous).
#include <algorithm>
#include <cstring>
#include <limits>

#include "core/thread_pool.h"
#include "ops/maxpool2d.h"

namespace hpcnn::cpu {

namespace {
// The in-bounds window of output (oy, ox): [y0, y1) x [x0, x1).
inline void window(const Pool2dGeometry& g, int oy, int ox, int& y0, int& y1, int& x0, int& x1) {
  y0 = oy * g.sh - g.pad_top;
  x0 = ox * g.sw - g.pad_left;
  y1 = std::min(y0 + g.ph, g.h);
  x1 = std::min(x0 + g.pw, g.w);
  y0 = std::max(y0, 0);
  x0 = std::max(x0, 0);
}
}  // namespace

void maxpool2d_forward(const Pool2dGeometry& g, const float* x, float* y) {
  const long long out_rows = (long long)g.n * g.oh;
  parallel_for(out_rows, [&](long long r0, long long r1, int) {
    for (long long r = r0; r < r1; ++r) {
      int n = static_cast<int>(r / g.oh), oy = static_cast<int>(r % g.oh);
      const float* xn = x + (long long)n * g.h * g.w * g.c;
      for (int ox = 0; ox < g.ow; ++ox) {
        float* out = y + ((r * g.ow) + ox) * g.c;
        int y0, y1, x0, x1;
        window(g, oy, ox, y0, y1, x0, x1);
        std::fill(out, out + g.c, -std::numeric_limits<float>::infinity());
        for (int iy = y0; iy < y1; ++iy)
          for (int ix = x0; ix < x1; ++ix) {
            const float* in = xn + ((long long)iy * g.w + ix) * g.c;
            for (int ci = 0; ci < g.c; ++ci) out[ci] = in[ci] > out[ci] ? in[ci] : out[ci];
          }
      }
    }
  }, 4);
}

void maxpool2d_backward(const Pool2dGeometry& g, const float* x, const float* y, const float* dy, float* dx) {
  // Threads own whole images, so overlapping windows (stride < pool) never race.
  parallel_for(g.n, [&](long long n0, long long n1, int) {
    const long long img = (long long)g.h * g.w * g.c;
    std::memset(dx + n0 * img, 0, sizeof(float) * (n1 - n0) * img);
    for (long long n = n0; n < n1; ++n) {
      const float* xn = x + n * img;
      float* dxn = dx + n * img;
      for (int oy = 0; oy < g.oh; ++oy)
        for (int ox = 0; ox < g.ow; ++ox) {
          long long o = ((n * g.oh + oy) * g.ow + ox) * g.c;
          int y0, y1, x0, x1;
          window(g, oy, ox, y0, y1, x0, x1);
          for (int ci = 0; ci < g.c; ++ci) {
            float best = y[o + ci];
            // the first position (row-major in the window) holding the max gets the gradient
            bool done = false;
            for (int iy = y0; iy < y1 && !done; ++iy)
              for (int ix = x0; ix < x1; ++ix) {
                long long at = ((long long)iy * g.w + ix) * g.c + ci;
                if (xn[at] == best) {
                  dxn[at] += dy[o + ci];
                  done = true;
                  break;
                }
              }
          }
        }
    }
  });
}

}  // namespace hpcnn::cpu
