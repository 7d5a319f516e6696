// A Sequential model: the spine of a training step. Getting a batch onto the model's device is
// the batch stager's job (nn/batch_stager.h); the model runs steps on staged tensors.
//
//   train_step(current, next):
//     take this step's batch: `current` staged now, or (current == nullptr) the batch the previous
//     call staged as its `next` (an error met while staging that one is raised now, at its turn)
//     forward through the layers into per-layer activation buffers
//     fused softmax + cross-entropy on the logits -> loss sum, correct count, dlogits; the weight
//     regularizers' penalty (nn/regularization.h) next to them; read back [loss_sum, correct,
//     penalty] (the one device->host copy of a step); the reported loss is the mean + the penalty
//     backward through the same layers (ping-pong gradient buffers), parameter gradients written
//     into the one gradient buffer, then the regularizers' gradients added to it
//     layers commit their training-time state (BatchNormalization's moving statistics; only now,
//     after the loss was found finite)
//     one optimizer step over the one parameter buffer (its trainable ranges)
//     stage `next` (if given) for the following call: on a GPU its upload runs on the copy stream
//     while this step's backward pass and optimizer step still run on the GPU
//
//   test_step(current, next) and predict_step(current, next): the same, without the backward
//   pass (predict: without targets, returning the outputs). All three share the staged batch: a
//   batch staged by one may be taken by another (predict_step leaves its y unchecked).
//
// All weights live in one contiguous buffer (and their gradients in another), trainable ones
// first, then the non-trainable ones (BatchNormalization's moving statistics: updated by their
// layer after the backward pass of a finite step, never by the optimizer); layers hold views. The device is the model's own property, set by to(). The buffers are in the
// device's layout (conv kernels OHWI on a GPU, nn/param_layout.h), converted only by get_weights,
// set_weights and to(). Before any device buffer of the model is freed or replaced, the model
// waits for the GPU's queued work (a step returns with its backward pass still running).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nn/batch_stager.h"
#include "nn/layer.h"
#include "nn/loss.h"
#include "nn/optimizer.h"
#include "nn/param_layout.h"
#include "nn/regularization.h"

namespace hpcnn::nn {

struct BatchStats {
  double loss_sum = 0;  // sum over the batch (divide by n for the mean)
  double correct = 0;
  long long n = 0;
};

class Sequential {
 public:
  Sequential(Shape input_shape, std::vector<LayerPtr> layers, uint64_t seed);
  ~Sequential();  // waits for the GPU's queued work before the device buffers are freed
  Sequential(const Sequential&) = delete;
  Sequential& operator=(const Sequential&) = delete;

  const Shape& input_shape() const { return input_shape_; }
  const std::vector<Shape>& output_shapes() const { return out_shapes_; }  // per layer, per sample
  int num_layers() const { return static_cast<int>(layers_.size()); }
  const Layer& layer(int i) const { return *layers_.at(i); }
  long long num_params() const { return params_.numel(); }
  // Per layer: each weight's spec (name, shape, trainable), Keras order (kernel, bias, ...).
  std::vector<std::vector<ParamSpec>> weight_specs() const { return specs_; }

  std::vector<Tensor> get_weights() const;            // host copies, Keras order and layouts
  void set_weights(const std::vector<Tensor>& ws);    // ValueError on count/shape mismatch
  // The flat buffers on the model's device, in that device's layout (param_layout()).
  Tensor& parameter_buffer() { return params_; }
  Tensor& gradient_buffer() { return grads_; }
  const ParamLayout& param_layout() const { return layout_; }

  void compile(std::unique_ptr<Optimizer> optimizer, Loss loss, bool from_logits);
  // Which layers the optimizer updates (one flag per layer; all by default). A frozen layer's
  // parameters and optimizer state stay as they are, and backward stops at the first trainable
  // layer with trainable weights. Non-trainable weights (ParamSpec::trainable) are never in the
  // optimizer's ranges. Each layer is told (Layer::set_trainable: a frozen BatchNormalization
  // runs in inference mode). Python sets it at compile (Keras' rule: trainable takes effect at
  // compile()).
  void set_trainable(const std::vector<bool>& per_layer);
  long long num_trainable_params() const;
  bool compiled() const { return optimizer_ != nullptr; }
  Optimizer* optimizer() const { return optimizer_.get(); }
  Loss loss() const { return loss_; }

  Device device() const { return device_; }
  void to(Device d);  // parameters and optimizer state, converted to d's layout

