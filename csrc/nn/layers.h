// The layers of hpcnn. Each is thin: shape rules, parameter specs, and calls into ops/.
//   Conv2D              conv2d (+ fused ReLU)                 kernel (kh,kw,in,out)*, bias (out) unless use_bias=False
//   Pool2D              max or average pooling (average:      no params
//                       padding not counted)
//   GlobalPool2D        global average or max pooling         no params; (h,w,c) -> (c) or (1,1,c)
//   ZeroPadding2D       zeros around the spatial axes         no params
//   Flatten             (H,W,C) -> (H*W*C) in H,W,C order     a view, no copy (Keras' NHWC order)
//   Dense               matmul + bias (+ fused ReLU)          kernel (in,out), bias (out) unless use_bias=False
//   Dropout             inverted dropout while training       identity view at inference
//   Activation          element-wise kinds or softmax         identity view for 'linear'
//   Rescaling           x * scale + offset per channel        no params (the constants are configuration)
//   BatchNormalization  over the last axis (+ fused ReLU)     gamma, beta (trainable), moving_mean,
//                                                             moving_variance (non-trainable)
// * Keras' shape; the model holds it in its device's conv2d kernel layout (ParamKind::Conv2DKernel).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "nn/layer.h"
#include "ops/activation.h"
#include "ops/conv2d.h"

namespace hpcnn::nn {

// What an Activation layer computes: softmax over the last axis, or an element-wise kind with its
// parameter (LeakyReLU's negative slope, ELU's alpha).
struct ActivationSpec {
  bool softmax = false;
  Act act = Act::Linear;
  float alpha = 0.f;
};
// "softmax" or a name of ops/activation.h ("" and "None" are 'linear'); ValueError otherwise.
ActivationSpec parse_activation(const std::string& s, float alpha = 0.f);

// The activation Conv2D, Dense and BatchNormalization fuse: 'relu' (true) or 'linear' (false);
// any other name is a ValueError (nn/lowering.h puts other activations in an Activation layer).
bool parse_fused_relu(const std::string& s, const char* layer);

class BatchNormLayer;

class Conv2DLayer : public Layer {
 public:
  Conv2DLayer(int filters, int kh, int kw, int sh, int sw, Padding padding, bool relu, bool use_bias = true);
  std::string kind() const override { return "Conv2D"; }
  Shape output_shape(const Shape& in) const override;
  std::vector<ParamSpec> param_specs(const Shape& in) const override;
  void forward(const Tensor& x, Tensor& y, const StepContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, Tensor& dy, Tensor* dx, const StepContext& ctx) override;
  bool backward_can_add() const override { return true; }
  void backward_adding(const Tensor& x, const Tensor& y, Tensor& dy, Tensor& dx, const StepContext& ctx) override;
  bool backward_reads_output() const override { return relu_; }  // the fused ReLU's mask
  bool fused_relu() const { return relu_; }
  // The kernel's weight name ("kernel"; a SeparableConv2D's pointwise half: "pointwise_kernel").
  void set_kernel_name(std::string name) { kernel_name_ = std::move(name); }
  // Inference (evaluate, predict): this convolution followed by `bn` (in inference mode) in one
  // op, the normalization folded into the kernel and bias (ops::conv_bn_fold) and its ReLU fused;
  // y is bn's output. The step plan decides where (nn/step_plan.h: plan.folds). On the CPU, where
  // the fold would touch more values than it saves (n * oh * ow < kh * kw * c: a deep layer at
  // batch 1), the two run apart instead (the convolution's output in a per-thread buffer).
  // relu_max: a ReLU6 after bn computed here too (6, plan.capped), else kNoReluCap.
  void forward_folded(const Tensor& x, Tensor& y, const StepContext& ctx, BatchNormLayer& bn,
                      float relu_max = kNoReluCap);
  // Inference: y = ReLU(this convolution (with `bn` folded in, when not null) + shortcut), a
  // residual block's convolution, Add and ReLU in one op (nn/step_plan.h: plan.residual).
  void forward_residual(const Tensor& x, const Tensor& shortcut, Tensor& y, const StepContext& ctx,
                        BatchNormLayer* bn);

