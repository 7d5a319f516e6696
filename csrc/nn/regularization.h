// Keras' weight regularizers (kernel_regularizer / bias_regularizer = L1, L2, L1L2) of a model: the
// penalty sum over the regularized weight arrays of l1 * sum |w| + l2 * sum w^2, added to the
// reported loss, and its gradient added to the parameters' gradients before the optimizer step.
//
// As in Keras, only trainable weights carry a penalty (a frozen layer's regularizer adds nothing to
// the loss, and its weights get no gradient), and the penalty counts in evaluation too (Keras'
// test_step computes the same loss). Both calls are one op over the regularized arrays
// (ops::weight_penalty); the sums are in a fixed order on both backends.
//
// The model makes two calls per step, whatever its structure (a Sequential or a graph):
//   add_penalty(params, slot)     when the loss is computed: the penalty goes into a double in the
//                                 model's device memory, next to the loss sum, so the one read-back
//                                 of the step's statistics brings it along (no extra synchronisation)
//   add_gradients(params, grads)  after the backward pass has written the parameter gradients
// A training step makes both, an evaluation step only the first.
#pragma once

#include <vector>

#include "nn/layer.h"
#include "nn/optimizer.h"
#include "nn/param_layout.h"
#include "ops/param_segments.h"

namespace hpcnn::nn {

// One regularizer per weight array (layer by layer, in param_specs order: the ParamLayout order),
// from the layers' set_regularizer calls. ValueError when a layer regularizes a parameter it does
// not have.
std::vector<Regularizer> regularizers_of(const std::vector<const Layer*>& layers,
                                         const std::vector<std::vector<ParamSpec>>& specs);

class Regularization {
 public:
  Regularization() = default;
  // per_array: one regularizer per entry of `layout`.
  Regularization(const ParamLayout& layout, std::vector<Regularizer> per_array);

  // Whether any weight array carries a penalty at all (when not, the model makes no calls).
  bool empty() const { return !any_; }
  // The trainable parts of the parameter buffer (the optimizer's ranges): only they are penalized.
  void set_trainable(const std::vector<ParamRange>& trainable);
  // *penalty += the penalty of params (a double in the memory of params' device).
  void add_penalty(const Tensor& params, double* penalty);
  // grads += the penalty's gradient.
  void add_gradients(const Tensor& params, Tensor& grads);

 private:
  const SegmentTable& table(Device d);

  ParamLayout layout_;
  std::vector<Regularizer> per_array_;
  std::vector<ParamRange> trainable_;
  bool any_ = false;
  SegmentTable table_;
  bool table_valid_ = false;
};

}  // namespace hpcnn::nn
