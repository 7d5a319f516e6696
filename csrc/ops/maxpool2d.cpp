// max_pool2d's dispatch (ops.h): checks, then maxpool2d_cpu.cpp or maxpool2d_cuda.cu (maxpool2d.h).
#include "ops/ops.h"

#include "ops/dispatch.h"
#include "ops/maxpool2d.h"
#include "ops/pool2d.h"

namespace hpcnn::ops {

void maxpool2d_forward(const Tensor& x, Tensor& y, int ph, int pw, int sh, int sw, Padding pad) {
  const Pool2dGeometry g = pool2d_forward_geometry("max_pool2d", x, y, ph, pw, sh, sw, pad);
  HPCNN_DISPATCH(x.device(), cpu::maxpool2d_forward(g, x.f32(), y.f32()),
                 cuda::maxpool2d_forward(device_index, g, x.f32(), y.f32()));
}

void maxpool2d_backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dx, int ph, int pw, int sh,
                        int sw, Padding pad) {
  Pool2dGeometry g = maxpool2d_geometry(x, ph, pw, sh, sw, pad);
  expect_shape("max_pool2d backward", "output", y, {g.n, g.oh, g.ow, g.c});
  expect_shape("max_pool2d backward", "output gradient", dy, {g.n, g.oh, g.ow, g.c});
  expect_shape("max_pool2d backward", "input gradient", dx, x.shape());
  same_device("max_pool2d backward", {&x, &y, &dy, &dx});
  HPCNN_DISPATCH(x.device(), cpu::maxpool2d_backward(g, x.f32(), y.f32(), dy.f32(), dx.f32()),
                 cuda::maxpool2d_backward(device_index, g, x.f32(), y.f32(), dy.f32(), dx.f32()));
}

}  // namespace hpcnn::ops
