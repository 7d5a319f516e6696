#include "data/prefetcher.h"

#include <algorithm>
#include <chrono>

#include "core/errors.h"

namespace hpcnn::data {

std::shared_ptr<HostBuffer> BufferPool::get(size_t bytes) {
  std::unique_ptr<HostBuffer> b;
  {
    std::lock_guard<std::mutex> lk(mutex_);
    for (size_t i = 0; i < free_.size(); ++i)
      if (free_[i]->bytes() >= bytes) {
        b = std::move(free_[i]);
        free_.erase(free_.begin() + static_cast<long>(i));
        break;
      }
  }
  if (!b) b = std::make_unique<HostBuffer>(bytes, kind_, device_);
  std::weak_ptr<BufferPool> weak = shared_from_this();
  // The deleter hands the buffer back if the pool still exists, else frees it.
  return std::shared_ptr<HostBuffer>(b.release(), [weak](HostBuffer* p) {
    std::unique_ptr<HostBuffer> owned(p);
    if (auto pool = weak.lock()) pool->put(std::move(owned));
  });
}

void BufferPool::put(std::unique_ptr<HostBuffer> b) {
  std::lock_guard<std::mutex> lk(mutex_);
  if (free_.size() < max_free_) free_.push_back(std::move(b));
}

Prefetcher::Prefetcher(std::shared_ptr<Loader> loader, long long epoch, int depth, Device target, bool stored_u8,
                       long long first_batch, Shard shard)
    : loader_(std::move(loader)),
      epoch_(epoch),
      first_batch_(first_batch),
      depth_(static_cast<size_t>(std::max(1, depth))),
      stored_u8_(stored_u8 && loader_->stores_u8()),
      shard_(shard) {
  HPCNN_CHECK_ARG(epoch >= 0, "epoch must be >= 0, got ", epoch);
  long long first = 0, count = 0;
  if (loader_->num_batches() > 0) loader_->shard_rows(0, shard_, first, count);  // checks the shard
  HPCNN_CHECK_ARG(depth >= 1, "prefetch must be >= 1, got ", depth);
  HPCNN_CHECK_ARG(first_batch >= 0 && first_batch <= loader_->num_batches(), "first batch ", first_batch,
                  " is outside [0, ", loader_->num_batches(), "] for ", loader_->num_batches(), " batches per epoch");
  const HostMemory kind = host_memory_for(target);
  x_pool_ = std::make_shared<BufferPool>(kind, 2 * depth_ + 4, target.index);
  y_pool_ = std::make_shared<BufferPool>(kind, 2 * depth_ + 4, target.index);
  thread_ = std::thread([this] { produce(); });
}

Prefetcher::~Prefetcher() { stop(); }

void Prefetcher::stop() {
  {
    std::lock_guard<std::mutex> lk(mutex_);
    stop_ = true;
    queue_.clear();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Prefetcher::produce() {
  try {
    const long long nb = loader_->num_batches();
    const Shape row = loader_->row_shape();
    const long long row_elems = shape_numel(row);
    const int classes = loader_->num_classes();
    const bool labels = loader_->has_labels(), one_hot = loader_->options().one_hot;
    for (long long i = first_batch_; i < nb; ++i) {
      {
        // While the queue is full, spend the wait reading the next window ahead (streaming), so
        // that moving to it does not stall a training step; then sleep until there is room.
        std::unique_lock<std::mutex> lk(mutex_);
        while (!stop_ && queue_.size() >= depth_) {
          lk.unlock();
          bool worked = loader_->read_ahead(epoch_, i, shard_);
          lk.lock();
          if (!worked) cv_.wait(lk, [&] { return stop_ || queue_.size() < depth_; });
        }
        if (stop_) break;
      }
      long long first = 0, n = 0;
      loader_->shard_rows(i, shard_, first, n);
      Batch b;
      const DType x_type = stored_u8_ ? DType::U8 : DType::F32;
      // (at least one byte: a rank's empty share of a small last batch is a batch of 0 rows)
      auto xb = x_pool_->get(std::max<size_t>(1, static_cast<size_t>(n * row_elems) * dtype_size(x_type)));
      b.x = host_tensor(xb, loader_->batch_x_shape(n), x_type);
      std::shared_ptr<HostBuffer> yb;
      if (labels) {
        size_t ybytes = std::max<size_t>(1, static_cast<size_t>(one_hot ? n * classes : n) * 4);
        yb = y_pool_->get(ybytes);
        b.y = one_hot ? host_tensor(yb, {n, classes}, DType::F32) : host_tensor(yb, {n}, DType::I32);
      }
      if (stored_u8_) loader_->fill_batch_stored(epoch_, i, b.x.u8(), yb ? yb->data() : nullptr, shard_);
      else loader_->fill_batch(epoch_, i, b.x.f32(), yb ? yb->data() : nullptr, shard_);
      {
        std::lock_guard<std::mutex> lk(mutex_);
        if (stop_) break;
        queue_.push_back(std::move(b));
      }
      cv_.notify_all();
      if (i + 1 == nb) loader_->warm_async(epoch_ + 1, shard_);  // the next epoch's first window(s), meanwhile
    }
  } catch (...) {
    std::lock_guard<std::mutex> lk(mutex_);
    error_ = std::current_exception();
  }
  {
    std::lock_guard<std::mutex> lk(mutex_);
    done_ = true;
  }
  cv_.notify_all();
}

Prefetcher::Status Prefetcher::next(Batch& out, int timeout_ms) {
  std::unique_lock<std::mutex> lk(mutex_);
  bool ready = cv_.wait_for(lk, std::chrono::milliseconds(timeout_ms),
                            [&] { return !queue_.empty() || done_ || stop_; });
  if (!ready) return Status::Timeout;
  if (!queue_.empty()) {
    out = std::move(queue_.front());
    queue_.pop_front();
    lk.unlock();
    cv_.notify_all();
    return Status::Ready;
  }
  if (error_) {
    auto e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
  return Status::End;
}

}  // namespace hpcnn::data
