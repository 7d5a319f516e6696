// The per-element arithmetic of maxpool2d_cuda.cu's kernels, as HPCNN_HD functions of one output
// (forward) or one input element (backward). The kernels are thin loops around these; the host
// self-test (diagnostics/cuda_kernel_selftest.cpp) runs the same functions over every element and
// compares them bit for bit with maxpool2d_cpu.cpp, so CI checks the GPU's indexing without a GPU.
// Plain C++ under g++ (HPCNN_HD = inline), __host__ __device__ under nvcc.
#pragma once

#include <cmath>

#include "core/hd.h"
#include "ops/pool2d_body.h"

namespace hpcnn::cuda::body {

// Output element i (flat NHWC index into y): the window's max, padded positions never win.
HPCNN_HD float maxpool_forward_at(const Pool2dGeometry& g, const float* x, long long i) {
  const Nhwc o = nhwc_of(i, g.oh, g.ow, g.c);
  int y0, y1, x0, x1;
  g.window(o.y, o.x, y0, y1, x0, x1);
  const float* xn = x + o.b * g.h * g.w * g.c + o.ci;
  float best = -INFINITY;
  for (int iy = y0; iy < y1; ++iy)
    for (int ix = x0; ix < x1; ++ix) {
      float v = xn[((long long)iy * g.w + ix) * g.c];
      best = v > best ? v : best;
    }
  return best;
}

// Input element i (flat NHWC index into x): the sum, in (oy, ox) order, of dy over the windows
// whose FIRST maximal position (row-major) is this element -- the CPU's rule and order.
HPCNN_HD float maxpool_backward_at(const Pool2dGeometry& g, const float* x, const float* y, const float* dy,
                                   long long i) {
  const Nhwc p = nhwc_of(i, g.h, g.w, g.c);
  int oy_lo, oy_hi, ox_lo, ox_hi;  // the outputs whose windows cover p
  covering_outputs(p.y, g.pad_top, g.ph, g.sh, g.oh, oy_lo, oy_hi);
  covering_outputs(p.x, g.pad_left, g.pw, g.sw, g.ow, ox_lo, ox_hi);
  const float* xn = x + p.b * g.h * g.w * g.c + p.ci;
  float acc = 0.f;
  for (int oy = oy_lo; oy <= oy_hi; ++oy)
    for (int ox = ox_lo; ox <= ox_hi; ++ox) {
      const long long o = pool_output_index(g, p.b, oy, ox, p.ci);
      const float best = y[o];
      int y0, y1, x0, x1;
      g.window(oy, ox, y0, y1, x0, x1);
      int wy = -1, wx = -1;
      for (int py = y0; py < y1 && wy < 0; ++py)
        for (int px = x0; px < x1; ++px)
          if (xn[((long long)py * g.w + px) * g.c] == best) {
            wy = py;
            wx = px;
            break;
          }
      if (wy == p.y && wx == p.x) acc += dy[o];
    }
  return acc;
}

}  // namespace hpcnn::cuda::body
