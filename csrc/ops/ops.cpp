// Dispatch: validate, then call the backend of the tensors' device.
#include "ops/ops.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/cuda_runtime.h"
#include "ops/activation.h"
#include "ops/add.h"
#include "ops/avgpool2d.h"
#include "ops/concat.h"
#include "ops/decode.h"
#include "ops/dropout.h"
#include "ops/finite_check.h"
#include "ops/loss_metrics.h"
#include "ops/param_norms.h"
#include "ops/param_norms_body.h"
#include "ops/scale_shift.h"
#include "ops/softmax_xent.h"

namespace hpcnn::ops {

#ifdef HPCNN_WITH_CUDA
#define HPCNN_DISPATCH(dev, cpu_call, cuda_call) \
  do {                                           \
    if ((dev).is_cpu()) {                        \
      cpu_call;                                  \
    } else {                                     \
      const int device_index = (dev).index;      \
      (void)device_index;                        \
      cuda_call;                                 \
    }                                            \
  } while (0)
#else
#define HPCNN_DISPATCH(dev, cpu_call, cuda_call)                                          \
  do {                                                                                    \
    if ((dev).is_cpu()) {                                                                 \
      cpu_call;                                                                           \
    } else {                                                                              \
      throw BackendError("no usable GPU: " + ::hpcnn::cuda::unavailable_reason());       \
    }                                                                                     \
  } while (0)
#endif

namespace {

void expect_f32(const char* op, const char* name, const Tensor& t) {
  HPCNN_CHECK_ARG(t.defined(), op, ": ", name, " is missing");
  HPCNN_CHECK_ARG(t.dtype() == DType::F32, op, ": ", name, " must be float32, got ", t.str());
}

void expect_shape(const char* op, const char* name, const Tensor& t, const Shape& want) {
  expect_f32(op, name, t);
  HPCNN_CHECK_ARG(t.shape() == want, op, ": ", name, " has shape ", shape_str(t.shape()), ", expected ",
                  shape_str(want));
}

void same_device(const char* op, std::initializer_list<const Tensor*> ts) {
  const Tensor* first = nullptr;
  for (const Tensor* t : ts) {
    if (!t || !t->defined()) continue;
    if (!first) first = t;
    HPCNN_CHECK_ARG(t->device() == first->device(), op, ": tensors on different devices (", first->device().str(),
                    " and ", t->device().str(), ")");
  }
}

int as_int(long long v, const char* op) {
  HPCNN_CHECK_ARG(v >= 0 && v < (1LL << 31), op, ": dimension ", v, " is out of range");
  return static_cast<int>(v);
}

}  // namespace

// ------------------------------------------------------------------ conv2d
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
                    bool relu) {
  same_device("conv2d", {&x, &w, &b, &y});  // first: the kernel's layout follows its device
  Conv2dGeometry g = conv2d_geometry(x, w, sh, sw, pad);
  if (b.defined()) expect_shape("conv2d", "bias", b, {g.f});
  expect_shape("conv2d", "output", y, {g.n, g.oh, g.ow, g.f});
  const float* bp = b.defined() ? b.f32() : nullptr;
  HPCNN_DISPATCH(x.device(), cpu::conv2d_forward(g, x.f32(), w.f32(), bp, y.f32(), relu),
                 cuda::conv2d_forward(device_index, g, x.f32(), w.f32(), bp, y.f32(), relu));
}

void conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& y, Tensor& dy, Tensor* dx, Tensor& dw,
                     Tensor& db, int sh, int sw, Padding pad, bool relu) {
  same_device("conv2d backward", {&x, &w, &y, &dy, dx, &dw, &db});
  Conv2dGeometry g = conv2d_geometry(x, w, sh, sw, pad);
  expect_shape("conv2d backward", "output gradient", dy, {g.n, g.oh, g.ow, g.f});
  if (relu) expect_shape("conv2d backward", "output", y, {g.n, g.oh, g.ow, g.f});
  if (dx) expect_shape("conv2d backward", "input gradient", *dx, x.shape());
  expect_shape("conv2d backward", "kernel gradient", dw, w.shape());  // the kernel's layout
  if (db.defined()) expect_shape("conv2d backward", "bias gradient", db, {g.f});
  const float* yp = relu ? y.f32() : nullptr;
  float* dxp = dx ? dx->f32() : nullptr;
  float* dbp = db.defined() ? db.f32() : nullptr;
  HPCNN_DISPATCH(x.device(), cpu::conv2d_backward(g, x.f32(), w.f32(), yp, dy.f32(), dxp, dw.f32(), dbp, relu),
                 cuda::conv2d_backward(device_index, g, x.f32(), w.f32(), yp, dy.f32(), dxp, dw.f32(), dbp, relu));
}

// ------------------------------------------------------------------ max-pool
// The geometry of a window pool (op: "max_pool2d" or "avg_pool2d") over input x.
static Pool2dGeometry pool2d_geometry(const char* op, const Tensor& x, int ph, int pw, int sh, int sw, Padding pad) {
  expect_f32(op, "input", x);
  HPCNN_CHECK_ARG(x.rank() == 4, op, ": input must be 4-D (batch, height, width, channels), got shape ",
                  shape_str(x.shape()));
  HPCNN_CHECK_ARG(x.dim(0) > 0, op, ": batch size is 0 (input shape ", shape_str(x.shape()), ")");
  return Pool2dGeometry::make(as_int(x.dim(0), op), as_int(x.dim(1), op), as_int(x.dim(2), op), as_int(x.dim(3), op),
                              ph, pw, sh, sw, pad, op);
}

