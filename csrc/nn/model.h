// A model: layers at the nodes of a graph (nn/graph.h; Sequential is the chain), and the spine of
// a training step over it. Getting a batch onto the model's device is the batch stager's job
// (nn/batch_stager.h); the model runs steps on staged tensors. The step, as nn/model.cpp reads:
//
//   train_step(current, next): take this step's batch (`current` staged now, or the one staged
//   ahead by the previous call's `next`), then
//     compute_gradients (one replica's step, a function of the staged batch):
//       forward through the nodes in topological order into the step's buffers; each node runs
//       what its run kind says (nn/step_plan.h, nn/run_kinds.h)
//       the loss and metrics (nn/loss.h, Model::loss_and_stats): loss sum, correct count, metric
//       sums and the regularizers' penalty, read back in the step's one device->host copy; dlogits
//       scaled by 1 / rows of the global batch
//       backward through the nodes in reverse, gradients of shared outputs summed in a fixed
//       order, parameter gradients into the one gradient buffer [data parallelism: summed over
//       the replicas by the GradientSync (nn/gradient_sync.h), in buckets during backward]
//     apply_gradients: the regularizers' gradients; the layers' training-time state committed
//       (BatchNormalization's moving statistics: only now, the loss being finite); one optimizer
//       step over the one parameter buffer (its trainable ranges)
//     stage `next` for the following call (on a GPU its upload overlaps this step's backward)
//   test_step and predict_step: the same forward (in chunks of rows on the CPU,
//   nn/chunked_inference.h), without the backward pass (predict: no targets, the outputs back).
//
// Memory: all weights live in one contiguous buffer (and their gradients in another), trainable
// ones first, then the non-trainable ones (moving statistics); layers hold views. A step's
// activations and gradients live in one arena laid out by the step's plan (nn/step_plan.h,
// nn/memory_plan.h), sized for the largest step kind at the batch capacity seen so far. The
// buffers are in the device's layout (nn/param_layout.h), converted only by get_weights,
// set_weights and to(); before a device buffer is freed the model waits for the GPU's queued work.
//
// One class, four files: nn/model.cpp (construction and the step above), nn/model_state.cpp (the
// weights, trainable ranges, optimizer state, to()), nn/model_memory.cpp (the plans, the arena,
// memory_report) and nn/model_loss.cpp (compile's loss, the metrics, the class weights and the
// step's loss part, loss_and_stats).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nn/batch_stager.h"
#include "nn/chunked_inference.h"
#include "nn/gradient_sync.h"
#include "nn/graph.h"
#include "nn/layer.h"
#include "nn/loss.h"
#include "nn/memory_plan.h"
#include "nn/optimizer.h"
#include "nn/param_layout.h"
#include "nn/regularization.h"
#include "nn/step_plan.h"

namespace hpcnn::nn {

class Model {
 public:
  // A graph: nodes in topological order, the last one the output (ValueError otherwise).
  Model(Shape input_shape, std::vector<Node> nodes, uint64_t seed);
  // A chain of layers: a Sequential model.
  Model(Shape input_shape, std::vector<LayerPtr> layers, uint64_t seed);
  ~Model();  // waits for the GPU's queued work before the device buffers are freed
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const Graph& graph() const { return graph_; }
  const Shape& input_shape() const { return graph_.input_shape(); }
  const std::vector<Shape>& output_shapes() const { return graph_.output_shapes(); }  // per node, per sample
  int num_nodes() const { return graph_.size(); }
  const Layer& layer(int i) const { return graph_.layer(i); }
  long long num_params() const { return layout_.count(); }  // parameters (the buffer also holds padding)
  // Per node: each weight's spec (name, shape, trainable), Keras order (kernel, bias, ...).
  std::vector<std::vector<ParamSpec>> weight_specs() const { return specs_; }

  std::vector<Tensor> get_weights() const;            // host copies, Keras order and layouts
  void set_weights(const std::vector<Tensor>& ws);    // ValueError on count/shape mismatch
  // Arrays [first, first + count) of get_weights' order (one Keras layer's weights: its nodes'
  // arrays are consecutive there), host copies in Keras' layouts.
  std::vector<Tensor> get_weights(size_t first, size_t count) const;
  // Writes ws (Keras' layouts) into arrays first, first + 1, ... of get_weights' order, on the
  // model's device; every shape is checked before anything is written (ValueError naming `what`).
  void set_weights(size_t first, const std::vector<Tensor>& ws, const std::string& what);
  // The flat buffers on the model's device, in that device's layout, with the padding between
  // arrays (param_layout()).
  Tensor& parameter_buffer() { return params_; }
  Tensor& gradient_buffer() { return grads_; }
  const ParamLayout& param_layout() const { return layout_; }

