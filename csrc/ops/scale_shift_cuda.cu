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

}  // namespace

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