Pool2dGeometry maxpool2d_geometry(const Tensor& x, int ph, int pw, int sh, int sw, Padding pad) {
  return pool2d_geometry("max_pool2d", x, ph, pw, sh, sw, pad);
}

void maxpool2d_forward(const Tensor& x, Tensor& y, int ph, int pw, int sh, int sw, Padding pad) {
  Pool2dGeometry g = maxpool2d_geometry(x, ph, pw, sh, sw, pad);
  expect_shape("max_pool2d", "output", y, {g.n, g.oh, g.ow, g.c});
  same_device("max_pool2d", {&x, &y});
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

// ------------------------------------------------------------------ average pooling
Pool2dGeometry avgpool2d_geometry(const Tensor& x, int ph, int pw, int sh, int sw, Padding pad) {
  return pool2d_geometry("avg_pool2d", x, ph, pw, sh, sw, pad);
}

void avgpool2d_forward(const Tensor& x, Tensor& y, int ph, int pw, int sh, int sw, Padding pad) {
  Pool2dGeometry g = avgpool2d_geometry(x, ph, pw, sh, sw, pad);
  expect_shape("avg_pool2d", "output", y, {g.n, g.oh, g.ow, g.c});
  same_device("avg_pool2d", {&x, &y});
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

// ------------------------------------------------------------------ global pooling
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

void global_avgpool2d_forward(const Tensor& x, Tensor& y) {
  const GlobalPoolGeometry g = global_pool_geometry("global_avg_pool2d", x);
  expect_pooled("global_avg_pool2d", "output", y, g);
  same_device("global_avg_pool2d", {&x, &y});
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
  const GlobalPoolGeometry g = global_pool_geometry("global_max_pool2d", x);
  expect_pooled("global_max_pool2d", "output", y, g);
  same_device("global_max_pool2d", {&x, &y});
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

// ------------------------------------------------------------------ zero padding
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

// ------------------------------------------------------------------ batch normalization
static BatchNormGeometry batchnorm_geometry(const char* op, const Tensor& x) {
  expect_f32(op, "input", x);
  HPCNN_CHECK_ARG(x.rank() >= 2, op, ": input must have a batch and a channel axis, got shape ", shape_str(x.shape()));
  HPCNN_CHECK_ARG(x.numel() > 0, op, ": input ", shape_str(x.shape()), " is empty");
  const int n = as_int(x.dim(0), op), c = as_int(x.dim(-1), op);
  return {n, x.numel() / ((long long)n * c), c};
}

static void expect_channels(const char* op, const char* name, const Tensor& t, int c, bool optional = false) {
  if (optional && !t.defined()) return;
  expect_shape(op, name, t, {c});
}

static const float* ptr_or_null(const Tensor& t) { return t.defined() ? t.f32() : nullptr; }

void batchnorm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y, float eps,
                                bool relu, Tensor& mean, Tensor& var, Tensor& invstd) {
  const char* op = "batch_norm";
  const BatchNormGeometry g = batchnorm_geometry(op, x);
  HPCNN_CHECK_ARG(eps > 0, op, ": epsilon must be positive, got ", eps);
  expect_channels(op, "gamma", gamma, g.c, true);
  expect_channels(op, "beta", beta, g.c, true);
  expect_shape(op, "output", y, x.shape());
  expect_channels(op, "batch mean", mean, g.c);
  expect_channels(op, "batch variance", var, g.c);
  expect_channels(op, "batch inverse std", invstd, g.c);
  same_device(op, {&x, &gamma, &beta, &y, &mean, &var, &invstd});
  HPCNN_DISPATCH(x.device(),
                 cpu::batchnorm_forward_training(g, x.f32(), ptr_or_null(gamma), ptr_or_null(beta), eps, relu, y.f32(),
                                                 mean.f32(), var.f32(), invstd.f32()),
                 cuda::batchnorm_forward_training(device_index, g, x.f32(), ptr_or_null(gamma), ptr_or_null(beta), eps,
                                                  relu, y.f32(), mean.f32(), var.f32(), invstd.f32()));
}

void batchnorm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& moving_mean,
                                 const Tensor& moving_var, Tensor& y, float eps, bool relu) {
  const char* op = "batch_norm (inference)";
  const BatchNormGeometry g = batchnorm_geometry(op, x);
  HPCNN_CHECK_ARG(eps > 0, op, ": epsilon must be positive, got ", eps);
  expect_channels(op, "gamma", gamma, g.c, true);
  expect_channels(op, "beta", beta, g.c, true);
  expect_channels(op, "moving mean", moving_mean, g.c);
  expect_channels(op, "moving variance", moving_var, g.c);
  expect_shape(op, "output", y, x.shape());
  same_device(op, {&x, &gamma, &beta, &moving_mean, &moving_var, &y});
  HPCNN_DISPATCH(x.device(),
                 cpu::batchnorm_forward_inference(g, x.f32(), ptr_or_null(gamma), ptr_or_null(beta), moving_mean.f32(),
                                                  moving_var.f32(), eps, relu, y.f32()),
                 cuda::batchnorm_forward_inference(device_index, g, x.f32(), ptr_or_null(gamma), ptr_or_null(beta),
                                                   moving_mean.f32(), moving_var.f32(), eps, relu, y.f32()));
}

void batchnorm_backward_training(const Tensor& x, const Tensor& y, Tensor& dy, const Tensor& gamma, const Tensor& mean,
                                 const Tensor& invstd, float eps, bool relu, Tensor* dx, Tensor* dgamma,
                                 Tensor* dbeta) {
  const char* op = "batch_norm backward";
  const BatchNormGeometry g = batchnorm_geometry(op, x);
  HPCNN_CHECK_ARG(eps > 0, op, ": epsilon must be positive, got ", eps);
  if (relu) expect_shape(op, "output", y, x.shape());
  expect_shape(op, "output gradient", dy, x.shape());
  expect_channels(op, "gamma", gamma, g.c, true);
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
                                  bool relu, Tensor& dx) {
  const char* op = "batch_norm backward (inference)";
  const BatchNormGeometry g = batchnorm_geometry(op, dx);
  HPCNN_CHECK_ARG(eps > 0, op, ": epsilon must be positive, got ", eps);
  if (relu) expect_shape(op, "output", y, dx.shape());
  expect_shape(op, "output gradient", dy, dx.shape());
  expect_channels(op, "gamma", gamma, g.c, true);
  expect_channels(op, "moving variance", moving_var, g.c);
  same_device(op, {&y, &dy, &gamma, &moving_var, &dx});
  const float* yp = relu ? y.f32() : nullptr;
  HPCNN_DISPATCH(dx.device(),
                 cpu::batchnorm_backward_inference(g, yp, dy.f32(), ptr_or_null(gamma), moving_var.f32(), eps, relu,
                                                   dx.f32()),
                 cuda::batchnorm_backward_inference(device_index, g, yp, dy.f32(), ptr_or_null(gamma),
                                                    moving_var.f32(), eps, relu, dx.f32()));
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

// ------------------------------------------------------------------ per-channel scale and shift
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

// ------------------------------------------------------------------ dense
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
  expect_shape("dense backward", "output gradient", dy, {g.n, g.out});
  if (relu) expect_shape("dense backward", "output", y, {g.n, g.out});
  if (dx) expect_shape("dense backward", "input gradient", *dx, x.shape());
  expect_shape("dense backward", "kernel gradient", dw, w.shape());
  if (db.defined()) expect_shape("dense backward", "bias gradient", db, {g.out});
  same_device("dense backward", {&x, &w, &y, &dy, dx, &dw, &db});
  const float* yp = relu ? y.f32() : nullptr;
  float* dxp = dx ? dx->f32() : nullptr;
  float* dbp = db.defined() ? db.f32() : nullptr;
  HPCNN_DISPATCH(x.device(), cpu::dense_backward(g, x.f32(), w.f32(), yp, dy.f32(), dxp, dw.f32(), dbp, relu),
                 cuda::dense_backward(device_index, g, x.f32(), w.f32(), yp, dy.f32(), dxp, dw.f32(), dbp, relu));
}

// ------------------------------------------------------------------ activations
void relu_forward(const Tensor& x, Tensor& y) {
  expect_f32("relu", "input", x);
  expect_shape("relu", "output", y, x.shape());
  same_device("relu", {&x, &y});
  HPCNN_DISPATCH(x.device(), cpu::relu_forward(x.numel(), x.f32(), y.f32()),
                 cuda::relu_forward(device_index, x.numel(), x.f32(), y.f32()));
}

void relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  expect_f32("relu backward", "output", y);
  expect_shape("relu backward", "output gradient", dy, y.shape());
  expect_shape("relu backward", "input gradient", dx, y.shape());
  same_device("relu backward", {&y, &dy, &dx});
  HPCNN_DISPATCH(y.device(), cpu::relu_backward(y.numel(), y.f32(), dy.f32(), dx.f32()),
                 cuda::relu_backward(device_index, y.numel(), y.f32(), dy.f32(), dx.f32()));
}

