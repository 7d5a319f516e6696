// Element-wise sums on the GPU: grid-stride loops on the compute stream.
#include "core/cuda_context.h"
#include "ops/add.h"

namespace hpcnn::cuda {

namespace {

__global__ void add_kernel(long long count, const float* a, const float* b, float* y) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count; i += (long long)gridDim.x * blockDim.x)
    y[i] = a[i] + b[i];
}

__global__ void accumulate_kernel(long long count, float* dst, const float* src) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count; i += (long long)gridDim.x * blockDim.x)
    dst[i] += src[i];
}

}  // namespace

void add(int device, long long count, const float* a, const float* b, float* y) {
  ContextLock ctx(device);
  if (count == 0) return;
  add_kernel<<<blocks_for(count), 256, 0, ctx.stream()>>>(count, a, b, y);
  HPCNN_CUDA_CHECK_LAUNCH();
}

void accumulate(int device, long long count, float* dst, const float* src) {
  ContextLock ctx(device);
  if (count == 0) return;
  accumulate_kernel<<<blocks_for(count), 256, 0, ctx.stream()>>>(count, dst, src);
  HPCNN_CUDA_CHECK_LAUNCH();
}

}  // namespace hpcnn::cuda
