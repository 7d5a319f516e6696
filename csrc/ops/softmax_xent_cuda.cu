// Fused softmax + cross-entropy on the GPU, the CPU's arithmetic per row:
//   kernel 1, one thread per row: max, log-sum-exp, loss term (ew::xent_term), first-argmax hit,
//            gradient (ew::softmax_prob - t) * grad_scale; the row's loss and hit go to scratch.
//   kernel 2, one block: sums the rows' values in a fixed order and adds them to stats[0..1]
//            (2 doubles on the device). No atomics: the same result on every run.
// Class indices on the device cannot be range-checked on the host without a copy; an index
// outside [0, cols) makes that row's loss and gradient NaN (visible, never silently wrong).
#include <cmath>

#include "core/cuda_context.h"
#include "ops/elementwise.h"
#include "ops/softmax_xent.h"
#include "ops/softmax_xent_body.h"

namespace hpcnn::cuda {

namespace {

constexpr int kReduceThreads = 256;

// dlogits may be null (evaluation). The row's arithmetic: body::xent_row.
__global__ void xent_rows_kernel(int rows, int cols, const float* logits, const float* onehot, const int32_t* labels,
                                 float* dlogits, float grad_scale, double* loss_out, double* hit_out,
                                 const float* row_w, float label_smoothing) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < rows)
    body::xent_row(r, cols, logits, onehot, labels, dlogits, grad_scale, loss_out, hit_out, row_w, label_smoothing);
}

// One block of kReduceThreads: stats[0] += sum(loss), stats[1] += sum(hit).
__global__ void reduce_stats_kernel(int rows, const double* loss, const double* hit, double* stats) {
  __shared__ double sl[kReduceThreads], sh[kReduceThreads];
  double a = 0.0, b = 0.0;
  for (int r = threadIdx.x; r < rows; r += kReduceThreads) {
    a += loss[r];
    b += hit[r];
  }
  sl[threadIdx.x] = a;
  sh[threadIdx.x] = b;
  __syncthreads();
  for (int half = kReduceThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      sl[threadIdx.x] += sl[threadIdx.x + half];
      sh[threadIdx.x] += sh[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    stats[0] += sl[0];
    stats[1] += sh[0];
  }
}

}  // namespace

void softmax_xent(int device, int rows, int cols, const float* logits, const float* onehot, const int32_t* labels,
                  float* dlogits, float grad_scale, double* stats, const float* row_w, float label_smoothing) {
  ContextLock ctx(device);
  if (rows == 0) return;
  ScratchPlan plan;
  size_t o_loss = plan.add<double>(rows);
  size_t o_hit = plan.add<double>(rows);
  char* base = plan.reserve(*ctx, "softmax_cross_entropy");
  double* loss = ScratchPlan::at<double>(base, o_loss);
  double* hit = ScratchPlan::at<double>(base, o_hit);
  xent_rows_kernel<<<(rows + 127) / 128, 128, 0, ctx.stream()>>>(rows, cols, logits, onehot, labels, dlogits,
                                                                 grad_scale, loss, hit, row_w,
                                                                 label_smoothing);
  HPCNN_CUDA_CHECK_LAUNCH();
  reduce_stats_kernel<<<1, kReduceThreads, 0, ctx.stream()>>>(rows, loss, hit, stats);
  HPCNN_CUDA_CHECK_LAUNCH();
}

}  // namespace hpcnn::cuda
