// relu_clip's dispatch (ops.h): checks, then relu_clip_cpu.cpp or relu_clip_cuda.cu (relu_clip.h).
#include "ops/ops.h"

#include <cmath>

#include "ops/dispatch.h"
#include "ops/relu_clip.h"

namespace hpcnn::ops {

namespace {
void check_params(const ReluClipParams& p) {
  HPCNN_CHECK_ARG(std::isfinite(p.negative_slope) && p.negative_slope >= 0.f,
                  "ReLU: negative_slope must be a finite number >= 0, got ", p.negative_slope);
  HPCNN_CHECK_ARG(std::isfinite(p.threshold), "ReLU: threshold must be finite, got ", p.threshold);
  HPCNN_CHECK_ARG(!p.has_max || (std::isfinite(p.max_value) && p.max_value >= 0.f),
                  "ReLU: max_value must be a finite number >= 0, got ", p.max_value);
}
}  // namespace

void relu_clip_forward(const ReluClipParams& p, const Tensor& x, Tensor& y) {
  check_params(p);
  expect_f32("relu", "input", x);
  expect_shape("relu", "output", y, x.shape());
  same_device("relu", {&x, &y});
  HPCNN_DISPATCH(x.device(), cpu::relu_clip_forward(p, x.numel(), x.f32(), y.f32()),
                 cuda::relu_clip_forward(device_index, p, x.numel(), x.f32(), y.f32()));
}

void relu_clip_backward(const ReluClipParams& p, const Tensor& x, const Tensor& dy, Tensor& dx) {
  check_params(p);
  expect_f32("relu backward", "input", x);
  expect_shape("relu backward", "output gradient", dy, x.shape());
  expect_shape("relu backward", "input gradient", dx, x.shape());
  same_device("relu backward", {&x, &dy, &dx});
  HPCNN_DISPATCH(x.device(), cpu::relu_clip_backward(p, x.numel(), x.f32(), dy.f32(), dx.f32()),
                 cuda::relu_clip_backward(device_index, p, x.numel(), x.f32(), dy.f32(), dx.f32()));
}

}  // namespace hpcnn::ops
