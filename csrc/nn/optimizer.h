// Optimizers over the model's one contiguous parameter buffer: one step = one op call
// (ops::adam_step / ops::sgd_step) per range of trainable parameters (one range covering the whole
// buffer unless layers are frozen). Parameters outside the ranges, and their optimizer state
// (Adam's moments, SGD's velocity), are never touched.
//
// The state of an optimizer is
//   - `iterations` (steps taken) and `learning_rate`: plain fields;
//   - named state buffers, declared by each optimizer at construction (Adam: "momentum" and
//     "velocity", SGD: "momentum": Keras 3's names), each a float32 buffer over the whole
//     parameter buffer. The base class owns them: it creates them (zeros) at the first step,
//     moves them with the model (to()), hands them out (state()) and replaces them (set_state()),
//     so a new optimizer only declares its names and uses state_buffer(i, params) in step().
// The buffers are aligned with the parameters element for element, so they live on the model's
// device in that device's layout and are converted with the parameters (nn/param_layout.h);
// Sequential::optimizer_state / set_optimizer_state convert them to and from Keras' layout for
// files (model files, BackupAndRestore).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/param_layout.h"

namespace hpcnn::nn {

// [begin, end) in elements of the parameter buffer.
struct ParamRange {
  long long begin = 0, end = 0;
};

// One named state buffer of an optimizer.
struct StateBuffer {
  std::string name;
  Tensor value;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::string name() const = 0;
  // One step (iterations + 1) updating the parameters in `trainable` only.
  virtual void step(Tensor& params, const Tensor& grads, const std::vector<ParamRange>& trainable) = 0;

  // The names of the state buffers, in their fixed order.
  const std::vector<std::string>& state_names() const { return state_names_; }
  // The state buffers in state_names() order, over the whole parameter buffer, on the device and
  // in the layout of the parameters; empty before the first step.
  std::vector<StateBuffer> state() const;
  // Replaces the state buffers: exactly the names of state_names(), each float32 with `numel`
  // elements on device d (the parameters' device and layout), or none at all (no step taken:
  // the buffers start at zeros at the next step). ValueError naming what does not match; either
  // everything is replaced or (an exception) nothing. `iterations` is not touched.
  void set_state(std::vector<StateBuffer> buffers, long long numel, Device d);
  // Moves the state to d, converted to d's layout as the parameters are. Either all of it moves or
  // (an exception) none of it.
  void to(Device d, const ParamLayout& layout);

  float learning_rate = 0.001f;
  long long iterations = 0;  // steps taken (Keras' optimizer.iterations)

 protected:
  explicit Optimizer(std::vector<std::string> state_names);
  // State buffer i, made (zeros, like `params`) when missing: for step().
  Tensor& state_buffer(size_t i, const Tensor& params);

 private:
  std::vector<std::string> state_names_;
  std::vector<Tensor> state_;  // one per name, all defined or none
};

class Adam : public Optimizer {
 public:
  Adam(float lr, float beta1, float beta2, float eps);
  std::string name() const override { return "Adam"; }
  void step(Tensor& params, const Tensor& grads, const std::vector<ParamRange>& trainable) override;
  float beta1, beta2, epsilon;
};

class SGD : public Optimizer {
 public:
  SGD(float lr, float momentum, bool nesterov);
  std::string name() const override { return "SGD"; }
  void step(Tensor& params, const Tensor& grads, const std::vector<ParamRange>& trainable) override;
  float momentum;
  bool nesterov;
};

}  // namespace hpcnn::nn
