// The global pools' dispatch (ops.h): checks, then global_pool2d_cpu.cpp or global_pool2d_cuda.cu
// (global_pool2d.h).
#include "ops/ops.h"

#include "ops/dispatch.h"
#include "ops/global_pool2d.h"

namespace hpcnn::ops {

static GlobalPoolGeometry global_pool_geometry(const char* op, const Tensor& x) {
  expect_f32(op, "input", x);
  HPCNN_CHECK_ARG(x.rank() == 4, op, ": input must be 4-D (batch, height, width, channels), got shape ",
                  shape_str(x.shape()));
  HPCNN_CHECK_ARG(x.numel() > 0, op, ": input ", shape_str(x.shape()), " is empty");
  return {as_int(x.dim(0), op), x.dim(1) * x.dim(2), as_int(x.dim(3), op)};
}

// The pooled output: (n, c), or (n, 1, 1, c) (keepdims; the same memory).
static void expect_pooled(const char* op, const char* name, const Tensor& y, const GlobalPoolGeometry& g) {
  expect_f32(op, name, y);
  const bool flat = y.shape() == Shape{g.n, g.c};
  const bool kept = y.shape() == Shape{g.n, 1, 1, g.c};
  HPCNN_CHECK_ARG(flat || kept, op, ": ", name, " has shape ", shape_str(y.shape()), ", expected (", g.n, ", ", g.c,
                  ") or (", g.n, ", 1, 1, ", g.c, ")");
}

// A forward's input x and pooled output y, on one device.
static GlobalPoolGeometry global_pool_forward_geometry(const char* op, const Tensor& x, const Tensor& y) {
  const GlobalPoolGeometry g = global_pool_geometry(op, x);
  expect_pooled(op, "output", y, g);
  same_device(op, {&x, &y});
  return g;
}

void global_avgpool2d_forward(const Tensor& x, Tensor& y) {
  const GlobalPoolGeometry g = global_pool_forward_geometry("global_avg_pool2d", x, y);
  HPCNN_DISPATCH(x.device(), cpu::global_avgpool_forward(g, x.f32(), y.f32()),
                 cuda::global_avgpool_forward(device_index, g, x.f32(), y.f32()));
}

void global_avgpool2d_backward(const Tensor& dy, Tensor& dx) {
  const GlobalPoolGeometry g = global_pool_geometry("global_avg_pool2d backward", dx);
  expect_pooled("global_avg_pool2d backward", "output gradient", dy, g);
  same_device("global_avg_pool2d backward", {&dy, &dx});
  HPCNN_DISPATCH(dx.device(), cpu::global_avgpool_backward(g, dy.f32(), dx.f32()),
                 cuda::global_avgpool_backward(device_index, g, dy.f32(), dx.f32()));
}

void global_maxpool2d_forward(const Tensor& x, Tensor& y) {
  const GlobalPoolGeometry g = global_pool_forward_geometry("global_max_pool2d", x, y);
  HPCNN_DISPATCH(x.device(), cpu::global_maxpool_forward(g, x.f32(), y.f32()),
                 cuda::global_maxpool_forward(device_index, g, x.f32(), y.f32()));
}

void global_maxpool2d_backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dx) {
  const GlobalPoolGeometry g = global_pool_geometry("global_max_pool2d backward", x);
  expect_pooled("global_max_pool2d backward", "output", y, g);
  expect_pooled("global_max_pool2d backward", "output gradient", dy, g);
  expect_shape("global_max_pool2d backward", "input gradient", dx, x.shape());
  same_device("global_max_pool2d backward", {&x, &y, &dy, &dx});
  HPCNN_DISPATCH(x.device(), cpu::global_maxpool_backward(g, x.f32(), y.f32(), dy.f32(), dx.f32()),
                 cuda::global_maxpool_backward(device_index, g, x.f32(), y.f32(), dy.f32(), dx.f32()));
}

}  // namespace hpcnn::ops
