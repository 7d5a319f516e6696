// Batch normalization over the last (channels) axis, Keras' BatchNormalization(axis=-1). x has
// shape (n, ..., c) and is read as rows = numel / c rows of c channels (NHWC: one row per pixel):
//
//   training  mean[c] = sum_r x[r, c] / rows;  var[c] = sum_r (x[r, c] - mean[c])^2 / rows (the
//             biased variance, Keras' ops.moments);  invstd[c] = 1 / sqrt(var[c] + eps);
//             y = gamma * (x - mean) * invstd + beta          (relu: y = max(y, 0), fused)
//   inference y = gamma * (x - moving_mean) / sqrt(moving_var + eps) + beta   (relu fused)
//   both      with a residual r (x's shape): y = act(... + r), a residual block's Add and ReLU in
//             the normalization's pass (a training step's block tail, nn/step_plan.h)
//   backward (training), g = dy masked by y > 0 when relu, xhat = (x - mean) * invstd:
//             dbeta = sum_r g;  dgamma = sum_r g * xhat;
//             dx = gamma * invstd * (g - dbeta / rows - xhat * dgamma / rows)
//   backward (inference: a frozen layer, whose statistics are constants)
//             dx = g * gamma / sqrt(moving_var + eps)   (dx may be absent: then only g, in dy)
//   inference parameter gradients (a trainable layer run in inference mode: a nested model
//             called with training=False), xhat = (x - moving_mean) * invstd, invstd =
//             ew::inv_std(moving_var, eps): dbeta = sum_r g;  dgamma = sum_r g * (x - moving_mean)
//             * invstd: the training backward's sums with the moving statistics as its mean and
//             invstd (the CPU runs exactly that). The CUDA backend does not hand the moving
//             statistics to cuDNN's backward as "saved" ones (its contract wants the forward-training
//             call's own): it sums columns with its deterministic column sums (cuda_kernels.h).
//   moving update (Keras): moving_mean = moving_mean * momentum + mean * (1 - momentum), and the
//             same for moving_var with the biased batch variance var.
//
// gamma and beta may be absent (Keras' scale=False / center=False): 1 and 0. dgamma/dbeta may be
// absent (not computed). With relu, both backwards leave g in dy (masked in place): a residual
// block's shortcut reads its gradient, the masked one, from there. mean/var/invstd are (c,) arrays the training forward writes and the
// training backward (invstd, mean) and the moving update (mean, var) read: the layer keeps them
// between the two on the model's device. Both backends return the biased variance in var, so the
// update is the same on either (the CUDA backend converts cuDNN's unbiased one, batchnorm_cuda.cu).
// CPU: batchnorm_cpu.cpp; CUDA: batchnorm_cuda.cu (cuDNN's batch norm, calls in cudnn_batchnorm.cu).
#pragma once

namespace hpcnn {

// A layer's batch statistics (mean, var, invstd: c floats each) live in one buffer on its device,
// each array at a multiple of this many floats (256 bytes, as the parameters are: nn/param_layout.h),
// so that cuDNN gets them at aligned addresses whatever c is (cuDNN 9 may refuse a misaligned
// pointer; with back-to-back arrays, c % 4 != 0 left var and invstd not even 16-byte aligned).
constexpr long long kBatchStatsAlignElems = 64;
// Where statistics array k (0 mean, 1 var, 2 invstd) starts; batchnorm_stats_floats(c) in all.
constexpr long long batchnorm_stats_offset(long long c, int k) {
  return k * ((c + kBatchStatsAlignElems - 1) / kBatchStatsAlignElems * kBatchStatsAlignElems);
}
constexpr long long batchnorm_stats_floats(long long c) { return batchnorm_stats_offset(c, 3); }

struct BatchNormGeometry {
  int n;        // batch
  long long m;  // rows per sample: product of the axes between batch and channels (h*w for NHWC)
  int c;        // channels
  long long rows() const { return static_cast<long long>(n) * m; }
};

namespace cpu {
// residual: null, or added before the ReLU.
void batchnorm_forward_training(const BatchNormGeometry& g, const float* x, const float* gamma, const float* beta,
                                float eps, bool relu, float* y, float* mean, float* var, float* invstd,
                                const float* residual);
void batchnorm_forward_inference(const BatchNormGeometry& g, const float* x, const float* gamma, const float* beta,
                                 const float* moving_mean, const float* moving_var, float eps, bool relu, float* y,
                                 const float* residual);
// With relu, dy is overwritten with the masked gradient. dx, dgamma, dbeta may be null.
void batchnorm_backward_training(const BatchNormGeometry& g, const float* x, const float* y, float* dy,
                                 const float* gamma, const float* mean, const float* invstd, float eps, bool relu,
                                 float* dx, float* dgamma, float* dbeta);
void batchnorm_backward_inference(const BatchNormGeometry& g, const float* y, float* dy, const float* gamma,
                                  const float* moving_var, float eps, bool relu, float* dx);
void batchnorm_update_moving(int c, float* moving_mean, float* moving_var, const float* mean, const float* var,
                             float momentum);
void batchnorm_inference_param_gradients(const BatchNormGeometry& g, const float* x, const float* y, float* dy,
                                         const float* moving_mean, const float* moving_var, float eps, bool relu,
                                         float* dgamma, float* dbeta);
}  // namespace cpu

namespace cuda {
void batchnorm_forward_training(int device, const BatchNormGeometry& g, const float* x, const float* gamma,
                                const float* beta, float eps, bool relu, float* y, float* mean, float* var,
                                float* invstd, const float* residual);
void batchnorm_forward_inference(int device, const BatchNormGeometry& g, const float* x, const float* gamma,
                                 const float* beta, const float* moving_mean, const float* moving_var, float eps,
                                 bool relu, float* y, const float* residual);
void batchnorm_backward_training(int device, const BatchNormGeometry& g, const float* x, const float* y, float* dy,
                                 const float* gamma, const float* mean, const float* invstd, float eps, bool relu,
                                 float* dx, float* dgamma, float* dbeta);
void batchnorm_backward_inference(int device, const BatchNormGeometry& g, const float* y, float* dy,
                                  const float* gamma, const float* moving_var, float eps, bool relu, float* dx);
void batchnorm_update_moving(int device, int c, float* moving_mean, float* moving_var, const float* mean,
                             const float* var, float momentum);
void batchnorm_inference_param_gradients(int device, const BatchNormGeometry& g, const float* x, const float* y,
                                         float* dy, const float* moving_mean, const float* moving_var, float eps,
                                         bool relu, float* dgamma, float* dbeta);
}  // namespace cuda

}  // namespace hpcnn
