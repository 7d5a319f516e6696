// Zero padding and its crop on the GPU: the shared pad/crop kernels (cuda_kernels.h).
#include "core/cuda_context.h"
#include "ops/cuda_kernels.h"
#include "ops/pad2d.h"

namespace hpcnn::cuda {

void pad2d_forward(int device, const Pad2dGeometry& g, const float* x, float* y) {
  ContextLock ctx(device);
  kernels::pad_nhwc(ctx.stream(), x, g.n, g.h, g.w, g.c, g.top, g.bottom, g.left, g.right, y);
}

void pad2d_backward(int device, const Pad2dGeometry& g, const float* dy, float* dx) {
  ContextLock ctx(device);
  kernels::crop_nhwc(ctx.stream(), dy, g.n, g.h, g.w, g.c, g.top, g.bottom, g.left, g.right, dx);
}

}  // namespace hpcnn::cuda
