// Optimizers over the model's one contiguous parameter buffer: one step = one op call
// (ops::adam_step / ops::sgd_step). Their state lives on the model's device and moves with it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace hpcnn::nn {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::string name() const = 0;
  virtual void step(Tensor& params, const Tensor& grads) = 0;
  virtual void to(Device d) = 0;  // move state
  float learning_rate = 0.001f;
  long long iterations = 0;  // steps taken (Keras' optimizer.iterations)
};

class Adam : public Optimizer {
 public:
  Adam(float lr, float beta1, float beta2, float eps);
  std::string name() const override { return "Adam"; }
  void step(Tensor& params, const Tensor& grads) override;
  void to(Device d) override;
  float beta1, beta2, epsilon;

 private:
  Tensor m_, v_;
};

class SGD : public Optimizer {
 public:
  SGD(float lr, float momentum, bool nesterov);
  std::string name() const override { return "SGD"; }
  void step(Tensor& params, const Tensor& grads) override;
  void to(Device d) override;
  float momentum;
  bool nesterov;

 private:
  Tensor velocity_;
};

}  // namespace hpcnn::nn
