// Per-element math shared by the CPU and CUDA backends (HPCNN_HD = __host__ __device__ under
// nvcc). The CPU loops call these, so every CI run tests the exact arithmetic the GPU kernels use.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/hd.h"
#include "core/rng.h"

namespace hpcnn::ew {

HPCNN_HD float relu(float x) { return x > 0.f ? x : 0.f; }
// ReLU's gradient from its output: 0 at the kink (x == 0), as TensorFlow and PyTorch do.
HPCNN_HD float relu_grad(float y, float dy) { return y > 0.f ? dy : 0.f; }

// Inverted dropout: element i of step `stream` is kept when its uniform draw is >= rate, and
// scaled by 1/(1-rate) so that inference needs no rescaling.
HPCNN_HD float dropout_scale(uint64_t seed, uint64_t stream, uint64_t i, float rate) {
  return rng::uniform(seed, stream, i) >= rate ? 1.0f / (1.0f - rate) : 0.0f;
}

// ---- optimizer updates (ops/optimizer_step.h), in Keras' order: the gradient is clipped, the
// weight decays, then the optimizer's rule updates the weight and its state.

// Keras' gradient clipping of one element: `scale` is its variable's clipnorm / global_clipnorm
// factor (1 without); clipvalue > 0 then clamps to [-clipvalue, clipvalue] (a NaN stays NaN).
HPCNN_HD float clip_gradient(float g, float scale, float clipvalue) {
  g *= scale;
  if (clipvalue > 0.f) g = g < -clipvalue ? -clipvalue : (g > clipvalue ? clipvalue : g);
  return g;
}

// Decoupled weight decay (Keras' BaseOptimizer, AdamW): w -= w * (weight_decay * learning_rate),
// applied before the update and independent of the gradient.
HPCNN_HD void decay_weight(float& p, float decay_lr) { p -= p * decay_lr; }

// Adam as Keras computes it: epsilon is added to sqrt(v) without bias correction, and the bias
// corrections are folded into the step size alpha = lr * sqrt(1 - b2^t) / (1 - b1^t).
HPCNN_HD void adam_update(float& p, float g, float& m, float& v, float alpha, float b1, float b2, float eps) {
  m += (g - m) * (1.f - b1);
  v += (g * g - v) * (1.f - b2);
  p -= alpha * m / (sqrtf(v) + eps);
}

// SGD as Keras: velocity = momentum * velocity - lr * g; Nesterov looks one step ahead. Without
// momentum there is no velocity (Keras keeps none): `vel` is then not touched.
HPCNN_HD void sgd_update(float& p, float g, float& vel, float lr, float momentum, bool nesterov) {
  if (momentum == 0.f) {
    p -= lr * g;
    return;
  }
  vel = momentum * vel - lr * g;
  p += nesterov ? momentum * vel - lr * g : vel;
}

// RMSprop as Keras 3: v = rho v + (1 - rho) g^2; centered: a = rho a + (1 - rho) g and the
// denominator is v - a^2 + eps, else v + eps (epsilon inside the square root); the increment
// lr g / sqrt(denominator) is applied directly, or through plain momentum
// (mom = momentum mom + increment; w -= mom). `mom` is touched only with momentum > 0, `avg`
// only when centered.
HPCNN_HD void rmsprop_update(float& p, float g, float& v, float& mom, float& avg, float lr, float rho, float momentum,
                             float eps, bool centered) {
  v = rho * v + (1.f - rho) * (g * g);
  float denom;
  if (centered) {
    avg = rho * avg + (1.f - rho) * g;
    denom = v - avg * avg + eps;
  } else {
    denom = v + eps;
  }
  const float increment = lr * g / sqrtf(denom);
  if (momentum > 0.f) {
    mom = momentum * mom + increment;
    p -= mom;
  } else {
    p -= increment;
  }
}

// ---- weight regularizers (ops/param_norms.h): the gradient of l1 * |w| + l2 * w^2 (sign(0) = 0).
HPCNN_HD float penalty_gradient(float w, float l1, float l2) {
  float d = 0.f;
  if (l1 != 0.f) d = w > 0.f ? l1 : (w < 0.f ? -l1 : 0.f);
  if (l2 != 0.f) d += 2.f * l2 * w;
  return d;
}

// Softmax cross-entropy for one row, given the row max `mx` and log-sum-exp `lse` of logits - mx:
// probability of class k, and the loss term for the target class.
HPCNN_HD float softmax_prob(float logit, float mx, float lse) { return expf(logit - mx - lse); }
HPCNN_HD float xent_term(float logit, float mx, float lse) { return -(logit - mx - lse); }

}  // namespace hpcnn::ew