 private:
  int filters_, kh_, kw_, sh_, sw_;
  Padding padding_;
  bool relu_, use_bias_;
  std::string kernel_name_ = "kernel";
  Tensor folded_kernel_, folded_bias_;  // forward_folded's, on the model's device (made on first use)
  bool fold_current_ = false;           // they hold the fold of the weights of this inference step
  void make_fold_buffers();             // (re)made when the kernel's device or shape differs
  // Folds bn into the buffers unless a later chunk of the same step finds them holding it already.
  void fold(const StepContext& ctx, BatchNormLayer& bn);
};

// MaxPooling2D (max = true) and AveragePooling2D (max = false; padded positions are not counted):
// a (ph, pw) window moved by strides (sh, sw) with Keras' padding (ops/pool2d.h).
class Pool2DLayer : public Layer {
 public:
  Pool2DLayer(bool max, int ph, int pw, int sh, int sw, Padding padding);
  std::string kind() const override { return max_ ? "MaxPooling2D" : "AveragePooling2D"; }
  Shape output_shape(const Shape& in) const override;
  void forward(const Tensor& x, Tensor& y, const StepContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, Tensor& dy, Tensor* dx, const StepContext& ctx) override;
  // Max: the position of each window's max; average: dy spread over the windows, nothing else.
  bool backward_reads_input() const override { return max_; }
  bool backward_reads_output() const override { return max_; }

 private:
  bool max_;
  int ph_, pw_, sh_, sw_;
  Padding padding_;
};

// The two pools by name (what the factory builds).
struct MaxPool2DLayer : Pool2DLayer {
  MaxPool2DLayer(int ph, int pw, int sh, int sw, Padding padding) : Pool2DLayer(true, ph, pw, sh, sw, padding) {}
};
struct AvgPool2DLayer : Pool2DLayer {
  AvgPool2DLayer(int ph, int pw, int sh, int sw, Padding padding) : Pool2DLayer(false, ph, pw, sh, sw, padding) {}
};

class FlattenLayer : public Layer {
 public:
  std::string kind() const override { return "Flatten"; }
  Shape output_shape(const Shape& in) const override;
  bool forward_is_view(bool) const override { return true; }
  bool backward_is_view() const override { return true; }
  bool backward_reads_input() const override { return false; }
  bool backward_reads_output() const override { return false; }
  void forward(const Tensor&, Tensor&, const StepContext&) override {}
  void backward(const Tensor&, const Tensor&, Tensor&, Tensor*, const StepContext&) override {}
};

class DenseLayer : public Layer {
 public:
  DenseLayer(int units, bool relu, bool use_bias = true);
  std::string kind() const override { return "Dense"; }
  Shape output_shape(const Shape& in) const override;
  std::vector<ParamSpec> param_specs(const Shape& in) const override;
  void forward(const Tensor& x, Tensor& y, const StepContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, Tensor& dy, Tensor* dx, const StepContext& ctx) override;
  bool backward_reads_output() const override { return relu_; }  // the fused ReLU's mask

 private:
  int units_;
  bool relu_, use_bias_;
};

// Keras' Dropout; `noise_shape` (per sample, no batch entry; empty: none) draws one mask value per
// position of that shape, broadcast over its axes of size 1 (0: the input's size): EfficientNet's
// (None, 1, 1, 1) drops whole samples of a residual branch. Such a mask is drawn by the dropout op
// into a small tensor and applied with the broadcast product (ops::multiply).
class DropoutLayer : public Layer {
 public:
  explicit DropoutLayer(float rate, std::vector<long long> noise_shape = {});
  std::string kind() const override { return "Dropout"; }
  Shape output_shape(const Shape& in) const override;
  bool forward_is_view(bool training) const override { return !training || inference_only() || rate_ == 0.f; }
  // In inference mode in every step (inside a nested model called with training=False): the
  // identity, whose gradient is dy itself.
  bool backward_is_view() const override { return inference_only(); }
  void forward(const Tensor& x, Tensor& y, const StepContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, Tensor& dy, Tensor* dx, const StepContext& ctx) override;
  bool backward_reads_input() const override { return false; }  // the mask is recomputed
  bool backward_reads_output() const override { return false; }

