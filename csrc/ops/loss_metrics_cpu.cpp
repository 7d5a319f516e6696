// ops/loss_metrics.h on the CPU: rows split over the thread pool, each row by the shared body
// (loss_metrics_body.h); per-thread partial sums combined in thread order (reproducible).
#include <vector>

#include "core/thread_pool.h"
#include "ops/loss_metrics.h"
#include "ops/loss_metrics_body.h"

namespace hpcnn::cpu {

namespace {
// sum over rows of row_value(r), in a fixed order.
template <typename F>
double sum_rows(int rows, F row_value) {
  const int max_threads = get_num_threads();
  std::vector<double> part(max_threads, 0.0);
  parallel_for(rows, [&](long long r0, long long r1, int tid) {
    double s = 0.0;
    for (long long r = r0; r < r1; ++r) s += row_value(static_cast<int>(r));
    part[tid] = s;
  }, 32, max_threads);
  double total = 0.0;
  for (double v : part) total += v;
  return total;
}
}  // namespace

void row_loss(const RowLossParams& p, int rows, int cols, const float* pred, const float* target, const float* w,
              float* dpred, float grad_scale, double* stats) {
  stats[0] += sum_rows(rows, [&](int r) { return body::row_loss(p, r, cols, pred, target, w, dpred, grad_scale); });
}

void row_weights(int rows, int cols, const float* sample_weight, const float* class_weight, int num_class_weights,
                 const float* target, const int32_t* labels, float* w) {
  for (int r = 0; r < rows; ++r)
    w[r] = body::row_weight(r, cols, sample_weight, class_weight, num_class_weights, target, labels);
}

void metric_rows(const RowMetricParams& p, int rows, int cols, const float* pred, const float* target,
                 const int32_t* labels, double* out) {
  out[0] += sum_rows(rows, [&](int r) { return body::metric_row(p, r, cols, pred, target, labels); });
}

}  // namespace hpcnn::cpu
