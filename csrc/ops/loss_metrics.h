// Per-row losses and metrics of a prediction against its target, for the losses that are not the
// fused softmax cross-entropy (ops/softmax_xent.h) and for the metrics beyond its accuracy count.
// A row is the last axis: pred and target are (rows, cols) float32; a row's value is the mean
// over its cols (Keras: the loss functions reduce the last axis with a mean).
//
//   row_loss     stats[0] += sum_r w_r * loss_r; dpred (may be null) = w_r * grad_scale * dloss_r/dpred
//                (grad_scale = 1/batch: the gradient of Keras' "sum_over_batch_size" reduction)
//     MeanSquaredError     mean (p - t)^2                    d = 2 (p - t) / cols
//     MeanAbsoluteError    mean |p - t|                      d = sign(p - t) / cols
//     BinaryCrossentropy   probabilities: q = clip(p, 1e-7, 1 - 1e-7) (Keras' epsilon),
//                          mean -(t log q + (1 - t) log(1 - q)); d = (q - t) / (q (1 - q)) / cols inside
//                          the clip, 0 outside it (the clip's gradient)
//                          from_logits: mean max(z, 0) - z t + log(1 + e^-|z|); d = (sigmoid(z) - t) / cols
//                          label_smoothing s: t -> t (1 - s) + s / 2 first
//   row_weights  w_r = sample_weight[r] * class_weight[class of row r] (either may be null): the
//                class is the label (int32 targets), the argmax of a one-hot row, or round(t) of a
//                one-column row (binary); a class outside the class_weight table weighs 1.
//   metric_rows  out[0] += sum over rows of the metric (unweighted, as Keras' `metrics=`):
//     CategoricalAccuracy        argmax(p) == argmax(t) (or == label)
//     SparseCategoricalAccuracy  argmax(p) == label (or round(t) of a float target of one column)
//     BinaryAccuracy             mean over cols of ((p > threshold) == t)
//     TopKCategoricalAccuracy    #{j: p_j > p_target} < k, target = argmax(t) or the label
//     MeanSquaredError / MeanAbsoluteError   as the losses
// Targets are float32 (rows, cols) or int32 class indices (rows,) (the accuracies); argmax is
// the first maximum. A class index outside [0, cols) counts as a miss. Sums are taken in a fixed
// order (the same result on every run). stats / out / w are on the op's device.
// Per-row arithmetic: loss_metrics_body.h (shared by both backends). CPU: loss_metrics_cpu.cpp;
// CUDA: loss_metrics_cuda.cu.
#pragma once

#include <cstdint>

namespace hpcnn {

enum class RowLoss : int { MeanSquaredError, MeanAbsoluteError, BinaryCrossentropy };
enum class RowMetric : int {
  CategoricalAccuracy,
  SparseCategoricalAccuracy,
  BinaryAccuracy,
  TopKCategoricalAccuracy,
  MeanSquaredError,
  MeanAbsoluteError,
};

struct RowLossParams {
  RowLoss kind = RowLoss::MeanSquaredError;
  bool from_logits = false;     // BinaryCrossentropy only
  float label_smoothing = 0.f;  // BinaryCrossentropy only
};

struct RowMetricParams {
  RowMetric kind = RowMetric::CategoricalAccuracy;
  int k = 5;                // TopKCategoricalAccuracy
  float threshold = 0.5f;   // BinaryAccuracy
};

namespace cpu {
void row_loss(const RowLossParams& p, int rows, int cols, const float* pred, const float* target, const float* w,
              float* dpred, float grad_scale, double* stats);
void row_weights(int rows, int cols, const float* sample_weight, const float* class_weight, int num_class_weights,
                 const float* target, const int32_t* labels, float* w);
void metric_rows(const RowMetricParams& p, int rows, int cols, const float* pred, const float* target,
                 const int32_t* labels, double* out);
}  // namespace cpu

namespace cuda {
void row_loss(int device, const RowLossParams& p, int rows, int cols, const float* pred, const float* target,
              const float* w, float* dpred, float grad_scale, double* stats);
void row_weights(int device, int rows, int cols, const float* sample_weight, const float* class_weight,
                 int num_class_weights, const float* target, const int32_t* labels, float* w);
void metric_rows(int device, const RowMetricParams& p, int rows, int cols, const float* pred, const float* target,
                 const int32_t* labels, double* out);
}  // namespace cuda

}  // namespace hpcnn
