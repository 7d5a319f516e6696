// 2-D max pooling, NHWC, Keras padding semantics (geometry: Pool2dGeometry, pool2d.h). Padded
// positions never win. Backward routes each output gradient to the first maximal input of its
// window (ties go to the lowest index: deterministic on both backends).
// CPU: maxpool2d_cpu.cpp; CUDA: maxpool2d_cuda.cu (bodies in maxpool2d_body.h).
#pragma once

#include "ops/pool2d.h"

namespace hpcnn {

namespace cpu {
void maxpool2d_forward(const Pool2dGeometry& g, const float* x, float* y);
// dx is overwritten.
void maxpool2d_backward(const Pool2dGeometry& g, const float* x, const float* y, const float* dy, float* dx);
}  // namespace cpu

namespace cuda {
void maxpool2d_forward(int device, const Pool2dGeometry& g, const float* x, float* y);
void maxpool2d_backward(int device, const Pool2dGeometry& g, const float* x, const float* y, const float* dy,
                        float* dx);
}  // namespace cuda

}  // namespace hpcnn
