// Softmax + cross-entropy fused, numerically stable (log-sum-exp with the row max subtracted).
// Targets are either one-hot/probability rows (float, [rows, cols]: categorical_crossentropy) or
// class indices (int32, [rows]: sparse_categorical_crossentropy); exactly one is non-null.
//   stats[0] += sum over rows of the loss, stats[1] += number of rows whose argmax (first max)
//   equals the target's argmax (Keras' accuracy). stats stays on the op's device: reading it back
//   is the caller's one synchronisation per step.
//   dlogits (may be null) = (softmax - target) * grad_scale; grad_scale = 1/batch gives the
//   gradient of the batch mean.
//   row_w (may be null): each row's loss and gradient are multiplied by row_w[r] (sample_weight,
//   class_weight; the accuracy count is not weighted, as Keras' metrics).
//   label_smoothing s (one-hot targets): the target row is t (1 - s) + s / cols (Keras').
// Class indices outside [0, cols) are a ValueError, checked before the op on the host.
// CPU: softmax_xent_cpu.cpp; CUDA: softmax_xent_cuda.cu.
#pragma once

#include <cstdint>

namespace hpcnn {

namespace cpu {
void softmax_xent(int rows, int cols, const float* logits, const float* onehot, const int32_t* labels,
                  float* dlogits, float grad_scale, double* stats, const float* row_w = nullptr,
                  float label_smoothing = 0.f);
}  // namespace cpu

namespace cuda {
void softmax_xent(int device, int rows, int cols, const float* logits, const float* onehot, const int32_t* labels,
                  float* dlogits, float grad_scale, double* stats, const float* row_w = nullptr,
                  float label_smoothing = 0.f);
}  // namespace cuda

}  // namespace hpcnn
