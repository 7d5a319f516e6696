// The losses a model is compiled with. Both are softmax cross-entropy (fused in
// ops::softmax_xent); they differ in what the targets are, which is what the batch stager checks.
#pragma once

namespace hpcnn::nn {

enum class Loss {
  CategoricalCrossentropy,        // targets: float32 one-hot (n, classes)
  SparseCategoricalCrossentropy,  // targets: int32 class indices (n,) or (n, 1)
};

}  // namespace hpcnn::nn
