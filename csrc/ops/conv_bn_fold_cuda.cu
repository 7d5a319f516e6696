// conv_bn_fold on the GPU (conv_bn_fold.h): one thread per kernel element (the kernel in OHWI),
// then one per filter for the bias; the arithmetic is conv_bn_fold_body.h's, as on the CPU.
#include "core/cuda_context.h"
#include "ops/conv_bn_fold.h"
#include "ops/conv_bn_fold_body.h"

namespace hpcnn::cuda {

namespace {

__global__ void fold_kernel_kernel(long long weights, int f, KernelLayout layout, const float* w, const float* gamma,
                                   const float* moving_var, float eps, float* w_out) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < weights;
       i += (long long)gridDim.x * blockDim.x) {
    const int j = body::conv_bn_fold_filter(i, weights, f, layout);
    w_out[i] = body::conv_bn_fold_kernel(w[i], body::conv_bn_fold_scale(gamma, moving_var, eps, j));
  }
}

__global__ void fold_bias_kernel(int f, const float* b, const float* gamma, const float* beta,
                                 const float* moving_mean, const float* moving_var, float eps, float* b_out) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j < f) b_out[j] = body::conv_bn_fold_bias(b, beta, moving_mean, body::conv_bn_fold_scale(gamma, moving_var, eps, j), j);
}

}  // namespace

void conv_bn_fold(int device, const ConvBnFoldGeometry& g, const float* w, const float* b, const float* gamma,
                  const float* beta, const float* moving_mean, const float* moving_var, float eps, float* w_out,
                  float* b_out) {
  ContextLock ctx(device);
  if (g.weights == 0) return;
  fold_kernel_kernel<<<blocks_for(g.weights), 256, 0, ctx.stream()>>>(g.weights, g.f, g.layout, w, gamma, moving_var,
                                                                     eps, w_out);
  HPCNN_CUDA_CHECK_LAUNCH();
  fold_bias_kernel<<<(g.f + 255) / 256, 256, 0, ctx.stream()>>>(g.f, b, gamma, beta, moving_mean, moving_var, eps,
                                                                  b_out);
  HPCNN_CUDA_CHECK_LAUNCH();
}

}  // namespace hpcnn::cuda
