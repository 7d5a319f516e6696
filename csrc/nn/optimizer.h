// Optimizers over the model's one contiguous parameter buffer: one step = one op call
// Optimizers over the model's one contiguous parameter buffer: one step = one op call
// (ops::adam_step / ops::sgd_step) per range of trainable parameters (one range covering the whole
// buffer unless layers are frozen). Parameters outside the ranges, and their optimizer state
// (Adam's moments, SGD's velocity), are never touched. The state lives on the model's device and
// moves with it; being aligned with the parameters element for element, it is in the same device
// layout and is converted with them (nn/param_layout.h).
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

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::string name() const = 0;
  // One step (iterations + 1) updating the parameters in `trainable` only.
  virtual void step(Tensor& params, const Tensor& grads, const std::vector<ParamRange>& trainable) = 0;
  // Moves the state to d, converted to d's layout as the parameters are. Either all of it moves or
  // (an exception) none of it.
  virtual void to(Device d, const ParamLayout& layout) = 0;
  // The state buffers (Adam: m, v; SGD: velocity), each over the whole parameter buffer, in the
  // device's layout; empty before the first step.
  virtual std::vector<Tensor> state() const = 0;
  float learning_rate = 0.001f;
  long long iterations = 0;  // steps taken (Keras' optimizer.iterations)
};

class Adam : public Optimizer {
 public:
  Adam(float lr, float beta1, float beta2, float eps);
  std::string name() const override { return "Adam"; }
  void step(Tensor& params, const Tensor& grads, const std::vector<ParamRange>& trainable) override;
  void to(Device d, const ParamLayout& layout) override;
  std::vector<Tensor> state() const override { return m_.defined() ? std::vector<Tensor>{m_, v_} : std::vector<Tensor>{}; }
  float beta1, beta2, epsilon;

 private:
  Tensor m_, v_;
};

class SGD : public Optimizer {
 public:
  SGD(float lr, float momentum, bool nesterov);
  std::string name() const override { return "SGD"; }
  void step(Tensor& params, const Tensor& grads, const std::vector<ParamRange>& trainable) override;
  void to(Device d, const ParamLayout& layout) override;
  std::vector<Tensor> state() const override {
    return velocity_.defined() ? std::vector<Tensor>{velocity_} : std::vector<Tensor>{};
  }
  float momentum;
  bool nesterov;

 private:
  Tensor velocity_;
};

}  // namespace hpcnn::nn
