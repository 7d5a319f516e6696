// Per-channel affine map on the GPU: one thread per element, ew::scale_shift as on the CPU.
#include "core/cuda_context.h"
#include "ops/elementwise.h"
#include "ops/scale_shift.h"

namespace hpcnn::cuda {

namespace {

__global__ void scale_shift_forward_kernel(long long count, int c, const float* x, const float* scale,
                                           const float* offset, float* y) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count; i += (long long)gridDim.x * blockDim.x)
    y[i] = ew::scale_shift(x[i], scale[i % c], offset[i % c]);
}

__global__ void scale_shift_backward_kernel(long long count, int c, const float* dy, const float* scale, float* dx) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count; i += (long long)gridDim.x * blockDim.x)
    dx[i] = dy[i] * scale[i % c];
}

__global__ void normalization_constants_kernel(int c, const float* mean, const float* var, float eps, float* scale,
                                               float* offset) {
  for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < c; j += gridDim.x * blockDim.x) {
    scale[j] = ew::normalization_scale(var[j], eps);
    offset[j] = -mean[j] * scale[j];
  }
}

}  // namespace

void normalization_constants(int device, int c, const float* mean, const float* var, float eps, float* scale,
                             float* offset) {
  ContextLock ctx(device);
  normalization_constants_kernel<<<blocks_for(c), 256, 0, ctx.stream()>>>(c, mean, var, eps, scale, offset);
  HPCNN_CUDA_CHECK_LAUNCH();
}

void scale_shift_forward(int device, long long rows, int c, const float* x, const float* scale, const float* offset,
                         float* y) {
  ContextLock ctx(device);
  const long long count = rows * c;
  if (count == 0) return;
  scale_shift_forward_kernel<<<blocks_for(count), 256, 0, ctx.stream()>>>(count, c, x, scale, offset, y);
  HPCNN_CUDA_CHECK_LAUNCH();
}

void scale_shift_backward(int device, long long rows, int c, const float* dy, const float* scale, float* dx) {
  ContextLock ctx(device);
  const long long count = rows * c;
  if (count == 0) return;
  scale_shift_backward_kernel<<<blocks_for(count), 256, 0, ctx.stream()>>>(count, c, dy, scale, dx);
  HPCNN_CUDA_CHECK_LAUNCH();
}

}  // namespace hpcnn::cuda
