// The cuDNN calls of the CUDA backend, side by side in ops/cudnn_*.cu: the convolutions in
// cudnn_ops.cu, batch normalization in cudnn_batchnorm.cu (so that a move to cuDNN's graph API
// touches those files only). Layout: activations NHWC, filters in cuDNN's NHWC filter layout KRSC =
// (out, kh, kw, in), which is the CUDA backend's kernel layout OHWI (ops/conv2d_layout.h): the
// filter descriptor describes the kernel buffer as it is, with no transpose on the way.
// Padding here is symmetric (cuDNN's convolution descriptor has one pad per axis); Keras' 'same'
// with an odd total pads explicitly in conv2d_cuda.cu and calls these with pad 0.
// CUDA translation units only.
#pragma once

#include "core/cuda_context.h"
#include "ops/conv2d_body.h"

namespace hpcnn::cuda::cudnn {

// n, h, w, c, f, kh, kw, sh, sw, ph, pw, oh, ow (+ `padded`, which cuDNN never sees).
using ConvShape = body::ConvGeom;

// y = conv(x, w) (+ b, ReLU when `bias` is not null and the fused call applies). Returns true
// when bias and ReLU were applied (cudnnConvolutionBiasActivationForward), false when only the
// convolution was computed and the caller adds the bias and activation itself.
bool conv_forward(Context& ctx, const ConvShape& s, const float* x, const float* w_krsc, const float* bias, bool relu,
                  float* y);
// dx = conv_transpose(dy, w): overwrites dx.
void conv_backward_data(Context& ctx, const ConvShape& s, const float* dy, const float* w_krsc, float* dx);
// dw_krsc = sum over the batch of x (*) dy: overwrites dw_krsc.
void conv_backward_filter(Context& ctx, const ConvShape& s, const float* x, const float* dy, float* dw_krsc);

// ---- batch normalization over the channels of NHWC data (batchnorm_cuda.cu calls these).
// The data is described as n x (h, 1) x c: h = the rows of one sample (the product of the axes
// between batch and channels); cuDNN's spatial mode normalizes each channel over n*h rows.
struct BnShape {
  int n, h, c;
};
// y = BN(x) with the batch's statistics. save_mean = the batch mean, save_invstd = 1/sqrt(biased
// var + eps); run_mean/run_var (zeroed here first) receive the batch mean and cuDNN's UNBIASED
// batch variance (exponentialAverageFactor 1: the running average is the batch's own value).
void batchnorm_forward_training(Context& ctx, const BnShape& s, const float* x, const float* scale, const float* bias,
                                double eps, float* y, float* run_mean, float* run_var, float* save_mean,
                                float* save_invstd);
// y = scale * (x - mean) / sqrt(var + eps) + bias.
void batchnorm_forward_inference(Context& ctx, const BnShape& s, const float* x, const float* scale, const float* bias,
                                 const float* mean, const float* var, double eps, float* y);
// dx, dscale, dbias (all overwritten) from the forward's saved mean and inverse std.
void batchnorm_backward(Context& ctx, const BnShape& s, const float* x, const float* dy, const float* scale, double eps,
                        const float* save_mean, const float* save_invstd, float* dx, float* dscale, float* dbias);

}  // namespace hpcnn::cuda::cudnn
