// Average pooling on the CPU, NHWC: per output pixel, all channels at once (contiguous runs).
// The float operations and their order are those of avgpool2d_body.h (bit-identical to the GPU).
#include <algorithm>
#include <cstring>

#include "core/scratch.h"
#include "core/thread_pool.h"
#include "ops/avgpool2d.h"
#include "ops/pool2d_cpu.h"

namespace hpcnn::cpu {

void avgpool2d_forward(const Pool2dGeometry& g, const float* x, float* y) {
  for_each_pool_window(g, x, y, [&](const float* xn, float* out, int y0, int y1, int x0, int x1) {
    std::fill(out, out + g.c, 0.f);
    for (int iy = y0; iy < y1; ++iy)
      for (int ix = x0; ix < x1; ++ix) {
        const float* in = xn + ((long long)iy * g.w + ix) * g.c;
        for (int ci = 0; ci < g.c; ++ci) out[ci] += in[ci];
      }
    const float count = static_cast<float>((y1 - y0) * (x1 - x0));
    for (int ci = 0; ci < g.c; ++ci) out[ci] /= count;
  });
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
          g.window(oy, ox, y0, y1, x0, x1);
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
