// The layers of hpcnn. Each is thin: shape rules, parameter specs, and calls into ops/.
//   Conv2D       conv2d (+ fused ReLU)                 params: kernel (kh,kw,in,out)*, bias (out)
//   MaxPool2D    max pooling                           no params
//   Flatten      (H,W,C) -> (H*W*C) in H,W,C order     a view, no copy (Keras' NHWC order)
//   Dense        matmul + bias (+ fused ReLU)          params: kernel (in,out), bias (out)
//   Dropout      inverted dropout while training       identity view at inference
//   Activation   relu or softmax (last axis)
// * Keras' shape; the model holds it in its device's conv2d kernel layout (ParamKind::Conv2DKernel).
#pragma once

#include "nn/layer.h"
#include "ops/conv2d.h"

namespace hpcnn::nn {

enum class Activation { Linear, ReLU, Softmax };
Activation parse_activation(const std::string& s);  // "relu", "softmax", "linear"/"" ; ValueError otherwise

class Conv2DLayer : public Layer {
 public:
  Conv2DLayer(int filters, int kh, int kw, int sh, int sw, Padding padding, bool relu);
  std::string kind() const override { return "Conv2D"; }
  Shape output_shape(const Shape& in) const override;
  std::vector<ParamSpec> param_specs(const Shape& in) const override;
  void forward(const Tensor& x, Tensor& y, const StepContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, Tensor& dy, Tensor* dx, const StepContext& ctx) override;
  bool backward_reads_output() const override { return relu_; }  // the fused ReLU's mask

 private:
  int filters_, kh_, kw_, sh_, sw_;
  Padding padding_;
  bool relu_;
};

class MaxPool2DLayer : public Layer {
 public:
  MaxPool2DLayer(int ph, int pw, int sh, int sw, Padding padding);
  std::string kind() const override { return "MaxPooling2D"; }
  Shape output_shape(const Shape& in) const override;
  void forward(const Tensor& x, Tensor& y, const StepContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, Tensor& dy, Tensor* dx, const StepContext& ctx) override;

 private:
  int ph_, pw_, sh_, sw_;
  Padding padding_;
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
  DenseLayer(int units, bool relu);
  std::string kind() const override { return "Dense"; }
  Shape output_shape(const Shape& in) const override;
  std::vector<ParamSpec> param_specs(const Shape& in) const override;
  void forward(const Tensor& x, Tensor& y, const StepContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, Tensor& dy, Tensor* dx, const StepContext& ctx) override;
  bool backward_reads_output() const override { return relu_; }  // the fused ReLU's mask

 private:
  int units_;
  bool relu_;
};

class DropoutLayer : public Layer {
 public:
  explicit DropoutLayer(float rate);
  std::string kind() const override { return "Dropout"; }
  Shape output_shape(const Shape& in) const override { return in; }
  bool forward_is_view(bool training) const override { return !training || rate_ == 0.f; }
  void forward(const Tensor& x, Tensor& y, const StepContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, Tensor& dy, Tensor* dx, const StepContext& ctx) override;
  bool backward_reads_input() const override { return false; }  // the mask is recomputed
  bool backward_reads_output() const override { return false; }

 private:
  float rate_;
};

class ActivationLayer : public Layer {
 public:
  explicit ActivationLayer(Activation a);
  std::string kind() const override { return "Activation"; }
  Activation activation() const { return act_; }
  Shape output_shape(const Shape& in) const override { return in; }
  bool forward_is_view(bool) const override { return act_ == Activation::Linear; }
  bool backward_is_view() const override { return act_ == Activation::Linear; }
  void forward(const Tensor& x, Tensor& y, const StepContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, Tensor& dy, Tensor* dx, const StepContext& ctx) override;
  bool backward_reads_input() const override { return false; }  // ReLU and softmax: from y
  bool backward_reads_output() const override { return act_ != Activation::Linear; }

 private:
  Activation act_;
};

}  // namespace hpcnn::nn