static void rows_cols(const char* op, const Tensor& x, int& rows, int& cols) {
  expect_f32(op, "input", x);
  HPCNN_CHECK_ARG(x.rank() >= 1 && x.dim(-1) > 0, op, ": input ", shape_str(x.shape()), " has no last axis");
  cols = as_int(x.dim(-1), op);
  rows = as_int(x.numel() / cols, op);
}

void softmax_forward(const Tensor& x, Tensor& y) {
  int rows, cols;
  rows_cols("softmax", x, rows, cols);
  expect_shape("softmax", "output", y, x.shape());
  same_device("softmax", {&x, &y});
  HPCNN_DISPATCH(x.device(), cpu::softmax_forward(rows, cols, x.f32(), y.f32()),
                 cuda::softmax_forward(device_index, rows, cols, x.f32(), y.f32()));
}

void softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  int rows, cols;
  rows_cols("softmax backward", y, rows, cols);
  expect_shape("softmax backward", "output gradient", dy, y.shape());
  expect_shape("softmax backward", "input gradient", dx, y.shape());
  same_device("softmax backward", {&y, &dy, &dx});
  HPCNN_DISPATCH(y.device(), cpu::softmax_backward(rows, cols, y.f32(), dy.f32(), dx.f32()),
                 cuda::softmax_backward(device_index, rows, cols, y.f32(), dy.f32(), dx.f32()));
}

void activation_forward(Act a, float alpha, const Tensor& x, Tensor& y) {
  const std::string op = std::string(act_name(a));
  expect_f32(op.c_str(), "input", x);
  expect_shape(op.c_str(), "output", y, x.shape());
  same_device(op.c_str(), {&x, &y});
  HPCNN_DISPATCH(x.device(), cpu::act_forward(a, alpha, x.numel(), x.f32(), y.f32()),
                 cuda::act_forward(device_index, a, alpha, x.numel(), x.f32(), y.f32()));
}

