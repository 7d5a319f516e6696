// The gradient reducer: one replica's nn::GradientSync (nn/gradient_sync.h). It sums the
// gradient buffer over the replicas in buckets, in reverse layer order, each started as soon as
// the backward pass has written its layers' gradients, so that the sums overlap the backward pass
// of the earlier layers (on a GPU they run on NCCL's stream; on the CPU on MPI's communication
// thread).
//
// Buckets: walking the layers from the last to the first, a layer's trainable gradients join the
// current bucket, which closes once it holds at least `bucket_bytes` (or when the next layer's
// gradients are not adjacent to it in the buffer: a frozen layer between them). A model's
// parameters are packed layer by layer, so every bucket is one contiguous range of the buffer and
// one collective. bucket_bytes 0: one bucket for the whole buffer (no overlap). The tutorial CNN
// (3.2 MB of gradients) with the default 2 MiB: 2 collectives per step (its Dense layers and last
// convolution, 2.8 MB, while the first three convolutions' backward runs; then the rest, 0.4 MB).
#pragma once

#include <vector>

#include "distribute/communicator.h"
#include "nn/gradient_sync.h"
#include "nn/model.h"

namespace hpcnn::distribute {

constexpr long long kDefaultBucketBytes = 2LL << 20;

struct Bucket {
  long long begin = 0, end = 0;  // float elements of the gradient buffer
  int closing_layer = 0;         // the bucket is complete once this layer's backward is done
};

// The buckets for per-layer gradient ranges (nn::Model::layer_gradient_ranges), in the order
// they complete (reverse layer order). Two layers' ranges are adjacent when only the zero padding
// of the parameter buffer (nn/param_layout.h) lies between them: one bucket then sums both, and
// that padding (zero on every replica, so its sum stays zero) with them.
std::vector<Bucket> plan_buckets(const std::vector<nn::ParamRange>& layer_ranges, long long bucket_bytes);

// Test-only failure injection (hpcnn._core.distribute.inject_failure; the failure-path tests):
// the replica with global index `replica`, in this process, fails once at its next training step
// after its loss statistics were summed and before its first gradient bucket starts, as a
// replica does that runs out of memory growing a workspace: `stall_s` 0 throws BackendError
// there, `stall_s` > 0 sleeps that long there instead (a stuck replica: the others' timeout).
void inject_failure(int replica, double stall_s);

class GradientReducer : public nn::GradientSync {
 public:
  GradientReducer(Communicator& comm, nn::Model& model, long long bucket_bytes);

  void reduce_stats(double* values, int count) override;
  void begin_gradients() override;
  void gradients_ready(int layer) override;
  void finish_gradients() override;
  void average_state(const Tensor& state, bool contributed) override;

  long long bucket_bytes() const { return bucket_bytes_; }
  // The last training step's collectives on the gradient buffer, and the bytes of the gradients
  // they summed (the parameters' own: the padding carried between arrays is not counted).
  long long step_collectives() const { return step_collectives_; }
  long long step_bytes() const { return step_bytes_; }
  const std::vector<Bucket>& buckets() const { return buckets_; }

 private:
  void start(size_t bucket);

  Communicator& comm_;
  nn::Model& model_;
  long long bucket_bytes_;
  std::vector<Bucket> buckets_;
  std::vector<char> started_;
  long long step_collectives_ = 0, step_bytes_ = 0;
};

}  // namespace hpcnn::distribute
