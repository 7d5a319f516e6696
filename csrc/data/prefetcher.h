// The background producer: one std::thread fills a bounded queue with ready batches of one epoch
// (Loader::fill_batch: read, inflate, decode, one-hot; or fill_batch_stored, which leaves uint8
// x undecoded for a GPU model to decode on the device) while the consumer trains on the previous
// ones. Buffers come from a small pool and go back to it when the last reference to a batch
// (e.g. the NumPy array handed to Python) is released, so steady state allocates nothing.
// Batches are pinned host memory when a CUDA device is the target and the backend is usable.
//
// stop() (also run by the destructor) asks the producer to finish the batch it is on and joins
// it: breaking out of an epoch early never leaves a thread behind.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/device.h"
#include "core/host_buffer.h"
#include "core/tensor.h"
#include "data/loader.h"

namespace hpcnn::data {

// Recycles batch buffers (core/host_buffer.h: pinned or pageable, fixed per pool).
class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  BufferPool(HostMemory kind, size_t max_free, int device = 0) : kind_(kind), max_free_(max_free), device_(device) {}
  // A buffer of at least `bytes`; it returns to the pool when the last shared_ptr goes.
  std::shared_ptr<HostBuffer> get(size_t bytes);
  bool pinned() const { return kind_ == HostMemory::Pinned; }

 private:
  void put(std::unique_ptr<HostBuffer> b);
  HostMemory kind_;
  size_t max_free_;
  int device_;  // the target GPU of pinned buffers
  std::mutex mutex_;
  std::vector<std::unique_ptr<HostBuffer>> free_;
};

struct Batch {
  Tensor x;  // float32 (B, ...) on the host; uint8 as stored when the prefetcher delivers stored rows
  Tensor y;  // int32 (B,) or float32 (B, classes); undefined without labels
};

class Prefetcher {
 public:
  // `target`: the device the batches are for (pinned buffers for a usable GPU). `stored_u8`: a
  // uint8 dataset's x is delivered as stored (Loader::fill_batch_stored), for a consumer that
  // decodes it on its own device; float32 x is delivered decoded either way. `first_batch`: the
  // epoch's batches from this one on (a training run resumed in the middle of an epoch). `shard`:
  // each batch holds only that rank's share of the global batch (Loader::shard_rows).
  Prefetcher(std::shared_ptr<Loader> loader, long long epoch, int depth, Device target, bool stored_u8 = false,
             long long first_batch = 0, Shard shard = {});
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  enum class Status { Ready, End, Timeout };
  // Waits up to `timeout_ms` for the next batch (so the caller can look at signals in between);
  // rethrows the producer's exception.
  Status next(Batch& out, int timeout_ms);
  void stop();
  bool pinned() const { return x_pool_->pinned(); }
  bool delivers_stored_u8() const { return stored_u8_; }

 private:
  void produce();

  std::shared_ptr<Loader> loader_;
  long long epoch_;
  long long first_batch_;
  size_t depth_;
  bool stored_u8_;
  Shard shard_;
  std::shared_ptr<BufferPool> x_pool_, y_pool_;  // separate: x and y buffers differ in size
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Batch> queue_;
  bool stop_ = false, done_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace hpcnn::data