void activation_backward(Act a, float alpha, const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dx) {
  const std::string op = std::string(act_name(a)) + " backward";
  expect_f32(op.c_str(), "input", x);
  expect_shape(op.c_str(), "output", y, x.shape());
  expect_shape(op.c_str(), "output gradient", dy, x.shape());
  expect_shape(op.c_str(), "input gradient", dx, x.shape());
  same_device(op.c_str(), {&x, &y, &dy, &dx});
  HPCNN_DISPATCH(x.device(), cpu::act_backward(a, alpha, x.numel(), x.f32(), y.f32(), dy.f32(), dx.f32()),
                 cuda::act_backward(device_index, a, alpha, x.numel(), x.f32(), y.f32(), dy.f32(), dx.f32()));
}

// ------------------------------------------------------------------ dropout
static void check_rate(float rate) {
  HPCNN_CHECK_ARG(rate >= 0.f && rate < 1.f, "dropout: rate must be in [0, 1), got ", rate);
}

void dropout_forward(const Tensor& x, Tensor& y, float rate, uint64_t seed, uint64_t stream, uint64_t offset) {
  check_rate(rate);
  expect_f32("dropout", "input", x);
  expect_shape("dropout", "output", y, x.shape());
  same_device("dropout", {&x, &y});
  HPCNN_DISPATCH(x.device(), cpu::dropout_forward(x.numel(), x.f32(), y.f32(), rate, seed, stream, offset),
                 cuda::dropout_forward(device_index, x.numel(), x.f32(), y.f32(), rate, seed, stream, offset));
}

void dropout_backward(const Tensor& dy, Tensor& dx, float rate, uint64_t seed, uint64_t stream, uint64_t offset) {
  check_rate(rate);
  expect_f32("dropout backward", "output gradient", dy);
  expect_shape("dropout backward", "input gradient", dx, dy.shape());
  same_device("dropout backward", {&dy, &dx});
  HPCNN_DISPATCH(dy.device(), cpu::dropout_backward(dy.numel(), dy.f32(), dx.f32(), rate, seed, stream, offset),
                 cuda::dropout_backward(device_index, dy.numel(), dy.f32(), dx.f32(), rate, seed, stream, offset));
}

// ------------------------------------------------------------------ loss and accuracy
static void check_target(const char* op, const Tensor& logits, const Tensor& target, int rows, int cols) {
  if (target.dtype() == DType::F32) {
    HPCNN_CHECK_ARG(target.shape() == logits.shape(), op, ": one-hot targets have shape ", shape_str(target.shape()),
                    ", predictions ", shape_str(logits.shape()), " (categorical_crossentropy wants one-hot rows; "
                    "use sparse_categorical_crossentropy for class indices)");
    return;
  }
  HPCNN_CHECK_ARG(target.dtype() == DType::I32, op, ": class indices must be int32, got ", target.str());
  HPCNN_CHECK_ARG(target.numel() == rows, op, ": ", target.numel(), " class indices for ", rows, " predictions");
  if (target.device().is_cpu()) {
    const int32_t* l = target.i32();
    for (int i = 0; i < rows; ++i)
      HPCNN_CHECK_ARG(l[i] >= 0 && l[i] < cols, op, ": label ", l[i], " at row ", i, " is outside [0, ", cols,
                      ") for a model with ", cols, " outputs");
  }
}

namespace {
// An optional float32 (rows,) per-row vector on `like`'s device (weights), or null.
const float* row_vector(const char* op, const char* name, const Tensor* v, const Tensor& like, int rows) {
  if (!v || !v->defined()) return nullptr;
  expect_shape(op, name, *v, {rows});
  same_device(op, {&like, v});
  return v->f32();
}
}  // namespace

void softmax_xent(const Tensor& logits, const Tensor& target, Tensor* dlogits, float grad_scale, double* stats,
                  const Tensor* row_w, float label_smoothing) {
  int rows, cols;
  rows_cols("softmax_cross_entropy", logits, rows, cols);
  HPCNN_CHECK_ARG(logits.rank() == 2, "softmax_cross_entropy: predictions must be 2-D (batch, classes), got ",
                  shape_str(logits.shape()));
  check_target("softmax_cross_entropy", logits, target, rows, cols);
  if (dlogits) expect_shape("softmax_cross_entropy", "gradient", *dlogits, logits.shape());
  same_device("softmax_cross_entropy", {&logits, &target, dlogits});
  HPCNN_CHECK_ARG(label_smoothing >= 0.f && label_smoothing <= 1.f,
                  "softmax_cross_entropy: label_smoothing must be in [0, 1], got ", label_smoothing);
  const float* oh = target.dtype() == DType::F32 ? target.f32() : nullptr;
  const int32_t* lb = target.dtype() == DType::I32 ? target.i32() : nullptr;
  float* dl = dlogits ? dlogits->f32() : nullptr;
  const float* w = row_vector("softmax_cross_entropy", "row weights", row_w, logits, rows);
  const float ls = oh ? label_smoothing : 0.f;
  HPCNN_DISPATCH(logits.device(), cpu::softmax_xent(rows, cols, logits.f32(), oh, lb, dl, grad_scale, stats, w, ls),
                 cuda::softmax_xent(device_index, rows, cols, logits.f32(), oh, lb, dl, grad_scale, stats, w, ls));
}

