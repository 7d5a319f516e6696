// The general ReLU on the GPU: one thread per element, ew::relu_clip as on the CPU.
#include "core/cuda_context.h"
#include "ops/elementwise.h"
#include "ops/relu_clip.h"

namespace hpcnn::cuda {

namespace {

__global__ void relu_clip_forward_kernel(ReluClipParams p, long long count, const float* x, float* y) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count; i += (long long)gridDim.x * blockDim.x)
    y[i] = ew::relu_clip(x[i], p);
}

__global__ void relu_clip_backward_kernel(ReluClipParams p, long long count, const float* x, const float* dy,
                                          float* dx) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count; i += (long long)gridDim.x * blockDim.x)
    dx[i] = dy[i] * ew::relu_clip_grad(x[i], p);
}

}  // namespace

void relu_clip_forward(int device, const ReluClipParams& p, long long count, const float* x, float* y) {
  if (count == 0) return;
  ContextLock ctx(device);
  relu_clip_forward_kernel<<<blocks_for(count), 256, 0, ctx.stream()>>>(p, count, x, y);
  HPCNN_CUDA_CHECK_LAUNCH();
}

void relu_clip_backward(int device, const ReluClipParams& p, long long count, const float* x, const float* dy,
                        float* dx) {
  if (count == 0) return;
  ContextLock ctx(device);
  relu_clip_backward_kernel<<<blocks_for(count), 256, 0, ctx.stream()>>>(p, count, x, dy, dx);
  HPCNN_CUDA_CHECK_LAUNCH();
}

}  // namespace hpcnn::cuda
