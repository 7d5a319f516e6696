// What one step over a graph (nn/graph.h) computes, in which order, and which buffer holds each
// activation and each gradient: the plan the model (nn/model.h) runs and sizes its memory by.
//
// Step times: forward of node i at time i (nodes [0, end)), the loss (or, for prediction, the
// copy of the output) at `end`, backward of node i at 2 * end - i (from the last node down).
// Each buffer records when it is first written and last read; nn/memory_plan.h packs them, so an
// activation's memory is reused as soon as neither a later layer nor the backward pass reads it
// (a layer says what its backward reads: Layer::backward_reads_input/output), and a gradient's
// as soon as the layer it flows into is done.
//
// Forward: a layer whose output is a view of its input (Flatten; Dropout at inference) gets no
// buffer: its value is the input's, reshaped.
// Inference steps (Test, Predict): a BatchNormalization whose one input is a Conv2D without a
// fused ReLU (or a DepthwiseConv2D, the normalization then without a fused ReLU: MobileNetV2's)
// that nothing else reads is folded into that convolution (ops::conv_bn_fold): the
// convolution computes the normalized output (and the ReLU fused into the normalization) in one
// pass, and the normalization's node is a view of it (`folds`). A ReLU6 Activation that alone reads
// such a normalization (one without a fused ReLU: MobileNetV2's expand and depthwise convolutions)
// is computed there too, the ReLU capped at 6 (`capped`): its node is a view of the convolution's
// output as well, a pass over the largest activations saved. Training steps fold only in the
// model's frozen part (a transfer-learning base: no backward runs through the convolution or the
// normalization, and the normalization uses its moving statistics; not a block tail's
// normalization): elsewhere the backward pass needs the convolution's own output, and the batch's
// statistics are not constants. Model(x, training=True) calls never fold.
// Inference steps also give a residual block's tail to its last convolution: where an Add of two
// inputs is read only by a plain ReLU (that reads only it), and one of its inputs is a convolution
// without a fused ReLU (or the BatchNormalization folded into one) that nothing else reads, and the
// other input (the shortcut) is computed before that convolution, the convolution computes
// ReLU(conv + shortcut) into the ReLU's buffer in its output stage (`residual`: ops::conv2d_forward
// with a residual); the Add's and the ReLU's nodes are views of it (`view_source`). One pass over
// the block's output instead of three (convolution, Add, ReLU).
// Training steps (Train, Call) give the tail to the block's last BatchNormalization instead (the
// convolution's output is the normalization's input there): where an Add of two inputs is read
// only by a plain ReLU (that reads only it, and is not the model's output), and one of its inputs
// is a BatchNormalization without a fused ReLU that nothing else reads, and the other input (the
// shortcut) is computed before it and read, besides the Add, only by nodes before it, the
// normalization computes ReLU(normalized + shortcut) into its buffer (`residual`,
// BatchNormLayer::forward_residual); the Add's and the ReLU's nodes are views of it. Backward: the
// ReLU and the Add pass dy through (`tail`), the shortcut's gradient shares dy's buffer (Alias),
// and the normalization masks that buffer by its output in place before anything else reads it
// (BatchNormLayer::backward_residual): the shortcut then reads the masked gradient, and the
// shortcut's other readers, all before the normalization, add to it afterwards.
// Backward (training): node i runs backward if it has trainable parameters or any of its inputs
// does, directly or further up (frozen layers before every trainable one are skipped, as are the
// gradients of the model's input). The gradient of an output that feeds several layers is the
// sum of their contributions, taken in a fixed order (the later layer first) so that the result
// is the same every step. How a contribution reaches the gradient of input p (GradRoute):
//   Write       the layer writes it into p's gradient buffer (p's first contribution)
//   WriteTemp   the layer writes it into a temporary, then it is added to p's gradient
//   AddInto     the layer adds it into p's gradient itself (Layer::backward_can_add: a Conv2D adds
//               in its backward-data's output stage), where WriteTemp would be
//   Alias       a pass-through backward (Add, Flatten: dx = dy): p's gradient takes over dy's
//               buffer (no copy); one input of a node does, a second one (a residual block's
//               shortcut) too where the first one's backward only reads it before anything
//               else adds to the second's gradient (step_plan.cpp, can_share_dy)
//   Copy        a pass-through to a further input with no gradient yet: a copy of dy
//   Accumulate  a pass-through to an input that has a gradient already: added to it
#pragma once

#include <cstdint>
#include <vector>

#include "nn/graph.h"
#include "nn/memory_plan.h"

