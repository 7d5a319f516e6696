// The per-element arithmetic of avgpool2d_cuda.cu's kernels (one output for forward, one input
// element for backward) as HPCNN_HD functions; the host self-test (cuda_kernel_selftest.cpp) runs
// them over every element and compares them bit for bit with avgpool2d_cpu.cpp.
#pragma once

#include "core/hd.h"
#include "ops/maxpool2d_body.h"

namespace hpcnn::cuda::body {

// The number of in-bounds positions of output (oy, ox)'s window: its divisor.
HPCNN_HD int avgpool_count(const PoolArgs& a, int oy, int ox) {
  int y0, y1, x0, x1;
  pool_window(a, oy, ox, y0, y1, x0, x1);
  return (y1 - y0) * (x1 - x0);
}

// Output element i (flat NHWC index into y).
HPCNN_HD float avgpool_forward_at(const PoolArgs& a, const float* x, long long i) {
  long long t = i;
  int ci = static_cast<int>(t % a.c); t /= a.c;
  int ox = static_cast<int>(t % a.ow); t /= a.ow;
  int oy = static_cast<int>(t % a.oh);
  long long n = t / a.oh;
  int y0, y1, x0, x1;
  pool_window(a, oy, ox, y0, y1, x0, x1);
  const float* xn = x + n * a.h * a.w * a.c + ci;
  float acc = 0.f;
  for (int iy = y0; iy < y1; ++iy)
    for (int ix = x0; ix < x1; ++ix) acc += xn[((long long)iy * a.w + ix) * a.c];
  return acc / static_cast<float>((y1 - y0) * (x1 - x0));
}

// Input element i (flat NHWC index into x): the gradients of the windows covering it.
HPCNN_HD float avgpool_backward_at(const PoolArgs& a, const float* dy, long long i) {
  long long t = i;
  int ci = static_cast<int>(t % a.c); t /= a.c;
  int ix = static_cast<int>(t % a.w); t /= a.w;
  int iy = static_cast<int>(t % a.h);
  long long n = t / a.h;
  int oy_lo = iy + a.pt - a.ph + 1;
  oy_lo = oy_lo <= 0 ? 0 : (oy_lo + a.sh - 1) / a.sh;
  int oy_hi = imin((iy + a.pt) / a.sh, a.oh - 1);
  int ox_lo = ix + a.pl - a.pw + 1;
  ox_lo = ox_lo <= 0 ? 0 : (ox_lo + a.sw - 1) / a.sw;
  int ox_hi = imin((ix + a.pl) / a.sw, a.ow - 1);
  float acc = 0.f;
  for (int oy = oy_lo; oy <= oy_hi; ++oy)
    for (int ox = ox_lo; ox <= ox_hi; ++ox)
      acc += dy[((n * a.oh + oy) * a.ow + ox) * a.c + ci] / static_cast<float>(avgpool_count(a, oy, ox));
  return acc;
}

}  // namespace hpcnn::cuda::body
