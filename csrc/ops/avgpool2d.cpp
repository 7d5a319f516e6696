// avg_pool2d's dispatch (ops.h): checks, then avgpool2d_cpu.cpp or avgpool2d_cuda.cu (avgpool2d.h).
#include "ops/ops.h"

#include "ops/avgpool2d.h"
#include "ops/dispatch.h"
#include "ops/pool2d.h"

namespace hpcnn::ops {

void avgpool2d_forward(const Tensor& x, Tensor& y, int ph, int pw, int sh, int sw, Padding pad) {
  const Pool2dGeometry g = pool2d_forward_geometry("avg_pool2d", x, y, ph, pw, sh, sw, pad);
  HPCNN_DISPATCH(x.device(), cpu::avgpool2d_forward(g, x.f32(), y.f32()),
                 cuda::avgpool2d_forward(device_index, g, x.f32(), y.f32()));
}

void avgpool2d_backward(const Tensor& dy, Tensor& dx, int ph, int pw, int sh, int sw, Padding pad) {
  expect_f32("avg_pool2d backward", "input gradient", dx);
  Pool2dGeometry g = avgpool2d_geometry(dx, ph, pw, sh, sw, pad);
  expect_shape("avg_pool2d backward", "output gradient", dy, {g.n, g.oh, g.ow, g.c});
  same_device("avg_pool2d backward", {&dy, &dx});
  HPCNN_DISPATCH(dx.device(), cpu::avgpool2d_backward(g, dy.f32(), dx.f32()),
                 cuda::avgpool2d_backward(device_index, g, dy.f32(), dx.f32()));
}

}  // namespace hpcnn::ops
