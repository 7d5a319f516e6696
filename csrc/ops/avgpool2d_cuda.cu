// Average pooling on the GPU: one thread per output (forward) or per input element (backward:
// a gather over the covering windows, no atomics), with the arithmetic of avgpool2d_body.h, so
// the results equal the CPU's bit for bit. cuDNN's pooling is not used: its descriptor pads
// symmetrically (Keras' 'same' may pad one more at the bottom/right) and its
// CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING would then count differently.
#include "core/cuda_context.h"
#include "ops/avgpool2d.h"
#include "ops/avgpool2d_body.h"

namespace hpcnn::cuda {

namespace {

__global__ void avgpool_forward_kernel(Pool2dGeometry g, const float* x, float* y) {
  const long long count = g.output_count();
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count; i += (long long)gridDim.x * blockDim.x)
    y[i] = body::avgpool_forward_at(g, x, i);
}

__global__ void avgpool_backward_kernel(Pool2dGeometry g, const float* dy, float* dx) {
  const long long count = g.input_count();
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count; i += (long long)gridDim.x * blockDim.x)
    dx[i] = body::avgpool_backward_at(g, dy, i);
}

}  // namespace

void avgpool2d_forward(int device, const Pool2dGeometry& g, const float* x, float* y) {
  ContextLock ctx(device);
  avgpool_forward_kernel<<<blocks_for(g.output_count()), 256, 0, ctx.stream()>>>(g, x, y);
  HPCNN_CUDA_CHECK_LAUNCH();
}

void avgpool2d_backward(int device, const Pool2dGeometry& g, const float* dy, float* dx) {
  ContextLock ctx(device);
  avgpool_backward_kernel<<<blocks_for(g.input_count()), 256, 0, ctx.stream()>>>(g, dy, dx);
  HPCNN_CUDA_CHECK_LAUNCH();
}

}  // namespace hpcnn::cuda
