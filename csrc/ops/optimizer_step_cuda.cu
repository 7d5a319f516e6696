// The optimizer updates of optimizer_step.h on the GPU: one kernel launch per update, one block per
// segment of the table (threads stride over its elements), the per-element math of
// ops/elementwise.h. Adam's bias-corrected step size is computed on the host in double, exactly as
// the CPU path does.
#include "core/cuda_context.h"
#include "ops/elementwise.h"
#include "ops/optimizer_step.h"

namespace hpcnn::cuda {

namespace {

constexpr int kThreads = 256;

// The element's clipped gradient, after its weight decayed (Keras' order).
__device__ __forceinline__ float prepare(float& p, float g, float scale, float decay, float clipvalue) {
  const float gi = ew::clip_gradient(g, scale, clipvalue);
  if (decay != 0.f) ew::decay_weight(p, decay);
  return gi;
}

__global__ void sgd_kernel(const ParamSegment* segs, float* p, const float* g, float* vel, SgdParams s,
                           UpdateCommon c) {
  const ParamSegment sg = segs[blockIdx.x];
  const float scale = c.clip_scales ? c.clip_scales[sg.variable] : 1.f;
  const float decay = sg.decay ? c.decay : 0.f;
  for (long long i = sg.begin + threadIdx.x; i < sg.end; i += blockDim.x) {
    const float gi = prepare(p[i], g[i], scale, decay, c.clipvalue);
    float none = 0.f;
    ew::sgd_update(p[i], gi, vel ? vel[i] : none, s.lr, s.momentum, s.nesterov);
  }
}

__global__ void adam_kernel(const ParamSegment* segs, float* p, const float* g, float* m, float* v, float alpha,
                            AdamParams a, UpdateCommon c) {
  const ParamSegment sg = segs[blockIdx.x];
  const float scale = c.clip_scales ? c.clip_scales[sg.variable] : 1.f;
  const float decay = sg.decay ? c.decay : 0.f;
  for (long long i = sg.begin + threadIdx.x; i < sg.end; i += blockDim.x) {
    const float gi = prepare(p[i], g[i], scale, decay, c.clipvalue);
    ew::adam_update(p[i], gi, m[i], v[i], alpha, a.beta1, a.beta2, a.eps);
  }
}

__global__ void rmsprop_kernel(const ParamSegment* segs, float* p, const float* g, float* vel, float* mom,
                               float* avg, RmspropParams r, UpdateCommon c) {
  const ParamSegment sg = segs[blockIdx.x];
  const float scale = c.clip_scales ? c.clip_scales[sg.variable] : 1.f;
  const float decay = sg.decay ? c.decay : 0.f;
  for (long long i = sg.begin + threadIdx.x; i < sg.end; i += blockDim.x) {
    const float gi = prepare(p[i], g[i], scale, decay, c.clipvalue);
    float none_m = 0.f, none_a = 0.f;
    ew::rmsprop_update(p[i], gi, vel[i], mom ? mom[i] : none_m, avg ? avg[i] : none_a, r.lr, r.rho, r.momentum,
                       r.eps, r.centered);
  }
}

}  // namespace

void sgd_step(int device, const ParamSegment* segs, int nseg, float* p, const float* g, float* velocity,
              const SgdParams& s, const UpdateCommon& c) {
  ContextLock ctx(device);
  if (nseg == 0) return;
  sgd_kernel<<<nseg, kThreads, 0, ctx.stream()>>>(segs, p, g, velocity, s, c);
  HPCNN_CUDA_CHECK_LAUNCH();
}

void adam_step(int device, const ParamSegment* segs, int nseg, float* p, const float* g, float* m, float* v,
               const AdamParams& a, const UpdateCommon& c) {
  ContextLock ctx(device);
  if (nseg == 0) return;
  adam_kernel<<<nseg, kThreads, 0, ctx.stream()>>>(segs, p, g, m, v, adam_alpha(a), a, c);
  HPCNN_CUDA_CHECK_LAUNCH();
}

void rmsprop_step(int device, const ParamSegment* segs, int nseg, float* p, const float* g, float* velocity,
                  float* momentum, float* average_gradient, const RmspropParams& r, const UpdateCommon& c) {
  ContextLock ctx(device);
  if (nseg == 0) return;
  rmsprop_kernel<<<nseg, kThreads, 0, ctx.stream()>>>(segs, p, g, velocity, momentum, average_gradient, r, c);
  HPCNN_CUDA_CHECK_LAUNCH();
}

}  // namespace hpcnn::cuda
