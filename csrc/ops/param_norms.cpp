// The dispatch of the fixed-order sums over a model's variables (ops.h: variable sums, clip
// factors, weight penalties): checks, then param_norms_cpu.cpp or param_norms_cuda.cu (param_norms.h).
#include "ops/ops.h"

#include <cmath>

#include "ops/dispatch.h"
#include "ops/param_norms.h"
#include "ops/param_norms_body.h"
#include "ops/param_segments.h"

namespace hpcnn::ops {

void variable_sums(const Tensor& x, const SegmentTable& segs, double* sums) {
  expect_covered("variable_sums", "input", x, segs);
  HPCNN_DISPATCH(x.device(), cpu::variable_sums(segs.data(), segs.size(), segs.variables(), x.f32(), sums),
                 cuda::variable_sums(device_index, segs.data(), segs.size(), segs.variables(), x.f32(), sums));
}

void clip_scales(const Tensor& grads, const SegmentTable& segs, ClipMode mode, double clipnorm, Tensor& scales) {
  expect_covered("clip_scales", "gradients", grads, segs);
  expect_shape("clip_scales", "scales", scales, {static_cast<long long>(segs.variables())});
  same_device("clip_scales", {&grads, &scales});
  HPCNN_CHECK_ARG(clipnorm > 0 && std::isfinite(clipnorm), "clip_scales: the clip norm must be positive, got ",
                  clipnorm);
  const int m = mode == ClipMode::PerVariable ? body::kClipNorm : body::kGlobalClipNorm;
  HPCNN_DISPATCH(grads.device(),
                 cpu::clip_scales(segs.data(), segs.size(), segs.variables(), grads.f32(), m, clipnorm, scales.f32()),
                 cuda::clip_scales(device_index, segs.data(), segs.size(), segs.variables(), grads.f32(), m, clipnorm,
                                   scales.f32()));
}

void weight_penalty(const Tensor& params, Tensor* grads, const SegmentTable& segs, double* penalty) {
  expect_covered("weight_penalty", "parameters", params, segs);
  if (grads) {
    expect_shape("weight_penalty", "gradients", *grads, params.shape());
    same_device("weight_penalty", {&params, grads});
  }
  float* g = data_or_null(grads);
  if (!g && !penalty) return;
  HPCNN_DISPATCH(params.device(),
                 cpu::weight_penalty(segs.data(), segs.size(), segs.variables(), params.f32(), g, penalty),
                 cuda::weight_penalty(device_index, segs.data(), segs.size(), segs.variables(), params.f32(), g,
                                      penalty));
}

}  // namespace hpcnn::ops
