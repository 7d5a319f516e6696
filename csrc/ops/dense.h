// Dense: y[n, o] = b[o] + sum_i x[n, i] * w[i, o], w in Keras layout (in, out); optional fused ReLU.
// The bias is optional (Keras' use_bias=False): b null means none, and db null is not computed.
// CPU: dense_cpu.cpp (CBLAS sgemm); CUDA: dense_cuda.cu (cuBLAS).
#pragma once

namespace hpcnn {

struct DenseGeometry {
  int n, in, out;
  double forward_flops() const { return 2.0 * n * (double)in * out; }
};

namespace cpu {
void dense_forward(const DenseGeometry& g, const float* x, const float* w, const float* b, float* y, bool relu);
// As conv2d_backward: dy masked in place when relu; dx may be null; dw, db overwritten.
void dense_backward(const DenseGeometry& g, const float* x, const float* w, const float* y, float* dy, float* dx,
                    float* dw, float* db, bool relu);
}  // namespace cpu

namespace cuda {
void dense_forward(int device, const DenseGeometry& g, const float* x, const float* w, const float* b, float* y,
                   bool relu);
void dense_backward(int device, const DenseGeometry& g, const float* x, const float* w, const float* y, float* dy,
                    float* dx, float* dw, float* db, bool relu);
}  // namespace cuda

}  // namespace hpcnn
