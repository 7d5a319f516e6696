// One row of the losses, weights and metrics of ops/loss_metrics.h, as HPCNN_HD functions: the
// CPU op loops over rows calling them, the CUDA kernels run one thread per row around them, so
// both backends compute the same arithmetic (the CPU tests check the code the GPU runs).
#pragma once

#include <cmath>
#include <cstdint>

#include "core/hd.h"
#include "ops/loss_metrics.h"

namespace hpcnn::body {

constexpr float kKerasEpsilon = 1e-7f;  // keras.config.epsilon(): the probability clip of binary cross-entropy

HPCNN_HD int first_argmax(const float* r, int cols) {
  int best = 0;
  for (int j = 1; j < cols; ++j)
    if (r[best] < r[j]) best = j;
  return best;
}

// The class of row r's target: the label, the argmax of a one-hot row, or round(t) of one column.
HPCNN_HD int target_class(int r, int cols, const float* target, const int32_t* labels) {
  if (labels) return labels[r];
  const float* t = target + (long long)r * cols;
  return cols == 1 ? (int)floorf(t[0] + 0.5f) : first_argmax(t, cols);
}

// Row r's loss (returned, times w) and, when dpred is not null, its gradient row.
HPCNN_HD double row_loss(const RowLossParams& p, int r, int cols, const float* pred, const float* target,
                         const float* w, float* dpred, float grad_scale) {
  const float* pr = pred + (long long)r * cols;
  const float* tr = target + (long long)r * cols;
  const float wr = w ? w[r] : 1.f;
  const float g = wr * grad_scale / (float)cols;
  double sum = 0.0;
  for (int j = 0; j < cols; ++j) {
    const float x = pr[j];
    float t = tr[j];
    float d = 0.f;
    if (p.kind == RowLoss::MeanSquaredError) {
      const float e = x - t;
      sum += (double)e * e;
      d = 2.f * e;
    } else if (p.kind == RowLoss::MeanAbsoluteError) {
      const float e = x - t;
      sum += fabs((double)e);
      d = e > 0.f ? 1.f : (e < 0.f ? -1.f : 0.f);
    } else {
      t = t * (1.f - p.label_smoothing) + 0.5f * p.label_smoothing;
      if (p.from_logits) {  // stable: max(z, 0) - z t + log(1 + e^-|z|)
        sum += (double)fmaxf(x, 0.f) - (double)x * t + log1p(exp(-fabs((double)x)));
        d = 1.f / (1.f + expf(-x)) - t;
      } else {
        const float q = fminf(fmaxf(x, kKerasEpsilon), 1.f - kKerasEpsilon);
        sum += -((double)t * log((double)q) + (1.0 - t) * log(1.0 - (double)q));
        d = (x > kKerasEpsilon && x < 1.f - kKerasEpsilon) ? (q - t) / (q * (1.f - q)) : 0.f;
      }
    }
    if (dpred) dpred[(long long)r * cols + j] = d * g;
  }
  return wr * (sum / cols);
}

HPCNN_HD float row_weight(int r, int cols, const float* sample_weight, const float* class_weight,
                          int num_class_weights, const float* target, const int32_t* labels) {
  float w = sample_weight ? sample_weight[r] : 1.f;
  if (class_weight) {
    const int c = target_class(r, cols, target, labels);
    if (c >= 0 && c < num_class_weights) w *= class_weight[c];
  }
  return w;
}

HPCNN_HD double metric_row(const RowMetricParams& p, int r, int cols, const float* pred, const float* target,
                           const int32_t* labels) {
  const float* pr = pred + (long long)r * cols;
  const float* tr = target ? target + (long long)r * cols : nullptr;
  switch (p.kind) {
    case RowMetric::CategoricalAccuracy:
    case RowMetric::SparseCategoricalAccuracy: {
      // Float targets: one-hot rows (categorical), or one class index per row (sparse, one column).
      const int c = labels ? labels[r]
                           : (p.kind == RowMetric::SparseCategoricalAccuracy ? (int)floorf(tr[0] + 0.5f)
                                                                              : first_argmax(tr, cols));
      return first_argmax(pr, cols) == c ? 1.0 : 0.0;
    }
    case RowMetric::TopKCategoricalAccuracy: {
      const int c = target_class(r, cols, target, labels);
      if (c < 0 || c >= cols) return 0.0;
      const float at = pr[c];
      if (at != at) return 0.0;  // NaN prediction: not in the top k
      int above = 0;
      for (int j = 0; j < cols; ++j) above += pr[j] > at ? 1 : 0;
      return above < p.k ? 1.0 : 0.0;
    }
    case RowMetric::BinaryAccuracy: {
      double hits = 0.0;
      for (int j = 0; j < cols; ++j) hits += ((pr[j] > p.threshold ? 1.f : 0.f) == tr[j]) ? 1.0 : 0.0;
      return hits / cols;
    }
    case RowMetric::MeanSquaredError:
    case RowMetric::MeanAbsoluteError: {
      double s = 0.0;
      for (int j = 0; j < cols; ++j) {
        const double e = (double)pr[j] - (double)tr[j];
        s += p.kind == RowMetric::MeanSquaredError ? e * e : fabs(e);
      }
      return s / cols;
    }
  }
  return 0.0;
}

}  // namespace hpcnn::body
