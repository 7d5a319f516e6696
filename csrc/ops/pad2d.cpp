// zero_pad2d's dispatch (ops.h): checks, then pad2d_cpu.cpp or pad2d_cuda.cu (pad2d.h).
#include "ops/ops.h"

#include "ops/dispatch.h"
#include "ops/pad2d.h"

namespace hpcnn::ops {

static Pad2dGeometry pad2d_geometry(const char* op, const Tensor& x, int top, int bottom, int left, int right) {
  expect_f32(op, "input", x);
  HPCNN_CHECK_ARG(x.rank() == 4, op, ": input must be 4-D (batch, height, width, channels), got shape ",
                  shape_str(x.shape()));
  HPCNN_CHECK_ARG(top >= 0 && bottom >= 0 && left >= 0 && right >= 0, op, ": padding must be >= 0, got ((", top,
                  ", ", bottom, "), (", left, ", ", right, "))");
  Pad2dGeometry g{as_int(x.dim(0), op), as_int(x.dim(1), op), as_int(x.dim(2), op), as_int(x.dim(3), op),
                  top, bottom, left, right};
  as_int((long long)g.h + top + bottom, op);
  as_int((long long)g.w + left + right, op);
  return g;
}

void zero_pad2d_forward(const Tensor& x, Tensor& y, int top, int bottom, int left, int right) {
  const Pad2dGeometry g = pad2d_geometry("zero_pad2d", x, top, bottom, left, right);
  expect_shape("zero_pad2d", "output", y, {g.n, g.oh(), g.ow(), g.c});
  same_device("zero_pad2d", {&x, &y});
  if (x.numel() == 0) return;
  HPCNN_DISPATCH(x.device(), cpu::pad2d_forward(g, x.f32(), y.f32()),
                 cuda::pad2d_forward(device_index, g, x.f32(), y.f32()));
}

void zero_pad2d_backward(const Tensor& dy, Tensor& dx, int top, int bottom, int left, int right) {
  const Pad2dGeometry g = pad2d_geometry("zero_pad2d backward", dx, top, bottom, left, right);
  expect_shape("zero_pad2d backward", "output gradient", dy, {g.n, g.oh(), g.ow(), g.c});
  same_device("zero_pad2d backward", {&dy, &dx});
  if (dx.numel() == 0) return;
  HPCNN_DISPATCH(dx.device(), cpu::pad2d_backward(g, dy.f32(), dx.f32()),
                 cuda::pad2d_backward(device_index, g, dy.f32(), dx.f32()));
}

}  // namespace hpcnn::ops
