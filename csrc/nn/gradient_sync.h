// The one hook data parallelism (distribute/) puts into a model's training step. nn/ knows nothing of
// transports: a model with a GradientSync calls it at four points of compute_gradients, and a
// model without one (one device) runs exactly as before.
//
//   loss and statistics of this replica's rows  -> reduce_stats   (sums over every replica; the
//                                                   non-finite-loss check uses the sums, so all
//                                                   replicas stop at the same step)
//   backward starts                              -> begin_gradients
//   after each layer's backward                  -> gradients_ready(layer)  (on a GPU: enqueued;
//                                                   the sync may start summing that layer's
//                                                   gradients while earlier layers' backward runs)
//   backward done                                -> finish_gradients  (returns when the gradient
//                                                   buffer holds the sum over every replica)
//
// Then the model adds the regularizers' gradients (once: they depend only on the weights, equal
// on every replica) and runs the optimizer. Each replica's loss gradient is scaled by 1 / (rows of
// the global batch), so the sum over replicas is the gradient of the global batch's mean loss:
// N replicas x B/N rows compute what one device computes for B rows, up to float summation order.
//
// After the optimizer's inputs are complete and the layers have committed their training-time
// state (BatchNormalization's moving statistics, moved toward the statistics of this replica's
// own rows: each replica normalizes its own share of the batch, as in Keras), average_state makes
// that state the mean over the replicas that had rows, so every replica holds the same weights
// (Keras keeps one copy per replica and reads their mean; the moving-average rule is linear, so
// averaging after every step gives the same numbers).
#pragma once

#include "core/tensor.h"

namespace hpcnn::nn {

class GradientSync {
 public:
  virtual ~GradientSync() = default;
  // Sums `count` doubles over every replica, in place (every replica gets the same values).
  virtual void reduce_stats(double* values, int count) = 0;
  virtual void begin_gradients() = 0;
  // The parameter gradients of layer `layer` are written (on a GPU: enqueued on the compute stream).
  virtual void gradients_ready(int layer) = 0;
  // Returns when the gradient buffer holds the sum of every replica's gradients.
  virtual void finish_gradients() = 0;
  // `state` (a view of the parameter buffer: the non-trainable weights) becomes the mean of its
  // values over the replicas whose `contributed` is true (those that had rows this step).
  virtual void average_state(const Tensor& state, bool contributed) = 0;
};

}  // namespace hpcnn::nn
