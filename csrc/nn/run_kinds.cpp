#include "nn/run_kinds.h"

#include "nn/depthwise_layer.h"
#include "nn/layers.h"
#include "nn/merge_layers.h"

namespace hpcnn::nn {

namespace {

// The BatchNormalization node a convolution computes (plan.folds), or null.
BatchNormLayer* folded_norm(Graph& g, const StepPlan& plan, int i) {
  return plan.folds[i] >= 0 ? &static_cast<BatchNormLayer&>(g.layer(plan.folds[i])) : nullptr;
}

}  // namespace

void run_forward(Graph& g, const StepPlan& plan, int i, const StepValues& value, std::vector<Tensor>& xs,
                 Tensor& y, const StepContext& ctx) {
  Layer& l = g.layer(i);
  const std::vector<int>& in = g.inputs(i);
  switch (plan.run[i]) {
    case RunKind::Plain:
      l.forward(value(in[0]), y, ctx);
      return;
    case RunKind::Merge:
      xs.clear();
      for (int p : in) xs.push_back(value(p));
      static_cast<MergeLayer&>(l).forward_merge(xs, y, ctx);
      return;
    case RunKind::FoldedConv: {  // the BatchNormalization after it (and a ReLU6) in its output stage
      const float relu_max = plan.capped[i] >= 0 ? 6.f : kNoReluCap;
      if (auto* dw = dynamic_cast<DepthwiseConv2DLayer*>(&l))
        dw->forward_folded(value(in[0]), y, ctx, *folded_norm(g, plan, i), relu_max);
      else
        static_cast<Conv2DLayer&>(l).forward_folded(value(in[0]), y, ctx, *folded_norm(g, plan, i), relu_max);
      return;
    }
    case RunKind::ConvBlockTail:  // ReLU(conv (+ folded normalization) + shortcut)
      static_cast<Conv2DLayer&>(l).forward_residual(value(in[0]), value(plan.residual[i]), y, ctx,
                                                    folded_norm(g, plan, i));
      return;
    case RunKind::NormBlockTail:  // ReLU(normalized + shortcut)
      static_cast<BatchNormLayer&>(l).forward_residual(value(in[0]), value(plan.residual[i]), y, ctx);
      return;
    case RunKind::View:
      break;
  }
  throw BackendError(cat("run_forward: node ", i, " is a view (no layer call)"));
}

void run_backward(Graph& g, const StepPlan& plan, int i, const StepValues& value, std::vector<Tensor>& xs,
                  Tensor& dy, const std::vector<Tensor*>& dxs, Tensor& gathered, const StepContext& ctx) {
  Layer& l = g.layer(i);
  const std::vector<int>& in = g.inputs(i);
  const Tensor& y = value.vals[i];  // its output in this step
  switch (plan.back[i]) {
    case BackKind::Plain:
      l.backward(value(in[0]), y, dy, dxs[0], ctx);
      return;
    case BackKind::Merge:
      xs.clear();
      for (int p : in) xs.push_back(value(p));
      static_cast<MergeLayer&>(l).backward_merge(xs, y, dy, dxs, ctx);
      return;
    case BackKind::Adding:
      l.backward_adding(value(in[0]), y, dy, gathered, ctx);
      return;
    case BackKind::NormBlockTail:  // the ReLU's mask on dy first
      static_cast<BatchNormLayer&>(l).backward_residual(value(in[0]), y, dy, dxs[0], ctx);
      return;
    case BackKind::None:
    case BackKind::PassThrough:
      break;
  }
  throw BackendError(cat("run_backward: node ", i, " makes no layer call backward"));
}

bool is_plain_conv(const Layer& l) {
  const auto* conv = dynamic_cast<const Conv2DLayer*>(&l);
  return conv && !conv->fused_relu();
}

bool is_depthwise_conv(const Layer& l) { return dynamic_cast<const DepthwiseConv2DLayer*>(&l) != nullptr; }

bool is_norm(const Layer& l) { return dynamic_cast<const BatchNormLayer*>(&l) != nullptr; }

bool is_plain_norm(const Layer& l) {
  const auto* bn = dynamic_cast<const BatchNormLayer*>(&l);
  return bn && !bn->fused_relu();
}

bool is_add(const Layer& l) { return dynamic_cast<const AddLayer*>(&l) != nullptr; }

bool is_plain_relu(const Layer& l) {
  const auto* act = dynamic_cast<const ActivationLayer*>(&l);
  return act && !act->spec().softmax && act->spec().act == Act::ReLU;
}

bool is_relu6(const Layer& l) {
  const auto* act = dynamic_cast<const ActivationLayer*>(&l);
  return act && !act->spec().softmax && act->spec().act == Act::ReLU6;
}

OutputActivation output_activation(const Layer& last) {
  const auto* act = dynamic_cast<const ActivationLayer*>(&last);
  if (!act) return OutputActivation::None;
  if (act->is_softmax()) return OutputActivation::Softmax;
  return act->spec().act == Act::Sigmoid ? OutputActivation::Sigmoid : OutputActivation::None;
}

}  // namespace hpcnn::nn
