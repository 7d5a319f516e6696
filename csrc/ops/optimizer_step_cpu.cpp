// The optimizer updates of optimizer_step.h on the CPU: segments split statically over the threads
// (the same slices for the same thread count), the per-element math of ops/elementwise.h.
#include <cmath>

#include "core/thread_pool.h"
#include "ops/elementwise.h"
#include "ops/optimizer_step.h"

namespace hpcnn {

float adam_alpha(const AdamParams& a) {
  return static_cast<float>(a.lr * std::sqrt(1.0 - std::pow((double)a.beta2, (double)a.t)) /
                            (1.0 - std::pow((double)a.beta1, (double)a.t)));
}

namespace cpu {

namespace {

constexpr long long kSegmentsPerThread = 4;  // 16K elements: below, fewer threads

// rule(i, g) for every element i of the table, g its clipped gradient, after its weight decayed.
template <typename Rule>
void for_each_element(const ParamSegment* segs, int nseg, float* p, const float* g, const UpdateCommon& c,
                      const Rule& rule) {
  parallel_for(nseg, [&](long long b, long long e, int) {
    for (long long s = b; s < e; ++s) {
      const ParamSegment& sg = segs[s];
      const float scale = c.clip_scales ? c.clip_scales[sg.variable] : 1.f;
      const float decay = sg.decay ? c.decay : 0.f;
      for (long long i = sg.begin; i < sg.end; ++i) {
        const float gi = ew::clip_gradient(g[i], scale, c.clipvalue);
        if (decay != 0.f) ew::decay_weight(p[i], decay);
        rule(i, gi);
      }
    }
  }, kSegmentsPerThread);
}

}  // namespace

void sgd_step(const ParamSegment* segs, int nseg, float* p, const float* g, float* velocity, const SgdParams& s,
              const UpdateCommon& c) {
  float none = 0.f;  // no velocity without momentum
  for_each_element(segs, nseg, p, g, c, [&](long long i, float gi) {
    ew::sgd_update(p[i], gi, velocity ? velocity[i] : none, s.lr, s.momentum, s.nesterov);
  });
}

void adam_step(const ParamSegment* segs, int nseg, float* p, const float* g, float* m, float* v, const AdamParams& a,
               const UpdateCommon& c) {
  const float alpha = adam_alpha(a);
  for_each_element(segs, nseg, p, g, c, [&](long long i, float gi) {
    ew::adam_update(p[i], gi, m[i], v[i], alpha, a.beta1, a.beta2, a.eps);
  });
}

void rmsprop_step(const ParamSegment* segs, int nseg, float* p, const float* g, float* velocity, float* momentum,
                  float* average_gradient, const RmspropParams& r, const UpdateCommon& c) {
  for_each_element(segs, nseg, p, g, c, [&](long long i, float gi) {
    float none_m = 0.f, none_a = 0.f;
    ew::rmsprop_update(p[i], gi, velocity[i], momentum ? momentum[i] : none_m,
                       average_gradient ? average_gradient[i] : none_a, r.lr, r.rho, r.momentum, r.eps, r.centered);
  });
}

}  // namespace cpu

}  // namespace hpcnn
