// Optimizer updates over a model's trainable variables, given as a segment table over the one flat
// parameter buffer (ops/param_segments.h): one op call updates every trainable variable; elements
// outside the table (frozen layers, non-trainable weights) are never read or written. Per element,
// in Keras' order (ops/elementwise.h holds the math both backends run):
//   g = clip_gradient(g, scale of the element's variable, clipvalue)   (the gradient buffer itself
//                                                                       is not modified)
//   w -= w * decay                     for variables with decay set (Keras' weight_decay)
//   the optimizer's rule (SGD, Adam, RMSprop) on w and its state
// State buffers are over the whole parameter buffer (aligned with it element for element); a
// state the configuration does not use (SGD's velocity without momentum, RMSprop's momentum and
// average gradient) is null and never touched.
// CPU: optimizer_step_cpu.cpp; CUDA: optimizer_step_cuda.cu.
#pragma once

#include "ops/param_segments.h"

namespace hpcnn {

// What every update applies before its optimizer's own rule (Keras' BaseOptimizer).
struct UpdateCommon {
  const float* clip_scales = nullptr;  // one factor per variable of the table, on the op's device
                                       // (ops/param_norms.h clip_scales); null: no norm clipping
  float clipvalue = 0.f;               // > 0: gradients clamped to [-clipvalue, clipvalue]
  float decay = 0.f;                   // weight_decay * learning_rate (variables with decay set)
};

struct SgdParams {
  float lr, momentum;
  bool nesterov;
};

struct AdamParams {
  float lr, beta1, beta2, eps;
  long long t;  // step number, from 1
};

struct RmspropParams {
  float lr, rho, momentum, eps;
  bool centered;
};

namespace cpu {
void sgd_step(const ParamSegment* segs, int nseg, float* p, const float* g, float* velocity, const SgdParams& s,
              const UpdateCommon& c);
void adam_step(const ParamSegment* segs, int nseg, float* p, const float* g, float* m, float* v, const AdamParams& a,
               const UpdateCommon& c);
void rmsprop_step(const ParamSegment* segs, int nseg, float* p, const float* g, float* velocity, float* momentum,
                  float* average_gradient, const RmspropParams& r, const UpdateCommon& c);
}  // namespace cpu

namespace cuda {
void sgd_step(int device, const ParamSegment* segs, int nseg, float* p, const float* g, float* velocity,
              const SgdParams& s, const UpdateCommon& c);
void adam_step(int device, const ParamSegment* segs, int nseg, float* p, const float* g, float* m, float* v,
               const AdamParams& a, const UpdateCommon& c);
void rmsprop_step(int device, const ParamSegment* segs, int nseg, float* p, const float* g, float* velocity,
                  float* momentum, float* average_gradient, const RmspropParams& r, const UpdateCommon& c);
}  // namespace cuda

// Adam's bias-corrected step size lr * sqrt(1 - beta2^t) / (1 - beta1^t), computed in double on
// the host for both backends.
float adam_alpha(const AdamParams& a);

}  // namespace hpcnn
