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
