// What each run kind of a step plan runs (nn/step_plan.h: RunKind forward, BackKind backward), and
// which layers the kinds take: the one place where the step calls a layer, and the one place that
// knows the concrete layers the step's fusions take (Conv2D, BatchNormalization, Add, ReLU,
// MergeLayer). plan_step asks the predicates below; the model's step (nn/model.cpp) moves tensors
// between buffers and calls run_forward / run_backward; neither names a layer class.
#pragma once

#include <vector>

#include "nn/graph.h"
#include "nn/step_plan.h"

namespace hpcnn::nn {

// The values a node reads in a step: the staged batch for kModelInput, else node p's output.
struct StepValues {
  const Tensor& x;
  const std::vector<Tensor>& vals;
  const Tensor& operator()(int p) const { return p == kModelInput ? x : vals[p]; }
};

// Node i's forward into y (its buffer), by plan.run[i]; not for View (no call: the model takes
// the source's value). xs: room for a merge layer's inputs.
void run_forward(Graph& g, const StepPlan& plan, int i, const StepValues& value, std::vector<Tensor>& xs,
                 Tensor& y, const StepContext& ctx);

// Node i's backward, by plan.back[i]; not for None or PassThrough (the model routes dy). dy: its
// output's gradient (may be overwritten); dxs: per input, where its gradient goes (null: not
// needed); gathered: input 0's gradient gathered so far, which Adding adds into. xs as above.
void run_backward(Graph& g, const StepPlan& plan, int i, const StepValues& value, std::vector<Tensor>& xs,
                  Tensor& dy, const std::vector<Tensor*>& dxs, Tensor& gathered, const StepContext& ctx);

// Which layers the fused kinds take (plan_step's rules in nn/step_plan.h):
bool is_plain_conv(const Layer& l);   // a Conv2D without a fused ReLU: FoldedConv, ConvBlockTail
bool is_depthwise_conv(const Layer& l);  // a DepthwiseConv2D: FoldedConv with a plain normalization
bool is_norm(const Layer& l);         // a BatchNormalization: folded into the convolution before it
bool is_plain_norm(const Layer& l);   // ... without a fused ReLU: NormBlockTail, or folded in a tail
bool is_add(const Layer& l);          // an Add: a block tail's sum
bool is_plain_relu(const Layer& l);   // an Activation that is a plain ReLU: a block tail's ReLU
bool is_relu6(const Layer& l);        // an Activation that is ReLU6: capped into a folded convolution

// The activation of a model's last layer that a loss may fuse (compile: softmax with the
// categorical cross-entropies, sigmoid with binary cross-entropy).
enum class OutputActivation { None, Softmax, Sigmoid };
OutputActivation output_activation(const Layer& last);

}  // namespace hpcnn::nn
