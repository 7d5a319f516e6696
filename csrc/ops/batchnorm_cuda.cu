// Batch normalization on the GPU: cuDNN's batch norm (cudnn_batchnorm.cu: the calls and their documented
// contracts) for the normalization and its gradients, our kernels for the rest:
//   forward (training)  cuDNN forward-training -> y, the batch mean and invstd, and cuDNN's
//                       unbiased variance, which unbiased_to_biased turns into the biased one
//                       Keras' moving update uses (the op's contract, batchnorm.h); ReLU in place.
//   forward (inference) cuDNN forward-inference (Keras' formula); ReLU in place.
//   backward (training) dy masked by y > 0 in place when relu, then cuDNN backward -> dx,
//                       dgamma, dbeta (into scratch where the caller wants none).
//   backward (frozen)   dx = g * gamma / sqrt(moving_var + eps), element-wise (ew::inv_std); with no
//                       dx asked for, only the ReLU's mask of dy in place.
//   parameter gradients (a trainable layer in inference mode) our kernels, not cuDNN: its backward
//                       takes the forward-training call's saved mean and invstd, not the moving
//                       statistics. One element-wise pass writes g (masked, into dy) and g * (x -
//                       moving_mean) (into scratch), the deterministic column sums (cuda_kernels.h)
//                       give dbeta and sum g * (x - moving_mean), one thread per channel multiplies
//                       the latter by invstd: the CPU's sums (batchnorm_body.h), in another order.
//   moving update       one thread per channel, ew::moving_average as on the CPU.
//   a single row        (rows = N*H*W == 1: batch 1 after global pooling) training forward and
//                       backward without cuDNN, one thread per channel running the CPU's
//                       arithmetic (batchnorm_body.h): cuDNN's training calls work with the
//                       unbiased variance, undefined for one row, and may refuse it; this way the
//                       answer is always the CPU's (var 0, y = beta), deterministic.
// scale=False / center=False: cuDNN always takes a scale and a bias, so ones / zeros are filled in
// scratch memory.
#include "core/cuda_context.h"
#include "core/errors.h"
#include "ops/batchnorm.h"
#include "ops/batchnorm_body.h"
#include "ops/cuda_kernels.h"
#include "ops/cudnn_ops.h"
#include "ops/elementwise.h"

namespace hpcnn::cuda {

namespace {

__global__ void fill_kernel(float* p, int count, float v) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) p[i] = v;
}

// var (unbiased, from cuDNN) -> var * (rows - 1) / rows: the biased variance (0 for one row).
__global__ void unbiased_to_biased_kernel(float* var, int c, double rows) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j < c) var[j] = rows > 1.0 ? static_cast<float>(static_cast<double>(var[j]) * ((rows - 1.0) / rows)) : 0.f;
}

__global__ void moving_update_kernel(int c, float* moving_mean, float* moving_var, const float* mean, const float* var,
                                     float momentum) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= c) return;
  moving_mean[j] = ew::moving_average(moving_mean[j], mean[j], momentum);
  moving_var[j] = ew::moving_average(moving_var[j], var[j], momentum);
}

__global__ void inference_param_terms_kernel(long long count, int c, const float* x, const float* y, float* dy,
                                             const float* moving_mean, float* term) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count; i += (long long)gridDim.x * blockDim.x)
    ::hpcnn::body::batchnorm_inference_param_term(i, c, x, y, dy, moving_mean, term);
}

__global__ void inference_dgamma_kernel(int c, const float* moving_var, float eps, float* dgamma) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j < c) ::hpcnn::body::batchnorm_inference_dgamma(j, moving_var, eps, dgamma);
}

// g (dy masked by y > 0 when y is given) is left in dy: the op's contract (batchnorm.h).
__global__ void frozen_backward_kernel(long long count, int c, const float* y, float* dy, const float* gamma,
                                       const float* moving_var, float eps, float* dx) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count; i += (long long)gridDim.x * blockDim.x) {
    const int j = static_cast<int>(i % c);
    const float g = y ? ew::relu_grad(y[i], dy[i]) : dy[i];
    if (y) dy[i] = g;
    dx[i] = g * ((gamma ? gamma[j] : 1.f) * ew::inv_std(moving_var[j], eps));
  }
}

__global__ void one_row_forward_kernel(int c, const float* x, const float* gamma, const float* beta, float eps,
                                       bool relu, float* y, float* mean, float* var, float* invstd) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j < c) ::hpcnn::body::batchnorm_one_row_forward(x[j], gamma, beta, j, eps, relu, y, mean, var, invstd);
}

