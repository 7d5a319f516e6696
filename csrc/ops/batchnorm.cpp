// Batch normalization's dispatch (ops.h): checks, then batchnorm_cpu.cpp or batchnorm_cuda.cu
// (batchnorm.h).
#include "ops/ops.h"

#include "ops/batchnorm.h"
#include "ops/dispatch.h"

namespace hpcnn::ops {

// The geometry of x (N, ..., C), with the epsilon every entry takes checked too.
static BatchNormGeometry batchnorm_geometry(const char* op, const Tensor& x, float eps) {
  expect_f32(op, "input", x);
  HPCNN_CHECK_ARG(x.rank() >= 2, op, ": input must have a batch and a channel axis, got shape ", shape_str(x.shape()));
  HPCNN_CHECK_ARG(x.numel() > 0, op, ": input ", shape_str(x.shape()), " is empty");
  const int n = as_int(x.dim(0), op), c = as_int(x.dim(-1), op);
  HPCNN_CHECK_ARG(eps > 0, op, ": epsilon must be positive, got ", eps);
  return {n, x.numel() / ((long long)n * c), c};
}

// A backward's output side: y (read only when relu) and dy of x's shape, gamma (c,) or undefined.
static void expect_backward_output(const char* op, const Tensor& x, const Tensor& y, const Tensor& dy,
                                   const Tensor& gamma, int c, bool relu) {
  if (relu) expect_shape(op, "output", y, x.shape());
  expect_shape(op, "output gradient", dy, x.shape());
  expect_channels(op, "gamma", gamma, c, true);
}

static const float* ptr_or_null(const Tensor& t) { return t.defined() ? t.f32() : nullptr; }

void batchnorm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y, float eps,
                                bool relu, Tensor& mean, Tensor& var, Tensor& invstd, const Tensor& residual) {
  const char* op = "batch_norm";
  const BatchNormGeometry g = batchnorm_geometry(op, x, eps);
  expect_channels(op, "gamma", gamma, g.c, true);
  expect_channels(op, "beta", beta, g.c, true);
  expect_shape(op, "output", y, x.shape());
  expect_channels(op, "batch mean", mean, g.c);
  expect_channels(op, "batch variance", var, g.c);
  expect_channels(op, "batch inverse std", invstd, g.c);
  if (residual.defined()) expect_shape(op, "residual", residual, x.shape());
  same_device(op, {&x, &gamma, &beta, &y, &mean, &var, &invstd, &residual});
  const float* res = ptr_or_null(residual);
  HPCNN_DISPATCH(x.device(),
                 cpu::batchnorm_forward_training(g, x.f32(), ptr_or_null(gamma), ptr_or_null(beta), eps, relu, y.f32(),
                                                 mean.f32(), var.f32(), invstd.f32(), res),
                 cuda::batchnorm_forward_training(device_index, g, x.f32(), ptr_or_null(gamma), ptr_or_null(beta), eps,
                                                  relu, y.f32(), mean.f32(), var.f32(), invstd.f32(), res));
}

void batchnorm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& moving_mean,
                                 const Tensor& moving_var, Tensor& y, float eps, bool relu, const Tensor& residual) {
  const char* op = "batch_norm (inference)";
  const BatchNormGeometry g = batchnorm_geometry(op, x, eps);
  expect_channels(op, "gamma", gamma, g.c, true);
  expect_channels(op, "beta", beta, g.c, true);
  expect_channels(op, "moving mean", moving_mean, g.c);
  expect_channels(op, "moving variance", moving_var, g.c);
  expect_shape(op, "output", y, x.shape());
  if (residual.defined()) expect_shape(op, "residual", residual, x.shape());
  same_device(op, {&x, &gamma, &beta, &moving_mean, &moving_var, &y, &residual});
  const float* res = ptr_or_null(residual);
  HPCNN_DISPATCH(x.device(),
                 cpu::batchnorm_forward_inference(g, x.f32(), ptr_or_null(gamma), ptr_or_null(beta), moving_mean.f32(),
                                                  moving_var.f32(), eps, relu, y.f32(), res),
                 cuda::batchnorm_forward_inference(device_index, g, x.f32(), ptr_or_null(gamma), ptr_or_null(beta),
                                                   moving_mean.f32(), moving_var.f32(), eps, relu, y.f32(), res));
}