void row_loss(const RowLossParams& p, const Tensor& pred, const Tensor& target, const Tensor* w, Tensor* dpred,
              float grad_scale, double* stats) {
  const char* op = "loss";
  int rows, cols;
  rows_cols(op, pred, rows, cols);
  expect_f32(op, "targets", target);
  HPCNN_CHECK_ARG(target.shape() == pred.shape(), op, ": targets have shape ", shape_str(target.shape()),
                  ", predictions ", shape_str(pred.shape()));
  if (dpred) expect_shape(op, "gradient", *dpred, pred.shape());
  same_device(op, {&pred, &target, dpred});
  HPCNN_CHECK_ARG(p.label_smoothing >= 0.f && p.label_smoothing <= 1.f, op, ": label_smoothing must be in [0, 1], got ",
                  p.label_smoothing);
  const float* wp = row_vector(op, "row weights", w, pred, rows);
  float* d = dpred ? dpred->f32() : nullptr;
  HPCNN_DISPATCH(pred.device(), cpu::row_loss(p, rows, cols, pred.f32(), target.f32(), wp, d, grad_scale, stats),
                 cuda::row_loss(device_index, p, rows, cols, pred.f32(), target.f32(), wp, d, grad_scale, stats));
}

void row_weights(const Tensor& target, const Tensor* sample_weight, const Tensor* class_weight, Tensor& w) {
  const char* op = "row_weights";
  HPCNN_CHECK_ARG(target.defined() && target.rank() >= 1, op, ": targets are missing");
  const int rows = as_int(target.dim(0), op);
  const int cols = target.dtype() == DType::I32 ? 1 : as_int(target.numel() / std::max<long long>(rows, 1), op);
  HPCNN_CHECK_ARG(target.dtype() == DType::F32 || target.dtype() == DType::I32, op,
                  ": targets must be float32 or int32, got ", target.str());
  expect_shape(op, "weights", w, {rows});
  same_device(op, {&target, &w});
  const float* sw = row_vector(op, "sample weights", sample_weight, target, rows);
  const float* cw = nullptr;
  int ncw = 0;
  if (class_weight && class_weight->defined()) {
    expect_f32(op, "class weights", *class_weight);
    same_device(op, {&target, class_weight});
    cw = class_weight->f32();
    ncw = as_int(class_weight->numel(), op);
  }
  const float* tf = target.dtype() == DType::F32 ? target.f32() : nullptr;
  const int32_t* lb = target.dtype() == DType::I32 ? target.i32() : nullptr;
  HPCNN_DISPATCH(target.device(), cpu::row_weights(rows, cols, sw, cw, ncw, tf, lb, w.f32()),
                 cuda::row_weights(device_index, rows, cols, sw, cw, ncw, tf, lb, w.f32()));
}

void metric_rows(const RowMetricParams& p, const Tensor& pred, const Tensor& target, double* out) {
  const char* op = "metric";
  int rows, cols;
  rows_cols(op, pred, rows, cols);
  HPCNN_CHECK_ARG(target.defined(), op, ": targets are missing");
  same_device(op, {&pred, &target});
  const bool labels = target.dtype() == DType::I32;
  if (labels) {
    HPCNN_CHECK_ARG(target.numel() == rows, op, ": ", target.numel(), " class indices for ", rows, " predictions");
    HPCNN_CHECK_ARG(p.kind == RowMetric::CategoricalAccuracy || p.kind == RowMetric::SparseCategoricalAccuracy ||
                        p.kind == RowMetric::TopKCategoricalAccuracy,
                    op, ": this metric needs float targets of the predictions' shape, not class indices");
  } else {
    expect_f32(op, "targets", target);
    HPCNN_CHECK_ARG(target.shape() == pred.shape(), op, ": targets have shape ", shape_str(target.shape()),
                    ", predictions ", shape_str(pred.shape()));
    HPCNN_CHECK_ARG(p.kind != RowMetric::SparseCategoricalAccuracy || cols == 1, op,
                    ": sparse_categorical_accuracy needs int32 class indices");
  }
  HPCNN_CHECK_ARG(p.k >= 1, op, ": k must be >= 1, got ", p.k);
  const float* tf = labels ? nullptr : target.f32();
  const int32_t* lb = labels ? target.i32() : nullptr;
  HPCNN_DISPATCH(pred.device(), cpu::metric_rows(p, rows, cols, pred.f32(), tf, lb, out),
                 cuda::metric_rows(device_index, p, rows, cols, pred.f32(), tf, lb, out));
}

