// Stand-alone activations (the Activation, ReLU, LeakyReLU, ELU and Softmax layers, and every
// activation= of Conv2D/Dense other than the fused ReLU):
//   element-wise: y = f(x) for the kinds of `Act` below, dx = dy * f'(x) (ops/elementwise.h has
//                 f and f' as HPCNN_HD functions, so both backends compute the same arithmetic);
//   softmax over the last axis: dx = y * (dy - sum(dy * y)).
// ReLU keeps its own entry points (relu_forward/backward: the gradient from y alone).
// CPU: activation_cpu.cpp; CUDA: activation_cuda.cu.
#pragma once

#include <string>

namespace hpcnn {

// The element-wise activations, with Keras' definitions (keras.activations):
//   Linear      x
//   ReLU        max(x, 0)
//   ReLU6       min(max(x, 0), 6)
//   LeakyReLU   x if x > 0 else alpha * x            (alpha = negative_slope)
//   ELU         x if x > 0 else alpha * (e^x - 1)
//   SELU        1.0507009873554805 * ELU(x, alpha = 1.6732632423543772)
//   GELU        x/2 * (1 + erf(x / sqrt 2))           (Keras' default, approximate=False)
//   GELUTanh    x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))   (approximate=True)
//   Tanh, Sigmoid 1/(1+e^-x), HardSigmoid relu6(x + 3)/6 (Keras 3),
//   Swish (= SiLU) x * sigmoid(x), Softplus log(1 + e^x), Softsign x/(1+|x|),
//   Mish        x * tanh(softplus(x)), HardSwish (= hard_silu) x * relu6(x + 3) / 6 (Keras 3)
enum class Act : int {
  Linear,
  ReLU,
  ReLU6,
  LeakyReLU,
  ELU,
  SELU,
  GELU,
  GELUTanh,
  Tanh,
  Sigmoid,
  HardSigmoid,
  Swish,
  Softplus,
  Softsign,
  Mish,
  HardSwish,
};

// Keras' name of each kind, and back ("gelu_approximate" names GELUTanh; "silu" is "swish",
// "hard_swish" is "hard_silu").
// parse_act throws ValueError naming the accepted names.
const char* act_name(Act a);
Act parse_act(const std::string& name);

namespace cpu {
void relu_forward(long long count, const float* x, float* y);
void relu_backward(long long count, const float* y, const float* dy, float* dx);
void act_forward(Act a, float alpha, long long count, const float* x, float* y);
// dx[i] = dy[i] * f'(x[i]) (y is the forward output, for the kinds whose f' reads it).
void act_backward(Act a, float alpha, long long count, const float* x, const float* y, const float* dy, float* dx);
void softmax_forward(int rows, int cols, const float* x, float* y);
void softmax_backward(int rows, int cols, const float* y, const float* dy, float* dx);
}  // namespace cpu

namespace cuda {
void relu_forward(int device, long long count, const float* x, float* y);
void relu_backward(int device, long long count, const float* y, const float* dy, float* dx);
void act_forward(int device, Act a, float alpha, long long count, const float* x, float* y);
void act_backward(int device, Act a, float alpha, long long count, const float* x, const float* y, const float* dy,
                  float* dx);
void softmax_forward(int device, int rows, int cols, const float* x, float* y);
void softmax_backward(int device, int rows, int cols, const float* y, const float* dy, float* dx);
}  // namespace cuda

}  // namespace hpcnn