 private:
  // The mask of this step for a batch of n (noise_shape's layers only), in mask_.
  void draw_mask(const Tensor& x, const StepContext& ctx);
  float rate_;
  std::vector<long long> noise_;
  Tensor ones_, mask_;  // (n, noise...) on the model's device, remade when n or the device changes
};

class ActivationLayer : public Layer {
 public:
  explicit ActivationLayer(ActivationSpec a);
  std::string kind() const override { return "Activation"; }
  const ActivationSpec& spec() const { return spec_; }
  bool is_softmax() const { return spec_.softmax; }
  Shape output_shape(const Shape& in) const override { return in; }
  bool forward_is_view(bool) const override { return is_linear(); }
  bool backward_is_view() const override { return is_linear(); }
  void forward(const Tensor& x, Tensor& y, const StepContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, Tensor& dy, Tensor* dx, const StepContext& ctx) override;
  // ReLU and softmax differentiate from y alone; the other activations from x (and y).
  bool backward_reads_input() const override { return !is_linear() && !spec_.softmax && spec_.act != Act::ReLU; }
  bool backward_reads_output() const override { return !is_linear(); }

 private:
  bool is_linear() const { return !spec_.softmax && spec_.act == Act::Linear; }
  ActivationSpec spec_;
};

// GlobalAveragePooling2D (max = false) and GlobalMaxPooling2D (max = true).
class GlobalPool2DLayer : public Layer {
 public:
  GlobalPool2DLayer(bool max, bool keepdims);
  std::string kind() const override { return max_ ? "GlobalMaxPooling2D" : "GlobalAveragePooling2D"; }
  Shape output_shape(const Shape& in) const override;
  void forward(const Tensor& x, Tensor& y, const StepContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, Tensor& dy, Tensor* dx, const StepContext& ctx) override;
  bool backward_reads_input() const override { return max_; }  // the max's position
  bool backward_reads_output() const override { return max_; }

 private:
  bool max_, keepdims_;
};

class ZeroPadding2DLayer : public Layer {
 public:
  ZeroPadding2DLayer(int top, int bottom, int left, int right);
  std::string kind() const override { return "ZeroPadding2D"; }
  void padding(int& top, int& bottom, int& left, int& right) const {
    top = top_, bottom = bottom_, left = left_, right = right_;
  }
  Shape output_shape(const Shape& in) const override;
  void forward(const Tensor& x, Tensor& y, const StepContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, Tensor& dy, Tensor* dx, const StepContext& ctx) override;
  bool backward_reads_input() const override { return false; }  // dy cropped
  bool backward_reads_output() const override { return false; }

 private:
  int top_, bottom_, left_, right_;
};

// y = x * scale + offset over the last axis; scale and offset hold one value or one per channel.
class RescalingLayer : public Layer {
 public:
  RescalingLayer(std::vector<float> scale, std::vector<float> offset);
  std::string kind() const override { return "Rescaling"; }
  Shape output_shape(const Shape& in) const override;
  void forward(const Tensor& x, Tensor& y, const StepContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, Tensor& dy, Tensor* dx, const StepContext& ctx) override;
  bool backward_reads_input() const override { return false; }  // dx = dy * scale
  bool backward_reads_output() const override { return false; }

