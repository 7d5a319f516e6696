// The other losses', the row weights' and the metrics' dispatch (ops.h): checks, then
// loss_metrics_cpu.cpp or loss_metrics_cuda.cu (loss_metrics.h).
#include "ops/ops.h"

#include <algorithm>
#include <cstdint>

#include "ops/dispatch.h"
#include "ops/loss_metrics.h"

namespace hpcnn::ops {

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

}  // namespace hpcnn::ops
