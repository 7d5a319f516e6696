// A layer at one position of a model's graph (nn/graph.h; a Sequential model is a chain). Layers
// hold configuration and views of their parameters in the model's one parameter buffer; they
// compute by calling ops/ops.h only (never a backend). Shapes given to layers are per-sample (no
// batch axis); tensors passed to forward/backward carry the batch as their first axis.
//
// Most layers take one input: they implement Layer. Layers of several inputs (Add, Concatenate)
// derive from MergeLayer below, which adds the forms that take all inputs at once.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace hpcnn::nn {

// The shape of a batch of n samples of per-sample shape `s`: (n, *s).
inline Shape with_batch(long long n, const Shape& s) {
  Shape out{n};
  out.insert(out.end(), s.begin(), s.end());
  return out;
}

enum class Init { GlorotUniform, Zeros, Ones };

// How a parameter is laid out in the model's buffer on a device (nn/param_layout.h):
//   Plain         its Keras shape, on every device;
//   Conv2DKernel  the layout the device's conv2d backend takes (ops::conv2d_kernel_layout): Keras'
//                 HWIO on the CPU, OHWI on a GPU. `shape` is always the Keras (HWIO) shape.
enum class ParamKind { Plain, Conv2DKernel };

// One weight array of a layer. `trainable` is Keras' notion of a weight's kind, fixed by the layer:
// a non-trainable weight (BatchNormalization's moving_mean and moving_variance) is state that the
// layer itself updates while training. It is a weight like any other for get_weights/set_weights,
// model files and device moves, but no optimizer ever steps it (it is outside the model's trainable
// ranges, nn/model.h) and backward writes no gradient for it. Distinct from a layer being
// frozen (Layer::set_trainable(false)), which excludes all of that layer's weights.
struct ParamSpec {
  std::string name;  // "kernel", "bias", "gamma", "moving_mean", ...
  Shape shape;       // Keras' shape: what get_weights/set_weights and model files use
  Init init;
  long long fan_in = 0, fan_out = 0;  // for glorot_uniform
  ParamKind kind = ParamKind::Plain;
  bool trainable = true;
};

// Keras' weight regularizers (L1, L2, L1L2) on one parameter: a penalty l1 * sum |w| + l2 * sum w^2
// added to the loss (nn/regularization.h). Zero factors: no penalty.
struct Regularizer {
  float l1 = 0.f, l2 = 0.f;
  bool active() const { return l1 != 0.f || l2 != 0.f; }
};

// What a step needs besides tensors: training or inference, and the dropout randomness.
struct StepContext {
  bool training = false;
  uint64_t seed = 0;
  uint64_t step = 0;      // training step counter: a fresh dropout mask per step
  int layer_index = 0;    // set by the model before each layer's call
  // The row of the global batch that this batch's row 0 is: 0 on one device; a data-parallel
  // replica's first row of its share (core/batch_shares.h). Random draws per sample are keyed by
  // the global row, so the replica count does not change them.
  long long first_row = 0;
  // An inference step's second or later chunk of rows (nn/chunked_inference.h): the weights are
  // those of its first chunk, so what a layer derived from them there (a folded kernel) is valid.
  // Later chunks may run side by side on several threads: a layer reads what it derived then,
  // and writes nothing it shares with another chunk.
  bool later_chunk = false;
  uint64_t dropout_stream() const { return step * 1024u + static_cast<uint64_t>(layer_index); }
  // The counter offset of a batch tensor t (rows first) in the global batch: first_row rows of
  // t's per-row size.
  uint64_t element_offset(const Tensor& t) const {
    const long long rows = t.rank() ? t.dim(0) : 0;
    return rows > 0 ? static_cast<uint64_t>(first_row) * static_cast<uint64_t>(t.numel() / rows) : 0;
  }
};