  // The optimizer's state buffers as host copies (nn/optimizer.h), in the layout of the model's
  // device or (keras_layout) in Keras' layout, the one files hold (the concatenation of
  // get_weights' arrays, flattened). Empty before the first step. ValueError when not compiled.
  std::vector<StateBuffer> optimizer_state(bool keras_layout) const;
  // Restores the optimizer: `keras` are its state buffers in Keras' layout (any device; none at
  // all for "no step taken yet"), converted here to the device's layout; `iterations` its step
  // count. ValueError (and nothing changed) when a name, size or dtype does not match.
  void set_optimizer_state(const std::vector<StateBuffer>& keras, long long iterations);

  // The random state: the seed (initial weights, dropout masks) and the step counter that keys
  // dropout (one per training step). Restoring both, with the weights and the optimizer state,
  // makes the following steps those of an uninterrupted run.
  uint64_t seed() const { return seed_; }
  uint64_t step() const { return step_; }
  void set_rng_state(uint64_t seed, uint64_t step) {
    seed_ = seed;
    step_ = step;
  }

  // One training step on `current`, or (nullptr) on the batch staged by the previous call's
  // `next`; then stages `next` (nullptr: none) for the following call. Errors of this step's
  // batch are raised here, including one met while staging it ahead; an error staging `next` is
  // kept with it and raised by the call that takes it. ValueError when current is nullptr and no
  // batch is staged. The batches' arrays must not change until the call that uses them returns.
  BatchStats train_step(const Batch* current, const Batch* next = nullptr);
  // Loss and accuracy without training; the same contract.
  BatchStats test_step(const Batch* current, const Batch* next = nullptr);
  // Outputs (n, *output_shape) on the host; the batches' targets are not needed (nor checked).
  Tensor predict_step(const Batch* current, const Batch* next = nullptr);
  bool has_staged() const { return stager_.has_ahead(); }
  // Drops a staged batch (and releases its arrays).
  void drop_staged() { stager_.drop_ahead(); }
  const BatchStager& stager() const { return stager_; }  // for the tests of the slot bookkeeping

 private:
  void bind_layers();
  void ensure_buffers(long long n);
  void require_compiled(const char* purpose) const;
  // The batch of this step: `current` staged now, or the one staged ahead; `training`: for a
  // training step (the leading augmentation layers draw for it).
  StagedBatch take_batch(const Batch* current, bool with_targets, bool training);
  // The step a batch staged now is for: the next training step (step_ + 1), or inference.
  StepContext staging_step(bool training) const;
  BatchStats train_on(const StagedBatch& b);
  BatchStats test_on(const StagedBatch& b);
  // Runs layers [0, end) and returns the output of layer end-1 (or the input when end == 0); the
  // leading augmentation layers' output is x itself (the stager ran them).
  Tensor forward(const Tensor& x, int end, bool training, long long first_row);
  BatchStats loss_and_stats(const Tensor& logits, const Tensor& target, Tensor* dlogits);
  int loss_end() const;  // layers run before the loss (the fused softmax is skipped)
  void wait_device() const;  // blocks until queued GPU work has finished (before buffers go)

  Shape input_shape_;
  std::vector<LayerPtr> layers_;
  int staged_layers_ = 0;  // the leading augmentation layers, which the stager runs (nn/augmentation.h)
  std::vector<Shape> in_shapes_, out_shapes_;
  std::vector<std::vector<ParamSpec>> specs_;
  uint64_t seed_;
  uint64_t step_ = 0;
  Device device_ = Device::cpu();

  Tensor params_, grads_;                 // the one parameter buffer and its gradients
  ParamLayout layout_;                    // where each parameter is in them, in which layout
  std::vector<bool> trainable_;           // per layer
  std::vector<ParamRange> trainable_ranges_;  // the trainable layers' parameters, merged runs

  Regularization regularization_;        // kernel_regularizer / bias_regularizer of the layers
  std::unique_ptr<Optimizer> optimizer_;
  Loss loss_ = Loss::CategoricalCrossentropy;
  bool fused_softmax_ = false;

  BatchStager stager_;

  // Buffers for up to capacity_ rows; smaller batches use leading views.
  long long capacity_ = 0;
  std::vector<Tensor> act_;               // per layer output (undefined for view layers)
  Tensor grad_a_, grad_b_, dlogits_;      // ping-pong gradient buffers
  Tensor stats_;
  std::vector<Tensor> acts_now_;          // this step's layer outputs (views)
};

}  // namespace hpcnn::nn
