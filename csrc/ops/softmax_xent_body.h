// One row of softmax_xent_cuda.cu's fused softmax + cross-entropy, as an HPCNN_HD function: the
// kernel runs one thread per row around it; the host self-test
// (diagnostics/cuda_kernel_selftest.cpp) runs it on the CPU against softmax_xent_cpu.cpp. The
// per-element math is ew:: (elementwise.h), shared with the CPU op. Plain C++ under g++ (HPCNN_HD =
// inline), __host__ __device__ under nvcc.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/hd.h"
#include "ops/elementwise.h"

namespace hpcnn::cuda::body {

HPCNN_HD int argmax_row(const float* r, int cols) {
  int best = 0;
  for (int j = 1; j < cols; ++j)
    if (r[best] < r[j]) best = j;  // std::max_element: the first maximum
  return best;
}

// One row: hit (argmax == target), the loss, and when wanted (dlogits not null) the gradient row.
// A class index outside [0, cols) gives a NaN loss and gradient (device labels are not
// range-checked).
HPCNN_HD void xent_row(int r, int cols, const float* logits, const float* onehot, const int32_t* labels,
                       float* dlogits, float grad_scale, double* loss_out, double* hit_out,
                       const float* row_w = nullptr, float label_smoothing = 0.f) {
  const float* lr = logits + (long long)r * cols;
  const float* t = onehot ? onehot + (long long)r * cols : nullptr;
  int target = labels ? labels[r] : argmax_row(t, cols);
  bool bad = labels && (target < 0 || target >= cols);
  int am = argmax_row(lr, cols);
  hit_out[r] = (!bad && am == target) ? 1.0 : 0.0;
  float mx = lr[am];
  float sum = 0.f;
  for (int j = 0; j < cols; ++j) sum += expf(lr[j] - mx);
  float lse = logf(sum);
  double l = 0.0;
  if (bad) {
    l = NAN;
  } else if (labels) {
    l = ew::xent_term(lr[target], mx, lse);
  } else {
    const float keep = 1.f - label_smoothing, spread = label_smoothing / (float)cols;
    for (int j = 0; j < cols; ++j) {
      const float tj = label_smoothing != 0.f ? t[j] * keep + spread : t[j];
      if (tj != 0.f) l += (double)tj * ew::xent_term(lr[j], mx, lse);
    }
  }
  const float w = row_w ? row_w[r] : 1.f;
  loss_out[r] = l * w;
  if (dlogits) {
    float* d = dlogits + (long long)r * cols;
    const float keep = 1.f - label_smoothing, spread = label_smoothing / (float)cols;
    for (int j = 0; j < cols; ++j) {
      float tj = labels ? (j == target ? 1.f : 0.f) : t[j];
      if (!labels && label_smoothing != 0.f) tj = tj * keep + spread;
      d[j] = bad ? NAN : (ew::softmax_prob(lr[j], mx, lse) - tj) * grad_scale * w;
    }
  }
}

}  // namespace hpcnn::cuda::body
