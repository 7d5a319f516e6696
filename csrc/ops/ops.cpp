// Dispatch: validate, then call the backend of the tensors' device.
#include "ops/ops.h"

#include <cmath>

#include "core/cuda_runtime.h"
#include "ops/activation.h"
#include "ops/decode.h"
#include "ops/dropout.h"
#include "ops/param_norms.h"
#include "ops/param_norms_body.h"
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
  expect_shape("conv2d", "bias", b, {g.f});
  expect_shape("conv2d", "output", y, {g.n, g.oh, g.ow, g.f});
  HPCNN_DISPATCH(x.device(), cpu::conv2d_forward(g, x.f32(), w.f32(), b.f32(), y.f32(), relu),
                 cuda::conv2d_forward(device_index, g, x.f32(), w.f32(), b.f32(), y.f32(), relu));
}

void conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& y, Tensor& dy, Tensor* dx, Tensor& dw,
                     Tensor& db, int sh, int sw, Padding pad, bool relu) {
  same_device("conv2d backward", {&x, &w, &y, &dy, dx, &dw, &db});
  Conv2dGeometry g = conv2d_geometry(x, w, sh, sw, pad);
  expect_shape("conv2d backward", "output gradient", dy, {g.n, g.oh, g.ow, g.f});
  if (relu) expect_shape("conv2d backward", "output", y, {g.n, g.oh, g.ow, g.f});
  if (dx) expect_shape("conv2d backward", "input gradient", *dx, x.shape());
  expect_shape("conv2d backward", "kernel gradient", dw, w.shape());  // the kernel's layout
  expect_shape("conv2d backward", "bias gradient", db, {g.f});
  const float* yp = relu ? y.f32() : nullptr;
  float* dxp = dx ? dx->f32() : nullptr;
  HPCNN_DISPATCH(x.device(), cpu::conv2d_backward(g, x.f32(), w.f32(), yp, dy.f32(), dxp, dw.f32(), db.f32(), relu),
                 cuda::conv2d_backward(device_index, g, x.f32(), w.f32(), yp, dy.f32(), dxp, dw.f32(), db.f32(), relu));
}

// ------------------------------------------------------------------ max-pool
Pool2dGeometry maxpool2d_geometry(const Tensor& x, int ph, int pw, int sh, int sw, Padding pad) {
  expect_f32("max_pool2d", "input", x);
  HPCNN_CHECK_ARG(x.rank() == 4, "max_pool2d: input must be 4-D (batch, height, width, channels), got shape ",
                  shape_str(x.shape()));
  HPCNN_CHECK_ARG(x.dim(0) > 0, "max_pool2d: batch size is 0 (input shape ", shape_str(x.shape()), ")");
  return Pool2dGeometry::make(as_int(x.dim(0), "max_pool2d"), as_int(x.dim(1), "max_pool2d"),
                              as_int(x.dim(2), "max_pool2d"), as_int(x.dim(3), "max_pool2d"), ph, pw, sh, sw, pad);
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
  expect_shape("dense", "bias", b, {g.out});
  expect_shape("dense", "output", y, {g.n, g.out});
  same_device("dense", {&x, &w, &b, &y});
  HPCNN_DISPATCH(x.device(), cpu::dense_forward(g, x.f32(), w.f32(), b.f32(), y.f32(), relu),
                 cuda::dense_forward(device_index, g, x.f32(), w.f32(), b.f32(), y.f32(), relu));
}

void dense_backward(const Tensor& x, const Tensor& w, const Tensor& y, Tensor& dy, Tensor* dx, Tensor& dw,
                    Tensor& db, bool relu) {
  DenseGeometry g = dense_geometry(x, w);
  expect_shape("dense backward", "output gradient", dy, {g.n, g.out});
  if (relu) expect_shape("dense backward", "output", y, {g.n, g.out});
  if (dx) expect_shape("dense backward", "input gradient", *dx, x.shape());
  expect_shape("dense backward", "kernel gradient", dw, w.shape());
  expect_shape("dense backward", "bias gradient", db, {g.out});
  same_device("dense backward", {&x, &w, &y, &dy, dx, &dw, &db});
  const float* yp = relu ? y.f32() : nullptr;
  float* dxp = dx ? dx->f32() : nullptr;
  HPCNN_DISPATCH(x.device(), cpu::dense_backward(g, x.f32(), w.f32(), yp, dy.f32(), dxp, dw.f32(), db.f32(), relu),
                 cuda::dense_backward(device_index, g, x.f32(), w.f32(), yp, dy.f32(), dxp, dw.f32(), db.f32(), relu));
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

void softmax_xent(const Tensor& logits, const Tensor& target, Tensor* dlogits, float grad_scale, double* stats) {
  int rows, cols;
  rows_cols("softmax_cross_entropy", logits, rows, cols);
  HPCNN_CHECK_ARG(logits.rank() == 2, "softmax_cross_entropy: predictions must be 2-D (batch, classes), got ",
                  shape_str(logits.shape()));
  check_target("softmax_cross_entropy", logits, target, rows, cols);
  if (dlogits) expect_shape("softmax_cross_entropy", "gradient", *dlogits, logits.shape());
  same_device("softmax_cross_entropy", {&logits, &target, dlogits});
  const float* oh = target.dtype() == DType::F32 ? target.f32() : nullptr;
  const int32_t* lb = target.dtype() == DType::I32 ? target.i32() : nullptr;
  float* dl = dlogits ? dlogits->f32() : nullptr;
  HPCNN_DISPATCH(logits.device(), cpu::softmax_xent(rows, cols, logits.f32(), oh, lb, dl, grad_scale, stats),
                 cuda::softmax_xent(device_index, rows, cols, logits.f32(), oh, lb, dl, grad_scale, stats));
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

void check_finite(const Tensor& t, const char* what) {
  if (!t.device().is_cpu() || t.dtype() != DType::F32) return;
  const float* p = t.f32();
  long long n = t.numel();
  for (long long i = 0; i < n; ++i)
    if (!std::isfinite(p[i]))
      throw ValueError(cat(what, " contains ", std::isnan(p[i]) ? "NaN" : "inf", " (first at flat index ", i,
                           " of shape ", shape_str(t.shape()), ")"));
}

}  // namespace hpcnn::ops
