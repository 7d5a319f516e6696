// Adam and SGD over the whole parameter buffer on the GPU, one kernel each, with the per-element
// math of ops/elementwise.h. Adam's bias-corrected step size is computed on the host in double,
// exactly as the CPU path does.
#include <cmath>

#include "core/cuda_context.h"
#include "ops/elementwise.h"
#include "ops/optimizer_step.h"

namespace hpcnn::cuda {

namespace {

__global__ void adam_kernel(long long count, float* p, const float* g, float* m, float* v, float alpha, float b1,
                            float b2, float eps) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count; i += (long long)gridDim.x * blockDim.x)
    ew::adam_update(p[i], g[i], m[i], v[i], alpha, b1, b2, eps);
}

__global__ void sgd_kernel(long long count, float* p, const float* g, float* vel, float lr, float momentum,
                           bool nesterov) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count; i += (long long)gridDim.x * blockDim.x)
    ew::sgd_update(p[i], g[i], vel[i], lr, momentum, nesterov);
}

}  // namespace

void adam_step(int device, long long count, float* p, const float* g, float* m, float* v, const AdamParams& a) {
  ContextLock ctx(device);
  if (count == 0) return;
  const float alpha = static_cast<float>(a.lr * std::sqrt(1.0 - std::pow((double)a.beta2, (double)a.t)) /
                                         (1.0 - std::pow((double)a.beta1, (double)a.t)));
  adam_kernel<<<blocks_for(count), 256, 0, ctx.stream()>>>(count, p, g, m, v, alpha, a.beta1, a.beta2, a.eps);
  HPCNN_CUDA_CHECK_LAUNCH();
}

void sgd_step(int device, long long count, float* p, const float* g, float* velocity, const SgdParams& s) {
  ContextLock ctx(device);
  if (count == 0) return;
  sgd_kernel<<<blocks_for(count), 256, 0, ctx.stream()>>>(count, p, g, velocity, s.lr, s.momentum, s.nesterov);
  HPCNN_CUDA_CHECK_LAUNCH();
}

}  // namespace hpcnn::cuda
