// The batch-normalization calls of cuDNN (ops/cudnn_ops.h; the convolution calls and the contracts
// of the calls both use, handles and tensor descriptors, are in cudnn_ops.cu).
//
// Batch normalization (batchnorm_cuda.cu; legacy API, in libcudnn_ops):
// cudnnSetTensor4dDescriptor(xDesc, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, n, c, h, 1) describes the
//   data (n, h, 1, c) with C innermost: exactly our NHWC rows. cudnnDeriveBNTensorDescriptor(bnDesc,
//   xDesc, mode) gives the 1 x C x 1 x 1 descriptor shared by scale, bias, means and variances.
// cudnnBatchNormalizationForwardTraining(h, mode, &alpha, &beta, xDesc, x, yDesc, y, bnDesc, scale,
//   bias, factor, runMean, runVar, eps, saveMean, saveInvVariance)
//   y = alpha * BN(x) + beta * y (alpha 1, beta 0: y not read). BN normalizes with the batch mean
//   and the BIASED batch variance. runMean = factor * mean + (1 - factor) * runMean, and the same
//   for runVar with the UNBIASED batch variance (rows / (rows - 1) times the biased one: cuDNN's
//   documented running variance, which PyTorch's running_var relies on; checked against MXNet's
//   issue 21111 where cuDNN's and the non-cuDNN moving variances differ by exactly that factor).
//   We pass factor = 1 into zeroed buffers (1 - factor = 0 would still multiply garbage: NaN * 0)
//   and apply Keras' own update afterwards, with the biased variance Keras uses
//   (batchnorm_cuda.cu converts). saveMean = mean, saveInvVariance = 1 / sqrt(biased var + eps)
//   (named "inverse variance", documented as what the backward pass takes). eps >=
//   CUDNN_BN_MIN_EPSILON (0 in cuDNN 9); the same eps in forward and backward.
//   mode CUDNN_BATCHNORM_SPATIAL_PERSISTENT in training (forward and backward, which must agree):
//   the documented fast path for NHWC float data; its caveat about limited value ranges (a scaled
//   atomic integer reduction) concerns NCHW only. Inference uses CUDNN_BATCHNORM_SPATIAL.
// cudnnBatchNormalizationForwardInference(h, mode, &alpha, &beta, xDesc, x, yDesc, y, bnDesc, scale,
//   bias, estimatedMean, estimatedVariance, eps)
//   y = scale * (x - mean) / sqrt(eps + var) + bias: Keras' inference formula.
// cudnnBatchNormalizationBackward(h, mode, &aData, &bData, &aParam, &bParam, xDesc, x, dyDesc, dy,
//   dxDesc, dx, bnDesc, scale, dScale, dBias, eps, savedMean, savedInvVariance)
//   dx = aData * dx_BN + bData * dx; dScale, dBias likewise with aParam/bParam (1 and 0:
//   overwritten). The bias does not enter (not passed).
#include "core/cuda_check.h"
#include "ops/cudnn_descriptors.h"
#include "ops/cudnn_ops.h"

namespace hpcnn::cuda::cudnn {

void batchnorm_forward_training(Context& ctx, const BnShape& s, const float* x, const float* scale, const float* bias,
                                double eps, float* y, float* run_mean, float* run_var, float* save_mean,
                                float* save_invstd) {
  BnDescs d(s, kBnTrainingMode);
  const float one = 1.f, zero = 0.f;
  HPCNN_CUDA_CHECK(cudaMemsetAsync(run_mean, 0, sizeof(float) * s.c, ctx.compute.s));
  HPCNN_CUDA_CHECK(cudaMemsetAsync(run_var, 0, sizeof(float) * s.c, ctx.compute.s));
  HPCNN_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(ctx.cudnn.h, kBnTrainingMode, &one, &zero, d.x.d, x, d.x.d,
                                                           y, d.bn.d, scale, bias, 1.0, run_mean, run_var, eps,
                                                           save_mean, save_invstd));
}

void batchnorm_forward_inference(Context& ctx, const BnShape& s, const float* x, const float* scale, const float* bias,
                                 const float* mean, const float* var, double eps, float* y) {
  BnDescs d(s, kBnInferenceMode);
  const float one = 1.f, zero = 0.f;
  HPCNN_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(ctx.cudnn.h, kBnInferenceMode, &one, &zero, d.x.d, x, d.x.d,
                                                            y, d.bn.d, scale, bias, mean, var, eps));
}

void batchnorm_backward(Context& ctx, const BnShape& s, const float* x, const float* dy, const float* scale, double eps,
                        const float* save_mean, const float* save_invstd, float* dx, float* dscale, float* dbias) {
  BnDescs d(s, kBnTrainingMode);
  const float one = 1.f, zero = 0.f;
  HPCNN_CUDNN_CHECK(cudnnBatchNormalizationBackward(ctx.cudnn.h, kBnTrainingMode, &one, &zero, &one, &zero, d.x.d, x,
                                                    d.x.d, dy, d.x.d, dx, d.bn.d, scale, dscale, dbias, eps, save_mean,
                                                    save_invstd));
}

}  // namespace hpcnn::cuda::cudnn
