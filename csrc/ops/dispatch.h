// What every operator's dispatch (ops/<op>.cpp, the definitions of ops.h) shares: the checks of
// its tensors, which throw ValueError naming the operator, and HPCNN_DISPATCH, the switch to the
// backend of the tensors' device. Internal to ops/: layers include ops.h, never this.
//
// One copy of each check, so that every operator words the same mistake the same way.
#pragma once

#include <initializer_list>

#include "core/cuda_runtime.h"
#include "core/errors.h"
#include "core/tensor.h"
#include "ops/param_segments.h"

// Runs `cpu_call` for a host device, else `cuda_call` with `device_index` (the GPU's number) in
// scope. Without the CUDA backend the CUDA call is not even compiled (the cuda:: functions are
// not built then), and a GPU tensor gets a BackendError saying why there is no GPU.
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

namespace hpcnn::ops {

inline void expect_f32(const char* op, const char* name, const Tensor& t) {
  HPCNN_CHECK_ARG(t.defined(), op, ": ", name, " is missing");
  HPCNN_CHECK_ARG(t.dtype() == DType::F32, op, ": ", name, " must be float32, got ", t.str());
}

inline void expect_shape(const char* op, const char* name, const Tensor& t, const Shape& want) {
  expect_f32(op, name, t);
  HPCNN_CHECK_ARG(t.shape() == want, op, ": ", name, " has shape ", shape_str(t.shape()), ", expected ",
                  shape_str(want));
}

// Every defined tensor of `ts` (null and undefined ones are optional arguments left out) on one device.
inline void same_device(const char* op, std::initializer_list<const Tensor*> ts) {
  const Tensor* first = nullptr;
  for (const Tensor* t : ts) {
    if (!t || !t->defined()) continue;
    if (!first) first = t;
    HPCNN_CHECK_ARG(t->device() == first->device(), op, ": tensors on different devices (", first->device().str(),
                    " and ", t->device().str(), ")");
  }
}

// A dimension as the int the backends take.
inline int as_int(long long v, const char* op) {
  HPCNN_CHECK_ARG(v >= 0 && v < (1LL << 31), op, ": dimension ", v, " is out of range");
  return static_cast<int>(v);
}

// A per-channel vector (c,) (batch normalization, scale_shift); `optional`: may be undefined.
inline void expect_channels(const char* op, const char* name, const Tensor& t, int c, bool optional = false) {
  if (optional && !t.defined()) return;
  expect_shape(op, name, t, {c});
}

// x read as rows of its last axis (softmax, the losses and metrics).
inline void rows_cols(const char* op, const Tensor& x, int& rows, int& cols) {
  expect_f32(op, "input", x);
  HPCNN_CHECK_ARG(x.rank() >= 1 && x.dim(-1) > 0, op, ": input ", shape_str(x.shape()), " has no last axis");
  cols = as_int(x.dim(-1), op);
  rows = as_int(x.numel() / cols, op);
}

// An optional float32 (rows,) per-row vector on `like`'s device (weights), or null.
inline const float* row_vector(const char* op, const char* name, const Tensor* v, const Tensor& like, int rows) {
  if (!v || !v->defined()) return nullptr;
  expect_shape(op, name, *v, {rows});
  same_device(op, {&like, v});
  return v->f32();
}

// A flat buffer a segment table runs over (the ops over a model's variables: param_norms,
// optimizer_step): float32, on the table's device, holding every element it names.
inline void expect_covered(const char* op, const char* name, const Tensor& t, const SegmentTable& segs) {
  expect_f32(op, name, t);
  HPCNN_CHECK_ARG(t.device() == segs.device(), op, ": ", name, " is on ", t.device().str(),
                  " but the segment table on ", segs.device().str());
  HPCNN_CHECK_ARG(segs.extent() <= t.numel(), op, ": the segment table reaches element ", segs.extent(),
                  " but ", name, " has ", t.numel());
}

// The tensors of a backward with a kernel, an optional bias and a fused ReLU (conv2d, dense)
// beyond its input and kernel: dy (and y, when relu) of the output's shape `out`, dx (optional) of
// x's shape, dw of w's (the kernel's layout), db (optional) of (out.back(),). Returns the pointers
// the backends take, null for what is not needed or not computed.
struct KernelBackwardData {
  const float* y;
  float* dx;
  float* db;
};
inline KernelBackwardData expect_kernel_backward(const char* op, const Tensor& x, const Tensor& w, const Tensor& y,
                                                 const Tensor& dy, const Tensor* dx, const Tensor& dw,
                                                 const Tensor& db, const Shape& out, bool relu) {
  expect_shape(op, "output gradient", dy, out);
  if (relu) expect_shape(op, "output", y, out);
  if (dx) expect_shape(op, "input gradient", *dx, x.shape());
  expect_shape(op, "kernel gradient", dw, w.shape());
  if (db.defined()) expect_shape(op, "bias gradient", db, {out.back()});
  return {relu ? y.f32() : nullptr, dx ? dx->f32() : nullptr, db.defined() ? db.f32() : nullptr};
}

// An optional output's data, or null when it is not wanted.
inline float* data_or_null(Tensor* t) { return t && t->defined() ? t->f32() : nullptr; }

}  // namespace hpcnn::ops
