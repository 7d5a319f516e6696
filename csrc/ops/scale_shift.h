// Per-channel affine map over the last axis (Keras' Rescaling(scale, offset), with one value or
// one per channel): x read as rows of c channels, y[r, j] = x[r, j] * scale[j] + offset[j];
// backward dx[r, j] = dy[r, j] * scale[j]. scale/offset: (c,) arrays on the tensors' device.
// Keras' Normalization is this map with constants from its mean and variance weights:
// normalization_constants gives scale = 1 / max(sqrt(var), eps), offset = -mean * scale (Keras:
// (x - mean) / max(sqrt(var), epsilon)), computed on the weights' device (ew::normalization_scale).
// CPU: scale_shift_cpu.cpp; CUDA: scale_shift_cuda.cu; per element ew::scale_shift.
#pragma once

namespace hpcnn {

namespace cpu {
void scale_shift_forward(long long rows, int c, const float* x, const float* scale, const float* offset, float* y);
void scale_shift_backward(long long rows, int c, const float* dy, const float* scale, float* dx);
void normalization_constants(int c, const float* mean, const float* var, float eps, float* scale, float* offset);
}  // namespace cpu

namespace cuda {
void scale_shift_forward(int device, long long rows, int c, const float* x, const float* scale, const float* offset,
                         float* y);
void scale_shift_backward(int device, long long rows, int c, const float* dy, const float* scale, float* dx);
void normalization_constants(int device, int c, const float* mean, const float* var, float eps, float* scale,
                             float* offset);
}  // namespace cuda

}  // namespace hpcnn
