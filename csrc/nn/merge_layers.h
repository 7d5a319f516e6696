// The layers of several inputs (nn/layer.h MergeLayer), Keras' merging layers:
//   Add          y = x0 + x1 + ... (inputs of one shape)      backward: every input gets dy
//   Concatenate  inputs side by side along `axis`            backward: dy split into the parts
//   Multiply     y = x0 * x1, Keras' broadcasting (an axis    backward: dy times the other input,
//                of 1 against any size: squeeze-and-         summed over the axes an input was
//                excitation's (h, w, c) x (1, 1, c))         broadcast along
// None has parameters. Add and Concatenate do not read their inputs or output in backward.
#pragma once

#include "nn/layer.h"

namespace hpcnn::nn {

class AddLayer : public MergeLayer {
 public:
  std::string kind() const override { return "Add"; }
  Shape merged_shape(const std::vector<Shape>& inputs) const override;
  void forward_merge(const std::vector<Tensor>& xs, Tensor& y, const StepContext& ctx) override;
  void backward_merge(const std::vector<Tensor>& xs, const Tensor& y, Tensor& dy, const std::vector<Tensor*>& dxs,
                      const StepContext& ctx) override;
  // The model routes dy to every input itself (no compute, nn/step_plan.h) and skips backward_merge.
  bool backward_is_view() const override { return true; }
  bool backward_reads_input() const override { return false; }
  bool backward_reads_output() const override { return false; }
};

class ConcatenateLayer : public MergeLayer {
 public:
  // Keras' axis: it counts the batch axis (-1, the default, is the last one; 0 is refused).
  explicit ConcatenateLayer(int axis);
  std::string kind() const override { return "Concatenate"; }
  int axis() const { return axis_; }
  Shape merged_shape(const std::vector<Shape>& inputs) const override;
  void forward_merge(const std::vector<Tensor>& xs, Tensor& y, const StepContext& ctx) override;
  void backward_merge(const std::vector<Tensor>& xs, const Tensor& y, Tensor& dy, const std::vector<Tensor*>& dxs,
                      const StepContext& ctx) override;
  bool backward_reads_input() const override { return false; }  // only the inputs' shapes
  bool backward_reads_output() const override { return false; }

 private:
  int axis_;
};

class MultiplyLayer : public MergeLayer {
 public:
  std::string kind() const override { return "Multiply"; }
  // Exactly two inputs of one rank whose axes agree or are 1 (ValueError naming the shapes).
  Shape merged_shape(const std::vector<Shape>& inputs) const override;
  void forward_merge(const std::vector<Tensor>& xs, Tensor& y, const StepContext& ctx) override;
  void backward_merge(const std::vector<Tensor>& xs, const Tensor& y, Tensor& dy, const std::vector<Tensor*>& dxs,
                      const StepContext& ctx) override;
  bool backward_reads_output() const override { return false; }
  bool backward_writes_dy() const override { return false; }
};

}  // namespace hpcnn::nn
