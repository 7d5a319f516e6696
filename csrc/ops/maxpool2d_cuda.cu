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

using body::PoolArgs;

PoolArgs args_of(const Pool2dGeometry& g) {
  return {g.n, g.h, g.w, g.c, g.ph, g.pw, g.sh, g.sw, g.oh, g.ow, g.pad_top, g.pad_left};
}

__global__ void maxpool_forward_kernel(PoolArgs a, const float* x, float* y) {
  long long count = (long long)a.n * a.oh * a.ow * a.c;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count; i += (long long)gridDim.x * blockDim.x)
    y[i] = body::maxpool_forward_at(a, x, i);
}

__global__ void maxpool_backward_kernel(PoolArgs a, const float* x, const float* y, const float* dy, float* dx) {
  long long count = (long long)a.n * a.h * a.w * a.c;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count; i += (long long)gridDim.x * blockDim.x)
    dx[i] = body::maxpool_backward_at(a, x, y, dy, i);
}

}  // namespace

void maxpool2d_forward(int device, const Pool2dGeometry& g, const float* x, float* y) {
  ContextLock ctx(device);
  long long count = (long long)g.n * g.oh * g.ow * g.c;
  maxpool_forward_kernel<<<blocks_for(count), 256, 0, ctx.stream()>>>(args_of(g), x, y);
  HPCNN_CUDA_CHECK_LAUNCH();
}

void maxpool2d_backward(int device, const Pool2dGeometry& g, const float* x, const float* y, const float* dy,
                        float* dx) {
  ContextLock ctx(device);
  long long count = (long long)g.n * g.h * g.w * g.c;
  maxpool_backward_kernel<<<blocks_for(count), 256, 0, ctx.stream()>>>(args_of(g), x, y, dy, dx);
  HPCNN_CUDA_CHECK_LAUNCH();
}

}  // namespace hpcnn::cuda
