// 2-D max pooling, NHWC, Keras padding semantics (see conv2d.h). Padded positions never win.
// Backward routes each output gradient to the first maximal input of its window (ties go to the
// lowest index: deterministic on both backends).
// CPU: maxpool2d_cpu.cpp; CUDA: maxpool2d_cuda.cu (cuDNN, CUDNN_POOLING_MAX_DETERMINISTIC).
#pragma once

#include "ops/conv2d.h"

namespace hpcnn {

struct Pool2dGeometry {
  int n, h, w, c;
  int ph, pw;  // pool size
  int sh, sw;
  int oh, ow;
  int pad_top, pad_left, pad_bottom, pad_right;
  // ValueError (naming `op`) when the output would be empty or arguments are non-positive.
  static Pool2dGeometry make(int n, int h, int w, int c, int ph, int pw, int sh, int sw, Padding pad,
                             const char* op = "max_pool2d");
};

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
