// BatchStager: everything about getting a batch onto the model's device, so that the model
// (nn/model.h) only runs steps on staged tensors.
//
//   check      x: host, float32 or uint8, (N, *input_shape) (or (N, H, W) for an (H, W, 1)
//              input), finite; rows in range; y (for training and evaluation) as the loss wants
//              it: float32 (n, outputs), finite (one-hot for categorical_crossentropy), or int32
//              class indices in [0, classes); sample weights (when given): float32 (n,), finite, >= 0
//   gather     the batch's rows (Batch::rows) into a host staging buffer; on the CPU float32 rows
//              in order are used in place (zero-copy) and uint8 is decoded on the host
//   upload     on a GPU: from pinned host memory (the staging buffer, or the caller's own array
//              when it is pinned already, like the loader's batches) on the copy stream
//              (cuda::copy_h2d_async); every op enqueued afterwards waits for it on the device,
//              the host does not. uint8 crosses as uint8 and is decoded on the device
//              (ops::decode_u8 on the compute stream): a quarter of float32's bytes.
//   augment    the model's leading augmentation layers (nn/augmentation.h), for the step the batch
//              is staged for (StepContext: training or not, seed, step): on the CPU fused into the
//              gather and decode (ops::augment_rows reads the batch's rows where they are), one
//              pass over the batch per further layer; on a GPU on the device after the upload and
//              decode (ops::augment on the compute stream). In inference they are the identity
//              (skipped: the zero-copy paths stay) except a crop, which takes the centre.
//
// Two staging slots (StagingSlot), each with its own host and device buffers. Every batch is
// staged into the slot the last step did not use. A batch staged ahead is uploaded while the step
// just enqueued still runs its backward pass on the GPU; why that is safe without waiting is
// written at stage_ahead() in batch_stager.cpp. A batch staged for the step about to run is
// uploaded after the work already queued. Device buffers only grow, and before one is freed the
// compute stream is synchronised (queued kernels may still read it).
//
// A batch staged ahead waits until a step takes it (take_ahead); an error met while staging it
// is kept and raised by take_ahead, so that it surfaces at that batch's turn.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <vector>

#include "core/host_buffer.h"
#include "core/tensor.h"
#include "nn/augmentation.h"
#include "nn/layer.h"
#include "nn/loss.h"

namespace hpcnn::nn {

// How uint8 inputs become float: x * scale[c] + shift[c] for channel c (the last axis), computed
// by pixel::decode_u8 on the host or on the GPU alike. One value applies to every channel. Empty
// (the default): scale 1, shift 0, i.e. uint8 arrays are fed unscaled, as Keras does; the data
// pipeline says how its uint8 rows are to be scaled (data/loader.h).
struct InputDecode {
  std::vector<float> scale, shift;
};

// One batch as its producer holds it, on the host.
struct Batch {
  Tensor x;  // float32 or uint8 (N, *input_shape), or (N, H, W) for an (H, W, 1) input
  Tensor y;  // float32 (N, outputs) (one-hot for categorical_crossentropy) or int32 (N,) / (N, 1); undefined for prediction
  Tensor w;  // sample weights: float32 (N,), finite, >= 0; undefined: every sample weighs 1
  // The rows of x (and y) that make the batch, in this order; absent: all N rows in order. A
  // shuffled epoch over arrays in memory is batches of rows; a data-parallel replica gets the
  // rows of its share of a global batch the same way.
  std::optional<std::vector<long long>> rows;
  InputDecode decode;  // for uint8 x
  // A batch its producer could not prepare (set instead of x and y): staging it ahead keeps this
  // error, and take_ahead raises it at the batch's turn.
  std::exception_ptr error;
  // Data parallelism: these rows are rows [first_row, first_row + n) of a global batch of
  // global_rows rows (one replica's share, core/batch_shares.h). global_rows 0: the batch is a
  // whole batch (first_row 0). Augmentation, like dropout, draws per global row.
  long long first_row = 0;
  long long global_rows = 0;
};

// A batch on the model's device, ready for a step.
struct StagedBatch {
  Tensor x;  // float32 (n, *shape after the leading augmentation), augmented for its step
  Tensor y;  // the targets as checked (undefined without targets)
  Tensor w;  // the sample weights (undefined when the batch has none)
  long long first_row = 0;    // as Batch: where these rows sit in the global batch
  long long global_rows = 0;  // rows of the global batch (n for a whole batch)
};

enum class StagingSlot { First, Second };
inline StagingSlot other(StagingSlot s) { return s == StagingSlot::First ? StagingSlot::Second : StagingSlot::First; }

class BatchStager {
 public:
  explicit BatchStager(Shape input_shape);
  ~BatchStager();  // waits for the GPU before its buffers are freed
  BatchStager(const BatchStager&) = delete;
  BatchStager& operator=(const BatchStager&) = delete;

  // The device batches go to (the model's). Drops a batch staged ahead and every buffer, after
  // the old device has finished with them; the buffers are made again on first use.
  void to(Device d);
  Device device() const { return device_; }
  // What the targets must look like (set by compile).
  void set_targets(Loss loss, long long classes);
  // The model's leading augmentation layers (set when the model is built); staged batches have
  // its output shape.
  void set_augmentation(LeadingAugmentation a) { aug_ = std::move(a); }