  // The loss: the categorical cross-entropies need a final softmax (fused with the loss) unless
  // from_logits; binary cross-entropy fuses a final sigmoid the same way (from the logits, stable)
  // or takes probabilities from any other last layer; mse / mae take the outputs as they are.
  void compile(std::unique_ptr<Optimizer> optimizer, const LossSpec& loss);
  void compile(std::unique_ptr<Optimizer> optimizer, Loss loss, bool from_logits) {
    compile(std::move(optimizer), LossSpec{loss, from_logits, 0.f});
  }
  // The metrics each step reports (BatchStats::metrics, in this order), on the model's outputs.
  // ValueError for a metric the loss's targets cannot serve (a float metric with class indices).
  void set_metrics(const std::vector<MetricSpec>& metrics);
  // Per-class weights of the loss (fit's class_weight), indexed by the target's class; empty: none.
  void set_class_weights(const std::vector<float>& weights);
  // Which nodes the optimizer updates (one flag per node; all by default; Python sets it at
  // compile, Keras' rule). A frozen node's weights and optimizer state stay as they are, backward
  // skips every node before which nothing is trainable, and each layer is told (a frozen
  // BatchNormalization runs in inference mode). Non-trainable weights are never stepped.
  void set_trainable(const std::vector<bool>& per_node);
  long long num_trainable_params() const;
  // The parameters the optimizer steps: exact runs of the buffer (no padding), sorted, adjacent
  // runs merged.
  const std::vector<ParamRange>& trainable_ranges() const { return trainable_ranges_; }
  bool compiled() const { return optimizer_ != nullptr; }
  Optimizer* optimizer() const { return optimizer_.get(); }
  Loss loss() const { return loss_.kind; }
  const LossSpec& loss_spec() const { return loss_; }

  Device device() const { return device_; }
  void to(Device d);  // parameters and optimizer state, converted to d's layout

  // The optimizer's state buffers as host copies (nn/optimizer.h), packed (no padding,
  // nn/param_layout.h), kernels in the device's layout or (keras_layout) in Keras', the one files
  // hold. Empty before the first step. ValueError when not compiled.
  std::vector<StateBuffer> optimizer_state(bool keras_layout) const;
  // Restores the optimizer from its packed state buffers in Keras' layout (none: no step taken yet)
  // and its step count. ValueError (and nothing changed) when a name, size or dtype does not match.
  void set_optimizer_state(const std::vector<StateBuffer>& keras, long long iterations);

  // The random state: the seed and the training step counter that keys dropout; restored with the
  // weights and the optimizer state, the following steps are those of an uninterrupted run.
  uint64_t seed() const { return seed_; }
  uint64_t step() const { return step_; }
  void set_rng_state(uint64_t seed, uint64_t step) {
    seed_ = seed;
    step_ = step;
  }

  // One training step on `current`, or (nullptr) on the batch the previous call staged as `next`;
  // then stages `next` (nullptr: none). An error staging a batch is raised by the call that takes
  // it; ValueError when current is nullptr and none is staged. The batches' arrays must not change
  // until the call that uses them returns.
  BatchStats train_step(const Batch* current, const Batch* next = nullptr);
  // Loss and accuracy without training; the same contract.
  BatchStats test_step(const Batch* current, const Batch* next = nullptr);
  // Outputs (n, *output_shape) on the host; the batches' targets are not needed (nor checked).
  Tensor predict_step(const Batch* current, const Batch* next = nullptr);
  // Keras' model(x, training=True): the host outputs of a forward pass in training mode (dropout,
  // BatchNormalization on the batch's statistics, then its moving statistics moved), no loss,
  // backward or optimizer step; compile not needed. Its draws are keyed by a stream of its own (a
  // call counter), so fit's steps draw what they would without the calls. Drops a staged batch.
  Tensor call_training(const Batch& batch);
  uint64_t calls() const { return calls_; }
  bool has_staged() const { return stager_.has_ahead(); }
  // Drops a staged batch (and releases its arrays).
  void drop_staged() { stager_.drop_ahead(); }
  const BatchStager& stager() const { return stager_; }  // for the tests of the slot bookkeeping

