// conv2d's dispatch (ops.h): the input and kernel checked against the kernel layout of their device
// (conv2d_layout.h), then conv2d_cpu.cpp or conv2d_cuda.cu (conv2d.h).
#include "ops/ops.h"

#include "ops/conv2d.h"
#include "ops/conv2d_layout.h"
#include "ops/dispatch.h"

namespace hpcnn::ops {

KernelLayout conv2d_kernel_layout(const Device& d) {
  return d.is_cpu() ? cpu::kConv2dKernelLayout : cuda::kConv2dKernelLayout;
}

Conv2dGeometry conv2d_geometry(const Tensor& x, const Tensor& w, int sh, int sw, Padding pad) {
  expect_f32("conv2d", "input", x);
  expect_f32("conv2d", "kernel", w);
  HPCNN_CHECK_ARG(x.rank() == 4, "conv2d: input must be 4-D (batch, height, width, channels), got shape ",
                  shape_str(x.shape()));
  const KernelLayout layout = conv2d_kernel_layout(w.device());
  HPCNN_CHECK_ARG(w.rank() == 4, "conv2d: kernel must be 4-D, ", kernel_layout_name(layout), " on ",
                  w.device().str(), ", got shape ", shape_str(w.shape()));
  HPCNN_CHECK_ARG(x.dim(0) > 0, "conv2d: batch size is 0 (input shape ", shape_str(x.shape()), ")");
  const KernelDims k = kernel_dims(layout, w.shape());
  HPCNN_CHECK_ARG(k.in == x.dim(3), "conv2d: kernel ", shape_str(w.shape()), " read as ", kernel_layout_name(layout),
                  " (the layout of the ", w.device().is_cpu() ? "CPU" : "CUDA", " backend) expects ", k.in,
                  " input channels, input ", shape_str(x.shape()), " has ", x.dim(3));
  return Conv2dGeometry::make(as_int(x.dim(0), "conv2d"), as_int(x.dim(1), "conv2d"), as_int(x.dim(2), "conv2d"),
                              as_int(x.dim(3), "conv2d"), as_int(k.out, "conv2d"), as_int(k.kh, "conv2d"),
                              as_int(k.kw, "conv2d"), sh, sw, pad);
}

void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y, int sh, int sw, Padding pad,
                    bool relu, const Tensor& residual, float relu_max) {
  same_device("conv2d", {&x, &w, &b, &y, &residual});  // first: the kernel's layout follows its device
  Conv2dGeometry g = conv2d_geometry(x, w, sh, sw, pad);
  if (b.defined()) expect_shape("conv2d", "bias", b, {g.f});
  expect_shape("conv2d", "output", y, {g.n, g.oh, g.ow, g.f});
  if (residual.defined()) {
    expect_f32("conv2d", "residual", residual);
    expect_shape("conv2d", "residual", residual, {g.n, g.oh, g.ow, g.f});
  }
  const float* bp = b.defined() ? b.f32() : nullptr;
  const float* rp = residual.defined() ? residual.f32() : nullptr;
  HPCNN_CHECK_ARG(relu_max > 0, "conv2d: the ReLU's cap must be positive, got ", relu_max);
  HPCNN_DISPATCH(x.device(), cpu::conv2d_forward(g, x.f32(), w.f32(), bp, y.f32(), relu, rp, relu_max),
                 cuda::conv2d_forward(device_index, g, x.f32(), w.f32(), bp, y.f32(), relu, rp, relu_max));
}

void conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& y, Tensor& dy, Tensor* dx, Tensor& dw,
                     Tensor& db, int sh, int sw, Padding pad, bool relu, bool add_to_dx) {
  same_device("conv2d backward", {&x, &w, &y, &dy, dx, &dw, &db});
  Conv2dGeometry g = conv2d_geometry(x, w, sh, sw, pad);
  const KernelBackwardData p = expect_kernel_backward("conv2d backward", x, w, y, dy, dx, dw, db,
                                                      {g.n, g.oh, g.ow, g.f}, relu);
  HPCNN_DISPATCH(x.device(),
                 cpu::conv2d_backward(g, x.f32(), w.f32(), p.y, dy.f32(), p.dx, dw.f32(), p.db, relu, add_to_dx),
                 cuda::conv2d_backward(device_index, g, x.f32(), w.f32(), p.y, dy.f32(), p.dx, dw.f32(), p.db, relu,
                                       add_to_dx));
}

}  // namespace hpcnn::ops
