// 2-D average pooling, NHWC, Keras' padding rules (conv2d.h; geometry: Pool2dGeometry of
// pool2d.h). Each output is the mean of the window's IN-BOUNDS positions: with 'same' padding
// the padded positions are left out of the count, as Keras (TensorFlow's avg_pool) does, so a
// corner window of 2x2 over a 1x1 image averages one value, not four with three zeros.
//   forward : y[o] = (sum of x over the window, row-major order) / count(o)
//   backward: dx[i] = sum over the windows covering i, in (oy, ox) order, of dy[o] / count(o)
// Both backends perform the same float operations in the same order: bit-identical results.
// CPU: avgpool2d_cpu.cpp; CUDA: avgpool2d_cuda.cu (bodies in avgpool2d_body.h).
#pragma once

#include "ops/pool2d.h"

namespace hpcnn {

namespace cpu {
void avgpool2d_forward(const Pool2dGeometry& g, const float* x, float* y);
void avgpool2d_backward(const Pool2dGeometry& g, const float* dy, float* dx);  // dx overwritten
}  // namespace cpu

namespace cuda {
void avgpool2d_forward(int device, const Pool2dGeometry& g, const float* x, float* y);
void avgpool2d_backward(int device, const Pool2dGeometry& g, const float* dy, float* dx);
}  // namespace cuda

}  // namespace hpcnn
