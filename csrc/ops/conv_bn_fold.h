// A BatchNormalization in inference mode folded into the convolution before it (nn/step_plan.h
// plans it for evaluate and predict): the normalization with the moving statistics is a
// per-filter affine map, y = (conv(x) + b - mean) * a + beta with a = gamma / sqrt(var + eps), so
//   w'[.., f] = w[.., f] * a[f]      b'[f] = (b[f] - mean[f]) * a[f] + beta[f]
// and conv(x; w', b') is the convolution followed by the normalization, in one pass over the
// output instead of two (the ReLU after it fused too, by the convolution). `a` is computed as the
// batch norm's inference op computes it (batchnorm_cpu.cpp: gamma / sqrt(var + eps) in double,
// rounded to float once), so the two differ only by float32 rounding of the reassociated sums.
// The kernel is in its device's layout (HWIO on the CPU: the filter is the last axis; OHWI on a
// GPU: the first); b null = no bias (0); gamma, beta null = 1, 0 (scale/center=False).
// Per element: body::conv_bn_fold_kernel / conv_bn_fold_bias (conv_bn_fold_body.h), which the CPU
// loop (conv_bn_fold_cpu.cpp) and the CUDA kernels (conv_bn_fold_cuda.cu) both run.
#pragma once

#include "ops/conv2d_layout.h"

namespace hpcnn {

struct ConvBnFoldGeometry {
  long long weights;   // kernel elements: kh * kw * c * f
  int f;               // filters (= the batch norm's channels)
  KernelLayout layout;  // which axis of the kernel is the filter's
};

namespace cpu {
void conv_bn_fold(const ConvBnFoldGeometry& g, const float* w, const float* b, const float* gamma, const float* beta,
                  const float* moving_mean, const float* moving_var, float eps, float* w_out, float* b_out);
}  // namespace cpu

namespace cuda {
void conv_bn_fold(int device, const ConvBnFoldGeometry& g, const float* w, const float* b, const float* gamma,
                  const float* beta, const float* moving_mean, const float* moving_var, float eps, float* w_out,
                  float* b_out);
}  // namespace cuda

}  // namespace hpcnn
