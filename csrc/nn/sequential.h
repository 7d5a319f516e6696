// A Sequential model: the spine of a training step.
//
//   train_batch(x, y):
//     stage x (uint8 -> float if needed, NaN/inf check, gather rows by index) and y (label range
//     check) on the host, copy both to the model's device (the only host->device copies of a step)
//     forward through the layers into per-layer activation buffers
//     fused softmax + cross-entropy on the logits -> loss sum, correct count, dlogits
//     backward through the same layers (ping-pong gradient buffers), parameter gradients written
//     into the one gradient buffer
//     one optimizer step over the one parameter buffer
//     read back [loss_sum, correct] (the one device->host copy of a step)
//
//   prefetch(x, y) (fit calls it right after train_batch(k) returns, with batch k+1): the same
//     staging, into the other of two staging slots; on a GPU via pinned host memory and an async
//     copy on the copy stream, overlapping step k's backward pass still running on the GPU. The
//     next train_batch with the same (x, y, rows) then starts from the uploaded batch.
//
// All trainable parameters live in one contiguous buffer (and their gradients in another);
// layers hold views. The device is the model's own property, set by to().
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nn/layer.h"
#include "nn/optimizer.h"

namespace hpcnn::nn {

enum class Loss { CategoricalCrossentropy, SparseCategoricalCrossentropy };

struct BatchStats {
  double loss_sum = 0;  // sum over the batch (divide by n for the mean)
  double correct = 0;
  long long n = 0;
};

class Sequential {
 public:
  Sequential(Shape input_shape, std::vector<LayerPtr> layers, uint64_t seed);
  ~Sequential();  // waits for a prefetch copy still in flight before its buffers are freed
  Sequential(const Sequential&) = delete;
  Sequential& operator=(const Sequential&) = delete;

  const Shape& input_shape() const { return input_shape_; }
  const std::vector<Shape>& output_shapes() const { return out_shapes_; }  // per layer, per sample
  int num_layers() const { return static_cast<int>(layers_.size()); }
  const Layer& layer(int i) const { return *layers_.at(i); }
  long long num_params() const { return params_.numel(); }
  // Per layer: (name, shape) of each weight, Keras order (kernel, bias).
  std::vector<std::vector<ParamSpec>> weight_specs() const { return specs_; }

  std::vector<Tensor> get_weights() const;            // host copies, Keras order and layouts
  void set_weights(const std::vector<Tensor>& ws);    // ValueError on count/shape mismatch
  Tensor& parameter_buffer() { return params_; }
  Tensor& gradient_buffer() { return grads_; }

  void compile(std::unique_ptr<Optimizer> optimizer, Loss loss, bool from_logits);
  // Which layers the optimizer updates (one flag per layer; all by default). A frozen layer's
  // parameters and optimizer state stay as they are, and backward stops at the first trainable
  // layer. Python sets it at compile (Keras' rule: trainable takes effect at compile()).
  void set_trainable(const std::vector<bool>& per_layer);
  long long num_trainable_params() const;
  bool compiled() const { return optimizer_ != nullptr; }
  Optimizer* optimizer() const { return optimizer_.get(); }
  Loss loss() const { return loss_; }

  Device device() const { return device_; }
  void to(Device d);

  uint64_t seed() const { return seed_; }
  uint64_t step() const { return step_; }

