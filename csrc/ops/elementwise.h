// Per-element math shared by the CPU and CUDA backends (HPCNN_HD = __host__ __device__ under
// nvcc). The CPU loops call these, so every CI run tests the exact arithmetic the GPU kernels use.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/hd.h"
#include "core/rng.h"
#include "ops/activation.h"

namespace hpcnn::ew {

HPCNN_HD float relu(float x) { return x > 0.f ? x : 0.f; }
// ReLU's gradient from its output: 0 at the kink (x == 0), as TensorFlow and PyTorch do.
HPCNN_HD float relu_grad(float y, float dy) { return y > 0.f ? dy : 0.f; }

// ------------------------------------------------------------------ activations (ops/activation.h)
// act<A>(x, alpha) = f(x) and act_grad<A>(x, y, alpha) = f'(x) (y = f(x), passed because some
// derivatives are cheapest from it). Templates, so that each kind compiles to its own branch-free
// loop on the CPU and its own kernel on the GPU, from this one definition.
HPCNN_HD float sigmoid(float x) {
  // Never exp of a large positive number: e^-|x| in (0, 1].
  if (x >= 0.f) return 1.f / (1.f + expf(-x));
  const float e = expf(x);
  return e / (1.f + e);
}
HPCNN_HD float softplus(float x) { return fmaxf(x, 0.f) + log1pf(expf(-fabsf(x))); }

constexpr float kSeluAlpha = 1.6732632423543772f;
constexpr float kSeluScale = 1.0507009873554805f;
constexpr float kSqrt2OverPi = 0.7978845608028654f;   // sqrt(2 / pi)
constexpr float kInvSqrt2 = 0.7071067811865476f;      // 1 / sqrt(2)
constexpr float kInvSqrt2Pi = 0.3989422804014327f;    // 1 / sqrt(2 pi)
constexpr float kGeluCubic = 0.044715f;

template <Act A>
HPCNN_HD float act(float x, float alpha) {
  if constexpr (A == Act::Linear) return x;
  if constexpr (A == Act::ReLU) return x > 0.f ? x : 0.f;
  if constexpr (A == Act::ReLU6) return x > 0.f ? (x < 6.f ? x : 6.f) : 0.f;
  if constexpr (A == Act::LeakyReLU) return x > 0.f ? x : alpha * x;
  if constexpr (A == Act::ELU) return x > 0.f ? x : alpha * expm1f(x);
  if constexpr (A == Act::SELU) return kSeluScale * (x > 0.f ? x : kSeluAlpha * expm1f(x));
  if constexpr (A == Act::GELU) return 0.5f * x * (1.f + erff(x * kInvSqrt2));
  if constexpr (A == Act::GELUTanh) return 0.5f * x * (1.f + tanhf(kSqrt2OverPi * (x + kGeluCubic * x * x * x)));
  if constexpr (A == Act::Tanh) return tanhf(x);
  if constexpr (A == Act::Sigmoid) return sigmoid(x);
  if constexpr (A == Act::HardSigmoid) return x <= -3.f ? 0.f : (x >= 3.f ? 1.f : x / 6.f + 0.5f);
  if constexpr (A == Act::Swish) return x * sigmoid(x);
  if constexpr (A == Act::Softplus) return softplus(x);
  if constexpr (A == Act::Softsign) return x / (1.f + fabsf(x));
  if constexpr (A == Act::Mish) return x * tanhf(softplus(x));
  return x;
}

// f'(x); at the kinks (ReLU at 0, ReLU6 at 0 and 6, HardSigmoid at +-3) the gradient is 0, as
// TensorFlow and PyTorch take it.
template <Act A>
HPCNN_HD float act_grad(float x, float y, float alpha) {
  if constexpr (A == Act::Linear) return 1.f;
  if constexpr (A == Act::ReLU) return x > 0.f ? 1.f : 0.f;
  if constexpr (A == Act::ReLU6) return (x > 0.f && x < 6.f) ? 1.f : 0.f;
  if constexpr (A == Act::LeakyReLU) return x > 0.f ? 1.f : alpha;
  if constexpr (A == Act::ELU) return x > 0.f ? 1.f : y + alpha;  // alpha * e^x
  if constexpr (A == Act::SELU) return x > 0.f ? kSeluScale : y + kSeluScale * kSeluAlpha;
  if constexpr (A == Act::GELU) return 0.5f * (1.f + erff(x * kInvSqrt2)) + x * kInvSqrt2Pi * expf(-0.5f * x * x);
  if constexpr (A == Act::GELUTanh) {
    const float t = tanhf(kSqrt2OverPi * (x + kGeluCubic * x * x * x));
    return 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * kSqrt2OverPi * (1.f + 3.f * kGeluCubic * x * x);
  }
  if constexpr (A == Act::Tanh) return 1.f - y * y;
  if constexpr (A == Act::Sigmoid) return y * (1.f - y);
  if constexpr (A == Act::HardSigmoid) return (x > -3.f && x < 3.f) ? 1.f / 6.f : 0.f;
  if constexpr (A == Act::Swish) {
    const float s = sigmoid(x);
    return s + x * s * (1.f - s);
  }
  if constexpr (A == Act::Softplus) return sigmoid(x);
  if constexpr (A == Act::Softsign) {
    const float d = 1.f + fabsf(x);
    return 1.f / (d * d);
  }
  if constexpr (A == Act::Mish) {
    const float t = tanhf(softplus(x));
    return t + x * (1.f - t * t) * sigmoid(x);
  }
  return 1.f;
}

// Runs CALL(K) with K the compile-time Act equal to the runtime value `a` (one instantiation per
// kind: the backends' loops and kernels are templates over the kind).
#define HPCNN_SWITCH_ACT(a, CALL)                              \
  switch (a) {                                                 \
    case hpcnn::Act::Linear: CALL(hpcnn::Act::Linear); break;           \
    case hpcnn::Act::ReLU: CALL(hpcnn::Act::ReLU); break;               \
    case hpcnn::Act::ReLU6: CALL(hpcnn::Act::ReLU6); break;             \
    case hpcnn::Act::LeakyReLU: CALL(hpcnn::Act::LeakyReLU); break;     \
    case hpcnn::Act::ELU: CALL(hpcnn::Act::ELU); break;                 \
    case hpcnn::Act::SELU: CALL(hpcnn::Act::SELU); break;               \
    case hpcnn::Act::GELU: CALL(hpcnn::Act::GELU); break;               \
    case hpcnn::Act::GELUTanh: CALL(hpcnn::Act::GELUTanh); break;       \
    case hpcnn::Act::Tanh: CALL(hpcnn::Act::Tanh); break;               \
    case hpcnn::Act::Sigmoid: CALL(hpcnn::Act::Sigmoid); break;         \
    case hpcnn::Act::HardSigmoid: CALL(hpcnn::Act::HardSigmoid); break; \
    case hpcnn::Act::Swish: CALL(hpcnn::Act::Swish); break;             \
    case hpcnn::Act::Softplus: CALL(hpcnn::Act::Softplus); break;       \
    case hpcnn::Act::Softsign: CALL(hpcnn::Act::Softsign); break;       \
    case hpcnn::Act::Mish: CALL(hpcnn::Act::Mish); break;               \
  }

// Rescaling: x * scale + offset (one multiply-add; nvcc and g++ both contract it into an FMA).
HPCNN_HD float scale_shift(float x, float scale, float offset) { return x * scale + offset; }

// ------------------------------------------------------------------ normalization
// Keras' moving average of a batch statistic (BatchNormalization's moving_mean/moving_variance):
// moving * momentum + batch * (1 - momentum).
HPCNN_HD float moving_average(float moving, float batch, float momentum) {
  return moving * momentum + batch * (1.f - momentum);
}
// 1 / sqrt(var + eps): the scale that normalizes a channel of variance var.
HPCNN_HD float inv_std(float var, float eps) { return 1.f / sqrtf(var + eps); }

// Inverted dropout: element i of step `stream` is kept when its uniform draw is >= rate, and
// scaled by 1/(1-rate) so that inference needs no rescaling.
HPCNN_HD float dropout_scale(uint64_t seed, uint64_t stream, uint64_t i, float rate) {
  return rng::uniform(seed, stream, i) >= rate ? 1.0f / (1.0f - rate) : 0.0f;
}

// Adam as Keras computes it: epsilon is added to sqrt(v) without bias correction, and the bias
// corrections are folded into the step size alpha = lr * sqrt(1 - b2^t) / (1 - b1^t).
HPCNN_HD void adam_update(float& p, float g, float& m, float& v, float alpha, float b1, float b2, float eps) {
  m += (g - m) * (1.f - b1);
  v += (g * g - v) * (1.f - b2);
  p -= alpha * m / (sqrtf(v) + eps);
}

// SGD as Keras: velocity = momentum * velocity - lr * g; Nesterov looks one step ahead.
HPCNN_HD void sgd_update(float& p, float g, float& vel, float lr, float momentum, bool nesterov) {
  if (momentum == 0.f) {
    p -= lr * g;
    return;
  }
  vel = momentum * vel - lr * g;
  p += nesterov ? momentum * vel - lr * g : vel;
}

// Softmax cross-entropy for one row, given the row max `mx` and log-sum-exp `lse` of logits - mx:
// probability of class k, and the loss term for the target class.
HPCNN_HD float softmax_prob(float logit, float mx, float lse) { return expf(logit - mx - lse); }
HPCNN_HD float xent_term(float logit, float mx, float lse) { return -(logit - mx - lse); }

}  // namespace hpcnn::ew
