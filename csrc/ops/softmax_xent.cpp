// The fused softmax cross-entropy's dispatch (ops.h): checks (class indices range-checked on the
// host), then softmax_xent_cpu.cpp or softmax_xent_cuda.cu (softmax_xent.h).
#include "ops/ops.h"

#include <cstdint>

#include "ops/dispatch.h"
#include "ops/softmax_xent.h"

namespace hpcnn::ops {

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

}  // namespace hpcnn::ops
