// Global pooling over the spatial axes, Keras' GlobalAveragePooling2D / GlobalMaxPooling2D:
// x (n, h, w, c) read as n images of hw = h*w positions of c channels -> y (n, c) (the layer
// reshapes to (n, 1, 1, c) for keepdims=True: the same memory).
//   average: y[n, c] = (sum over positions in order of x) / hw;  dx = dy[n, c] / hw everywhere
//   max:     y[n, c] = max over positions;  dx = dy[n, c] at the FIRST position holding the max
//            (the tie rule of max_pool2d), 0 elsewhere
// Both backends perform the same float operations in the same order: bit-identical results.
// CPU: global_pool2d_cpu.cpp; CUDA: global_pool2d_cuda.cu (bodies in global_pool2d_body.h).
#pragma once

namespace hpcnn {

struct GlobalPoolGeometry {
  int n;
  long long hw;
  int c;
};

namespace cpu {
void global_avgpool_forward(const GlobalPoolGeometry& g, const float* x, float* y);
void global_avgpool_backward(const GlobalPoolGeometry& g, const float* dy, float* dx);
void global_maxpool_forward(const GlobalPoolGeometry& g, const float* x, float* y);
void global_maxpool_backward(const GlobalPoolGeometry& g, const float* x, const float* y, const float* dy, float* dx);
}  // namespace cpu

namespace cuda {
void global_avgpool_forward(int device, const GlobalPoolGeometry& g, const float* x, float* y);
void global_avgpool_backward(int device, const GlobalPoolGeometry& g, const float* dy, float* dx);
void global_maxpool_forward(int device, const GlobalPoolGeometry& g, const float* x, float* y);
void global_maxpool_backward(int device, const GlobalPoolGeometry& g, const float* x, const float* y,
                             const float* dy, float* dx);
}  // namespace cuda

}  // namespace hpcnn
