// scale_shift's dispatch (ops.h): checks, then scale_shift_cpu.cpp or scale_shift_cuda.cu
// (scale_shift.h).
#include "ops/ops.h"

#include "ops/dispatch.h"
#include "ops/scale_shift.h"

namespace hpcnn::ops {

void scale_shift_forward(const Tensor& x, const Tensor& scale, const Tensor& offset, Tensor& y) {
  const char* op = "scale_shift";
  expect_f32(op, "input", x);
  HPCNN_CHECK_ARG(x.rank() >= 1 && x.dim(-1) > 0, op, ": input ", shape_str(x.shape()), " has no channel axis");
  const int c = as_int(x.dim(-1), op);
  expect_channels(op, "scale", scale, c);
  expect_channels(op, "offset", offset, c);
  expect_shape(op, "output", y, x.shape());
  same_device(op, {&x, &scale, &offset, &y});
  HPCNN_DISPATCH(x.device(), cpu::scale_shift_forward(x.numel() / c, c, x.f32(), scale.f32(), offset.f32(), y.f32()),
                 cuda::scale_shift_forward(device_index, x.numel() / c, c, x.f32(), scale.f32(), offset.f32(),
                                           y.f32()));
}

void scale_shift_backward(const Tensor& dy, const Tensor& scale, Tensor& dx) {
  const char* op = "scale_shift backward";
  expect_f32(op, "output gradient", dy);
  HPCNN_CHECK_ARG(dy.rank() >= 1 && dy.dim(-1) > 0, op, ": gradient ", shape_str(dy.shape()), " has no channel axis");
  const int c = as_int(dy.dim(-1), op);
  expect_channels(op, "scale", scale, c);
  expect_shape(op, "input gradient", dx, dy.shape());
  same_device(op, {&dy, &scale, &dx});
  HPCNN_DISPATCH(dy.device(), cpu::scale_shift_backward(dy.numel() / c, c, dy.f32(), scale.f32(), dx.f32()),
                 cuda::scale_shift_backward(device_index, dy.numel() / c, c, dy.f32(), scale.f32(), dx.f32()));
}

void normalization_constants(const Tensor& mean, const Tensor& var, float eps, Tensor& scale, Tensor& offset) {
  const char* op = "normalization_constants";
  expect_f32(op, "mean", mean);
  HPCNN_CHECK_ARG(mean.rank() == 1, op, ": mean must be 1-D, got ", shape_str(mean.shape()));
  const int c = as_int(mean.dim(0), op);
  expect_channels(op, "variance", var, c);
  expect_channels(op, "scale", scale, c);
  expect_channels(op, "offset", offset, c);
  same_device(op, {&mean, &var, &scale, &offset});
  HPCNN_DISPATCH(mean.device(), cpu::normalization_constants(c, mean.f32(), var.f32(), eps, scale.f32(), offset.f32()),
                 cuda::normalization_constants(device_index, c, mean.f32(), var.f32(), eps, scale.f32(),
                                               offset.f32()));
}

}  // namespace hpcnn::ops
