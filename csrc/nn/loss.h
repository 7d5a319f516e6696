// The losses and metrics a model is compiled with. The two categorical cross-entropies are
// softmax cross-entropy (fused with a final softmax in ops::softmax_xent); the others are the
// per-row losses of ops/loss_metrics.h (binary cross-entropy fused with a final sigmoid). The
// targets each takes are what the batch stager checks.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/errors.h"
#include "ops/loss_metrics.h"

namespace hpcnn::nn {

enum class Loss {
  CategoricalCrossentropy,        // targets: float32 one-hot (n, classes)
  SparseCategoricalCrossentropy,  // targets: int32 class indices (n,) or (n, 1)
  BinaryCrossentropy,             // targets: float32 (n, units), values in [0, 1]
  MeanSquaredError,               // targets: float32 (n, units)
  MeanAbsoluteError,              // targets: float32 (n, units)
};

// Whether the loss takes class indices (int32) rather than float rows like the outputs.
inline bool takes_class_indices(Loss l) { return l == Loss::SparseCategoricalCrossentropy; }

// The kernel a loss runs, the one place that maps a Loss to it: the categorical cross-entropies
// run ops::softmax_xent (nullopt here), the others ops::row_loss with these parameters.
// from_logits (the outputs are logits: compile's from_logits, or a final sigmoid fused with the
// loss) and label_smoothing reach binary cross-entropy only; mse and mae take neither.
inline std::optional<RowLossParams> row_loss_params(Loss l, bool from_logits, float label_smoothing) {
  switch (l) {
    case Loss::CategoricalCrossentropy:
    case Loss::SparseCategoricalCrossentropy:
      return std::nullopt;
    case Loss::BinaryCrossentropy:
      return RowLossParams{RowLoss::BinaryCrossentropy, from_logits, label_smoothing};
    case Loss::MeanSquaredError:
      return RowLossParams{RowLoss::MeanSquaredError, false, 0.f};
    case Loss::MeanAbsoluteError:
      return RowLossParams{RowLoss::MeanAbsoluteError, false, 0.f};
  }
  return std::nullopt;
}

// How a model's loss is computed (compile's arguments).
struct LossSpec {
  Loss kind = Loss::CategoricalCrossentropy;
  bool from_logits = false;
  float label_smoothing = 0.f;  // categorical and binary cross-entropy
};

// What a training or test step reports (nn/model.h: the loss part of the step fills it).
struct BatchStats {
  double loss_sum = 0;  // sum over the batch (divide by n for the mean); weighted by the sample weights
  double correct = 0;   // categorical cross-entropies: rows whose argmax is the target's (else 0)
  long long n = 0;
  std::vector<double> metrics;  // per compiled metric (set_metrics): its sum over the batch's rows
};

// A compiled metric: reported per batch as a sum over its rows (nn::BatchStats::metrics).
using MetricSpec = RowMetricParams;

// A training step whose loss is NaN or inf: raised before the backward pass, so the weights and
// the optimizer are not updated. A ValueError (Python: hpcnn._core.NonFiniteLossError, a
// ValueError subclass) that carries the batch's mean loss, so that fit can hand it to the
// callbacks as Keras does (TerminateOnNaN stops training instead of the error).
struct NonFiniteLoss : ValueError {
  NonFiniteLoss(const std::string& message, double mean_loss) : ValueError(message), loss(mean_loss) {}
  double loss;  // the batch's mean loss (NaN or +-inf)
};

}  // namespace hpcnn::nn
