// The loop both window pools' CPU forward passes share (maxpool2d_cpu.cpp, avgpool2d_cpu.cpp):
// every output pixel with its in-bounds window, all c channels at once (a contiguous run in
// NHWC). hpcnn's threads split the output rows.
#pragma once

#include "core/thread_pool.h"
#include "ops/pool2d.h"

namespace hpcnn::cpu {

// Calls pixel(xn, out, y0, y1, x0, x1) for every output pixel: xn is its image in x, out its c
// outputs in y, and rows [y0, y1) x columns [x0, x1) of xn its window (Pool2dGeometry::window).
template <class Pixel>
void for_each_pool_window(const Pool2dGeometry& g, const float* x, float* y, Pixel&& pixel) {
  const long long out_rows = (long long)g.n * g.oh;
  parallel_for(out_rows, [&](long long r0, long long r1, int) {
    for (long long r = r0; r < r1; ++r) {
      const int n = static_cast<int>(r / g.oh), oy = static_cast<int>(r % g.oh);
      const float* xn = x + (long long)n * g.h * g.w * g.c;
      for (int ox = 0; ox < g.ow; ++ox) {
        int y0, y1, x0, x1;
        g.window(oy, ox, y0, y1, x0, x1);
        pixel(xn, y + (r * g.ow + ox) * g.c, y0, y1, x0, x1);
      }
    }
  }, 4);
}

}  // namespace hpcnn::cpu