  // Stages `b` for the step about to run (into the slot the last step did not use, which becomes
  // the last step's slot). Drops a batch staged ahead first. Errors are raised here.
  // `with_targets`: b.y is required and checked; otherwise it is ignored (prediction).
  // `step`: the step the batch is for (training or not, seed, step number: the augmentation's
  // draws; its layer_index and first_row are not read).
  StagedBatch stage(const Batch& b, bool with_targets, const StepContext& step = StepContext());
  // Stages `b` ahead, for the step after the one just enqueued, into the slot that step does not
  // read. Never throws: an error is kept with the batch and raised by take_ahead.
  void stage_ahead(const Batch& b, bool with_targets, const StepContext& step = StepContext()) noexcept;
  // The batch staged ahead, for the step about to run (its slot becomes the last step's slot).
  // Raises the error met while staging it; ValueError when nothing is staged, when the step
  // needs targets and the batch was staged without (by a prediction), or when the leading
  // augmentation made it for another step (training vs. inference, or another step number).
  StagedBatch take_ahead(bool with_targets, const StepContext& step = StepContext());
  // Drops a batch staged ahead (waiting for its copy, so that its buffers can be reused).
  void drop_ahead();
  bool has_ahead() const { return ahead_.has_value(); }

  // For the tests of the slot bookkeeping (the same code on the CPU as on a GPU).
  StagingSlot last_slot() const { return last_slot_; }
  std::optional<StagingSlot> ahead_slot() const;

 private:
  struct SlotBuffers {
    std::shared_ptr<HostBuffer> host_x, host_y, host_w;  // pinned when the device is a GPU
    std::shared_ptr<HostBuffer> host_aug;                // the CPU's second buffer for a further augmentation
    Tensor dev_x, dev_x_u8, dev_y, dev_w;                // bytes on the device (typed views are taken)
    Tensor dev_aug[2];                                   // the augmentation's outputs on a GPU
  };
  struct Ahead {
    StagedBatch batch;
    StagingSlot slot = StagingSlot::First;
    bool with_targets = false;
    StepContext step;  // the step it was staged for
    std::exception_ptr error;
  };

  // When an upload may start: after the work queued on the compute stream (a batch staged for the
  // step about to run: the last call may have failed with work queued that reads any slot), or
  // alongside it (a batch staged ahead, right after a step that read its result back: see
  // stage_ahead in batch_stager.cpp).
  enum class Upload { AfterQueuedWork, AlongsideQueuedWork };

  StagedBatch stage_into(const Batch& b, bool with_targets, StagingSlot slot, Upload when, const StepContext& step);
  Tensor stage_input(const Batch& b, long long n, SlotBuffers& s, Upload when, const StepContext& step);
  // The input on the GPU, before augmentation: uploaded, decoded (x of the model's input shape).
  Tensor upload_input(const Batch& b, long long n, SlotBuffers& s, Upload when);
  // The leading augmentation on the host, from the batch's rows (gather, decode, augment in one
  // pass), and on the device, from the uploaded batch.
  Tensor augment_on_host(const Batch& b, long long n, SlotBuffers& s, const StepContext& step);
  Tensor augment_on_device(const Tensor& x, SlotBuffers& s, const StepContext& step);
  Tensor stage_targets(const Batch& b, long long n, SlotBuffers& s, Upload when);
  Tensor stage_weights(const Batch& b, long long n, SlotBuffers& s, Upload when);
  // A staging buffer viewed as `shape` and `dtype`: host (pinned on a GPU) or device bytes, made
  // or grown as needed (a device block only after the compute stream has finished with it).
  Tensor host_buffer(std::shared_ptr<HostBuffer>& buf, const Shape& shape, DType dtype);
  Tensor device_buffer(Tensor& buf, const Shape& shape, DType dtype);
  // Host (pinned) -> the slot's device buffer, on the copy stream.
  Tensor upload(const Tensor& host, Tensor& dev_buf, Upload when);
  // Whether a caller's host array is pinned already (like the loader's batches for a GPU): its
  // rows in order are then uploaded from where they are, without a copy into a staging buffer.
  bool pinned(const Tensor& host) const;
  // Blocks until the uploads enqueued so far have finished; then the host buffers they read may
  // be refilled and the callers' arrays they read released.
  void wait_copies();
  // Blocks until the device has finished all queued work (before device buffers are freed).
  void wait_device();
  SlotBuffers& slot(StagingSlot s) { return slots_[s == StagingSlot::First ? 0 : 1]; }

  Shape input_shape_;
  LeadingAugmentation aug_;  // none unless the model starts with augmentation layers
  Device device_ = Device::cpu();
  Loss loss_ = Loss::CategoricalCrossentropy;
  long long classes_ = 0;
  SlotBuffers slots_[2];
  StagingSlot last_slot_ = StagingSlot::Second;  // so that the first batch goes to First
  std::optional<Ahead> ahead_;
  // The host arrays that uploads read (our staging buffers, and callers' pinned arrays uploaded
  // in place): kept alive until wait_copies() has seen the uploads finish.
  std::vector<Tensor> in_flight_;
  bool copies_pending_ = false;  // uploads enqueued since the last wait_copies()
};

}  // namespace hpcnn::nn