__global__ void one_row_backward_kernel(int c, const float* x, const float* y, float* dy, const float* gamma,
                                        const float* mean, const float* invstd, bool relu, float* dx, float* dgamma,
                                        float* dbeta) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= c) return;
  ::hpcnn::body::batchnorm_one_row_backward(x[j], relu ? y[j] : 0.f, dy[j], gamma, mean, invstd, j, relu, dx, dgamma,
                                            dbeta);
  if (relu) dy[j] = ew::relu_grad(y[j], dy[j]);  // g left in dy, as the CPU does
}

void fill(cudaStream_t s, float* p, int count, float v) {
  fill_kernel<<<(count + 255) / 256, 256, 0, s>>>(p, count, v);
  HPCNN_CUDA_CHECK_LAUNCH();
}

// cuDNN's lower bound for epsilon (0 in cuDNN 9; 1e-5 in some older releases): a clear error
// instead of CUDNN_STATUS_BAD_PARAM.
void check_epsilon(float eps) {
  HPCNN_CHECK_ARG(eps >= CUDNN_BN_MIN_EPSILON, "batch_norm on the GPU: epsilon ", eps, " is below cuDNN's minimum ",
                  CUDNN_BN_MIN_EPSILON, " (CUDNN_BN_MIN_EPSILON of this cuDNN)");
}

cudnn::BnShape bn_shape(const BatchNormGeometry& g) {
  // cuDNN's descriptors take int dimensions and strides: one sample (h * c values) must fit.
  HPCNN_CHECK_BACKEND(g.m * g.c <= 0x7fffffffLL, "batch_norm: a sample of ", g.m, " x ", g.c,
                      " values is beyond cuDNN's int descriptors");
  return {g.n, static_cast<int>(g.m), g.c};
}

}  // namespace

void batchnorm_forward_training(int device, const BatchNormGeometry& g, const float* x, const float* gamma,
                                const float* beta, float eps, bool relu, float* y, float* mean, float* var,
                                float* invstd, const float* residual) {
  check_epsilon(eps);
  ContextLock ctx(device);
  cudaStream_t s = ctx.stream();
  if (g.rows() == 1) {  // one row per channel: the CPU's arithmetic, without cuDNN (above)
    one_row_forward_kernel<<<(g.c + 255) / 256, 256, 0, s>>>(g.c, x, gamma, beta, eps, relu && !residual, y, mean,
                                                             var, invstd);
    HPCNN_CUDA_CHECK_LAUNCH();
    if (residual) kernels::bias_act(s, y, g.rows(), g.c, nullptr, relu, residual);
    return;
  }
  ScratchPlan plan;
  size_t o_one = plan.add<float>(gamma ? 0 : g.c), o_zero = plan.add<float>(beta ? 0 : g.c),
         o_run = plan.add<float>(g.c);
  char* base = plan.reserve(*ctx, "batch_norm");
  float* run_mean = ScratchPlan::at<float>(base, o_run);
  if (!gamma) fill(s, ScratchPlan::at<float>(base, o_one), g.c, 1.f);
  if (!beta) fill(s, ScratchPlan::at<float>(base, o_zero), g.c, 0.f);
  const float* scale = gamma ? gamma : ScratchPlan::at<float>(base, o_one);
  const float* bias = beta ? beta : ScratchPlan::at<float>(base, o_zero);
  cudnn::batchnorm_forward_training(*ctx, bn_shape(g), x, scale, bias, eps, y, run_mean, var, mean, invstd);
  unbiased_to_biased_kernel<<<(g.c + 255) / 256, 256, 0, s>>>(var, g.c, static_cast<double>(g.rows()));
  HPCNN_CUDA_CHECK_LAUNCH();
  if (relu || residual) kernels::bias_act(s, y, g.rows(), g.c, nullptr, relu, residual);
}

void batchnorm_forward_inference(int device, const BatchNormGeometry& g, const float* x, const float* gamma,
                                 const float* beta, const float* moving_mean, const float* moving_var, float eps,
                                 bool relu, float* y, const float* residual) {
  check_epsilon(eps);
  ContextLock ctx(device);
  cudaStream_t s = ctx.stream();
  ScratchPlan plan;
  size_t o_one = plan.add<float>(gamma ? 0 : g.c), o_zero = plan.add<float>(beta ? 0 : g.c);
  char* base = plan.reserve(*ctx, "batch_norm (inference)");
  if (!gamma) fill(s, ScratchPlan::at<float>(base, o_one), g.c, 1.f);
  if (!beta) fill(s, ScratchPlan::at<float>(base, o_zero), g.c, 0.f);
  const float* scale = gamma ? gamma : ScratchPlan::at<float>(base, o_one);
  const float* bias = beta ? beta : ScratchPlan::at<float>(base, o_zero);
  cudnn::batchnorm_forward_inference(*ctx, bn_shape(g), x, scale, bias, moving_mean, moving_var, eps, y);
  if (relu || residual) kernels::bias_act(s, y, g.rows(), g.c, nullptr, relu, residual);
}

