// Zero padding of the spatial axes, Keras' ZeroPadding2D: x (n, h, w, c) -> y (n, h+top+bottom,
// w+left+right, c) with zeros around; backward crops dy back to (n, h, w, c).
// CPU: pad2d_cpu.cpp; CUDA: pad2d_cuda.cu (the shared kernels::pad_nhwc / crop_nhwc, whose index
// arithmetic the host self-test checks).
#pragma once

namespace hpcnn {

struct Pad2dGeometry {
  int n, h, w, c;
  int top, bottom, left, right;
  int oh() const { return h + top + bottom; }
  int ow() const { return w + left + right; }
};

namespace cpu {
void pad2d_forward(const Pad2dGeometry& g, const float* x, float* y);
void pad2d_backward(const Pad2dGeometry& g, const float* dy, float* dx);
}  // namespace cpu

namespace cuda {
void pad2d_forward(int device, const Pad2dGeometry& g, const float* x, float* y);
void pad2d_backward(int device, const Pad2dGeometry& g, const float* dy, float* dx);
}  // namespace cuda

}  // namespace hpcnn
