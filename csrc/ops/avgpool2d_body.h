// The per-element arithmetic of avgpool2d_cuda.cu's kernels (one output for forward, one input
// element for backward) as HPCNN_HD functions; the host self-test
// (diagnostics/cuda_kernel_selftest.cpp) runs them over every element and compares them bit for bit
// with avgpool2d_cpu.cpp.
#pragma once

#include "core/hd.h"
#include "ops/pool2d_body.h"

namespace hpcnn::cuda::body {

// The number of in-bounds positions of output (oy, ox)'s window: its divisor.
HPCNN_HD int avgpool_count(const Pool2dGeometry& g, int oy, int ox) {
  int y0, y1, x0, x1;
  g.window(oy, ox, y0, y1, x0, x1);
  return (y1 - y0) * (x1 - x0);
}

// Output element i (flat NHWC index into y).
HPCNN_HD float avgpool_forward_at(const Pool2dGeometry& g, const float* x, long long i) {
  const Nhwc o = nhwc_of(i, g.oh, g.ow, g.c);
  int y0, y1, x0, x1;
  g.window(o.y, o.x, y0, y1, x0, x1);
  const float* xn = x + o.b * g.h * g.w * g.c + o.ci;
  float acc = 0.f;
  for (int iy = y0; iy < y1; ++iy)
    for (int ix = x0; ix < x1; ++ix) acc += xn[((long long)iy * g.w + ix) * g.c];
  return acc / static_cast<float>((y1 - y0) * (x1 - x0));
}

// Input element i (flat NHWC index into x): the gradients of the windows covering it.
HPCNN_HD float avgpool_backward_at(const Pool2dGeometry& g, const float* dy, long long i) {
  const Nhwc p = nhwc_of(i, g.h, g.w, g.c);
  int oy_lo, oy_hi, ox_lo, ox_hi;  // the outputs whose windows cover p
  covering_outputs(p.y, g.pad_top, g.ph, g.sh, g.oh, oy_lo, oy_hi);
  covering_outputs(p.x, g.pad_left, g.pw, g.sw, g.ow, ox_lo, ox_hi);
  float acc = 0.f;
  for (int oy = oy_lo; oy <= oy_hi; ++oy)
    for (int ox = ox_lo; ox <= ox_hi; ++ox)
      acc += dy[pool_output_index(g, p.b, oy, ox, p.ci)] / static_cast<float>(avgpool_count(g, oy, ox));
  return acc;
}

}  // namespace hpcnn::cuda::body
