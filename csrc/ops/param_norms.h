// Fixed-order sums over a model's variables, given as a segment table (ops/param_segments.h):
//   variable_sums   per variable v: sums[2v] = sum |x|, sums[2v+1] = sum x^2 (float64)
//   clip_scales     Keras' gradient clipping factors, one float per variable: clipnorm (per
//                   variable) or global_clipnorm (one factor for all); the update ops apply them
//   weight_penalty  the weight regularizers' penalty, sum over v of l1_v sum |w_v| + l2_v sum w_v^2,
//                   added to *penalty (may be null); and, when grads is not null, its gradient
//                   l1 sign(w) + 2 l2 w added to grads (the model's hook, nn/regularization.h)
// The sums never depend on the thread count, and the CPU and the GPU add the same numbers in the
// same order (param_norms_body.h). Outputs stay on the op's device (scales, sums and penalty are
// device memory on a GPU), so a training step needs no extra synchronisation.
// CPU: param_norms_cpu.cpp; CUDA: param_norms_cuda.cu.
#pragma once

#include "ops/param_segments.h"

namespace hpcnn {

namespace cpu {
void variable_sums(const ParamSegment* segs, int nseg, int nvar, const float* x, double* sums);
void clip_scales(const ParamSegment* segs, int nseg, int nvar, const float* g, int mode, double clipnorm,
                 float* scales);
void weight_penalty(const ParamSegment* segs, int nseg, int nvar, const float* w, float* grads, double* penalty);
}  // namespace cpu

namespace cuda {
void variable_sums(int device, const ParamSegment* segs, int nseg, int nvar, const float* x, double* sums);
void clip_scales(int device, const ParamSegment* segs, int nseg, int nvar, const float* g, int mode,
                 double clipnorm, float* scales);
void weight_penalty(int device, const ParamSegment* segs, int nseg, int nvar, const float* w, float* grads,
                    double* penalty);
}  // namespace cuda

}  // namespace hpcnn