  // ---- the training step in two halves, for data parallelism (distribute/replica_set.h) ----
  // One replica's half on a staged batch (forward, loss, backward, the GradientSync's calls): then
  // the gradient buffer holds the whole global batch's gradients. The loss gradient is scaled by
  // 1 / b.global_rows and per-sample draws are keyed by global rows (b.first_row + i), so the result
  // does not depend on the replica count. A batch without rows adds nothing but makes every call.
  BatchStats compute_gradients(const StagedBatch& b);
  // The other half: the regularizers' gradients (once, after the sum over replicas), the layers'
  // training-time state (averaged over the replicas), then the optimizer's step.
  void apply_gradients();
  // test_step's work on a staged batch (statistics summed over the replicas with a sync); a batch
  // without rows adds nothing.
  BatchStats evaluate_staged(const StagedBatch& b);
  // The data-parallel hook (not owned; null: one device, the default).
  void set_gradient_sync(GradientSync* sync) { sync_ = sync; }
  GradientSync* gradient_sync() const { return sync_; }
  // Per node: the part of the gradient buffer its trainable parameters fill (empty when it has
  // none or is frozen), so that a sync can sum a node's gradients as soon as they are written.
  std::vector<ParamRange> layer_gradient_ranges() const;
  // The non-trainable weights' span of the parameter buffer (BatchNormalization's moving
  // statistics; empty when there are none): the state replicas average after each step.
  ParamRange state_range() const;

  // The planned step memory for batches of n rows (plans as the model is now: compiled or not,
  // trainable flags), and the arena allocated now.
  MemoryReport memory_report(long long n) const;
  long long arena_bytes() const { return arena_.defined() ? static_cast<long long>(arena_.nbytes()) : 0; }
  // Off: every step buffer keeps its memory for the whole step (tests: the same bits either way,
  // unless a layer reads what it said it would not, Layer::backward_reads_input/output).
  void set_memory_reuse(bool on);
  bool memory_reuse() const { return memory_reuse_; }
  // Inference on the CPU runs a batch in chunks of rows (nn/chunked_inference.h): the chunks of a
  // batch of n rows; set_inference_chunk_rows(rows > 0): chunks of that many rows instead (tests,
  // benchmarks), 0: the rule.
  InferenceChunks inference_chunks(long long n) const { return chunked_.choose(graph_, specs_, device_, n); }
  long long inference_chunk_rows(long long n) const { return inference_chunks(n).rows; }
  int inference_chunks_split(long long n) const { return inference_chunks(n).split; }
  void set_inference_chunk_rows(long long rows) { chunked_.set_rows_override(rows); }
  long long inference_chunk_rows_override() const { return chunked_.rows_override(); }

 private:
  static constexpr int kModes = 4;  // StepMode: Train, Test, Predict, Call
  // ---- construction and the step (nn/model.cpp)
  void bind_layers();
  // ValueError for an augmentation layer after a weighted one; the leading ones go to the stager.
  void set_up_augmentation();
  void require_compiled(const char* purpose) const;
  void wait_device() const;  // blocks until queued GPU work has finished (before buffers go)
  // The batch of this step: `current` staged now, or the one staged ahead.
  StagedBatch take_batch(const Batch* current, bool with_targets, bool training);
  // The random context of call_training's forward (and its staging): the call counter's.
  StepContext call_context() const;
  // The step a batch staged now is for: the next training step (step_ + 1), or inference.
  StepContext staging_step(bool training) const;
  BatchStats train_on(const StagedBatch& b);
  BatchStats test_on(const StagedBatch& b);
  // Runs the plan's forward nodes on x and returns the output of node end - 1. The first
  // staged_nodes_ nodes ran in the stager: x is the output of the last of them.
  Tensor forward(const Tensor& x, StepMode mode);
  BufferPlace step_buffers(StepMode mode) const { return {&arena_, &arena_layouts_[static_cast<int>(mode)], 0}; }
  // forward() over one chunk of rows (nodes up to `to`): row0, its first row in the batch; its
  // activations in `place`; vals, xs: the chunk's node outputs and a merge layer's inputs.
  Tensor forward_rows(const Tensor& x, StepMode mode, long long row0, const BufferPlace& place,
                      std::vector<Tensor>& vals, std::vector<Tensor>& xs, int to);
  // Nodes [from, to) of mode's plan over x's rows (vals holds the values of the nodes they read).
  void run_nodes(const Tensor& x, StepMode mode, StepContext& ctx, const BufferPlace& place, std::vector<Tensor>& vals,
                 std::vector<Tensor>& xs, int from, int to);
  // [loss_sum, correct, n, metrics...] summed over the replicas (with a sync; as is without one).
  BatchStats reduce_stats(BatchStats st);
  void backward(const Tensor& x);
  // One node's backward (the body of backward()).
  void backward_node(int i, const Tensor& x, const StepContext& ctx);
  // ---- the weights (nn/model_state.cpp)
  void initialize_weights();  // the initial weights, drawn from seed_ (a new model is on the CPU)
  // ---- the step's memory (nn/model_memory.cpp)
  void ensure_buffers(long long n);
  void make_plans();
  // Per node: whether the optimizer steps some of its weights (the backward pass starts there).
  std::vector<bool> nodes_with_trainable_weights() const;
  Tensor arena_view(StepMode mode, int buffer, const Shape& shape) const { return step_buffers(mode).view(buffer, shape); }
  // Frees the arena, the loss's buffers and the step's views of them; capacity_ 0 until remade.
  void release_step_buffers();
  void ensure_loss_buffers(long long cap);
  // ---- the loss part of the step (nn/model_loss.cpp)
  // The loss, its gradient (dlogits, may be null) and the metrics of a batch whose nodes ran up
  // to loss_end() (`logits`: that output). grad_scale: dlogits' factor (1 / global rows).
  BatchStats loss_and_stats(const Tensor& logits, const StagedBatch& b, Tensor* dlogits, bool training,
                            float grad_scale);
  // The per-row loss weights of a batch (sample_weight x class_weight), or undefined for none.
  Tensor row_weights(const StagedBatch& b, bool training);
  // The model's outputs for the metrics: the fused softmax / sigmoid applied to `logits`.
  Tensor metric_outputs(const Tensor& logits, bool training);
  int loss_end() const;  // nodes run before the loss (a fused softmax / sigmoid is skipped)

