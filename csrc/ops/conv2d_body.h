// The convolution conv2d_cuda.cu asks cuDNN for (cudnn_ops.h), derived from a Keras geometry in
// plain C++ so that the host self-test (diagnostics/cuda_kernel_selftest.cpp) feeds the same shapes
// to its reference convolution written from the cuDNN documentation.
#pragma once

#include "ops/conv2d.h"

namespace hpcnn::cuda::body {

// The convolution cuDNN is asked for: Keras geometry g with symmetric padding as is; with an odd
// total (Keras pads more at the bottom/right) the input is zero-padded explicitly (`padded`) and
// the convolution runs on the padded size with pad 0.
struct ConvGeom {
  int n, h, w, c;  // input (NHWC) as cuDNN sees it
  int f, kh, kw;   // filters, kernel
  int sh, sw;      // strides
  int ph, pw;      // symmetric padding
  int oh, ow;      // output
  bool padded;     // x must be padded by (pad_top, pad_bottom, pad_left, pad_right) first
  // A grouped convolution (depthwise: groups = c, the filter then holds c / groups input channels
  // per output channel) and the kernel's dilation; conv2d's are 1.
  int groups = 1;
  int dh = 1, dw = 1;
};

inline ConvGeom conv_geom(const Conv2dGeometry& g) {
  bool sym = g.pad_top == g.pad_bottom && g.pad_left == g.pad_right;
  if (sym) return {g.n, g.h, g.w, g.c, g.f, g.kh, g.kw, g.sh, g.sw, g.pad_top, g.pad_left, g.oh, g.ow, false};
  return {g.n, g.h + g.pad_top + g.pad_bottom, g.w + g.pad_left + g.pad_right, g.c, g.f, g.kh, g.kw, g.sh, g.sw,
          0, 0, g.oh, g.ow, true};
}

}  // namespace hpcnn::cuda::body
