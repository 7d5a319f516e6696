// Average pooling on the CPU, NHWC: per output pixel, all channels at once (contiguous runs).
// The float operations and their order are those of avgpool2d_body.h (bit-identical to the GPU).
#include <algorithm>
#include <cstring>

#include "core/scratch.h"
#include "core/thread_pool.h"
#include "ops/avgpool2d.h"

namespace hpcnn::cpu {

namespace {
inline void window(const Pool2dGeometry& g, int oy, int ox, int& y0, int& y1, int& x0, int& x1) {
  y0 = oy * g.sh - g.pad_top;
  x0 = ox * g.sw - g.pad_left;
  y1 = std::min(y0 + g.ph, g.h);
  x1 = std::min(x0 + g.pw, g.w);
  y0 = std::max(y0, 0);
  x0 = std::max(x0, 0);
}
}  // namespace

void avgpool2d_forward(const Pool2dGeometry& g, const float* x, float* y) {
  const long long out_rows = (long long)g.n * g.oh;
  parallel_for(out_rows, [&](long long r0, long long r1, int) {
    for (long long r = r0; r < r1; ++r) {
      const int n = static_cast<int>(r / g.oh), oy = static_cast<int>(r % g.oh);
      const float* xn = x + (long long)n * g.h * g.w * g.c;
      for (int ox = 0; ox < g.ow; ++ox) {
        float* out = y + (r * g.ow + ox) * g.c;
        int y0, y1, x0, x1;
        window(g, oy, ox, y0, y1, x0, x1);
        std::fill(out, out + g.c, 0.f);
        for (int iy = y0; iy < y1; ++iy)
          for (int ix = x0; ix < x1; ++ix) {
            const float* in = xn + ((long long)iy * g.w + ix) * g.c;
            for (int ci = 0; ci < g.c; ++ci) out[ci] += in[ci];
          }
        const float count = static_cast<float>((y1 - y0) * (x1 - x0));
        for (int ci = 0; ci < g.c; ++ci) out[ci] /= count;
      }
    }
  }, 4);
}

void avgpool2d_backward(const Pool2dGeometry& g, const float* dy, float* dx) {
  const long long img = (long long)g.h * g.w * g.c;
  const long long out_img = (long long)g.oh * g.ow * g.c;
  parallel_for(g.n, [&](long long n0, long long n1, int) {  // threads own whole images
    float* share = thread_scratch().floats(g.c, 0);
    for (long long n = n0; n < n1; ++n) {
      float* dxn = dx + n * img;
      const float* dyn = dy + n * out_img;
      std::memset(dxn, 0, sizeof(float) * img);
      for (int oy = 0; oy < g.oh; ++oy)
        for (int ox = 0; ox < g.ow; ++ox) {
          int y0, y1, x0, x1;
          window(g, oy, ox, y0, y1, x0, x1);
          const float count = static_cast<float>((y1 - y0) * (x1 - x0));
          const float* d = dyn + ((long long)oy * g.ow + ox) * g.c;
          for (int ci = 0; ci < g.c; ++ci) share[ci] = d[ci] / count;
          for (int iy = y0; iy < y1; ++iy)
            for (int ix = x0; ix < x1; ++ix) {
              float* o = dxn + ((long long)iy * g.w + ix) * g.c;
              for (int ci = 0; ci < g.c; ++ci) o[ci] += share[ci];
            }
        }
    }
  });
}

}  // namespace hpcnn::cpu
