// Max pooling on the GPU, NHWC, with the contract of maxpool2d.h implemented exactly:
//   forward : one thread per output element; max over the window's in-bounds positions
//             (padded positions never win), compared as the CPU does.
//   backward: one thread per INPUT element gathers, in (oy, ox) order, the gradients of the
//             windows whose first maximal position (row-major) it is. No atomics: deterministic,
//             and the same additions in the same order as the CPU, so dx matches it bit for bit.
// The index arithmetic is in maxpool2d_body.h (the host self-test runs it too).
// cuDNN's pooling is not used: see the note at the top of cudnn_ops.cu (asymmetric 'same'
// padding and the undocumented tie rule of CUDNN_POOLING_MAX_DETERMINISTIC).
#include "core/cuda_context.h"
#include "ops/maxpool2d.h"
#include "ops/maxpool2d_body.h"

namespace hpcnn::cuda {

namespace {

__global__ void maxpool_forward_kernel(Pool2dGeometry g, const float* x, float* y) {
  const long long count = g.output_count();
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count; i += (long long)gridDim.x * blockDim.x)
    y[i] = body::maxpool_forward_at(g, x, i);
}

__global__ void maxpool_backward_kernel(Pool2dGeometry g, const float* x, const float* y, const float* dy, float* dx) {
  const long long count = g.input_count();
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count; i += (long long)gridDim.x * blockDim.x)
    dx[i] = body::maxpool_backward_at(g, x, y, dy, i);
}

}  // namespace

void maxpool2d_forward(int device, const Pool2dGeometry& g, const float* x, float* y) {
  ContextLock ctx(device);
  maxpool_forward_kernel<<<blocks_for(g.output_count()), 256, 0, ctx.stream()>>>(g, x, y);
  HPCNN_CUDA_CHECK_LAUNCH();
}

void maxpool2d_backward(int device, const Pool2dGeometry& g, const float* x, const float* y, const float* dy,
                        float* dx) {
  ContextLock ctx(device);
  maxpool_backward_kernel<<<blocks_for(g.input_count()), 256, 0, ctx.stream()>>>(g, x, y, dy, dx);
  HPCNN_CUDA_CHECK_LAUNCH();
}

}  // namespace hpcnn::cuda
