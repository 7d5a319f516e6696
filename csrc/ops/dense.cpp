// dense's dispatch (ops.h): checks, then dense_cpu.cpp or dense_cuda.cu (dense.h).
#include "ops/ops.h"

#include "ops/dense.h"
#include "ops/dispatch.h"

namespace hpcnn::ops {

static DenseGeometry dense_geometry(const Tensor& x, const Tensor& w) {
  expect_f32("dense", "input", x);
  expect_f32("dense", "kernel", w);
  HPCNN_CHECK_ARG(x.rank() == 2, "dense: input must be 2-D (batch, features), got shape ", shape_str(x.shape()));
  HPCNN_CHECK_ARG(w.rank() == 2, "dense: kernel must be 2-D (in, out), got shape ", shape_str(w.shape()));
  HPCNN_CHECK_ARG(x.dim(0) > 0, "dense: batch size is 0 (input shape ", shape_str(x.shape()), ")");
  HPCNN_CHECK_ARG(w.dim(0) == x.dim(1), "dense: kernel ", shape_str(w.shape()), " expects ", w.dim(0),
                  " input features, input ", shape_str(x.shape()), " has ", x.dim(1));
  return {as_int(x.dim(0), "dense"), as_int(x.dim(1), "dense"), as_int(w.dim(1), "dense")};
}

void dense_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y, bool relu) {
  DenseGeometry g = dense_geometry(x, w);
  if (b.defined()) expect_shape("dense", "bias", b, {g.out});
  expect_shape("dense", "output", y, {g.n, g.out});
  same_device("dense", {&x, &w, &b, &y});
  const float* bp = b.defined() ? b.f32() : nullptr;
  HPCNN_DISPATCH(x.device(), cpu::dense_forward(g, x.f32(), w.f32(), bp, y.f32(), relu),
                 cuda::dense_forward(device_index, g, x.f32(), w.f32(), bp, y.f32(), relu));
}

void dense_backward(const Tensor& x, const Tensor& w, const Tensor& y, Tensor& dy, Tensor* dx, Tensor& dw,
                    Tensor& db, bool relu) {
  DenseGeometry g = dense_geometry(x, w);
  const KernelBackwardData p = expect_kernel_backward("dense backward", x, w, y, dy, dx, dw, db, {g.n, g.out}, relu);
  same_device("dense backward", {&x, &w, &y, &dy, dx, &dw, &db});
  HPCNN_DISPATCH(x.device(), cpu::dense_backward(g, x.f32(), w.f32(), p.y, dy.f32(), p.dx, dw.f32(), p.db, relu),
                 cuda::dense_backward(device_index, g, x.f32(), w.f32(), p.y, dy.f32(), p.dx, dw.f32(), p.db, relu));
}

}  // namespace hpcnn::ops
