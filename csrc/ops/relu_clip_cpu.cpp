// The general ReLU on the CPU: ew::relu_clip per element, threads over slices.
#include "core/thread_pool.h"
#include "ops/elementwise.h"
#include "ops/relu_clip.h"

namespace hpcnn::cpu {

void relu_clip_forward(const ReluClipParams& p, long long count, const float* x, float* y) {
  parallel_for(count, [&](long long b, long long e, int) {
    const ReluClipParams q = p;  // a local copy: stores through y cannot alias it
    for (long long i = b; i < e; ++i) y[i] = ew::relu_clip(x[i], q);
  }, 1 << 14);
}

void relu_clip_backward(const ReluClipParams& p, long long count, const float* x, const float* dy, float* dx) {
  parallel_for(count, [&](long long b, long long e, int) {
    const ReluClipParams q = p;
    for (long long i = b; i < e; ++i) dx[i] = dy[i] * ew::relu_clip_grad(x[i], q);
  }, 1 << 14);
}

}  // namespace hpcnn::cpu
