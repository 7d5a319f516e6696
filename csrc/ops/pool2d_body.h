// The per-element index arithmetic both window pools' kernels share (maxpool2d_body.h,
// avgpool2d_body.h) besides Pool2dGeometry::window and nhwc_of (cuda_kernels_body.h): which
// outputs' windows cover the input element a backward thread gathers for, and their flat index.
// HPCNN_HD: the host self-test runs it too.
#pragma once

#include "core/hd.h"
#include "ops/cuda_kernels_body.h"
#include "ops/pool2d.h"

namespace hpcnn::cuda::body {

// Along one axis: the outputs o in [lo, hi] (0 <= o < count) whose window, positions
// o*stride - pad .. o*stride - pad + size - 1, covers position i (none when lo > hi).
HPCNN_HD void covering_outputs(int i, int pad, int size, int stride, int count, int& lo, int& hi) {
  lo = i + pad - size + 1;
  lo = lo <= 0 ? 0 : (lo + stride - 1) / stride;
  hi = (i + pad) / stride;
  hi = hi < count - 1 ? hi : count - 1;
}

// The flat NHWC index into y of output (n, oy, ox, ci).
HPCNN_HD long long pool_output_index(const Pool2dGeometry& g, long long n, int oy, int ox, int ci) {
  return ((n * g.oh + oy) * g.ow + ox) * g.c + ci;
}

}  // namespace hpcnn::cuda::body
