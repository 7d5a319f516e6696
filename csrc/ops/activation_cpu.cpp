// Stand-alone activations on the CPU: ReLU, the element-wise kinds of ops/activation.h (one
// loop per kind, instantiated from the shared ew::act / ew::act_grad), softmax.
#include <algorithm>
#include <cmath>

#include "core/thread_pool.h"
#include "ops/activation.h"
#include "ops/elementwise.h"

namespace hpcnn::cpu {

namespace {

// Element-wise loops over [0, count), split over hpcnn's threads.
constexpr long long kMinPerThread = 1 << 14;

// alpha is copied into each loop: read through the lambda's reference, a float that the output
// stores might alias, it would be reloaded per element and keep the loop from vectorizing.
template <Act A>
void forward_kind(float alpha, long long count, const float* x, float* y) {
  parallel_for(count, [&](long long b, long long e, int) {
    const float a = alpha;
    const float* __restrict__ in = x;
    float* __restrict__ out = y;
    for (long long i = b; i < e; ++i) out[i] = ew::act<A>(in[i], a);
  }, kMinPerThread);
}

template <Act A>
void backward_kind(float alpha, long long count, const float* x, const float* y, const float* dy, float* dx) {
  parallel_for(count, [&](long long b, long long e, int) {
    const float a = alpha;
    const float* __restrict__ in = x;
    const float* __restrict__ out = y;
    const float* __restrict__ g = dy;
    float* __restrict__ d = dx;
    for (long long i = b; i < e; ++i) d[i] = g[i] * ew::act_grad<A>(in[i], out[i], a);
  }, kMinPerThread);
}

}  // namespace

void relu_forward(long long count, const float* x, float* y) {
  parallel_for(count, [&](long long b, long long e, int) {
    for (long long i = b; i < e; ++i) y[i] = ew::relu(x[i]);
  }, kMinPerThread);
}

void relu_backward(long long count, const float* y, const float* dy, float* dx) {
  parallel_for(count, [&](long long b, long long e, int) {
    for (long long i = b; i < e; ++i) dx[i] = ew::relu_grad(y[i], dy[i]);
  }, kMinPerThread);
}

void act_forward(Act a, float alpha, long long count, const float* x, float* y) {
#define HPCNN_FWD(K) forward_kind<K>(alpha, count, x, y)
  HPCNN_SWITCH_ACT(a, HPCNN_FWD)
#undef HPCNN_FWD
}

void act_backward(Act a, float alpha, long long count, const float* x, const float* y, const float* dy, float* dx) {
#define HPCNN_BWD(K) backward_kind<K>(alpha, count, x, y, dy, dx)
  HPCNN_SWITCH_ACT(a, HPCNN_BWD)
#undef HPCNN_BWD
}

void softmax_forward(int rows, int cols, const float* x, float* y) {
  parallel_for(rows, [&](long long r0, long long r1, int) {
    for (long long r = r0; r < r1; ++r) {
      const float* xr = x + r * cols;
      float* yr = y + r * cols;
      float mx = *std::max_element(xr, xr + cols);
      float sum = 0.f;
      for (int j = 0; j < cols; ++j) sum += std::exp(xr[j] - mx);
      float lse = std::log(sum);
      for (int j = 0; j < cols; ++j) yr[j] = ew::softmax_prob(xr[j], mx, lse);
    }
  }, 64);
}

void softmax_backward(int rows, int cols, const float* y, const float* dy, float* dx) {
  parallel_for(rows, [&](long long r0, long long r1, int) {
    for (long long r = r0; r < r1; ++r) {
      const float* yr = y + r * cols;
      const float* dyr = dy + r * cols;
      float dot = 0.f;
      for (int j = 0; j < cols; ++j) dot += dyr[j] * yr[j];
      for (int j = 0; j < cols; ++j) dx[r * cols + j] = yr[j] * (dyr[j] - dot);
    }
  }, 64);
}

}  // namespace hpcnn::cpu
