#include "nn/depthwise_layer.h"

#include <limits>

#include "core/errors.h"
#include "nn/layers.h"
#include "ops/ops.h"

namespace hpcnn::nn {

DepthwiseConv2DLayer::DepthwiseConv2DLayer(DepthwiseSpec spec) : s_(std::move(spec)) {
  HPCNN_CHECK_ARG(s_.depth_multiplier > 0, "DepthwiseConv2D: depth_multiplier must be a positive integer, got ",
                  s_.depth_multiplier);
  HPCNN_CHECK_ARG(s_.kh > 0 && s_.kw > 0, "DepthwiseConv2D: kernel_size must be positive, got (", s_.kh, ", ", s_.kw,
                  ")");
  HPCNN_CHECK_ARG(s_.sh > 0 && s_.sw > 0, "DepthwiseConv2D: strides must be positive, got (", s_.sh, ", ", s_.sw, ")");
  HPCNN_CHECK_ARG(s_.dh > 0 && s_.dw > 0, "DepthwiseConv2D: dilation_rate must be positive, got (", s_.dh, ", ", s_.dw,
                  ")");
}

Shape DepthwiseConv2DLayer::output_shape(const Shape& in) const {
  HPCNN_CHECK_ARG(in.size() == 3, "DepthwiseConv2D expects inputs of shape (height, width, channels), got ",
                  shape_str(in));
  for (long long d : in)
    HPCNN_CHECK_ARG(d > 0 && d <= std::numeric_limits<int>::max(), "DepthwiseConv2D: input shape ", shape_str(in),
                    " has a dimension out of range");
  const DepthwiseGeometry g = DepthwiseGeometry::make(1, (int)in[0], (int)in[1], (int)in[2], s_.depth_multiplier,
                                                      s_.kh, s_.kw, s_.sh, s_.sw, s_.dh, s_.dw, s_.padding);
  return {g.oh, g.ow, g.oc()};
}

std::vector<ParamSpec> DepthwiseConv2DLayer::param_specs(const Shape& in) const {
  const long long c = in.at(2), m = s_.depth_multiplier, rf = (long long)s_.kh * s_.kw;
  // Keras' glorot fans of a 4-D kernel: receptive field x the last two axes.
  std::vector<ParamSpec> specs{{s_.kernel_name, {s_.kh, s_.kw, c, m}, Init::GlorotUniform, rf * c, rf * m}};
  if (s_.use_bias) specs.push_back({"bias", {c * m}, Init::Zeros, 0, 0});
  return specs;
}

void DepthwiseConv2DLayer::forward(const Tensor& x, Tensor& y, const StepContext&) {
  ops::depthwise_conv2d_forward(x, params_[0], s_.use_bias ? params_[1] : Tensor(), y, s_.sh, s_.sw, s_.dh, s_.dw,
                                s_.padding);
}

void DepthwiseConv2DLayer::forward_folded(const Tensor& x, Tensor& y, const StepContext& ctx, BatchNormLayer& bn,
                                          float relu_max) {
  const Tensor& w = params_[0];
  const long long oc = w.dim(2) * w.dim(3);
  if (!folded_kernel_.defined() || folded_kernel_.device() != w.device() || folded_kernel_.shape() != w.shape()) {
    folded_kernel_ = Tensor::empty(w.shape(), DType::F32, w.device());
    folded_bias_ = Tensor::empty({oc}, DType::F32, w.device());
    fold_current_ = false;
  }
  // Folded at every step (the weights may have changed since), by the first chunk of a step:
  // later chunks running side by side only read it (as Conv2DLayer::fold).
  if (!(ctx.later_chunk && fold_current_)) {
    const Shape hwio{w.dim(0), w.dim(1), 1, oc};  // output channel k = ci * m + j is the innermost axis
    Tensor folded = folded_kernel_.reshape(hwio);
    bn.fold_into(w.reshape(hwio), s_.use_bias ? params_[1] : Tensor(), folded, folded_bias_, KernelLayout::HWIO);
    fold_current_ = true;
  }
  ops::depthwise_conv2d_forward(x, folded_kernel_, folded_bias_, y, s_.sh, s_.sw, s_.dh, s_.dw, s_.padding,
                                relu_max < kNoReluCap, relu_max);
}

void DepthwiseConv2DLayer::backward(const Tensor& x, const Tensor&, Tensor& dy, Tensor* dx, const StepContext&) {
  Tensor no_bias;
  ops::depthwise_conv2d_backward(x, params_[0], dy, dx, grads_[0], s_.use_bias ? grads_[1] : no_bias, s_.sh, s_.sw,
                                 s_.dh, s_.dw, s_.padding);
}

}  // namespace hpcnn::nn