// ------------------------------------------------------------------ over a model's variables
namespace {

// A flat buffer the table runs over: float32, on the table's device, holding every element it names.
void expect_covered(const char* op, const char* name, const Tensor& t, const SegmentTable& segs) {
  expect_f32(op, name, t);
  HPCNN_CHECK_ARG(t.device() == segs.device(), op, ": ", name, " is on ", t.device().str(),
                  " but the segment table on ", segs.device().str());
  HPCNN_CHECK_ARG(segs.extent() <= t.numel(), op, ": the segment table reaches element ", segs.extent(),
                  " but ", name, " has ", t.numel());
}

// A state buffer of an update: the parameters' shape, on their device.
void expect_state(const char* op, const char* name, const Tensor* t, const Tensor& params, bool required) {
  if (!t || !t->defined()) {
    HPCNN_CHECK_ARG(!required, op, ": ", name, " is missing");
    return;
  }
  expect_shape(op, name, *t, params.shape());
  same_device(op, {&params, t});
}

UpdateCommon common_of(const char* op, const UpdateOptions& o, const SegmentTable& segs) {
  UpdateCommon c;
  if (o.clip_scales) {
    expect_shape(op, "clip scales", *o.clip_scales, {static_cast<long long>(segs.variables())});
    HPCNN_CHECK_ARG(o.clip_scales->device() == segs.device(), op, ": clip scales are on ",
                    o.clip_scales->device().str(), " but the segment table on ", segs.device().str());
    c.clip_scales = o.clip_scales->f32();
  }
  HPCNN_CHECK_ARG(o.clipvalue >= 0.f && std::isfinite(o.clipvalue), op, ": clipvalue must be >= 0, got ",
                  o.clipvalue);
  HPCNN_CHECK_ARG(std::isfinite(o.decay), op, ": weight decay must be finite, got ", o.decay);
  c.clipvalue = o.clipvalue;
  c.decay = o.decay;
  return c;
}

void expect_update(const char* op, const Tensor& params, const Tensor& grads, const SegmentTable& segs) {
  expect_covered(op, "parameters", params, segs);
  expect_shape(op, "gradients", grads, params.shape());
  same_device(op, {&params, &grads});
}

float* data_or_null(Tensor* t) { return t && t->defined() ? t->f32() : nullptr; }

}  // namespace

void variable_sums(const Tensor& x, const SegmentTable& segs, double* sums) {
  expect_covered("variable_sums", "input", x, segs);
  HPCNN_DISPATCH(x.device(), cpu::variable_sums(segs.data(), segs.size(), segs.variables(), x.f32(), sums),
                 cuda::variable_sums(device_index, segs.data(), segs.size(), segs.variables(), x.f32(), sums));
}

void clip_scales(const Tensor& grads, const SegmentTable& segs, ClipMode mode, double clipnorm, Tensor& scales) {
  expect_covered("clip_scales", "gradients", grads, segs);
  expect_shape("clip_scales", "scales", scales, {static_cast<long long>(segs.variables())});
  same_device("clip_scales", {&grads, &scales});
  HPCNN_CHECK_ARG(clipnorm > 0 && std::isfinite(clipnorm), "clip_scales: the clip norm must be positive, got ",
                  clipnorm);
  const int m = mode == ClipMode::PerVariable ? body::kClipNorm : body::kGlobalClipNorm;
  HPCNN_DISPATCH(grads.device(),
                 cpu::clip_scales(segs.data(), segs.size(), segs.variables(), grads.f32(), m, clipnorm, scales.f32()),
                 cuda::clip_scales(device_index, segs.data(), segs.size(), segs.variables(), grads.f32(), m, clipnorm,
                                   scales.f32()));
}

void weight_penalty(const Tensor& params, Tensor* grads, const SegmentTable& segs, double* penalty) {
  expect_covered("weight_penalty", "parameters", params, segs);
  if (grads) {
    expect_shape("weight_penalty", "gradients", *grads, params.shape());
    same_device("weight_penalty", {&params, grads});
  }
  float* g = data_or_null(grads);
  if (!g && !penalty) return;
  HPCNN_DISPATCH(params.device(),
                 cpu::weight_penalty(segs.data(), segs.size(), segs.variables(), params.f32(), g, penalty),
                 cuda::weight_penalty(device_index, segs.data(), segs.size(), segs.variables(), params.f32(), g,
                                      penalty));
}

void sgd_step(Tensor& params, const Tensor& grads, Tensor* velocity, const SegmentTable& segs, const SgdParams& s,
              const UpdateOptions& o) {
  expect_update("sgd", params, grads, segs);
  expect_state("sgd", "velocity", velocity, params, s.momentum != 0.f);
  const UpdateCommon c = common_of("sgd", o, segs);
  float* vel = data_or_null(velocity);
  HPCNN_DISPATCH(params.device(), cpu::sgd_step(segs.data(), segs.size(), params.f32(), grads.f32(), vel, s, c),
                 cuda::sgd_step(device_index, segs.data(), segs.size(), params.f32(), grads.f32(), vel, s, c));
}

void adam_step(Tensor& params, const Tensor& grads, Tensor& m, Tensor& v, const SegmentTable& segs,
               const AdamParams& a, const UpdateOptions& o) {
  expect_update("adam", params, grads, segs);
  expect_state("adam", "first moments", &m, params, true);
  expect_state("adam", "second moments", &v, params, true);
  HPCNN_CHECK_ARG(a.t >= 1, "adam: step number must start at 1");
  const UpdateCommon c = common_of("adam", o, segs);
  HPCNN_DISPATCH(params.device(),
                 cpu::adam_step(segs.data(), segs.size(), params.f32(), grads.f32(), m.f32(), v.f32(), a, c),
                 cuda::adam_step(device_index, segs.data(), segs.size(), params.f32(), grads.f32(), m.f32(), v.f32(),
                                 a, c));
}

void rmsprop_step(Tensor& params, const Tensor& grads, Tensor& velocity, Tensor* momentum, Tensor* average_gradient,
                  const SegmentTable& segs, const RmspropParams& r, const UpdateOptions& o) {
  expect_update("rmsprop", params, grads, segs);
  expect_state("rmsprop", "velocity", &velocity, params, true);
  expect_state("rmsprop", "momentum", momentum, params, r.momentum > 0.f);
  expect_state("rmsprop", "average gradient", average_gradient, params, r.centered);
  const UpdateCommon c = common_of("rmsprop", o, segs);
  float* mom = data_or_null(momentum);
  float* avg = data_or_null(average_gradient);
  HPCNN_DISPATCH(params.device(),
                 cpu::rmsprop_step(segs.data(), segs.size(), params.f32(), grads.f32(), velocity.f32(), mom, avg, r,
                                   c),
                 cuda::rmsprop_step(device_index, segs.data(), segs.size(), params.f32(), grads.f32(), velocity.f32(),
                                    mom, avg, r, c));
}

