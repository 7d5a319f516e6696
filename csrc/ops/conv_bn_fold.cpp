// conv_bn_fold's dispatch (ops.h): checks, then conv_bn_fold_cpu.cpp or conv_bn_fold_cuda.cu
// (conv_bn_fold.h).
#include "ops/ops.h"

#include "ops/conv_bn_fold.h"
#include "ops/dispatch.h"

namespace hpcnn::ops {

static const float* ptr_or_null(const Tensor& t) { return t.defined() ? t.f32() : nullptr; }

void conv_bn_fold(const Tensor& w, const Tensor& b, const Tensor& gamma, const Tensor& beta, const Tensor& moving_mean,
                  const Tensor& moving_var, float eps, Tensor& w_out, Tensor& b_out,
                  std::optional<KernelLayout> kernel_layout) {
  const char* op = "conv_bn_fold";
  expect_f32(op, "kernel", w);
  const KernelLayout layout = kernel_layout ? *kernel_layout : conv2d_kernel_layout(w.device());
  HPCNN_CHECK_ARG(w.rank() == 4, op, ": kernel must be 4-D, ", kernel_layout_name(layout), ", got shape ",
                  shape_str(w.shape()));
  const int f = as_int(kernel_dims(layout, w.shape()).out, op);
  HPCNN_CHECK_ARG(eps > 0, op, ": epsilon must be positive, got ", eps);
  expect_channels(op, "bias", b, f, true);
  expect_channels(op, "gamma", gamma, f, true);
  expect_channels(op, "beta", beta, f, true);
  expect_channels(op, "moving mean", moving_mean, f);
  expect_channels(op, "moving variance", moving_var, f);
  expect_shape(op, "folded kernel", w_out, w.shape());
  expect_channels(op, "folded bias", b_out, f);
  same_device(op, {&w, &b, &gamma, &beta, &moving_mean, &moving_var, &w_out, &b_out});
  const ConvBnFoldGeometry g{w.numel(), f, layout};
  HPCNN_DISPATCH(w.device(),
                 cpu::conv_bn_fold(g, w.f32(), ptr_or_null(b), ptr_or_null(gamma), ptr_or_null(beta),
                                   moving_mean.f32(), moving_var.f32(), eps, w_out.f32(), b_out.f32()),
                 cuda::conv_bn_fold(device_index, g, w.f32(), ptr_or_null(b), ptr_or_null(gamma), ptr_or_null(beta),
                                    moving_mean.f32(), moving_var.f32(), eps, w_out.f32(), b_out.f32()));
}

}  // namespace hpcnn::ops
