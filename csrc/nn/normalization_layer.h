// Keras' Normalization (axis=-1, invert=False) after adapt() or with its weights from a file:
// y = (x - mean) / max(sqrt(variance), epsilon) over the last axis, computed as the per-channel
// affine map of ops::scale_shift with constants derived on the model's device from the weights
// (ops::normalization_constants) at each step's first chunk. Weights in Keras' order, all
// non-trainable: mean (c,), variance (c,), count () (how many values adapt() saw; Keras keeps it
// as an integer, hpcnn as a float32 holding the same whole number). Normalization with mean= and
// variance= given has no weights: nn/lowering.h makes it a Rescaling with the constants.
#pragma once

#include <string>
#include <vector>

#include "nn/layer.h"

namespace hpcnn::nn {

class NormalizationLayer : public Layer {
 public:
  explicit NormalizationLayer(float epsilon);
  std::string kind() const override { return "Normalization"; }
  Shape output_shape(const Shape& in) const override;
  std::vector<ParamSpec> param_specs(const Shape& in) const override;
  void forward(const Tensor& x, Tensor& y, const StepContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, Tensor& dy, Tensor* dx, const StepContext& ctx) override;
  bool backward_reads_input() const override { return false; }  // dx = dy * scale
  bool backward_reads_output() const override { return false; }
  bool backward_writes_dy() const override { return false; }

 private:
  float epsilon_;
  Tensor scale_, offset_;  // (c,) on the model's device: this step's constants
};

}  // namespace hpcnn::nn
