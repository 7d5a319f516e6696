// Adam and SGD over the whole parameter buffer in one pass (ops/elementwise.h holds the math).
#include <cmath>

#include "core/thread_pool.h"
#include "ops/elementwise.h"
#include "ops/optimizer_step.h"

namespace hpcnn::cpu {

void adam_step(long long count, float* p, const float* g, float* m, float* v, const AdamParams& a) {
  const float alpha = static_cast<float>(a.lr * std::sqrt(1.0 - std::pow((double)a.beta2, (double)a.t)) /
                                         (1.0 - std::pow((double)a.beta1, (double)a.t)));
  parallel_for(count, [&](long long b, long long e, int) {
    for (long long i = b; i < e; ++i) ew::adam_update(p[i], g[i], m[i], v[i], alpha, a.beta1, a.beta2, a.eps);
  }, 1 << 14);
}

void sgd_step(long long count, float* p, const float* g, float* velocity, const SgdParams& s) {
  parallel_for(count, [&](long long b, long long e, int) {
    for (long long i = b; i < e; ++i) ew::sgd_update(p[i], g[i], velocity[i], s.lr, s.momentum, s.nesterov);
  }, 1 << 14);
}

}  // namespace hpcnn::cpu
