// The losses a model is compiled with. Both are softmax cross-entropy (fused in
// ops::softmax_xent); they differ in what the targets are, which is what the batch stager checks.
#pragma once

#include <string>

#include "core/errors.h"

namespace hpcnn::nn {

enum class Loss {
  CategoricalCrossentropy,        // targets: float32 one-hot (n, classes)
  SparseCategoricalCrossentropy,  // targets: int32 class indices (n,) or (n, 1)
};

// A training step whose loss is NaN or inf: raised before the backward pass, so the weights and
// the optimizer are not updated. A ValueError (Python: hpcnn._core.NonFiniteLossError, a
// ValueError subclass) that carries the batch's mean loss, so that fit can hand it to the
// callbacks as Keras does (TerminateOnNaN stops training instead of the error).
struct NonFiniteLoss : ValueError {
  NonFiniteLoss(const std::string& message, double mean_loss) : ValueError(message), loss(mean_loss) {}
  double loss;  // the batch's mean loss (NaN or +-inf)
};

}  // namespace hpcnn::nn
