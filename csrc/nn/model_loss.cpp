// The loss part of a model: what compile sets (the loss, whether a final softmax / sigmoid is
// fused with it), the metrics and the class weights, and the step's loss part, loss_and_stats:
// the loss and its gradient, the per-row weights (sample_weight x class_weight), the metrics on
// the outputs and the regularizers' penalty, read back in one copy.
#include "nn/model.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "nn/run_kinds.h"
#include "ops/ops.h"

namespace hpcnn::nn {

// ------------------------------------------------------------------ compile
void Model::compile(std::unique_ptr<Optimizer> optimizer, const LossSpec& loss) {
  HPCNN_CHECK_ARG(optimizer != nullptr, "compile: an optimizer is required");
  const Shape& out = graph_.output_shapes().back();
  HPCNN_CHECK_ARG(out.size() == 1, "compile: the model output ", shape_str(out),
                  " is not (units,): add Flatten() and a Dense output layer");
  HPCNN_CHECK_ARG(loss.label_smoothing >= 0.f && loss.label_smoothing <= 1.f,
                  "compile: label_smoothing must be in [0, 1], got ", loss.label_smoothing);
  const OutputActivation last = output_activation(graph_.layer(graph_.size() - 1));
  const bool softmax_last = last == OutputActivation::Softmax;
  const bool sigmoid_last = last == OutputActivation::Sigmoid;
  const bool categorical = loss.kind == Loss::CategoricalCrossentropy || loss.kind == Loss::SparseCategoricalCrossentropy;
  bool fused = false;
  if (categorical) {
    if (!loss.from_logits)
      HPCNN_CHECK_ARG(softmax_last, "compile: cross-entropy expects probabilities, but the last layer has no "
                      "softmax: use activation='softmax' on the last layer, or a loss with from_logits=True");
    HPCNN_CHECK_ARG(!(softmax_last && loss.from_logits), "compile: from_logits=True but the last layer already "
                    "applies softmax; drop one of the two");
    fused = softmax_last && !loss.from_logits;
  } else if (loss.kind == Loss::BinaryCrossentropy) {
    HPCNN_CHECK_ARG(!(sigmoid_last && loss.from_logits), "compile: from_logits=True but the last layer already "
                    "applies sigmoid; drop one of the two");
    fused = sigmoid_last;  // from the logits: exact where the probabilities round to 0 or 1
  }
  optimizer->to(device_, layout_);
  optimizer_ = std::move(optimizer);
  loss_ = loss;
  fused_output_ = fused;
  metrics_.clear();
  stager_.set_targets(loss.kind, out.at(0));
  plans_current_ = false;  // the fused softmax / sigmoid changes what runs
}

// The nodes the step runs before the loss: all but a final softmax / sigmoid fused with it.
int Model::loss_end() const { return graph_.size() - (fused_output_ ? 1 : 0); }

void Model::set_metrics(const std::vector<MetricSpec>& metrics) {
  require_compiled("setting its metrics");
  const long long units = graph_.output_shapes().back().at(0);
  for (const MetricSpec& m : metrics) {
    const bool accuracy = m.kind == RowMetric::CategoricalAccuracy || m.kind == RowMetric::SparseCategoricalAccuracy ||
                          m.kind == RowMetric::TopKCategoricalAccuracy;
    HPCNN_CHECK_ARG(accuracy || !takes_class_indices(loss_.kind), "compile: this metric compares the outputs with "
                    "float targets, but sparse_categorical_crossentropy takes class indices");
    HPCNN_CHECK_ARG(m.kind != RowMetric::SparseCategoricalAccuracy || takes_class_indices(loss_.kind) || units == 1,
                    "compile: sparse_categorical_accuracy needs class indices (loss='sparse_categorical_crossentropy')");
    HPCNN_CHECK_ARG(m.k >= 1, "compile: top-k accuracy needs k >= 1, got ", m.k);
  }
  wait_device();  // a queued step may still write the old stats buffer
  metrics_ = metrics;
  stats_ = metric_out_ = Tensor();  // re-made for the new count at the next step
  capacity_ = 0;
}

void Model::set_class_weights(const std::vector<float>& weights) {
  for (size_t c = 0; c < weights.size(); ++c)
    HPCNN_CHECK_ARG(std::isfinite(weights[c]) && weights[c] >= 0.f, "class_weight: the weight of class ", c,
                    " must be a finite number >= 0, got ", weights[c]);
  wait_device();  // a queued step may still read the old table
  class_weights_host_ = weights;
  class_weights_ = Tensor();
  if (weights.empty()) return;
  Tensor host = Tensor::empty({static_cast<long long>(weights.size())});
  std::copy(weights.begin(), weights.end(), host.f32());
  class_weights_ = device_.is_cpu() ? host : host.to(device_);
}

// ------------------------------------------------------------------ the loss part of the step
Tensor Model::row_weights(const StagedBatch& b, bool training) {
  // Per-row weights only when the batch has sample weights or class weights apply: the default
  // path passes none. Class weights weigh training steps only (fit's class_weight; Keras leaves
  // validation and evaluate unweighted).
  const bool class_weighted = class_weights_.defined() && training;
  if (!b.w.defined() && !class_weighted) return Tensor();
  Tensor w = row_w_.view(0, {b.y.dim(0)});
  ops::row_weights(b.y, b.w.defined() ? &b.w : nullptr, class_weighted ? &class_weights_ : nullptr, w);
  return w;
}

Tensor Model::metric_outputs(const Tensor& logits, bool training) {
  if (!fused_output_) return logits;
  // Metrics see the model's outputs: the fused softmax / sigmoid (the last node) runs here for them.
  const int last = graph_.size() - 1;
  Tensor out = metric_out_.view(0, logits.shape());
  graph_.layer(last).forward(logits, out, StepContext{training, seed_, step_, last});
  return out;
}

// grad_scale: the factor of dlogits, 1 / rows of the global batch (the mean over every replica's rows).
BatchStats Model::loss_and_stats(const Tensor& logits, const StagedBatch& b, Tensor* dlogits, bool training,
                                 float grad_scale) {
  stats_.fill_zero();
  double* s = reinterpret_cast<double*>(stats_.raw());
  const long long n = logits.dim(0);
  const Tensor w = row_weights(b, training);
  const Tensor* wp = w.defined() ? &w : nullptr;
  // A fused final sigmoid leaves logits for binary cross-entropy, as from_logits does.
  const std::optional<RowLossParams> row = row_loss_params(loss_.kind, loss_.from_logits || fused_output_,
                                                           loss_.label_smoothing);
  if (row) ops::row_loss(*row, logits, b.y, wp, dlogits, grad_scale, s);
  else ops::softmax_xent(logits, b.y, dlogits, grad_scale, s, wp, loss_.label_smoothing);
  if (!metrics_.empty()) {
    const Tensor out = metric_outputs(logits, training);
    for (size_t i = 0; i < metrics_.size(); ++i) ops::metric_rows(metrics_[i], out, b.y, s + 3 + i);
  }
  regularization_.add_penalty(params_, s + 2);
  Tensor host = device_.is_cpu() ? stats_ : stats_.to(Device::cpu());
  const double* h = reinterpret_cast<const double*>(host.raw());
  // Keras' loss: the batch mean plus the penalty; loss_sum is per sample, so the penalty counts n times.
  BatchStats st{h[0] + static_cast<double>(n) * h[2], h[1], n, {}};
  st.metrics.assign(h + 3, h + 3 + metrics_.size());
  return st;
}

}  // namespace hpcnn::nn
