// Keras' ReLU(max_value, negative_slope, threshold) in the combinations the element-wise
// activations do not cover (a max_value other than 6, a threshold, a slope with a max_value):
// ops::relu_clip. nn/lowering.h sends the plain, ReLU6 and leaky forms to an Activation instead.
#pragma once

#include <string>

#include "nn/layer.h"
#include "ops/relu_clip.h"

namespace hpcnn::nn {

class ReluClipLayer : public Layer {
 public:
  explicit ReluClipLayer(ReluClipParams p) : p_(p) {}
  std::string kind() const override { return "ReLU"; }
  Shape output_shape(const Shape& in) const override { return in; }
  void forward(const Tensor& x, Tensor& y, const StepContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, Tensor& dy, Tensor* dx, const StepContext& ctx) override;
  bool backward_reads_output() const override { return false; }  // f' from x
  bool backward_writes_dy() const override { return false; }

 private:
  ReluClipParams p_;
};

}  // namespace hpcnn::nn
