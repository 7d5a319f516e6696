// The per-element arithmetic of maxpool2d_cuda.cu's kernels, as HPCNN_HD functions of one output
// (forward) or one input element (backward). The kernels are thin loops around these; the host
// self-test (cuda_kernel_selftest.cpp) runs the same functions over every element and compares
// them bit for bit with maxpool2d_cpu.cpp, so CI checks the GPU's indexing without a GPU.
// Plain C++ under g++ (HPCNN_HD = inline), __host__ __device__ under nvcc.
#pragma once

#include <cmath>

#include "core/hd.h"

namespace hpcnn::cuda::body {

HPCNN_HD int imin(int a, int b) { return a < b ? a : b; }
HPCNN_HD int imax(int a, int b) { return a > b ? a : b; }

// The pooling geometry (Pool2dGeometry, maxpool2d.h) as the kernels take it: NHWC input
// (n, h, w, c), window (ph, pw), strides (sh, sw), output (oh, ow), top and left padding.
struct PoolArgs {
  int n, h, w, c, ph, pw, sh, sw, oh, ow, pt, pl;
};

// The in-bounds window of output (oy, ox): [y0, y1) x [x0, x1).
HPCNN_HD void pool_window(const PoolArgs& a, int oy, int ox, int& y0, int& y1, int& x0, int& x1) {
  y0 = oy * a.sh - a.pt;
  x0 = ox * a.sw - a.pl;
  y1 = imin(y0 + a.ph, a.h);
  x1 = imin(x0 + a.pw, a.w);
  y0 = imax(y0, 0);
  x0 = imax(x0, 0);
}

// Output element i (flat NHWC index into y): the window's max, padded positions never win.
HPCNN_HD float maxpool_forward_at(const PoolArgs& a, const float* x, long long i) {
  long long t = i;
  int ci = static_cast<int>(t % a.c); t /= a.c;
  int ox = static_cast<int>(t % a.ow); t /= a.ow;
  int oy = static_cast<int>(t % a.oh);
  long long n = t / a.oh;
  int y0, y1, x0, x1;
  pool_window(a, oy, ox, y0, y1, x0, x1);
  const float* xn = x + n * a.h * a.w * a.c + ci;
  float best = -INFINITY;
  for (int iy = y0; iy < y1; ++iy)
    for (int ix = x0; ix < x1; ++ix) {
      float v = xn[((long long)iy * a.w + ix) * a.c];
      best = v > best ? v : best;
    }
  return best;
}

// Input element i (flat NHWC index into x): the sum, in (oy, ox) order, of dy over the windows
// whose FIRST maximal position (row-major) is this element -- the CPU's rule and order.
HPCNN_HD float maxpool_backward_at(const PoolArgs& a, const float* x, const float* y, const float* dy, long long i) {
  long long t = i;
  int ci = static_cast<int>(t % a.c); t /= a.c;
  int ix = static_cast<int>(t % a.w); t /= a.w;
  int iy = static_cast<int>(t % a.h);
  long long n = t / a.h;
  // Outputs whose window covers iy: oy*sh - pt <= iy <= oy*sh - pt + ph - 1.
  int oy_lo = iy + a.pt - a.ph + 1;
  oy_lo = oy_lo <= 0 ? 0 : (oy_lo + a.sh - 1) / a.sh;
  int oy_hi = imin((iy + a.pt) / a.sh, a.oh - 1);
  int ox_lo = ix + a.pl - a.pw + 1;
  ox_lo = ox_lo <= 0 ? 0 : (ox_lo + a.sw - 1) / a.sw;
  int ox_hi = imin((ix + a.pl) / a.sw, a.ow - 1);
  const float* xn = x + n * a.h * a.w * a.c + ci;
  float acc = 0.f;
  for (int oy = oy_lo; oy <= oy_hi; ++oy)
    for (int ox = ox_lo; ox <= ox_hi; ++ox) {
      long long o = ((n * a.oh + oy) * a.ow + ox) * a.c + ci;
      float best = y[o];
      int y0, y1, x0, x1;
      pool_window(a, oy, ox, y0, y1, x0, x1);
      int wy = -1, wx = -1;
      for (int py = y0; py < y1 && wy < 0; ++py)
        for (int px = x0; px < x1; ++px)
          if (xn[((long long)py * a.w + px) * a.c] == best) {
            wy = py;
            wx = px;
            break;
          }
      if (wy == iy && wx == ix) acc += dy[o];
    }
  return acc;
}

}  // namespace hpcnn::cuda::body
