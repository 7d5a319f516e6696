// What the CUDA depthwise convolution asks of cuDNN (depthwise_conv2d_cuda.cu), as plain C++ so that
// the host self-test can check it: the grouped convolution of a depthwise geometry, and where each
// element of cuDNN's KRSC kernel comes from in Keras' (kh, kw, c, m) kernel.
#pragma once

#include "core/hd.h"
#include "ops/conv2d_body.h"
#include "ops/depthwise_conv2d.h"

namespace hpcnn::cuda::body {

// groups = c, filters = c * m (filter c*m + j reads channel c: Keras' order), the dilation as
// given; an odd 'same' total pads x explicitly first (`padded`), as conv2d does.
inline ConvGeom depthwise_geom(const DepthwiseGeometry& g) {
  ConvGeom s{g.n, g.h, g.w, g.c, g.oc(), g.kh, g.kw, g.sh, g.sw, g.pad_top, g.pad_left, g.oh, g.ow, false};
  if (g.pad_top != g.pad_bottom || g.pad_left != g.pad_right) {
    s.h = g.h + g.pad_top + g.pad_bottom;
    s.w = g.w + g.pad_left + g.pad_right;
    s.ph = s.pw = 0;
    s.padded = true;
  }
  s.groups = g.c;
  s.dh = g.dh;
  s.dw = g.dw;
  return s;
}

// Keras' kernel is a row-major (taps, oc) matrix (taps = kh * kw); cuDNN's KRSC kernel with one
// input channel per group is its transpose (oc, taps). Element i of the KRSC kernel is element
// keras_index(i) of Keras'.
HPCNN_HD long long depthwise_keras_index(long long i, int taps, int oc) {
  return (i % taps) * oc + i / taps;
}

}  // namespace hpcnn::cuda::body