// ------------------------------------------------------------------ add
void add_n(const std::vector<Tensor>& xs, Tensor& y) {
  HPCNN_CHECK_ARG(xs.size() >= 2, "add: needs at least two inputs, got ", xs.size());
  expect_f32("add", "output", y);
  for (size_t i = 0; i < xs.size(); ++i) {
    expect_f32("add", "input", xs[i]);
    HPCNN_CHECK_ARG(xs[i].shape() == y.shape(), "add: input ", i, " has shape ", shape_str(xs[i].shape()),
                    ", the output ", shape_str(y.shape()), " (every input must have the output's shape)");
    same_device("add", {&xs[i], &y});
  }
  const long long n = y.numel();
  HPCNN_DISPATCH(y.device(), cpu::add(n, xs[0].f32(), xs[1].f32(), y.f32()),
                 cuda::add(device_index, n, xs[0].f32(), xs[1].f32(), y.f32()));
  for (size_t i = 2; i < xs.size(); ++i)
    HPCNN_DISPATCH(y.device(), cpu::accumulate(n, y.f32(), xs[i].f32()),
                   cuda::accumulate(device_index, n, y.f32(), xs[i].f32()));
}

void accumulate(Tensor& dst, const Tensor& src) {
  expect_f32("accumulate", "destination", dst);
  expect_f32("accumulate", "source", src);
  HPCNN_CHECK_ARG(src.numel() == dst.numel(), "accumulate: source ", shape_str(src.shape()), " and destination ",
                  shape_str(dst.shape()), " differ in size");
  same_device("accumulate", {&dst, &src});
  HPCNN_DISPATCH(dst.device(), cpu::accumulate(dst.numel(), dst.f32(), src.f32()),
                 cuda::accumulate(device_index, dst.numel(), dst.f32(), src.f32()));
}

// ------------------------------------------------------------------ concat, split, copy
namespace {

// The axis of `shape` that `axis` names (negative from the end), checked: not the batch axis.
int concat_axis(const char* op, const Shape& shape, int axis) {
  const int rank = static_cast<int>(shape.size());
  const int a = axis < 0 ? axis + rank : axis;
  HPCNN_CHECK_ARG(a >= 0 && a < rank, op, ": axis ", axis, " is out of range for shape ", shape_str(shape));
  HPCNN_CHECK_ARG(a != 0, op, ": axis ", axis, " is the batch axis; concatenate along a per-sample axis");
  return a;
}

long long prod(const Shape& s, int from, int to) {
  long long p = 1;
  for (int i = from; i < to; ++i) p *= s[i];
  return p;
}

// The parts' shapes along `a` must agree with `whole` on every other axis, and add up to it.
void check_parts(const char* op, const Shape& whole, const std::vector<Shape>& parts, int a) {
  long long total = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    bool fits = parts[i].size() == whole.size();
    for (size_t d = 0; fits && d < whole.size(); ++d) fits = static_cast<int>(d) == a || parts[i][d] == whole[d];
    HPCNN_CHECK_ARG(fits, op, ": part ", i, " has shape ", shape_str(parts[i]), ", which does not fit ",
                    shape_str(whole), " along axis ", a);
    total += parts[i][a];
  }
  HPCNN_CHECK_ARG(total == whole[a], op, ": the parts add up to ", total, " along axis ", a, ", the whole has ",
                  whole[a]);
}

void copy_rows(const Device& d, long long rows, long long width, const float* src, long long src_pitch, float* dst,
               long long dst_pitch) {
  HPCNN_DISPATCH(d, cpu::copy_rows(rows, width, src, src_pitch, dst, dst_pitch),
                 cuda::copy_rows(device_index, rows, width, src, src_pitch, dst, dst_pitch));
}

}  // namespace

void concat(const std::vector<Tensor>& xs, Tensor& y, int axis) {
  HPCNN_CHECK_ARG(!xs.empty(), "concatenate: no inputs");
  expect_f32("concatenate", "output", y);
  const int a = concat_axis("concatenate", y.shape(), axis);
  std::vector<Shape> parts;
  for (const Tensor& x : xs) {
    expect_f32("concatenate", "input", x);
    same_device("concatenate", {&x, &y});
    parts.push_back(x.shape());
  }
  check_parts("concatenate", y.shape(), parts, a);
  const long long rows = prod(y.shape(), 0, a), pitch = prod(y.shape(), a, y.rank());
  long long offset = 0;
  for (const Tensor& x : xs) {
    const long long width = prod(x.shape(), a, x.rank());
    copy_rows(y.device(), rows, width, x.f32(), width, y.f32() + offset, pitch);
    offset += width;
  }
}

void split(const Tensor& dy, const std::vector<long long>& sizes, const std::vector<Tensor*>& dxs, int axis) {
  expect_f32("split", "input", dy);
  HPCNN_CHECK_ARG(sizes.size() == dxs.size(), "split: ", sizes.size(), " sizes for ", dxs.size(), " outputs");
  const int a = concat_axis("split", dy.shape(), axis);
  std::vector<Shape> parts;
  for (size_t i = 0; i < sizes.size(); ++i) {
    Shape s = dy.shape();
    s[a] = sizes[i];
    if (dxs[i]) expect_shape("split", "output", *dxs[i], s);
    if (dxs[i]) same_device("split", {&dy, dxs[i]});
    parts.push_back(std::move(s));
  }
  check_parts("split", dy.shape(), parts, a);
  const long long rows = prod(dy.shape(), 0, a), pitch = prod(dy.shape(), a, dy.rank());
  long long offset = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const long long width = prod(parts[i], a, dy.rank());
    if (dxs[i]) copy_rows(dy.device(), rows, width, dy.f32() + offset, pitch, dxs[i]->f32(), width);
    offset += width;
  }
}

