// Optimizers over the model's one contiguous parameter buffer: one step = one op call
// (ops::adam_step / ops::sgd_step). Their state lives on the model's device and moves with it;
// being aligned with the parameters element for element, it is in the same device layout and is
// converted with them (nn/param_layout.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/param_layout.h"

namespace hpcnn::nn {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::string name() const = 0;
  virtual void step(Tensor& params, const Tensor& grads) = 0;
  // Moves the state to d, converted to d's layout as the parameters are. Either all of it moves or
  // (an exception) none of it.
  virtual void to(Device d, const ParamLayout& layout) = 0;
  float learning_rate = 0.001f;
  long long iterations = 0;  // steps taken (Keras' optimizer.iterations)
};

class Adam : public Optimizer {
 public:
  Adam(float lr, float beta1, float beta2, float eps);
  std::string name() const override { return "Adam"; }
  void step(Tensor& params, const Tensor& grads) override;
  void to(Device d, const ParamLayout& layout) override;
  float beta1, beta2, epsilon;

 private:
  Tensor m_, v_;
};

class SGD : public Optimizer {
 public:
  SGD(float lr, float momentum, bool nesterov);
  std::string name() const override { return "SGD"; }
  void step(Tensor& params, const Tensor& grads) override;
  void to(Device d, const ParamLayout& layout) override;
  float momentum;
  bool nesterov;

 private:
  Tensor velocity_;
};

}  // namespace hpcnn::nn
