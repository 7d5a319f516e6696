// Depthwise 2-D convolution, Keras' DepthwiseConv2D: each input channel c is convolved with its own
// depth_multiplier (m) filters, output channel c*m + j (NHWC activations):
//   y[n, oy, ox, c*m + j] = b[c*m + j]
//       + sum_{ky, kx} x[n, oy*sh + ky*dh - pad_top, ox*sw + kx*dw - pad_left, c] * w[ky, kx, c, j]
// w is Keras' kernel (kh, kw, c, m) on every device (its memory is the HWIO kernel (kh, kw, 1, c*m)
// of a grouped convolution with c groups). Keras' padding with the dilated kernel's extent
// (kh - 1) * dh + 1: 'valid' none, 'same' out = ceil(in / stride), the odd extra row/column at the
// bottom/right. Backward: dx (the transposed convolution), dw, db.
// CPU (depthwise_conv2d_cpu.cpp): direct loops, channels innermost so each tap is a vector
// multiply-add over a contiguous run of channels: no im2col (a depthwise layer does ~2 FLOP per
// byte it moves, so it is memory-bound and an im2col copy would multiply its traffic by kh*kw).
// CUDA (depthwise_conv2d_cuda.cu): cuDNN's grouped convolution (group count = c), the kernel moved
// to cuDNN's KRSC layout (c*m, kh, kw, 1) in scratch memory per call (it is small).
#pragma once

#include "ops/conv2d.h"

namespace hpcnn {

struct DepthwiseGeometry {
  int n, h, w, c;    // input
  int m, kh, kw;     // depth multiplier, kernel
  int sh, sw;        // strides
  int dh, dw;        // dilation
  int oh, ow;        // output
  int pad_top, pad_left, pad_bottom, pad_right;
  int oc() const { return c * m; }  // output channels
  // ValueError when an argument is not positive or the output would be empty.
  static DepthwiseGeometry make(int n, int h, int w, int c, int m, int kh, int kw, int sh, int sw, int dh, int dw,
                                Padding pad);
  double forward_flops() const { return 2.0 * n * oh * ow * (double)oc() * kh * kw; }
  // The bytes a forward pass must move at least: x read once, y written once (float32).
  double forward_bytes() const { return 4.0 * ((double)n * h * w * c + (double)n * oh * ow * oc()); }
};

namespace cpu {
// b may be null (use_bias=False). relu: y = min(max(y, 0), relu_max) as each row is written.
void depthwise_conv2d_forward(const DepthwiseGeometry& g, const float* x, const float* w, const float* b, float* y,
                              bool relu = false, float relu_max = kNoReluCap);
// dx, db may be null (not computed); dw, dx and db are overwritten.
void depthwise_conv2d_backward(const DepthwiseGeometry& g, const float* x, const float* w, const float* dy, float* dx,
                               float* dw, float* db);
}  // namespace cpu

namespace cuda {
void depthwise_conv2d_forward(int device, const DepthwiseGeometry& g, const float* x, const float* w, const float* b,
                              float* y, bool relu = false, float relu_max = kNoReluCap);
void depthwise_conv2d_backward(int device, const DepthwiseGeometry& g, const float* x, const float* w,
                               const float* dy, float* dx, float* dw, float* db);
}  // namespace cuda

}  // namespace hpcnn
