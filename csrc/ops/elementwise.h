// Per-element math shared by the CPU and CUDA backends (HPCNN_HD = __host__ __device__ under
// nvcc). The CPU loops call these, so every CI run tests the exact arithmetic the GPU kernels use.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/hd.h"
#include "core/rng.h"
#include "ops/activation.h"
#include "ops/relu_clip.h"

namespace hpcnn::ew {

HPCNN_HD float relu(float x) { return x > 0.f ? x : 0.f; }
// ReLU's gradient from its output: 0 at the kink (x == 0), as TensorFlow and PyTorch do.
HPCNN_HD float relu_grad(float y, float dy) { return y > 0.f ? dy : 0.f; }

// ------------------------------------------------------------------ float math for the activations
// exp, expm1, log1p and erfc written out as branch-free float arithmetic: the CPU loops that call
// them vectorize (libm's expf/tanhf/erff are scalar calls, 20-50x slower per element here), and
// the GPU runs the very same operations (fmaf is one rounding on both), so the two backends agree
// to the last few bits instead of the libraries' own. Accuracy against float64 (tests/
// test_layer_ops.py): a few ulp over the float range the activations use.

// The float whose bits are i, and back.
HPCNN_HD float bits_to_float(int32_t i) {
#if defined(__CUDA_ARCH__)
  return __int_as_float(i);
#else
  float f;
  std::memcpy(&f, &i, sizeof f);
  return f;
#endif
}

// 2^n for an integer-valued n in [-126, 127], and x - n ln2 (Cody-Waite: ln2 split in a part
// whose products with n are exact, and the rest) for n = round(x / ln2).
struct Exp2Split {
  float scale;  // 2^n
  float r;      // x - n ln2, |r| <= ln2 / 2
};
HPCNN_HD Exp2Split exp2_split(float x) {
  x = x < -87.3f ? -87.3f : (x > 88.0f ? 88.0f : x);  // 2^n stays a normal float
  const float n = rintf(x * 1.44269504088896341f);
  float r = fmaf(n, -0.693145751953125f, x);  // ln2's leading 16 bits: n * it is exact
  r = fmaf(n, -1.42860682030941723e-06f, r);
  return {bits_to_float((static_cast<int32_t>(n) + 127) << 23), r};
}

// (e^r - 1) / r for |r| <= ln2/2: the Taylor series 1 + r/2! + ... + r^7/8! (the next term is
// below 1e-9 relative).
HPCNN_HD float expm1_over_r(float r) {
  float p = 1.f / 40320.f;
  p = fmaf(p, r, 1.f / 5040.f);
  p = fmaf(p, r, 1.f / 720.f);
  p = fmaf(p, r, 1.f / 120.f);
  p = fmaf(p, r, 1.f / 24.f);
  p = fmaf(p, r, 1.f / 6.f);
  p = fmaf(p, r, 0.5f);
  return fmaf(p, r, 1.f);
}

// e^x (0 below -87.3, where e^x is under float's normal range; saturated at e^88 above 88).
HPCNN_HD float fexp(float x) {
  const Exp2Split s = exp2_split(x);
  const float e = s.scale * fmaf(s.r, expm1_over_r(s.r), 1.f);
  return x < -87.3f ? 0.f : e;
}

// e^x - 1 without cancellation near 0: 2^n (e^r - 1) + (2^n - 1), exact in its last step for n = 0.
HPCNN_HD float fexpm1(float x) {
  const Exp2Split s = exp2_split(x);
  return fmaf(s.scale, s.r * expm1_over_r(s.r), s.scale - 1.f);
}

// log(1 + t) for t in [0, 1]: 2 atanh(s) with s = t / (2 + t) in [0, 1/3], its odd series to s^13.
HPCNN_HD float flog1p01(float t) {
  const float s = t / (2.f + t), s2 = s * s;
  float p = 1.f / 13.f;
  p = fmaf(p, s2, 1.f / 11.f);
  p = fmaf(p, s2, 1.f / 9.f);
  p = fmaf(p, s2, 1.f / 7.f);
  p = fmaf(p, s2, 1.f / 5.f);
  p = fmaf(p, s2, 1.f / 3.f);
  p = fmaf(p, s2, 1.f);
  return 2.f * s * p;
}

// erfc(a) for a >= 0, given e^(-a^2): e^(-a^2) P(t), t = 1 / (1 + a/2), with P a degree-9 fit of
// erfc(a) e^(a^2) (tools/fit_erfc.py has the fit: relative error below 4e-7 for a in [0, 10], so
// erfc keeps its relative accuracy far into the tail, where GELU's outputs are tiny).
HPCNN_HD float ferfc_nonneg(float a, float exp_minus_a2) {
  const float t = 1.f / fmaf(0.5f, a, 1.f);
  float p = -4.676148668e-02f;
  p = fmaf(p, t, 2.212749124e-01f);
  p = fmaf(p, t, -3.472745717e-01f);
  p = fmaf(p, t, 1.041517258e-01f);
  p = fmaf(p, t, 1.068594679e-01f);
  p = fmaf(p, t, 1.373072714e-01f);
  p = fmaf(p, t, 2.634685636e-01f);
  p = fmaf(p, t, 2.784970105e-01f);
  p = fmaf(p, t, 2.824952602e-01f);
  p = fmaf(p, t, -1.815825090e-05f);
  return p * exp_minus_a2;
}

// ------------------------------------------------------------------ activations (ops/activation.h)
// act<A>(x, alpha) = f(x) and act_grad<A>(x, y, alpha) = f'(x) (y = f(x), passed because some
// derivatives are cheapest from it). Templates, so that each kind compiles to its own branch-free
// loop on the CPU and its own kernel on the GPU, from this one definition.
HPCNN_HD float sigmoid(float x) {
  // Never e^x of a large positive x: e = e^-|x| in (0, 1].
  const float e = fexp(-fabsf(x));
  const float s = 1.f / (1.f + e);
  return x >= 0.f ? s : e * s;
}
HPCNN_HD float softplus(float x) { return (x > 0.f ? x : 0.f) + flog1p01(fexp(-fabsf(x))); }
HPCNN_HD float ftanh(float x) {
  const float u = fexpm1(-2.f * fabsf(x));  // in (-1, 0]
  return copysignf(-u / (2.f + u), x);
}
// The standard normal CDF Phi(x) = (1 + erf(x / sqrt 2)) / 2, from erfc of |x| / sqrt 2 (no
// cancellation in either tail), and e^(-x^2 / 2) for the density.
HPCNN_HD float normal_cdf(float x, float exp_half_x2) {
  const float q = 0.5f * ferfc_nonneg(fabsf(x) * 0.7071067811865476f, exp_half_x2);
  return x >= 0.f ? 1.f - q : q;
}
// tanh(softplus(x)) = ((1 + e^x)^2 - 1) / ((1 + e^x)^2 + 1) = n / (n + 2), n = e^x (e^x + 2);
// 1 in float beyond x = 20.
HPCNN_HD float tanh_softplus(float x) {
  const float e = fexp(x < 20.f ? x : 20.f);
  const float n = e * (e + 2.f);
  return n / (n + 2.f);
}

constexpr float kSeluAlpha = 1.6732632423543772f;
constexpr float kSeluScale = 1.0507009873554805f;
constexpr float kSqrt2OverPi = 0.7978845608028654f;   // sqrt(2 / pi)
constexpr float kInvSqrt2Pi = 0.3989422804014327f;    // 1 / sqrt(2 pi)
constexpr float kGeluCubic = 0.044715f;

template <Act A>
HPCNN_HD float act(float x, float alpha) {
  if constexpr (A == Act::Linear) return x;
  if constexpr (A == Act::ReLU) return x > 0.f ? x : 0.f;
  if constexpr (A == Act::ReLU6) return x > 0.f ? (x < 6.f ? x : 6.f) : 0.f;
  if constexpr (A == Act::LeakyReLU) return x > 0.f ? x : alpha * x;
  if constexpr (A == Act::ELU) return x > 0.f ? x : alpha * fexpm1(x);
  if constexpr (A == Act::SELU) return kSeluScale * (x > 0.f ? x : kSeluAlpha * fexpm1(x));
  if constexpr (A == Act::GELU) return x * normal_cdf(x, fexp(-0.5f * x * x));
  // (1 + tanh(u)) / 2 = sigmoid(2u): the same function, without 1 + tanh's cancellation for u << 0.
  if constexpr (A == Act::GELUTanh) return x * sigmoid(2.f * kSqrt2OverPi * (x + kGeluCubic * x * x * x));
  if constexpr (A == Act::Tanh) return ftanh(x);
  if constexpr (A == Act::Sigmoid) return sigmoid(x);
  if constexpr (A == Act::HardSigmoid) return x > -3.f ? (x < 3.f ? (x + 3.f) / 6.f : 1.f) : 0.f;
  if constexpr (A == Act::Swish) return x * sigmoid(x);
  if constexpr (A == Act::Softplus) return softplus(x);
  if constexpr (A == Act::Softsign) return x / (1.f + fabsf(x));
  if constexpr (A == Act::Mish) return x * tanh_softplus(x);
  if constexpr (A == Act::HardSwish) return x * (x > -3.f ? (x < 3.f ? (x + 3.f) / 6.f : 1.f) : 0.f);
  return x;
}

// f'(x); at the kinks (ReLU at 0, ReLU6 at 0 and 6, HardSigmoid at +-3) the gradient is 0, as
// TensorFlow and PyTorch take it. Written with selects (no && or ||): branch-free loops.
template <Act A>
HPCNN_HD float act_grad(float x, float y, float alpha) {
  if constexpr (A == Act::Linear) return 1.f;
  if constexpr (A == Act::ReLU) return x > 0.f ? 1.f : 0.f;
  if constexpr (A == Act::ReLU6) return x > 0.f ? (x < 6.f ? 1.f : 0.f) : 0.f;
  if constexpr (A == Act::LeakyReLU) return x > 0.f ? 1.f : alpha;
  if constexpr (A == Act::ELU) return x > 0.f ? 1.f : y + alpha;  // alpha * e^x
  if constexpr (A == Act::SELU) return x > 0.f ? kSeluScale : y + kSeluScale * kSeluAlpha;
  if constexpr (A == Act::GELU) {
    const float e = fexp(-0.5f * x * x);
    return normal_cdf(x, e) + x * kInvSqrt2Pi * e;
  }
  if constexpr (A == Act::GELUTanh) {  // f = x s, s = sigmoid(2u): f' = s + x s (1 - s) 2u'
    const float s = sigmoid(2.f * kSqrt2OverPi * (x + kGeluCubic * x * x * x));
    return s + x * s * (1.f - s) * 2.f * kSqrt2OverPi * (1.f + 3.f * kGeluCubic * x * x);
  }
  if constexpr (A == Act::Tanh) return 1.f - y * y;
  if constexpr (A == Act::Sigmoid) return y * (1.f - y);
  if constexpr (A == Act::HardSigmoid) return x > -3.f ? (x < 3.f ? 1.f / 6.f : 0.f) : 0.f;
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
    const float t = tanh_softplus(x);
    return t + x * (1.f - t * t) * sigmoid(x);
  }
  // d/dx x (x + 3) / 6 = (2x + 3) / 6 inside (-3, 3); 0 below, 1 above (the value at the kinks: TensorFlow's).
  if constexpr (A == Act::HardSwish) return x > -3.f ? (x < 3.f ? (2.f * x + 3.f) / 6.f : 1.f) : 0.f;
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
    case hpcnn::Act::HardSwish: CALL(hpcnn::Act::HardSwish); break;     \
  }