namespace hpcnn::nn {

// Call: the model called in training mode (Keras' model(x, training=True)): the forward pass of a
// training step over every node (Dropout draws, BatchNormalization on the batch's statistics),
// returning the outputs, without a loss or a backward pass.
enum class StepMode { Train, Test, Predict, Call };
enum class GradRoute : uint8_t { None, Write, WriteTemp, AddInto, Alias, Copy, Accumulate };

// What a node runs forward, one kind per node of a plan (StepPlan::run); nn/run_kinds.cpp says
// which layer call each kind makes.
//   Plain          Layer::forward of its one input
//   View           no call: its value is view_source's, reshaped (Flatten; Dropout at inference;
//                  a BatchNormalization folded into its convolution; a block tail's Add and ReLU)
//   Merge          MergeLayer::forward_merge of all its inputs (Add, Concatenate)
//   FoldedConv     inference: a Conv2D that computes the BatchNormalization after it (folds)
//   ConvBlockTail  inference: a Conv2D (and the BatchNormalization folded into it, if any) that
//                  computes its block's ReLU(... + shortcut) (residual)
//   NormBlockTail  training: a BatchNormalization that computes ReLU(normalized + shortcut)
enum class RunKind : uint8_t { Plain, View, Merge, FoldedConv, ConvBlockTail, NormBlockTail };
// What a node runs backward in a training step (StepPlan::back), nn/run_kinds.cpp again.
//   None           no backward (runs_backward is false)
//   PassThrough    no call: dx = dy to every input by its route (Add, Flatten; a block tail's Add
//                  and ReLU)
//   Plain          Layer::backward
//   Merge          MergeLayer::backward_merge
//   Adding         Layer::backward_adding: input 0's gradient added into (GradRoute::AddInto)
//   NormBlockTail  the block tail's BatchNormalization: the ReLU's mask on dy first
enum class BackKind : uint8_t { None, PassThrough, Plain, Merge, Adding, NormBlockTail };

constexpr int kBatchBuffer = -1;  // a value that is (a view of) the staged batch itself
constexpr int kNoResidual = -2;   // StepPlan::residual of a node that adds none
constexpr int kNotAView = -3;     // StepPlan::view_source of a node with a buffer of its own

struct StepPlan {
  StepMode mode = StepMode::Predict;
  int end = 0;                            // nodes [0, end) run forward; end - 1 feeds the loss
  std::vector<int> value_buffer;          // per node < end: the buffer of its output (kBatchBuffer)
  std::vector<char> forward_view;         // per node: its output is its input reshaped
  std::vector<int> folds;                 // per node: the BatchNormalization node folded into this
                                          // convolution (it computes that node's output), or -1
  std::vector<int> capped;                // per node: the ReLU6 node after its folded normalization
                                          // that this convolution computes too, or -1
  std::vector<int> view_source;           // per node: the node whose value it is (a forward view;
                                          // kModelInput: the batch), or kNotAView
  std::vector<int> residual;              // per node: for a convolution (inference) or a
                                          // BatchNormalization (training) that computes its block's
                                          // ReLU(... + shortcut), the shortcut's node (kModelInput:
                                          // the batch), else kNoResidual
  std::vector<int> tail;                  // per node: for an Add or ReLU of such a block tail, the
                                          // node that computes it, else -1
  std::vector<RunKind> run;               // per node: what its forward runs
  std::vector<BackKind> back;             // per node: what its backward runs (Train)
  std::vector<char> runs_backward;        // per node (training)
  std::vector<int> grad_buffer;           // per node: the buffer of its output's gradient, or -1
  std::vector<std::vector<GradRoute>> routes;  // per node, per input
  std::vector<std::vector<int>> temps;         // per node, per input: the WriteTemp buffer, or -1

  struct Buffer {
    long long per_sample = 0;  // float32 elements per sample of the batch
    int first = 0, last = 0;   // step times: first written, last read
  };
  std::vector<Buffer> buffers;
};

// The plan of one step kind. `end`: how many nodes run forward (the model's size, or one less
// when the last node is a softmax fused into the loss); `trains`: per node, whether it has
// parameters the optimizer updates (Train only).
StepPlan plan_step(const Graph& g, StepMode mode, int end, const std::vector<bool>& trains);

// The plan's buffers for batches of `rows` rows, packed into one arena (nn/memory_plan.h).
constexpr long long kArenaAlignment = 256;  // bytes: cuDNN's and the widest vector loads' alignment
ArenaLayout pack_plan(const StepPlan& plan, long long rows);

// The bytes of a step's activations and gradients for a batch size (Model::memory_report).
struct MemoryReport {
  long long batch = 0;
  long long train = 0, test = 0, predict = 0;  // the planned arena of each step kind
  // The training step's buffers each kept for the whole step (no memory shared): what the arena
  // of a step that keeps every activation and gradient would be (set_memory_reuse(false)).
  long long train_keep_all = 0;
  // One buffer per activation for the whole step, plus two gradient buffers of the largest
  // activation and the logits' gradient: how the model's memory was laid out before the plan.
  long long one_buffer_per_activation = 0;
  // The step's statistics (loss sum, correct count, regularization penalty, one sum per other metric, as
  // doubles): the one copy from the device a training or test step makes.
  long long statistics = 0;
  // What the predict plan merges (nn/step_plan.h): BatchNormalizations folded into their
  // convolutions (and the ReLU6s after them capped there), residual blocks whose Add and ReLU
  // their last convolution computes.
  int predict_folded = 0, predict_capped = 0, predict_residual_blocks = 0;
  int train_residual_blocks = 0;  // block tails a training step's BatchNormalization computes
  int train_folded = 0;           // BatchNormalizations a training step folds (its frozen part)
};

}  // namespace hpcnn::nn
