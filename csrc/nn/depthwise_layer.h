// Keras' DepthwiseConv2D as a core layer (ops::depthwise_conv2d): each input channel convolved with
// its own depth_multiplier filters. Weights in Keras' order and layout on every device: the kernel
// (kh, kw, in, depth_multiplier) (a plain parameter: the op takes Keras' layout on both backends)
// and the bias (in * depth_multiplier,) unless use_bias=False. Its activation, when not linear, is
// a separate core Activation (nn/lowering.h). A SeparableConv2D lowers to this layer (no bias, its
// kernel named "depthwise_kernel") followed by a 1x1 Conv2D.
#pragma once

#include <string>
#include <vector>

#include "nn/layer.h"
#include "ops/conv2d.h"

namespace hpcnn::nn {

class BatchNormLayer;

struct DepthwiseSpec {
  int depth_multiplier = 1;
  int kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1;
  Padding padding = Padding::Valid;
  bool use_bias = true;
  std::string kernel_name = "kernel";  // Keras 3's name (SeparableConv2D's: "depthwise_kernel")
};

class DepthwiseConv2DLayer : public Layer {
 public:
  explicit DepthwiseConv2DLayer(DepthwiseSpec spec);  // ValueError for a non-positive argument
  std::string kind() const override { return "DepthwiseConv2D"; }
  Shape output_shape(const Shape& in) const override;
  std::vector<ParamSpec> param_specs(const Shape& in) const override;
  void forward(const Tensor& x, Tensor& y, const StepContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, Tensor& dy, Tensor* dx, const StepContext& ctx) override;
  bool backward_reads_output() const override { return false; }
  bool backward_writes_dy() const override { return false; }
  // Inference (evaluate, predict): this convolution followed by `bn` (in inference mode, without a
  // fused ReLU) in one op, the normalization folded into the kernel and bias (ops::conv_bn_fold,
  // the kernel viewed as HWIO (kh, kw, 1, c*m)); y is bn's output: one pass over the output less
  // (MobileNetV2's expanded activations, nn/step_plan.h: plan.folds). Always folded: the kernel
  // (kh*kw*c*m values) is smaller than any output it saves a pass over. relu_max: a ReLU6 after bn
  // computed here too (6, plan.capped), else kNoReluCap.
  void forward_folded(const Tensor& x, Tensor& y, const StepContext& ctx, BatchNormLayer& bn,
                      float relu_max = kNoReluCap);

 private:
  DepthwiseSpec s_;
  Tensor folded_kernel_, folded_bias_;  // forward_folded's, on the model's device (made on first use)
  bool fold_current_ = false;           // they hold the fold of the weights of this inference step
};

}  // namespace hpcnn::nn