class Layer {
 public:
  virtual ~Layer() = default;
  virtual std::string kind() const = 0;
  virtual Shape output_shape(const Shape& input) const = 0;  // ValueError when the input does not fit
  virtual std::vector<ParamSpec> param_specs(const Shape& input) const { return {}; }
  // Views into the model's parameter and gradient buffers, in param_specs order, shaped in the
  // model's device layout (ParamKind).
  void bind(std::vector<Tensor> params, std::vector<Tensor> grads) {
    params_ = std::move(params);
    grads_ = std::move(grads);
  }
  // y has the output shape; a layer that returns a view of x (Flatten, Dropout at inference)
  // says so with forward_is_view and ignores y.
  virtual bool forward_is_view(bool training) const { return false; }
  virtual void forward(const Tensor& x, Tensor& y, const StepContext& ctx) = 0;
  // dy may be overwritten. dx is null for the first layer (its input gradient is not needed).
  // Parameter gradients are written (not accumulated) into the bound grads.
  virtual void backward(const Tensor& x, const Tensor& y, Tensor& dy, Tensor* dx, const StepContext& ctx) = 0;
  // A layer that can add its input gradient into dx instead of overwriting it says so, and the
  // model calls backward_adding with the gradient gathered so far for an input that other layers
  // read too (GradRoute::AddInto, nn/step_plan.h): no temporary, no separate addition pass.
  // Conv2D adds in its backward-data's output stage.
  virtual bool backward_can_add() const { return false; }
  virtual void backward_adding(const Tensor&, const Tensor&, Tensor&, Tensor&, const StepContext&) {
    throw BackendError(kind() + ": backward_adding called on a layer whose backward cannot add");
  }
  // A layer whose dx is dy reshaped (no compute) says so, and backward is not called. For a
  // MergeLayer: the gradient of every input is dy (Add).
  virtual bool backward_is_view() const { return false; }
  // What backward reads besides dy, so that the model can reuse the memory of an activation as
  // soon as no later step reads it (nn/step_plan.h). The defaults keep both: a layer that does not
  // say otherwise is always given valid x and y. A layer that answers false may still be passed
  // the tensor (for its shape) but must not read its values.
  virtual bool backward_reads_input() const { return true; }
  virtual bool backward_reads_output() const { return true; }
  // Whether backward may write into dy (a fused ReLU's mask in place). A layer that answers false
  // only reads it, and the plan may let another tensor's gradient share dy's buffer (a residual
  // block's shortcut: GradRoute::Alias for both inputs of the Add, nn/step_plan.cpp).
  virtual bool backward_writes_dy() const { return true; }
  // Whether this is a MergeLayer (takes the forms below instead of forward/backward).
  virtual bool is_merge() const { return false; }

  // Keras' kernel_regularizer / bias_regularizer: a penalty on the parameter named `param`
  // ("kernel", "bias"). The model refuses a name that is not among the layer's parameters.
  void set_regularizer(const std::string& param, Regularizer r) { regularizers_[param] = r; }
  const std::map<std::string, Regularizer>& regularizers() const { return regularizers_; }

  // Called once per training step, after the loss was found finite and the backward pass ran,
  // before the optimizer step: a layer that keeps training-time state in non-trainable weights
  // (BatchNormalization's moving statistics) commits this step's update here, so a step that
  // fails (a NaN loss) leaves every weight as it was.
  virtual void commit_training_step(const StepContext& ctx) {}

  // Whether the model trains this layer (Keras' layer.trainable, taken at compile). A frozen
  // layer's weights take no optimizer step; a layer may also change how it computes when frozen
  // (Keras: a frozen BatchNormalization runs in inference mode, with its moving statistics, also
  // during fit).
  void set_trainable(bool t) { trainable_ = t; }
  bool trainable() const { return trainable_; }

  // Keras' `training=False` at a nested model's call (`base_model(inputs, training=False)`): the
  // layer computes in inference mode in every step, fit's included (Dropout the identity,
  // BatchNormalization on its moving statistics), while a trainable layer's weights still take
  // gradients. Set from the position's config ("inference_only", nn/factory.h), so the replicas
  // built from the same recipe agree.
  void set_inference_only(bool on) { inference_only_ = on; }
  bool inference_only() const { return inference_only_; }
  // Whether this step trains this layer's computation: a training step and not inference_only.
  bool training(const StepContext& ctx) const { return ctx.training && !inference_only_; }

 protected:
  std::vector<Tensor> params_, grads_;

 private:
  std::map<std::string, Regularizer> regularizers_;
  bool trainable_ = true;
  bool inference_only_ = false;
};

using LayerPtr = std::unique_ptr<Layer>;

// A layer of two or more inputs (Add, Concatenate). The model calls the *_merge forms with every
// input; the one-input forms of Layer do not apply to it (they throw).
class MergeLayer : public Layer {
 public:
  bool is_merge() const final { return true; }
  // ValueError when the inputs do not fit together (the message names the layer and the shapes).
  virtual Shape merged_shape(const std::vector<Shape>& inputs) const = 0;
  virtual void forward_merge(const std::vector<Tensor>& xs, Tensor& y, const StepContext& ctx) = 0;
  // dxs[i] null: input i's gradient is not needed. Writes (not accumulates) the gradients; dy may
  // be overwritten.
  virtual void backward_merge(const std::vector<Tensor>& xs, const Tensor& y, Tensor& dy,
                              const std::vector<Tensor*>& dxs, const StepContext& ctx) = 0;

  Shape output_shape(const Shape& input) const final;  // ValueError: the layer needs >= 2 inputs
  void forward(const Tensor& x, Tensor& y, const StepContext& ctx) final;
  void backward(const Tensor& x, const Tensor& y, Tensor& dy, Tensor* dx, const StepContext& ctx) final;
};

}  // namespace hpcnn::nn