  Graph graph_;
  std::vector<std::vector<ParamSpec>> specs_;
  uint64_t seed_;
  uint64_t step_ = 0;
  uint64_t calls_ = 0;  // call_training's counter: its dropout and augmentation streams
  Device device_ = Device::cpu();

  Tensor params_, grads_;                 // the one parameter buffer and its gradients
  ParamLayout layout_;                    // where each parameter is in them, in which layout
  std::vector<bool> trainable_;           // per node
  std::vector<ParamRange> trainable_ranges_;  // the trainable nodes' parameters, merged runs

  // Data parallelism (nn/gradient_sync.h): the sync (not owned; null on one device), and the step
  // compute_gradients ran, for apply_gradients and the layers' StepContext: whether it had rows
  // (then layers have training-time state to commit) and its first global row.
  GradientSync* sync_ = nullptr;
  bool step_had_rows_ = false;
  long long step_first_row_ = 0;

  Regularization regularization_;        // kernel_regularizer / bias_regularizer of the layers
  std::unique_ptr<Optimizer> optimizer_;
  LossSpec loss_;
  bool fused_output_ = false;             // the last node's softmax / sigmoid runs inside the loss
  std::vector<MetricSpec> metrics_;
  Tensor class_weights_;                  // float32 (classes,) on the device, or undefined
  std::vector<float> class_weights_host_;

  BatchStager stager_;
  int staged_nodes_ = 0;  // the leading augmentation nodes, which the stager runs (nn/augmentation.h)

  // The step plans (one per StepMode) and their arena layouts for capacity_ rows; smaller
  // batches use the leading rows of each buffer.
  bool plans_current_ = false;
  bool memory_reuse_ = true;
  std::array<StepPlan, kModes> plans_;
  std::array<ArenaLayout, kModes> arena_layouts_;
  long long capacity_ = 0;
  Tensor arena_;
  ChunkedInference chunked_;              // inference in chunks of rows, and their side arena
  Tensor stats_;                          // statistics_doubles() doubles (loss_and_stats)
  long long statistics_doubles() const { return 3 + static_cast<long long>(metrics_.size()); }
  Tensor row_w_;                          // per-row loss weights (sample_weight x class_weight)
  Tensor metric_out_;                     // the outputs the metrics read when the activation is fused
  // This step's tensors (views): each node's output and each output's gradient.
  std::vector<Tensor> vals_, grads_now_;
  std::vector<Tensor> xs_;                // a merge layer's inputs
  std::vector<Tensor> dx_targets_;        // a node's input gradients (or temporaries)
  std::vector<Tensor*> dx_ptrs_;
};

}  // namespace hpcnn::nn
