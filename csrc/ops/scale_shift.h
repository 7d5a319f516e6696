// Per-channel affine map over the last axis (Keras' Rescaling(scale, offset), with one value or
// one per channel): x read as rows of c channels, y[r, j] = x[r, j] * scale[j] + offset[j];
// backward dx[r, j] = dy[r, j] * scale[j]. scale/offset: (c,) arrays on the tensors' device.
// CPU: scale_shift_cpu.cpp; CUDA: scale_shift_cuda.cu; per element ew::scale_shift.
#pragma once

namespace hpcnn {

namespace cpu {
void scale_shift_forward(long long rows, int c, const float* x, const float* scale, const float* offset, float* y);
void scale_shift_backward(long long rows, int c, const float* dy, const float* scale, float* dx);
}  // namespace cpu

namespace cuda {
void scale_shift_forward(int device, long long rows, int c, const float* x, const float* scale, const float* offset,
                         float* y);
void scale_shift_backward(int device, long long rows, int c, const float* dy, const float* scale, float* dx);
}  // namespace cuda

}  // namespace hpcnn