void batchnorm_backward_training(const Tensor& x, const Tensor& y, Tensor& dy, const Tensor& gamma, const Tensor& mean,
                                 const Tensor& invstd, float eps, bool relu, Tensor* dx, Tensor* dgamma,
                                 Tensor* dbeta) {
  const char* op = "batch_norm backward";
  const BatchNormGeometry g = batchnorm_geometry(op, x, eps);
  expect_backward_output(op, x, y, dy, gamma, g.c, relu);
  expect_channels(op, "batch mean", mean, g.c);
  expect_channels(op, "batch inverse std", invstd, g.c);
  if (dx) expect_shape(op, "input gradient", *dx, x.shape());
  if (dgamma) expect_channels(op, "gamma gradient", *dgamma, g.c);
  if (dbeta) expect_channels(op, "beta gradient", *dbeta, g.c);
  same_device(op, {&x, &y, &dy, &gamma, &mean, &invstd, dx, dgamma, dbeta});
  const float* yp = relu ? y.f32() : nullptr;
  float* dxp = dx ? dx->f32() : nullptr;
  float* dgp = dgamma ? dgamma->f32() : nullptr;
  float* dbp = dbeta ? dbeta->f32() : nullptr;
  HPCNN_DISPATCH(x.device(),
                 cpu::batchnorm_backward_training(g, x.f32(), yp, dy.f32(), ptr_or_null(gamma), mean.f32(),
                                                  invstd.f32(), eps, relu, dxp, dgp, dbp),
                 cuda::batchnorm_backward_training(device_index, g, x.f32(), yp, dy.f32(), ptr_or_null(gamma),
                                                   mean.f32(), invstd.f32(), eps, relu, dxp, dgp, dbp));
}

void batchnorm_backward_inference(const Tensor& y, Tensor& dy, const Tensor& gamma, const Tensor& moving_var, float eps,
                                  bool relu, Tensor* dx) {
  const char* op = "batch_norm backward (inference)";
  const BatchNormGeometry g = batchnorm_geometry(op, dy, eps);
  expect_backward_output(op, dy, y, dy, gamma, g.c, relu);
  expect_channels(op, "moving variance", moving_var, g.c);
  if (dx) expect_shape(op, "input gradient", *dx, dy.shape());
  same_device(op, {&y, &dy, &gamma, &moving_var, dx});
  if (!dx && !relu) return;  // nothing to write: dy is g already
  const float* yp = relu ? y.f32() : nullptr;
  float* dxp = dx ? dx->f32() : nullptr;
  HPCNN_DISPATCH(dy.device(),
                 cpu::batchnorm_backward_inference(g, yp, dy.f32(), ptr_or_null(gamma), moving_var.f32(), eps, relu,
                                                   dxp),
                 cuda::batchnorm_backward_inference(device_index, g, yp, dy.f32(), ptr_or_null(gamma),
                                                    moving_var.f32(), eps, relu, dxp));
}

void batchnorm_inference_param_gradients(const Tensor& x, const Tensor& y, Tensor& dy, const Tensor& moving_mean,
                                         const Tensor& moving_var, float eps, bool relu, Tensor* dgamma, Tensor* dbeta) {
  const char* op = "batch_norm parameter gradients (inference)";
  const BatchNormGeometry g = batchnorm_geometry(op, x, eps);
  expect_backward_output(op, x, y, dy, Tensor(), g.c, relu);
  expect_channels(op, "moving mean", moving_mean, g.c);
  expect_channels(op, "moving variance", moving_var, g.c);
  HPCNN_CHECK_ARG(dgamma || dbeta, op, ": neither a gamma nor a beta gradient asked for");
  if (dgamma) expect_channels(op, "gamma gradient", *dgamma, g.c);
  if (dbeta) expect_channels(op, "beta gradient", *dbeta, g.c);
  same_device(op, {&x, &y, &dy, &moving_mean, &moving_var, dgamma, dbeta});
  const float* yp = relu ? y.f32() : nullptr;
  float* dgp = dgamma ? dgamma->f32() : nullptr;
  float* dbp = dbeta ? dbeta->f32() : nullptr;
  HPCNN_DISPATCH(x.device(),
                 cpu::batchnorm_inference_param_gradients(g, x.f32(), yp, dy.f32(), moving_mean.f32(),
                                                          moving_var.f32(), eps, relu, dgp, dbp),
                 cuda::batchnorm_inference_param_gradients(device_index, g, x.f32(), yp, dy.f32(), moving_mean.f32(),
                                                           moving_var.f32(), eps, relu, dgp, dbp));
}

void batchnorm_update_moving(Tensor& moving_mean, Tensor& moving_var, const Tensor& mean, const Tensor& var,
                             float momentum) {
  const char* op = "batch_norm moving update";
  expect_f32(op, "moving mean", moving_mean);
  HPCNN_CHECK_ARG(moving_mean.rank() == 1, op, ": statistics must be 1-D (channels,), got ",
                  shape_str(moving_mean.shape()));
  const int c = as_int(moving_mean.dim(0), op);
  expect_channels(op, "moving variance", moving_var, c);
  expect_channels(op, "batch mean", mean, c);
  expect_channels(op, "batch variance", var, c);
  HPCNN_CHECK_ARG(momentum >= 0.f && momentum <= 1.f, op, ": momentum must be in [0, 1], got ", momentum);
  same_device(op, {&moving_mean, &moving_var, &mean, &var});
  HPCNN_DISPATCH(moving_mean.device(),
                 cpu::batchnorm_update_moving(c, moving_mean.f32(), moving_var.f32(), mean.f32(), var.f32(), momentum),
                 cuda::batchnorm_update_moving(device_index, c, moving_mean.f32(), moving_var.f32(), mean.f32(),
                                               var.f32(), momentum));
}

}  // namespace hpcnn::ops