  // x: (n, *input_shape) float32 or uint8 on the host. y: float32 one-hot (n, classes) or integer
  // labels (n,) / (n, 1). `rows`, when given, selects (and orders) the rows of x and y to use.
  BatchStats train_batch(const Tensor& x, const Tensor& y, const std::vector<long long>* rows = nullptr);
  BatchStats test_batch(const Tensor& x, const Tensor& y, const std::vector<long long>* rows = nullptr);
  // Stages the batch that the next train_batch/test_batch(x, y, rows) will use, with the same checks
  // and errors, and on a GPU starts its host->device copy on the copy stream without waiting: the
  // upload overlaps the previous step's backward pass, still running on the GPU. The next
  // train_batch/test_batch uses it when called with the same arrays (same data pointers, shapes,
  // dtypes) and the same rows; anything else discards it. x and y must not be modified until then
  // (they are kept alive, so their addresses cannot be reused by other arrays meanwhile).
  void prefetch(const Tensor& x, const Tensor& y, const std::vector<long long>* rows = nullptr);
  bool has_prefetch() const { return pending_.has_value(); }
  // For the tests of the slot bookkeeping: the staging slot (0/1) of the last staged step, and the
  // pending prefetch's (-1 without one). A prefetch must never take the last step's slot.
  int last_step_slot() const { return slot_; }
  int prefetch_slot() const { return pending_ ? pending_->slot : -1; }
  // Outputs (n, *output_shape) on the host.
  Tensor predict_batch(const Tensor& x, const std::vector<long long>* rows = nullptr);

 private:
  void bind_layers();
  void ensure_buffers(long long n);
  // Checks, sizes the buffers and stages one batch: (inputs, targets) on the model's device.
  std::pair<Tensor, Tensor> stage_batch(const Tensor& x, const Tensor& y, const std::vector<long long>* rows,
                                        const char* purpose);
  // Stage into staging slot `slot`; `async` (prefetch): on a GPU through pinned memory and the copy
  // stream, without waiting; otherwise the synchronous copy as before.
  Tensor stage_input(const Tensor& x, const std::vector<long long>* rows, long long n, int slot, bool async);
  Tensor stage_target(const Tensor& y, const std::vector<long long>* rows, long long n, int slot, bool async);
  Tensor& host_staging(Tensor& buf, const Shape& shape, DType dtype);  // (re)made as needed
  void upload(const Tensor& host, Tensor& dev, bool async);           // host -> the device buffer view
  void discard_prefetch();
  void wait_staging_free();
  long long batch_rows(const Tensor& x, const std::vector<long long>* rows) const;
  // Runs layers [0, end) and returns the output of layer end-1 (or the input when end == 0).
  Tensor forward(const Tensor& x, int end, bool training);
  BatchStats loss_and_stats(const Tensor& logits, const Tensor& target, Tensor* dlogits);
  int loss_end() const;  // layers run before the loss (the fused softmax is skipped)

  Shape input_shape_;
  std::vector<LayerPtr> layers_;
  std::vector<Shape> in_shapes_, out_shapes_;
  std::vector<std::vector<ParamSpec>> specs_;
  uint64_t seed_;
  uint64_t step_ = 0;
  Device device_ = Device::cpu();

  Tensor params_, grads_;                 // the one parameter buffer and its gradients
  std::vector<std::vector<long long>> param_offsets_;
  std::vector<bool> trainable_;           // per layer
  std::vector<ParamRange> trainable_ranges_;  // the trainable layers' parameters, merged runs

  std::unique_ptr<Optimizer> optimizer_;
  Loss loss_ = Loss::CategoricalCrossentropy;
  bool fused_softmax_ = false;

  // Buffers for up to capacity_ rows; smaller batches use leading views.
  long long capacity_ = 0;
  std::vector<Tensor> act_;               // per layer output (undefined for view layers)
  Tensor grad_a_, grad_b_, dlogits_;      // ping-pong gradient buffers
  Tensor stats_;
  // Two staging slots, alternated by every staged batch (slot_ is the last one used), so that a
  // prefetch never writes the input buffer that the step still running on the GPU reads (see
  // prefetch()). Host buffers are pinned when the model is on a GPU.
  Tensor x_host_[2], x_dev_[2], y_host_[2], y_dev_[2];
  int slot_ = 0;
  // The batch staged by prefetch(), waiting for the matching train_batch/test_batch.
  struct Prefetched {
    Tensor x, y;                  // the caller's arrays: identity, and kept alive
    bool has_rows = false;
    std::vector<long long> rows;
    Tensor X, Y;                  // staged on the model's device
    int slot = 0;                 // their staging slot (becomes slot_ when the batch is used)
  };
  std::optional<Prefetched> pending_;
  std::vector<Tensor> acts_now_;          // this step's layer outputs (views)
};

}  // namespace hpcnn::nn