 private:
  void upload(Device d, int c);  // scale_/offset_ expanded to c channels, on d (once per device)
  std::vector<float> scale_, offset_;
  Tensor scale_dev_, offset_dev_;
};

// Keras' BatchNormalization over the last axis (axis = -1, or the last axis counted from the
// batch axis). Training (fit, the layer trainable): normalizes with the batch's statistics and,
// when the step commits, moves the moving statistics toward them (Keras' momentum rule); inference
// (evaluate, predict, or a frozen layer during fit, as Keras does): normalizes with the moving
// statistics. Weights in Keras' order: gamma (scale=True), beta (center=True), moving_mean,
// moving_variance; the last two are non-trainable. `relu`: a following ReLU fused into the op.
class BatchNormLayer : public Layer {
 public:
  BatchNormLayer(int axis, float momentum, float epsilon, bool center, bool scale, bool relu);
  std::string kind() const override { return "BatchNormalization"; }
  Shape output_shape(const Shape& in) const override;
  std::vector<ParamSpec> param_specs(const Shape& in) const override;
  void forward(const Tensor& x, Tensor& y, const StepContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, Tensor& dy, Tensor* dx, const StepContext& ctx) override;
  // x (and the batch statistics) always; y only for the fused ReLU's mask.
  bool backward_reads_output() const override { return relu_; }
  bool backward_writes_dy() const override { return relu_; }  // the fused ReLU masks dy in place
  void commit_training_step(const StepContext& ctx) override;
  bool fused_relu() const { return relu_; }
  // The convolution kernel w and bias b (undefined: none) with this layer's inference-mode
  // normalization folded in (ops::conv_bn_fold) into w_out, b_out (Conv2DLayer::forward_folded).
  // (layout: as ops::conv_bn_fold's, for a depthwise kernel)
  void fold_into(const Tensor& w, const Tensor& b, Tensor& w_out, Tensor& b_out,
                 std::optional<KernelLayout> layout = std::nullopt) const;
  // A training step's residual block tail (nn/step_plan.h: plan.residual of this node): y =
  // ReLU(this normalization + shortcut), the block's Add and ReLU in the normalization's pass
  // (a layer without a fused ReLU of its own). Its backward masks dy by y > 0 in place (the
  // gradient of the Add's output, which the shortcut's gradient shares) before the normalization's.
  void forward_residual(const Tensor& x, const Tensor& shortcut, Tensor& y, const StepContext& ctx);
  void backward_residual(const Tensor& x, const Tensor& y, Tensor& dy, Tensor* dx, const StepContext& ctx);

 private:
  // forward and backward, with a ReLU (relu) and a residual (defined) or not.
  void forward_with(const Tensor& x, const Tensor& residual, bool relu, Tensor& y, const StepContext& ctx);
  void backward_with(const Tensor& x, const Tensor& y, Tensor& dy, Tensor* dx, bool relu);
  // The bound weights by role (undefined when the layer has none: scale/center False).
  Tensor gamma() const { return scale_ ? params_[0] : Tensor(); }
  Tensor beta() const { return center_ ? params_[scale_ ? 1 : 0] : Tensor(); }
  Tensor moving_mean() const { return params_[(scale_ ? 1 : 0) + (center_ ? 1 : 0)]; }
  Tensor moving_var() const { return params_[(scale_ ? 1 : 0) + (center_ ? 1 : 0) + 1]; }
  void ensure_batch_stats(Device d, int c);
  Tensor batch_stat(int k, int c) const;  // mean (0), var (1), invstd (2) in batch_stats_

  int axis_;
  float momentum_, epsilon_;
  bool center_, scale_, relu_;
  // The last training forward's batch statistics on the model's device: mean, var, invstd (c each,
  // each at a 256-byte boundary: ops/batchnorm.h).
  Tensor batch_stats_;
  bool used_batch_stats_ = false;  // the last forward normalized with them (training mode)
  bool uncommitted_ = false;       // ... and the moving statistics have not taken them yet
};

}  // namespace hpcnn::nn
