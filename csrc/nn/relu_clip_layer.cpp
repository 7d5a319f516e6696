#include "nn/relu_clip_layer.h"

#include "ops/ops.h"

namespace hpcnn::nn {

void ReluClipLayer::forward(const Tensor& x, Tensor& y, const StepContext&) { ops::relu_clip_forward(p_, x, y); }

void ReluClipLayer::backward(const Tensor& x, const Tensor&, Tensor& dy, Tensor* dx, const StepContext&) {
  if (dx) ops::relu_clip_backward(p_, x, dy, *dx);
}

}  // namespace hpcnn::nn