// Keras' general ReLU (ops/relu_clip.h): the part above the threshold, clipped to [0, max_value]
// when there is one, minus the slope times the part below the threshold.
HPCNN_HD float relu_clip(float x, const ReluClipParams& p) {
  float a = x > p.threshold ? x : 0.f;
  if (p.has_max) a = a < 0.f ? 0.f : (a > p.max_value ? p.max_value : a);
  const float below = p.threshold - x > 0.f ? p.threshold - x : 0.f;
  return a - p.negative_slope * below;
}
HPCNN_HD float relu_clip_grad(float x, const ReluClipParams& p) {
  const float a = x > p.threshold ? x : 0.f;  // (threshold 0: x > 0 the same test)
  float d = x > p.threshold ? 1.f : 0.f;
  if (p.has_max) d = a > 0.f && a < p.max_value ? d : 0.f;
  return d + (p.threshold - x > 0.f ? p.negative_slope : 0.f);
}

// Rescaling: x * scale + offset (one multiply-add; nvcc and g++ both contract it into an FMA).
HPCNN_HD float scale_shift(float x, float scale, float offset) { return x * scale + offset; }

// Keras' Normalization: 1 / max(sqrt(var), eps), the factor of (x - mean) (ops/scale_shift.h).
HPCNN_HD float normalization_scale(float var, float eps) {
  const float s = sqrtf(var);
  return 1.f / (s > eps ? s : eps);
}

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
