// The batch loader behind hpcnn.data.HDF5Dataset: x (and optionally y) from one HDF5 file, an
// epoch plan (shuffle_plan.h), a cache of decoded-from-disk row blocks bounded by a byte budget,
// and fill_batch, which turns the rows of batch i of epoch e into float32 x and int32 (or one-hot
// float32) y (fill_batch_stored: x left as stored uint8, for a model that decodes on its GPU). Both the prefetcher's producer thread and random access (ds[i]) call fill_batch;
// a mutex keeps one caller at a time (the heavy work inside runs on hpcnn's pool).
//
// Data parallelism (a Shard): each rank fills only its share of every global batch, the rows
// [share_begin(n, ranks, rank), share_end(n, ranks, rank)) of batch i's n rows (core/batch_shares.h):
// disjoint over the ranks, their union the epoch, the global batches the same for any rank count
// (the plan is a function of (seed, epoch) and the file, never of the ranks, and every rank must
// use the same seed). A rank whose share of a small last batch is empty gets a batch of 0 rows.
// What a rank reads: without shuffling (validation), only the blocks that hold its rows; with the
// chunk-group shuffle, only the blocks of its lanes (~1/ranks of the file, shuffle_plan.h); with
// the rows shuffle, rows are mixed within a window, so each rank reads every window (as one rank
// would: fine when the file is cached in memory, read once).
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"
#include "data/h5_dataset.h"
#include "data/shuffle_plan.h"

namespace hpcnn::data {

enum class CacheMode { Auto, Memory, None };
CacheMode parse_cache_mode(const std::string& s);
// "off", "rows", "chunk_groups"; "auto" is none (the loader chooses). ValueError for others.
std::optional<ShuffleMode> parse_shuffle_mode(const std::string& s);

// Which share of every batch a rank fills (rank 0 of 1: the whole batch).
struct Shard {
  long long rank = 0, ranks = 1;
};

struct LoaderOptions {
  std::string path, x_name = "x_train", y_name = "y_train";  // y_name "" = no labels
  long long batch_size = 32;
  // None: chosen from the file and the options, never from the rank count: Rows when the stored
  // bytes fit memory_budget (cached in memory, read once: the exact full shuffle costs nothing)
  // or cache is Memory; ChunkGroups when the file is streamed (there the bytes per rank matter).
  std::optional<ShuffleMode> shuffle;
  std::optional<uint64_t> seed;  // none: a fresh random seed for this loader
  std::vector<float> scale{1.0f / 255}, shift{0.0f};  // per channel (size 1 or channels)
  int num_classes = 0;    // 0: inferred from the labels (max + 1); negative: ValueError
  bool one_hot = false;   // y as float32 (B, num_classes)
  bool drop_remainder = false;
  CacheMode cache = CacheMode::Auto;
  size_t memory_budget = size_t(1) << 30;
};

class Loader {
 public:
  explicit Loader(LoaderOptions opt);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // Loads the first window of `epoch` on a background thread (a no-op while one is running), so
  // that an epoch does not open with a stall: called for epoch 0 at construction and for epoch
  // e + 1 when the producer has made the last batch of epoch e. With chunk groups, the first
  // windows of the lanes `shard` covers (none at construction: the shard is not known yet, and
  // reading every lane would read the whole of what a rank should not). Errors are left for
  // fill_batch to report.
  void warm_async(long long epoch, const Shard& shard = {});
  // Waits for a warm-up in progress (tests and benchmarks: counters that no longer move).
  void wait_warm_up();

  const LoaderOptions& options() const { return opt_; }
  ShuffleMode shuffle_mode() const { return *opt_.shuffle; }
  // The shuffle seed (the one given, or the one drawn at construction). A data-parallel run gives
  // every rank rank 0's, so that all ranks follow the same plan. set_seed replaces it, as
  // a resumed training run does to repeat the shuffle order of the run it continues; epoch plans
  // made with the old seed are dropped (cached rows stay: they do not depend on the order).
  uint64_t seed() const { return *opt_.seed; }
  void set_seed(uint64_t seed);
  const DatasetInfo& x_info() const { return x_->info(); }
  const DatasetInfo* y_info() const { return y_ ? &y_->info() : nullptr; }
  long long num_rows() const { return rows_; }
  long long num_batches() const;
  long long batch_rows(long long i) const;  // rows in batch i
  // The rows [first, first + count) of batch i that `shard` fills.
  void shard_rows(long long i, const Shard& shard, long long& first, long long& count) const;
  Shape batch_x_shape(long long rows) const;  // (B, H, W, C) / (B, H, W, 1) / (B, F)
  Shape row_shape() const {
    Shape s = batch_x_shape(1);
    return Shape(s.begin() + 1, s.end());
  }
  int num_classes() const { return num_classes_; }
  bool has_labels() const { return y_ != nullptr; }
  bool in_memory() const { return in_memory_; }
  long long window_blocks() const { return window_blocks_; }
  long long lanes() const { return lanes_; }  // chunk groups' lanes (shuffle_plan.h); 0 otherwise
  long long block_rows() const { return x_->block_rows(); }
  bool raw_chunk_path() const { return x_->raw_chunk_path(); }
  std::string repr() const;