void batchnorm_backward_training(int device, const BatchNormGeometry& g, const float* x, const float* y, float* dy,
                                 const float* gamma, const float* mean, const float* invstd, float eps, bool relu,
                                 float* dx, float* dgamma, float* dbeta) {
  check_epsilon(eps);
  ContextLock ctx(device);
  cudaStream_t s = ctx.stream();
  if (g.rows() == 1) {  // one row per channel: the CPU's arithmetic, without cuDNN (above)
    one_row_backward_kernel<<<(g.c + 255) / 256, 256, 0, s>>>(g.c, x, y, dy, gamma, mean, invstd, relu, dx, dgamma,
                                                              dbeta);
    HPCNN_CUDA_CHECK_LAUNCH();
    return;
  }
  ScratchPlan plan;
  size_t o_one = plan.add<float>(gamma ? 0 : g.c), o_dx = plan.add<float>(dx ? 0 : g.rows() * g.c),
         o_dg = plan.add<float>(dgamma ? 0 : g.c), o_db = plan.add<float>(dbeta ? 0 : g.c);
  char* base = plan.reserve(*ctx, "batch_norm backward");
  if (!gamma) fill(s, ScratchPlan::at<float>(base, o_one), g.c, 1.f);
  const float* scale = gamma ? gamma : ScratchPlan::at<float>(base, o_one);
  if (relu) kernels::relu_mask(s, dy, y, g.rows() * g.c);
  cudnn::batchnorm_backward(*ctx, bn_shape(g), x, dy, scale, eps, mean, invstd,
                            dx ? dx : ScratchPlan::at<float>(base, o_dx),
                            dgamma ? dgamma : ScratchPlan::at<float>(base, o_dg),
                            dbeta ? dbeta : ScratchPlan::at<float>(base, o_db));
}

void batchnorm_backward_inference(int device, const BatchNormGeometry& g, const float* y, float* dy,
                                  const float* gamma, const float* moving_var, float eps, bool relu, float* dx) {
  ContextLock ctx(device);
  const long long count = g.rows() * g.c;
  if (!dx) {  // only the mask (the op returns before this without relu)
    kernels::relu_mask(ctx.stream(), dy, y, count);
    return;
  }
  frozen_backward_kernel<<<blocks_for(count), 256, 0, ctx.stream()>>>(count, g.c, relu ? y : nullptr, dy, gamma,
                                                                      moving_var, eps, dx);
  HPCNN_CUDA_CHECK_LAUNCH();
}

void batchnorm_update_moving(int device, int c, float* moving_mean, float* moving_var, const float* mean,
                             const float* var, float momentum) {
  ContextLock ctx(device);
  moving_update_kernel<<<(c + 255) / 256, 256, 0, ctx.stream()>>>(c, moving_mean, moving_var, mean, var, momentum);
  HPCNN_CUDA_CHECK_LAUNCH();
}

void batchnorm_inference_param_gradients(int device, const BatchNormGeometry& g, const float* x, const float* y,
                                         float* dy, const float* moving_mean, const float* moving_var, float eps,
                                         bool relu, float* dgamma, float* dbeta) {
  ContextLock ctx(device);
  cudaStream_t s = ctx.stream();
  const long long count = g.rows() * g.c;
  // Temporaries from the context's scratch, which only grows, and only once the collectives in
  // flight have finished (the growth guards of core/cuda_async.h): no allocation or free per step.
  ScratchPlan plan;
  const size_t o_term = plan.add<float>(dgamma ? count : 0),
               o_part = plan.add<float>(static_cast<size_t>(kernels::column_sum_partials(g.c)));
  char* base = plan.reserve(*ctx, "batch_norm parameter gradients (inference)");
  float* term = dgamma ? ScratchPlan::at<float>(base, o_term) : nullptr;
  float* partials = ScratchPlan::at<float>(base, o_part);
  if (relu || term) {
    inference_param_terms_kernel<<<blocks_for(count), 256, 0, s>>>(count, g.c, x, relu ? y : nullptr, dy,
                                                                   moving_mean, term);
    HPCNN_CUDA_CHECK_LAUNCH();
  }
  if (dbeta) kernels::column_sum(s, dy, g.rows(), g.c, partials, dbeta);
  if (dgamma) {
    kernels::column_sum(s, term, g.rows(), g.c, partials, dgamma);
    inference_dgamma_kernel<<<(g.c + 255) / 256, 256, 0, s>>>(g.c, moving_var, eps, dgamma);
    HPCNN_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace hpcnn::cuda
