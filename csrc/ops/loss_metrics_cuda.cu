// ops/loss_metrics.h on the GPU: one thread per row runs the shared body (loss_metrics_body.h)
// and writes the row's value to scratch; one block then sums the rows in a fixed order into the
// caller's double on the device (no atomics: the same result on every run).
#include "core/cuda_context.h"
#include "ops/loss_metrics.h"
#include "ops/loss_metrics_body.h"

namespace hpcnn::cuda {

namespace {

constexpr int kReduceThreads = 256;

__global__ void row_loss_kernel(RowLossParams p, int rows, int cols, const float* pred, const float* target,
                                const float* w, float* dpred, float grad_scale, double* row_out) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < rows) row_out[r] = body::row_loss(p, r, cols, pred, target, w, dpred, grad_scale);
}

__global__ void row_weights_kernel(int rows, int cols, const float* sample_weight, const float* class_weight,
                                   int num_class_weights, const float* target, const int32_t* labels, float* w) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < rows) w[r] = body::row_weight(r, cols, sample_weight, class_weight, num_class_weights, target, labels);
}

__global__ void metric_rows_kernel(RowMetricParams p, int rows, int cols, const float* pred, const float* target,
                                   const int32_t* labels, double* row_out) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < rows) row_out[r] = body::metric_row(p, r, cols, pred, target, labels);
}

// One block of kReduceThreads: *out += sum(values[0..rows)).
__global__ void reduce_rows_kernel(int rows, const double* values, double* out) {
  __shared__ double s[kReduceThreads];
  double a = 0.0;
  for (int r = threadIdx.x; r < rows; r += kReduceThreads) a += values[r];
  s[threadIdx.x] = a;
  __syncthreads();
  for (int half = kReduceThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) s[threadIdx.x] += s[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) *out += s[0];
}

}  // namespace

void row_loss(int device, const RowLossParams& p, int rows, int cols, const float* pred, const float* target,
              const float* w, float* dpred, float grad_scale, double* stats) {
  ContextLock ctx(device);
  if (rows == 0) return;
  ScratchPlan plan;
  size_t o_rows = plan.add<double>(rows);
  double* per_row = ScratchPlan::at<double>(plan.reserve(*ctx, "row_loss"), o_rows);
  row_loss_kernel<<<(rows + 127) / 128, 128, 0, ctx.stream()>>>(p, rows, cols, pred, target, w, dpred, grad_scale,
                                                                per_row);
  HPCNN_CUDA_CHECK_LAUNCH();
  reduce_rows_kernel<<<1, kReduceThreads, 0, ctx.stream()>>>(rows, per_row, stats);
  HPCNN_CUDA_CHECK_LAUNCH();
}

void row_weights(int device, int rows, int cols, const float* sample_weight, const float* class_weight,
                 int num_class_weights, const float* target, const int32_t* labels, float* w) {
  ContextLock ctx(device);
  if (rows == 0) return;
  row_weights_kernel<<<(rows + 127) / 128, 128, 0, ctx.stream()>>>(rows, cols, sample_weight, class_weight,
                                                                    num_class_weights, target, labels, w);
  HPCNN_CUDA_CHECK_LAUNCH();
}

void metric_rows(int device, const RowMetricParams& p, int rows, int cols, const float* pred, const float* target,
                 const int32_t* labels, double* out) {
  ContextLock ctx(device);
  if (rows == 0) return;
  ScratchPlan plan;
  size_t o_rows = plan.add<double>(rows);
  double* per_row = ScratchPlan::at<double>(plan.reserve(*ctx, "metric_rows"), o_rows);
  metric_rows_kernel<<<(rows + 127) / 128, 128, 0, ctx.stream()>>>(p, rows, cols, pred, target, labels, per_row);
  HPCNN_CUDA_CHECK_LAUNCH();
  reduce_rows_kernel<<<1, kReduceThreads, 0, ctx.stream()>>>(rows, per_row, out);
  HPCNN_CUDA_CHECK_LAUNCH();
}

}  // namespace hpcnn::cuda
