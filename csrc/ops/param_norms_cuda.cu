// The fixed-order sums of param_norms.h on the GPU, with the arithmetic of param_norms_body.h:
//   partials kernel: one block of kSegmentLanes threads per segment; thread l is lane l; the lanes
//                    are added as the body's binary tree in shared memory
//   final kernels:   one thread: per-variable sums in table order, then the clip factors or the
//                    penalty (a few hundred additions for a typical model)
//   gradient kernel: one block per segment, the penalty's gradient added element by element
// No atomics anywhere: the same bits on every run, and the CPU's bits.
#include "core/cuda_context.h"
#include "ops/elementwise.h"
#include "ops/param_norms.h"
#include "ops/param_norms_body.h"

namespace hpcnn::cuda {

namespace {

__global__ void segment_partials_kernel(const ParamSegment* segs, const float* x, double* partial) {
  __shared__ double lanes_abs[kSegmentLanes], lanes_sq[kSegmentLanes];
  const int l = threadIdx.x;
  body::segment_lane_sums(x, segs[blockIdx.x], l, lanes_abs[l], lanes_sq[l]);
  __syncthreads();
  for (int half = kSegmentLanes / 2; half > 0; half /= 2) {
    if (l < half) body::tree_level(lanes_abs, lanes_sq, l, half);
    __syncthreads();
  }
  if (l == 0) {
    partial[2 * (long long)blockIdx.x] = lanes_abs[0];
    partial[2 * (long long)blockIdx.x + 1] = lanes_sq[0];
  }
}

__global__ void variable_sums_kernel(const ParamSegment* segs, int nseg, int nvar, const double* partial,
                                     double* sums) {
  if (threadIdx.x == 0 && blockIdx.x == 0) body::variable_sums_from_segments(segs, nseg, partial, nvar, sums);
}

__global__ void clip_scales_kernel(const ParamSegment* segs, int nseg, int nvar, const double* partial,
                                   double* sums, int mode, double clipnorm, float* scales) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  body::variable_sums_from_segments(segs, nseg, partial, nvar, sums);
  body::clip_scales_from_sums(sums, nvar, mode, clipnorm, scales);
}

__global__ void penalty_kernel(const ParamSegment* segs, int nseg, int nvar, const double* partial, double* sums,
                               double* penalty) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  body::variable_sums_from_segments(segs, nseg, partial, nvar, sums);
  body::penalty_from_sums(segs, nseg, sums, penalty);
}

__global__ void penalty_gradient_kernel(const ParamSegment* segs, const float* w, float* grads) {
  const ParamSegment s = segs[blockIdx.x];
  for (long long i = s.begin + threadIdx.x; i < s.end; i += blockDim.x)
    grads[i] += ew::penalty_gradient(w[i], s.l1, s.l2);
}

// Scratch for the segments' partial sums and the per-variable sums.
struct SumScratch {
  double* partial;
  double* sums;
};

SumScratch reserve_sums(Context& ctx, int nseg, int nvar, const char* what) {
  ScratchPlan plan;
  const size_t o_partial = plan.add<double>(2 * static_cast<size_t>(nseg));
  const size_t o_sums = plan.add<double>(2 * static_cast<size_t>(nvar));
  char* base = plan.reserve(ctx, what);
  return {ScratchPlan::at<double>(base, o_partial), ScratchPlan::at<double>(base, o_sums)};
}

}  // namespace

void variable_sums(int device, const ParamSegment* segs, int nseg, int nvar, const float* x, double* sums) {
  ContextLock ctx(device);
  if (nseg == 0) return;
  SumScratch s = reserve_sums(*ctx, nseg, nvar, "variable sums");
  segment_partials_kernel<<<nseg, kSegmentLanes, 0, ctx.stream()>>>(segs, x, s.partial);
  HPCNN_CUDA_CHECK_LAUNCH();
  variable_sums_kernel<<<1, 1, 0, ctx.stream()>>>(segs, nseg, nvar, s.partial, sums);
  HPCNN_CUDA_CHECK_LAUNCH();
}

void clip_scales(int device, const ParamSegment* segs, int nseg, int nvar, const float* g, int mode,
                 double clipnorm, float* scales) {
  ContextLock ctx(device);
  if (nseg == 0) return;
  SumScratch s = reserve_sums(*ctx, nseg, nvar, "gradient clipping");
  segment_partials_kernel<<<nseg, kSegmentLanes, 0, ctx.stream()>>>(segs, g, s.partial);
  HPCNN_CUDA_CHECK_LAUNCH();
  clip_scales_kernel<<<1, 1, 0, ctx.stream()>>>(segs, nseg, nvar, s.partial, s.sums, mode, clipnorm, scales);
  HPCNN_CUDA_CHECK_LAUNCH();
}

void weight_penalty(int device, const ParamSegment* segs, int nseg, int nvar, const float* w, float* grads,
                    double* penalty) {
  ContextLock ctx(device);
  if (nseg == 0) return;
  if (penalty) {
    SumScratch s = reserve_sums(*ctx, nseg, nvar, "weight penalty");
    segment_partials_kernel<<<nseg, kSegmentLanes, 0, ctx.stream()>>>(segs, w, s.partial);
    HPCNN_CUDA_CHECK_LAUNCH();
    penalty_kernel<<<1, 1, 0, ctx.stream()>>>(segs, nseg, nvar, s.partial, s.sums, penalty);
    HPCNN_CUDA_CHECK_LAUNCH();
  }
  if (grads) {
    penalty_gradient_kernel<<<nseg, kSegmentLanes, 0, ctx.stream()>>>(segs, w, grads);
    HPCNN_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace hpcnn::cuda
