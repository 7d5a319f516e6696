// Optimizers over the model's one contiguous parameter buffer, with Keras' update rules
// (keras.optimizers: SGD, Adam, AdamW, RMSprop) and Keras' common arguments (weight_decay,
// clipnorm, global_clipnorm, clipvalue; OptimizerOptions).
//
// A step, in Keras' order (BaseOptimizer.apply):
//   the learning rate of this step: the schedule's value at `iterations` (nn/schedule.h), or the
//     fixed rate
//   clipnorm / global_clipnorm: the gradients' norms (fixed-order sums, ops/param_norms.h) give a
//     factor per variable, kept on the device
//   one update op over every trainable variable (ops/optimizer_step.h): the gradient clipped, the
//     weight decayed (w -= lr * weight_decay * w, except variables excluded), the optimizer's rule
//   iterations + 1
// The variables are the model's weight arrays (ParamLayout entries); only those inside the
// trainable ranges are touched: frozen layers and non-trainable weights, and their optimizer state
// (Adam's moments, SGD's velocity, ...), stay as they are.
//
// State: `iterations`, the learning rate, and named state buffers with Keras 3's names, declared
// by each optimizer at construction (SGD: momentum; Adam, AdamW: momentum, velocity; RMSprop:
// velocity[, momentum][, average_gradient]); buffers the configuration does not use are not
// declared (SGD without momentum keeps none, as Keras). Each buffer is over the whole parameter
// buffer, aligned with it element for element, so it is in the same device layout and is
// converted with the parameters (nn/param_layout.h); it lives on the model's device and moves
// with it. The base class makes them (zeros) at the first step, moves them (to()), hands them out
// (state()) and replaces them (set_state(): checkpoints and model files).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/param_layout.h"
#include "nn/schedule.h"
#include "ops/ops.h"

namespace hpcnn::nn {

// [begin, end) in elements of the parameter buffer.
struct ParamRange {
  long long begin = 0, end = 0;
  bool operator==(const ParamRange& o) const { return begin == o.begin && end == o.end; }
};

// One named state buffer of an optimizer.
struct StateBuffer {
  std::string name;
  Tensor value;
};

// Keras' arguments that every optimizer takes. Zero means "not given" (Keras' None). At most one
// of the three clippings may be set.
struct OptimizerOptions {
  double weight_decay = 0;     // decoupled: w -= learning_rate * weight_decay * w before each update
  double clipnorm = 0;         // each variable's gradient scaled to a norm of at most clipnorm
  double global_clipnorm = 0;  // all trainable gradients scaled together to a norm of at most this
  double clipvalue = 0;        // each gradient element clamped to [-clipvalue, clipvalue]
  // Weight arrays (indices in get_weights order) that weight decay skips: Keras'
  // optimizer.exclude_from_weight_decay(var_names=...), resolved to indices by Python.
  std::vector<long long> no_decay;
};

class Optimizer {
 public:
  // ValueError for a learning rate that is not positive and finite, or bad options. state_names:
  // the optimizer's state buffers for its configuration, in their fixed order.
  Optimizer(double learning_rate, OptimizerOptions options, std::vector<std::string> state_names);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual std::string name() const = 0;
  // One step (iterations + 1) updating the parameters in `trainable` only.
  void step(Tensor& params, const Tensor& grads, const std::vector<ParamRange>& trainable);
  // Moves the state to d, converted to d's layout as the parameters are, and takes the variables
  // (weight arrays) of `layout`. Either all of the state moves or (an exception) none of it.
  void to(Device d, const ParamLayout& layout);
  // The names of the state buffers, in their fixed order.
  const std::vector<std::string>& state_names() const { return state_names_; }
  // The state buffers in state_names() order, each over the whole parameter buffer, on the device
  // and in the layout of the parameters; empty before the first step (made together: all or none).
  std::vector<StateBuffer> state() const;
  // Replaces the state buffers: exactly the names of state_names(), each float32 with `numel`
  // elements on device d (the parameters' device and layout), or none at all (no step taken: the
  // buffers start at zeros at the next step). ValueError naming what does not match; either
  // everything is replaced or (an exception) nothing. `iterations` is not touched.
  void set_state(std::vector<StateBuffer> buffers, long long numel, Device d);

  // The learning rate of the next step: the schedule's value at `iterations`, or the fixed rate.
  double learning_rate() const;
  // Sets the fixed rate; ValueError when a schedule drives the rate (Keras: not settable).
  void set_learning_rate(double lr);
  // The schedule that drives the rate from now on (null: back to the fixed rate).
  void set_schedule(std::unique_ptr<LearningRateSchedule> schedule) { schedule_ = std::move(schedule); }
  const LearningRateSchedule* schedule() const { return schedule_.get(); }
  const OptimizerOptions& options() const { return options_; }

  long long iterations = 0;  // steps taken (Keras' optimizer.iterations)

 protected:
  // The update op of this optimizer over the table's elements, at learning rate lr; state_ (one
  // buffer per state name) is made (zeros, the parameters' shape and device) before the call.
  virtual void update(Tensor& params, const Tensor& grads, const SegmentTable& segs, double lr,
                      const ops::UpdateOptions& o) = 0;
  // State buffer `name` (one of state_names()), or null when the configuration keeps none.
  Tensor* state_buffer(const char* name);

 private:
  std::vector<std::string> state_names_;
  std::vector<Tensor> state_;  // one per name, all defined or none

  // The segment table of the trainable variables on params' device (rebuilt when they change).
  const SegmentTable& table_for(const std::vector<ParamRange>& trainable, Device d);

  double learning_rate_;
  std::unique_ptr<LearningRateSchedule> schedule_;
  OptimizerOptions options_;
  ParamLayout layout_;  // the model's variables (empty: each trainable range is one variable)
  std::vector<ParamRange> table_ranges_;
  SegmentTable table_;
  bool table_valid_ = false;
  Tensor clip_scales_;  // one factor per variable of the table, on its device
};

class SGD : public Optimizer {
 public:
  SGD(double lr, float momentum, bool nesterov, OptimizerOptions options = {});
  std::string name() const override { return "SGD"; }
  const float momentum;
  const bool nesterov;

 protected:
  void update(Tensor& params, const Tensor& grads, const SegmentTable& segs, double lr,
              const ops::UpdateOptions& o) override;
};

class Adam : public Optimizer {
 public:
  Adam(double lr, float beta1, float beta2, float eps, OptimizerOptions options = {});
  std::string name() const override { return "Adam"; }
  const float beta1, beta2, epsilon;

 protected:
  void update(Tensor& params, const Tensor& grads, const SegmentTable& segs, double lr,
              const ops::UpdateOptions& o) override;
};

// Keras' AdamW: Adam whose weight_decay is required (Keras' default 0.004 is Python's).
class AdamW : public Adam {
 public:
  AdamW(double lr, float beta1, float beta2, float eps, OptimizerOptions options);
  std::string name() const override { return "AdamW"; }
};

class RMSprop : public Optimizer {
 public:
  RMSprop(double lr, float rho, float momentum, float eps, bool centered, OptimizerOptions options = {});
  std::string name() const override { return "RMSprop"; }
  const float rho, momentum, epsilon;
  const bool centered;

 protected:
  void update(Tensor& params, const Tensor& grads, const SegmentTable& segs, double lr,
              const ops::UpdateOptions& o) override;
};

}  // namespace hpcnn::nn