  // Streaming read-ahead, for the producer's idle time (its queue is full): loads up to ~16 MiB
  // of the window after the one batch `next_batch` of `epoch` falls in (chunk groups: the next
  // windows of the lanes `shard` covers), within the cache budget. Returns false when there is
  // nothing to do (memory mode, last window, already loaded, no room).
  bool read_ahead(long long epoch, long long next_batch, const Shard& shard = {});

  // Fills batch i of `epoch`: x_out holds batch_rows(i) * row elements, decoded to float
  // (x * scale + shift per channel); y_out batch_rows(i) int32 labels, or batch_rows(i) *
  // num_classes floats when one_hot (ignored without labels).
  // With a shard: only its rows of the batch (shard_rows), x_out and y_out sized for them.
  void fill_batch(long long epoch, long long i, float* x_out, void* y_out, const Shard& shard = {});
  // The same batch with x as stored, uint8 (stores_u8() only): for a consumer that decodes on its
  // own device with decode_scale()/decode_shift() (a GPU model: a quarter of the bytes cross PCIe).
  void fill_batch_stored(long long epoch, long long i, uint8_t* x_out, void* y_out, const Shard& shard = {});
  bool stores_u8() const { return x_->info().kind == ElemKind::U8; }
  // The decode as one value per channel (the last axis of a delivered row).
  const std::vector<float>& decode_scale() const { return scale_; }
  const std::vector<float>& decode_shift() const { return shift_; }

  // Counters for tests and benchmarks: blocks read from the file so far, the bytes read for them
  // (as stored: compressed chunks) and inflated (decoded), peak cached bytes.
  long long blocks_read() const { return blocks_read_; }
  uint64_t bytes_read() const { return x_->bytes_read(); }
  uint64_t bytes_inflated() const { return x_->bytes_inflated(); }
  // The part of those counts that warm-ups read (an epoch's first windows, read during the epoch
  // before): what a counted epoch minus its warm-up of the next one read is exact.
  long long warm_blocks_read() const { return warm_blocks_; }
  uint64_t warm_bytes_read() const { return warm_bytes_read_; }
  uint64_t warm_bytes_inflated() const { return warm_bytes_inflated_; }
  size_t peak_cached_bytes() const { return peak_cached_; }
  double io_seconds() const { return x_->io_seconds(); }
  double inflate_seconds() const { return x_->inflate_seconds(); }
  double scatter_seconds() const { return x_->scatter_seconds(); }
  double decode_seconds() const { return decode_seconds_; }

 private:
  // Chooses the cache mode and window, and checks the memory they need (MemoryError naming the
  // file and dataset) before anything sized by the file is allocated.
  void plan_memory();
  const EpochPlan& plan(long long epoch);
  // Drops a block from the cache, keeping its buffer for reuse (spare_); returns the next entry.
  std::unordered_map<long long, std::vector<uint8_t>>::iterator drop_block(
      std::unordered_map<long long, std::vector<uint8_t>>::iterator it);
  void ensure_blocks(const std::vector<long long>& needed);
  // The blocks of the windows that positions [p0, p0 + n) of the epoch's order fall in.
  std::vector<long long> blocks_for(const EpochPlan& p, long long p0, long long n) const;
  void fill(long long epoch, long long i, void* x_out, bool decode, void* y_out, const Shard& shard);

  LoaderOptions opt_;
  std::unique_ptr<H5Dataset> x_, y_;
  std::vector<int32_t> labels_;
  long long rows_ = 0;
  int num_classes_ = 0;
  int channels_ = 1;
  std::vector<float> scale_, shift_;  // expanded to `channels_`
  std::vector<float> scale_row_, shift_row_;  // expanded to one row: a decode loop that vectorizes
  std::atomic<double> decode_seconds_{0};  // stats: written under mutex_, read by anyone
  bool in_memory_ = false;
  long long window_blocks_ = 1, cache_capacity_ = 1, lanes_ = 0;

  std::mutex mutex_;
  std::mutex warm_mutex_;           // guards warm_ (start/join)
  std::thread warm_;
  std::atomic<bool> warming_{false};
  long long plan_epoch_ = -1;
  long long filled_epoch_ = -1;     // the epoch fill_batch last served (a warm-up for it is moot)
  EpochPlan plan_;
  // Chunk groups: the last batch of the epoch that reads each block (any rank's). A streaming
  // cache drops the blocks whose batches come soonest first: those past their last use, never
  // the windows read ahead.
  std::vector<long long> block_last_batch_;
  std::unordered_map<long long, std::vector<uint8_t>> cache_;  // block id -> stored bytes
  // Buffers of blocks dropped from a streaming cache, reused for the next blocks read: fresh
  // memory for every block of every epoch cost page faults and a zero fill per byte (about an
  // eighth of a streamed epoch's time). Never more buffers in all than the cache ever held.
  std::vector<std::vector<uint8_t>> spare_;
  std::list<long long> lru_;                                  // most recent first
  std::atomic<long long> blocks_read_{0}, warm_blocks_{0};
  std::atomic<uint64_t> warm_bytes_read_{0}, warm_bytes_inflated_{0};
  std::atomic<size_t> peak_cached_{0};
};

}  // namespace hpcnn::data
