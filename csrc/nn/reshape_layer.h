// Keras' Reshape: the per-sample shape changed to `target` (one entry may be -1: the size that
// keeps the element count), in row-major order, as Keras reshapes NHWC data. A view of its input
// (no copy, no compute), like Flatten; its gradient is dy seen in the input's shape.
#pragma once

#include <vector>

#include "nn/layer.h"

namespace hpcnn::nn {

class ReshapeLayer : public Layer {
 public:
  // ValueError for an entry that is not positive or -1, or more than one -1.
  explicit ReshapeLayer(std::vector<long long> target);
  std::string kind() const override { return "Reshape"; }
  // ValueError naming both shapes when the element counts differ (or -1 cannot be resolved).
  Shape output_shape(const Shape& in) const override;
  bool forward_is_view(bool) const override { return true; }
  bool backward_is_view() const override { return true; }
  bool backward_reads_input() const override { return false; }
  bool backward_reads_output() const override { return false; }
  void forward(const Tensor&, Tensor&, const StepContext&) override {}
  void backward(const Tensor&, const Tensor&, Tensor&, Tensor*, const StepContext&) override {}

 private:
  std::vector<long long> target_;
};

}  // namespace hpcnn::nn