void copy(const Tensor& src, Tensor& dst) {
  expect_f32("copy", "source", src);
  expect_f32("copy", "destination", dst);
  HPCNN_CHECK_ARG(src.numel() == dst.numel(), "copy: source ", shape_str(src.shape()), " and destination ",
                  shape_str(dst.shape()), " differ in size");
  same_device("copy", {&src, &dst});
  const long long n = src.numel();
  const long long rows = src.rank() >= 2 ? src.dim(0) : 1;  // per sample: the CPU splits rows over threads
  const long long width = rows ? n / rows : 0;
  copy_rows(src.device(), rows, width, src.f32(), width, dst.f32(), width);
}

// ------------------------------------------------------------------ decode
void decode_u8(const Tensor& x, Tensor& y, const float* scale, const float* shift) {
  HPCNN_CHECK_ARG(x.dtype() == DType::U8, "decode: input must be uint8, got ", x.str());
  HPCNN_CHECK_ARG(x.rank() >= 1, "decode: input must have a channel axis");
  expect_shape("decode", "output", y, x.shape());
  same_device("decode", {&x, &y});
  int channels = as_int(x.dim(-1), "decode");
  HPCNN_DISPATCH(x.device(), cpu::decode_u8(x.numel(), channels, x.u8(), y.f32(), scale, shift),
                 cuda::decode_u8(device_index, x.numel(), channels, x.u8(), y.f32(), scale, shift));
}

// ------------------------------------------------------------------ augmentation
static AugmentGeometry augment_geometry(const char* op, const Tensor& x, const Tensor& y, long long n,
                                        const AugmentSpec& s) {
  HPCNN_CHECK_ARG(x.defined() && x.rank() == 4, op, ": input must be 4-D (batch, height, width, channels), got ",
                  x.defined() ? shape_str(x.shape()) : std::string("nothing"));
  AugmentGeometry g;
  g.n = n;
  g.h = as_int(x.dim(1), op);
  g.w = as_int(x.dim(2), op);
  g.c = as_int(x.dim(3), op);
  augment_output_hw(s, g.h, g.w, g.oh, g.ow);
  expect_shape(op, "output", y, {n, g.oh, g.ow, g.c});
  return g;
}

void augment(const Tensor& x, Tensor& y, const AugmentSpec& s, const AugmentDraw& d) {
  expect_f32("augment", "input", x);
  const AugmentGeometry g = augment_geometry("augment", x, y, x.rank() == 4 ? x.dim(0) : 0, s);
  same_device("augment", {&x, &y});
  if (y.numel() == 0) return;
  HPCNN_DISPATCH(x.device(), cpu::augment(g, s, d, cpu::AugmentSource{x.f32()}, y.f32()),
                 cuda::augment(device_index, g, s, d, x.f32(), y.f32()));
}

void augment_rows(const Tensor& x, const long long* rows, const float* scale, const float* shift, Tensor& y,
                  const AugmentSpec& s, const AugmentDraw& d) {
  HPCNN_CHECK_ARG(x.defined() && x.device().is_cpu() && y.device().is_cpu(), "augment_rows: host tensors only");
  HPCNN_CHECK_ARG(x.dtype() == DType::F32 || x.dtype() == DType::U8, "augment_rows: input must be float32 or uint8, "
                  "got ", x.str());
  HPCNN_CHECK_ARG(y.defined() && y.rank() == 4, "augment_rows: output must be 4-D, got ",
                  y.defined() ? shape_str(y.shape()) : std::string("nothing"));
  const AugmentGeometry g = augment_geometry("augment_rows", x, y, y.dim(0), s);
  const long long have = x.dim(0);
  if (rows) {
    for (long long i = 0; i < g.n; ++i)
      HPCNN_CHECK_ARG(rows[i] >= 0 && rows[i] < have, "augment_rows: row index ", rows[i], " is outside the input's ",
                      have, " rows");
  } else {
    HPCNN_CHECK_ARG(g.n <= have, "augment_rows: ", g.n, " output rows from an input of ", have);
  }
  const bool u8 = x.dtype() == DType::U8;
  HPCNN_CHECK_ARG(!u8 || (scale && shift), "augment_rows: a uint8 input needs its decode (scale, shift)");
  if (y.numel() == 0) return;
  cpu::AugmentSource src;
  if (u8) src.u8 = x.u8();
  else src.f32 = x.f32();
  src.rows = rows;
  src.scale = scale;
  src.shift = shift;
  cpu::augment(g, s, d, src, y.f32());
}

void check_finite(const Tensor& t, const char* what) {
  if (!t.device().is_cpu() || t.dtype() != DType::F32) return;
  const float* p = t.f32();
  const long long i = cpu::first_non_finite(p, t.numel());
  if (i >= 0)
    throw ValueError(cat(what, " contains ", std::isnan(p[i]) ? "NaN" : "inf", " (first at flat index ", i,
                         " of shape ", shape_str(t.shape()), ")"));
}

}  // namespace hpcnn::ops
