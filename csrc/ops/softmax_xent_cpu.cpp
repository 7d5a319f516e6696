// Fused softmax + cross-entropy on the CPU. Each row: mx = max, lse = log(sum(exp(l - mx))),
// loss = -(l_target - mx - lse) (one-hot: sum over classes of -t_k * log p_k), gradient
// (p - t) * grad_scale. Per-thread partial sums are combined in thread order (reproducible).
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/thread_pool.h"
#include "ops/elementwise.h"
#include "ops/softmax_xent.h"

namespace hpcnn::cpu {

namespace {
int argmax_row(const float* r, int cols) { return static_cast<int>(std::max_element(r, r + cols) - r); }

int target_class(int row, int cols, const float* onehot, const int32_t* labels) {
  return labels ? labels[row] : argmax_row(onehot + (long long)row * cols, cols);
}
}  // namespace

void softmax_xent(int rows, int cols, const float* logits, const float* onehot, const int32_t* labels,
                  float* dlogits, float grad_scale, double* stats, const float* row_w, float label_smoothing) {
  const float keep = 1.f - label_smoothing, spread = label_smoothing / static_cast<float>(cols);
  const int max_threads = get_num_threads();
  std::vector<double> loss(max_threads, 0.0), correct(max_threads, 0.0);
  parallel_for(rows, [&](long long r0, long long r1, int tid) {
    double l_sum = 0.0, c_sum = 0.0;
    for (long long r = r0; r < r1; ++r) {
      const float* lr = logits + r * cols;
      float mx = *std::max_element(lr, lr + cols);
      float sum = 0.f;
      for (int j = 0; j < cols; ++j) sum += std::exp(lr[j] - mx);
      float lse = std::log(sum);
      const float w = row_w ? row_w[r] : 1.f;  // sample_weight * class_weight (null: 1)
      double l = 0.0;
      if (labels) {
        l = ew::xent_term(lr[labels[r]], mx, lse);
      } else {
        const float* t = onehot + r * cols;
        for (int j = 0; j < cols; ++j) {
          const float tj = label_smoothing != 0.f ? t[j] * keep + spread : t[j];
          if (tj != 0.f) l += (double)tj * ew::xent_term(lr[j], mx, lse);
        }
      }
      l_sum += row_w ? l * w : l;
      c_sum += argmax_row(lr, cols) == target_class(static_cast<int>(r), cols, onehot, labels) ? 1.0 : 0.0;
      if (dlogits) {
        float* d = dlogits + r * cols;
        for (int j = 0; j < cols; ++j) {
          float t = labels ? (j == labels[r] ? 1.f : 0.f) : onehot[r * cols + j];
          if (!labels && label_smoothing != 0.f) t = t * keep + spread;
          d[j] = (ew::softmax_prob(lr[j], mx, lse) - t) * (grad_scale * w);
        }
      }
    }
    loss[tid] = l_sum;
    correct[tid] = c_sum;
  }, 32, max_threads);  // loss and correct are sized for max_threads (the pool may have grown since)
  for (int t = 0; t < max_threads; ++t) {
    stats[0] += loss[t];
    stats[1] += correct[t];
  }
}

}  // namespace hpcnn::cpu
