// Global pooling on the GPU with the arithmetic of global_pool2d_body.h: one thread per (image,
// channel) output, summing or scanning the positions in order (the CPU's order: same bits).
// Backward: average, one thread per input element; max, one thread per output finds its first
// maximal position and writes that image-channel's whole gradient column (no atomics).
#include "core/cuda_context.h"
#include "ops/global_pool2d.h"
#include "ops/global_pool2d_body.h"

namespace hpcnn::cuda {

namespace {

__global__ void global_avg_forward_kernel(GlobalPoolGeometry g, const float* x, float* y) {
  const long long count = (long long)g.n * g.c;
  for (long long o = blockIdx.x * (long long)blockDim.x + threadIdx.x; o < count; o += (long long)gridDim.x * blockDim.x)
    y[o] = body::global_avg_at(x, g.hw, g.c, o);
}

__global__ void global_avg_backward_kernel(GlobalPoolGeometry g, const float* dy, float* dx) {
  const long long count = (long long)g.n * g.hw * g.c;
  const float hw = static_cast<float>(g.hw);
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count; i += (long long)gridDim.x * blockDim.x) {
    const long long n = i / (g.hw * g.c);
    dx[i] = dy[n * g.c + i % g.c] / hw;
  }
}

__global__ void global_max_forward_kernel(GlobalPoolGeometry g, const float* x, float* y) {
  const long long count = (long long)g.n * g.c;
  for (long long o = blockIdx.x * (long long)blockDim.x + threadIdx.x; o < count; o += (long long)gridDim.x * blockDim.x)
    y[o] = body::global_max_at(x, g.hw, g.c, o);
}

__global__ void global_max_backward_kernel(GlobalPoolGeometry g, const float* x, const float* y, const float* dy,
                                           float* dx) {
  const long long count = (long long)g.n * g.c;
  for (long long o = blockIdx.x * (long long)blockDim.x + threadIdx.x; o < count; o += (long long)gridDim.x * blockDim.x) {
    const long long win = body::global_max_winner(x, y, g.hw, g.c, o);
    const long long n = o / g.c;
    const int ci = static_cast<int>(o % g.c);
    float* col = dx + n * g.hw * g.c + ci;
    for (long long q = 0; q < g.hw; ++q) col[q * g.c] = q == win ? dy[o] : 0.f;
  }
}

}  // namespace

void global_avgpool_forward(int device, const GlobalPoolGeometry& g, const float* x, float* y) {
  ContextLock ctx(device);
  global_avg_forward_kernel<<<blocks_for((long long)g.n * g.c), 256, 0, ctx.stream()>>>(g, x, y);
  HPCNN_CUDA_CHECK_LAUNCH();
}

void global_avgpool_backward(int device, const GlobalPoolGeometry& g, const float* dy, float* dx) {
  ContextLock ctx(device);
  global_avg_backward_kernel<<<blocks_for((long long)g.n * g.hw * g.c), 256, 0, ctx.stream()>>>(g, dy, dx);
  HPCNN_CUDA_CHECK_LAUNCH();
}

void global_maxpool_forward(int device, const GlobalPoolGeometry& g, const float* x, float* y) {
  ContextLock ctx(device);
  global_max_forward_kernel<<<blocks_for((long long)g.n * g.c), 256, 0, ctx.stream()>>>(g, x, y);
  HPCNN_CUDA_CHECK_LAUNCH();
}

void global_maxpool_backward(int device, const GlobalPoolGeometry& g, const float* x, const float* y, const float* dy,
                             float* dx) {
  ContextLock ctx(device);
  global_max_backward_kernel<<<blocks_for((long long)g.n * g.c), 256, 0, ctx.stream()>>>(g, x, y, dy, dx);
  HPCNN_CUDA_CHECK_LAUNCH();
}

}  // namespace hpcnn::cuda
