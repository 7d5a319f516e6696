#include "data/loader.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <limits>
#include <random>

#include "core/batch_shares.h"
#include "core/dynamic_for.h"
#include "core/errors.h"
#include "core/pixel.h"
#include "core/thread_pool.h"
#include "data/size_checks.h"

namespace hpcnn::data {

CacheMode parse_cache_mode(const std::string& s) {
  if (s == "auto") return CacheMode::Auto;
  if (s == "memory") return CacheMode::Memory;
  if (s == "none") return CacheMode::None;
  throw ValueError(cat("cache must be 'auto', 'memory' or 'none', got '", s, "'"));
}

std::optional<ShuffleMode> parse_shuffle_mode(const std::string& s) {
  if (s == "auto") return std::nullopt;
  if (s == "off") return ShuffleMode::Off;
  if (s == "rows") return ShuffleMode::Rows;
  if (s == "chunk_groups") return ShuffleMode::ChunkGroups;
  throw ValueError(cat("shuffle must be 'auto', 'off', 'rows' or 'chunk_groups', got '", s, "'"));
}

Loader::Loader(LoaderOptions opt) : opt_(std::move(opt)) {
  HPCNN_CHECK_ARG(opt_.batch_size >= 1, "batch_size must be >= 1, got ", opt_.batch_size);
  HPCNN_CHECK_ARG(opt_.num_classes >= 0, "num_classes must be >= 0, got ", opt_.num_classes);
  if (!opt_.seed) opt_.seed = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  x_ = std::make_unique<H5Dataset>(opt_.path, opt_.x_name);
  const DatasetInfo& xi = x_->info();
  const int rank = static_cast<int>(xi.shape.size());
  HPCNN_CHECK_ARG(rank >= 2 && rank <= 4, x_->where(), " has shape ", shape_str(xi.shape),
                  ": expected images (N, H, W, C) or (N, H, W), or features (N, F)");
  HPCNN_CHECK_ARG(xi.kind == ElemKind::U8 || xi.kind == ElemKind::F32, x_->where(), " has dtype ", xi.dtype,
                  ": expected uint8 or float32");
  HPCNN_CHECK_ARG(xi.rows() > 0, x_->where(), " is empty (shape ", shape_str(xi.shape), ")");
  HPCNN_CHECK_ARG(xi.row_elems() > 0, x_->where(), " has empty rows (shape ", shape_str(xi.shape), ")");
  rows_ = xi.rows();
  const long long ch = rank == 4 ? xi.shape[3] : rank == 3 ? 1 : xi.shape[1];
  HPCNN_CHECK_ARG(ch <= std::numeric_limits<int>::max(), x_->where(), " has shape ", shape_str(xi.shape),
                  ": more channels than hpcnn handles");
  channels_ = static_cast<int>(ch);
  plan_memory();

  auto expand = [&](const std::vector<float>& v, const char* what) {
    HPCNN_CHECK_ARG(v.size() == 1 || v.size() == static_cast<size_t>(channels_), what, " has ", v.size(),
                    " values; expected 1 or one per channel (", channels_, ") for x of shape ", shape_str(xi.shape));
    std::vector<float> out(channels_);
    for (int c = 0; c < channels_; ++c) out[c] = v.size() == 1 ? v[0] : v[c];
    return out;
  };
  scale_ = expand(opt_.scale, "scale");
  shift_ = expand(opt_.shift, "shift");
  scale_row_.resize(xi.row_elems());
  shift_row_.resize(xi.row_elems());
  for (long long e = 0; e < xi.row_elems(); ++e) {
    scale_row_[e] = scale_[e % channels_];
    shift_row_[e] = shift_[e % channels_];
  }

  if (!opt_.y_name.empty()) {
    y_ = std::make_unique<H5Dataset>(opt_.path, opt_.y_name);
    const DatasetInfo& yi = y_->info();
    bool shape_ok = yi.shape.size() == 1 || (yi.shape.size() == 2 && yi.shape[1] == 1);
    HPCNN_CHECK_ARG(shape_ok, y_->where(), " has shape ", shape_str(yi.shape),
                    ": labels must be class indices of shape (N,) or (N, 1)");
    HPCNN_CHECK_ARG(yi.kind == ElemKind::U8 || yi.kind == ElemKind::Int, y_->where(), " has dtype ", yi.dtype,
                    ": labels must be integers (class indices)");
    HPCNN_CHECK_ARG(yi.rows() == rows_, "x and y have different lengths in file '", opt_.path, "': '",
                    opt_.x_name, "' has ", rows_, " rows, '", opt_.y_name, "' has ", yi.rows());
    std::vector<int64_t> raw = y_->read_all_int64();
    int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
    for (int64_t v : raw) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    if (opt_.num_classes > 0) {
      for (size_t k = 0; k < raw.size(); ++k)
        HPCNN_CHECK_ARG(raw[k] >= 0 && raw[k] < opt_.num_classes, "label ", raw[k], " at row ", k, " of ",
                        y_->where(), " is outside [0, ", opt_.num_classes, ") (num_classes=", opt_.num_classes, ")");
      num_classes_ = opt_.num_classes;
    } else {
      HPCNN_CHECK_ARG(lo >= 0, y_->where(), " holds a negative label (", lo, "): labels must be class indices >= 0");
      HPCNN_CHECK_ARG(hi < (1 << 20), y_->where(), " holds label ", hi, ": too large for a class index");
      num_classes_ = static_cast<int>(hi) + 1;
    }
    labels_.assign(raw.begin(), raw.end());
  } else {
    HPCNN_CHECK_ARG(!opt_.one_hot, "one_hot needs labels, but no y dataset was given");
    num_classes_ = opt_.num_classes;
  }
  // Epoch 0's first window loads while the caller builds its model. Not with chunk groups: which
  // lanes a rank reads is known only when its producer asks for its share.
  if (shuffle_mode() != ShuffleMode::ChunkGroups) warm_async(0);
}

void Loader::plan_memory() {
  // Before anything is allocated from sizes the file declares (a damaged header can declare 2^62
  // rows in a small file), the memory the loader needs up front: the labels (stored, int64 and
  // int32 copies), the epoch's order (and its shuffle scratch), the per-row scale and shift, a
  // block as read and decoded, two batches; plus every row with the memory cache. Sizes fit 63
  // bits (checked when the dataset was opened), but their sums and products are checked too.
  const uint64_t rows = static_cast<uint64_t>(rows_), row_bytes = x_->row_bytes();
  const uint64_t row_elems = static_cast<uint64_t>(x_->info().row_elems());
  const uint64_t block_bytes = static_cast<uint64_t>(x_->block_rows()) * row_bytes;  // <= the dataset
  const uint64_t total = x_->total_bytes();
  const uint64_t batch = std::min<uint64_t>(static_cast<uint64_t>(opt_.batch_size), rows);
  const uint64_t kTooMuch = std::numeric_limits<uint64_t>::max();
  const uint64_t kPerCachedBlock = 128;  // the cache's map node and vector, per block
  uint64_t need = 0;
  auto add = [&](uint64_t a, uint64_t b) {
    uint64_t p = 0;
    if (need == kTooMuch || !checked_mul(a, b, p) || !checked_add(need, p, need)) need = kTooMuch;
  };
  if (!opt_.y_name.empty()) add(rows, 8 + 8 + 4);
  add(rows, 2 * sizeof(long long));                            // the order, its shuffle scratch
  add(static_cast<uint64_t>(x_->num_blocks()), 2 * sizeof(long long));  // block order, windows
  add(row_elems, 2 * sizeof(float));
  add(block_bytes, 2);
  add(batch * 2, row_elems * sizeof(float));
  // The shuffle, when not given: a pure function of the file and the options (never of the rank
  // count or of the memory this machine has: every rank must make the same choice). The exact
  // row shuffle where the file is read once into memory; chunk groups where it is streamed, and
  // every epoch's bytes count (and, with ranks, shrink to ~1/ranks each).
  const bool fits = total <= opt_.memory_budget;
  if (!opt_.shuffle)
    opt_.shuffle = opt_.cache == CacheMode::Memory || (opt_.cache == CacheMode::Auto && fits) ? ShuffleMode::Rows
                                                                                                 : ShuffleMode::ChunkGroups;
  const bool groups = *opt_.shuffle == ShuffleMode::ChunkGroups;
  if (groups) {
    add(rows, sizeof(long long));                                // the lanes' rows before they are dealt
    add(static_cast<uint64_t>(x_->num_blocks()), sizeof(long long));  // block_last_batch_
  }
  const uint64_t base = need;
  const uint64_t avail = available_memory();

  in_memory_ = opt_.cache == CacheMode::Memory ||
               (opt_.cache == CacheMode::Auto && total <= opt_.memory_budget && base != kTooMuch &&
                total <= avail && base <= avail - total);
  const long long nblocks = x_->num_blocks();
  // Chunk groups: a window per lane, of blocks that the lane's rows are shuffled within; the same
  // on every rank (a function of the budget and the file): the whole lane when the file fits the
  // budget, else a size that lets one process hold every lane's current and next window.
  const ChunkGroupShape shape = chunk_group_shape(opt_.memory_budget, block_bytes, x_->block_rows(), opt_.batch_size,
                                                  nblocks, fits);
  lanes_ = groups ? shape.lanes : 0;
  if (in_memory_) {
    window_blocks_ = groups ? shape.window_blocks : nblocks;
    cache_capacity_ = nblocks;
    add(total, 1);
    add(static_cast<uint64_t>(cache_capacity_), kPerCachedBlock);
  } else if (groups) {
    // One process (the most a rank can cover) holds each lane's window and the next one (a batch
    // straddles them; read-ahead fills the next), shuffle_plan.h. A rank of R holds ~1/R of that.
    window_blocks_ = shape.window_blocks;
    cache_capacity_ = std::min(nblocks, shape.cache_blocks());
    add(static_cast<uint64_t>(cache_capacity_), block_bytes + kPerCachedBlock);
  } else {
    // Two windows fit the budget: a batch can straddle a window boundary.
    window_blocks_ = std::max<long long>(1, static_cast<long long>(opt_.memory_budget / 2 / std::max<uint64_t>(1, block_bytes)));
    window_blocks_ = std::min(window_blocks_, x_->num_blocks());
    cache_capacity_ = 2 * window_blocks_;
    add(static_cast<uint64_t>(cache_capacity_), block_bytes + kPerCachedBlock);
  }
  require_memory(need, cat("reading ", x_->where(), opt_.y_name.empty() ? "" : cat(" with labels '", opt_.y_name, "'"),
                           " (", rows_, " rows of ", bytes_str(row_bytes), ", cache='",
                           in_memory_ ? "memory" : "none", "')"));
}

Loader::~Loader() {
  std::lock_guard<std::mutex> lk(warm_mutex_);
  if (warm_.joinable()) warm_.join();
}

void Loader::warm_async(long long epoch, const Shard& shard) {
  std::lock_guard<std::mutex> lk(warm_mutex_);
  if (warming_.exchange(true)) return;
  if (warm_.joinable()) warm_.join();  // the previous warm-up has finished (warming_ was false)
  warm_ = std::thread([this, epoch, shard] {
    try {
      std::lock_guard<std::mutex> lock(mutex_);
      // Too late when a producer has already started this epoch: loading its first window again
      // would only evict the blocks it is working on.
      if (filled_epoch_ != epoch) {
        const long long blocks0 = blocks_read_;
        const uint64_t read0 = x_->bytes_read(), inflated0 = x_->bytes_inflated();
        struct Count {  // whatever the warm-up read, even when it fails half-way
          std::function<void()> f;
          ~Count() { f(); }
        } count{[&] {
          warm_blocks_ += blocks_read_ - blocks0;
          warm_bytes_read_ += x_->bytes_read() - read0;
          warm_bytes_inflated_ += x_->bytes_inflated() - inflated0;
        }};
        const EpochPlan& p = plan(epoch);
        if (p.lanes > 0) {  // the first windows of the shard's lanes: what its first batch reads
          long long first = 0, n = 0;
          shard_rows(0, shard, first, n);
          if (n > 0) ensure_blocks(blocks_for(p, first, n));
        } else if (!p.windows.empty()) {
          ensure_blocks(p.windows[0]);
        }
      }
    } catch (...) {
      // fill_batch meets the same error and reports it to the consumer.
    }
    warming_ = false;
  });
}

void Loader::wait_warm_up() {
  std::lock_guard<std::mutex> lk(warm_mutex_);
  if (warm_.joinable()) warm_.join();
}

void Loader::set_seed(uint64_t seed) {
  std::lock_guard<std::mutex> wl(warm_mutex_);
  if (warm_.joinable()) warm_.join();  // a warm-up planning with the old seed finishes first
  std::lock_guard<std::mutex> lk(mutex_);
  if (*opt_.seed == seed) return;
  opt_.seed = seed;
  plan_epoch_ = -1;
  filled_epoch_ = -1;
}

long long Loader::num_batches() const {
  long long b = opt_.batch_size;
  return opt_.drop_remainder ? rows_ / b : (rows_ + b - 1) / b;
}

long long Loader::batch_rows(long long i) const {
  return std::max(0LL, std::min(opt_.batch_size, rows_ - i * opt_.batch_size));
}

void Loader::shard_rows(long long i, const Shard& shard, long long& first, long long& count) const {
  HPCNN_CHECK_ARG(shard.ranks >= 1 && shard.rank >= 0 && shard.rank < shard.ranks, "shard: rank ", shard.rank,
                  " of ", shard.ranks, " ranks");
  const long long n = batch_rows(i);
  first = share_begin(n, shard.ranks, shard.rank);
  count = share_end(n, shard.ranks, shard.rank) - first;
}

Shape Loader::batch_x_shape(long long rows) const {
  Shape s = x_->info().shape;
  s[0] = rows;
  if (s.size() == 3) s.push_back(1);  // (N, H, W) -> (B, H, W, 1): what Conv2D takes
  return s;
}

std::string Loader::repr() const {
  std::string s = cat("HDF5Dataset('", opt_.path, "', ", x_->info().describe());
  if (y_) s += cat(", ", y_->info().describe());
  s += cat(", rows=", rows_, ", batch_size=", opt_.batch_size, ", batches=", num_batches(),
           ", shuffle='", shuffle_mode_name(shuffle_mode()), "'", ", cache=",
           in_memory_ ? "'memory'"
                      : cat("'none' (", shuffle_mode() == ShuffleMode::ChunkGroups ? cat(lanes_, " lanes, windows") : std::string("window"),
                            " of ", window_blocks_, " x ", x_->block_rows(), " rows)"),
           ", read=", x_->raw_chunk_path() ? "raw chunks + parallel inflate" : "hyperslab", ")");
  return s;
}

const EpochPlan& Loader::plan(long long epoch) {
  if (epoch != plan_epoch_) {
    plan_ = make_epoch_plan(rows_, x_->block_rows(), window_blocks_, shuffle_mode(), *opt_.seed, epoch,
                            opt_.batch_size, lanes_);
    check_epoch_plan(plan_, rows_, x_->block_rows());  // fill reads only the blocks the plan loads
    plan_epoch_ = epoch;
    if (plan_.lanes > 0) {
      block_last_batch_.assign(x_->num_blocks(), -1);
      for (long long pos = 0; pos < rows_; ++pos) {
        long long& last = block_last_batch_[plan_.order[pos] / x_->block_rows()];
        last = std::max(last, pos / opt_.batch_size);
      }
    }
    if (!in_memory_)  // streaming: every epoch reads the file again
      for (auto it = cache_.begin(); it != cache_.end();) it = drop_block(it);
  }
  return plan_;
}

std::unordered_map<long long, std::vector<uint8_t>>::iterator Loader::drop_block(
    std::unordered_map<long long, std::vector<uint8_t>>::iterator it) {
  spare_.push_back(std::move(it->second));
  return cache_.erase(it);
}

void Loader::ensure_blocks(const std::vector<long long>& needed) {
  std::vector<long long> missing;
  for (long long b : needed)
    if (!cache_.count(b)) missing.push_back(b);
  if (missing.empty()) return;
  if (!in_memory_) {
    // Evict blocks this batch does not need, oldest windows first (the plan's order is not
    // needed: a block is never needed again in the same epoch once its window is done).
    std::vector<long long> keep(needed.begin(), needed.end());
    std::sort(keep.begin(), keep.end());
    long long room = cache_capacity_ - static_cast<long long>(missing.size());
    if (plan_.lanes > 0) {
      // Chunk groups: lanes move to their next windows at different batches; drop the blocks
      // whose last batch comes first (those done with), never a lane's window read ahead first.
      std::vector<std::pair<long long, long long>> drop;  // (last batch, block)
      for (auto& kv : cache_)
        if (!std::binary_search(keep.begin(), keep.end(), kv.first)) drop.emplace_back(block_last_batch_[kv.first], kv.first);
      std::sort(drop.begin(), drop.end());
      for (size_t k = 0; k < drop.size() && static_cast<long long>(cache_.size()) > std::max(0LL, room); ++k)
        drop_block(cache_.find(drop[k].second));
    } else {
      for (auto it = cache_.begin(); it != cache_.end() && static_cast<long long>(cache_.size()) > std::max(0LL, room);) {
        if (!std::binary_search(keep.begin(), keep.end(), it->first)) it = drop_block(it);
        else ++it;
      }
    }
  }
  std::vector<uint8_t*> dst;
  for (long long b : missing) {
    auto& buf = cache_[b];
    if (!spare_.empty()) {  // a dropped block's buffer: already faulted in, no zero fill at its size
      buf = std::move(spare_.back());
      spare_.pop_back();
    }
    buf.resize(static_cast<size_t>(x_->rows_in_block(b)) * x_->row_bytes());
    dst.push_back(buf.data());
  }
  try {
    x_->read_blocks(missing, dst);
  } catch (...) {
    for (long long b : missing) cache_.erase(b);  // never keep half-read blocks
    throw;
  }
  blocks_read_ += static_cast<long long>(missing.size());
  size_t bytes = 0;
  for (auto& kv : cache_) bytes += kv.second.capacity();
  for (auto& v : spare_) bytes += v.capacity();  // held too
  peak_cached_ = std::max(peak_cached_.load(), bytes);
}

std::vector<long long> Loader::blocks_for(const EpochPlan& p, long long p0, long long n) const {
  std::vector<long long> wins;
  if (p.lanes == 0) {
    for (long long w = p.window_of(p0); w <= p.window_of(p0 + n - 1); ++w) wins.push_back(w);
  } else {
    for (long long pos = p0; pos < p0 + n; ++pos) {
      const long long w = p.window_of(pos);
      if (wins.empty() || wins.back() != w) wins.push_back(w);
    }
    std::sort(wins.begin(), wins.end());
    wins.erase(std::unique(wins.begin(), wins.end()), wins.end());
  }
  std::vector<long long> blocks;
  for (long long w : wins) blocks.insert(blocks.end(), p.windows[w].begin(), p.windows[w].end());
  if (p.lanes > 0) {  // neighbouring lanes' windows may share a block
    std::sort(blocks.begin(), blocks.end());
    blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
  }
  return blocks;
}

bool Loader::read_ahead(long long epoch, long long next_batch, const Shard& shard) {
  if (in_memory_ || next_batch >= num_batches()) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  const EpochPlan& p = plan(epoch);
  if (p.lanes > 0) {
    // The next window of each lane the shard's rows of batch `next_batch` fall in.
    long long first = 0, n = 0;
    shard_rows(next_batch, shard, first, n);
    if (n == 0) return false;
    const long long p0 = next_batch * opt_.batch_size + first;
    std::vector<long long> cur;
    for (long long pos = p0; pos < p0 + n; ++pos) {
      const long long w = p.window_of(pos);
      if (cur.empty() || cur.back() != w) cur.push_back(w);
    }
    const size_t block_bytes = static_cast<size_t>(x_->block_rows()) * x_->row_bytes();
    const long long step = std::max<long long>(1, static_cast<long long>((size_t(16) << 20) / std::max<size_t>(1, block_bytes)));
    std::vector<long long> todo;
    for (long long w : cur) {
      const long long lane = std::upper_bound(p.lane_windows.begin(), p.lane_windows.end(), w) - p.lane_windows.begin() - 1;
      if (w + 1 >= p.lane_windows[lane + 1]) continue;  // the lane's last window
      for (long long b : p.windows[w + 1])
        if (!cache_.count(b) && static_cast<long long>(todo.size()) < step &&
            std::find(todo.begin(), todo.end(), b) == todo.end())
          todo.push_back(b);
    }
    if (todo.empty()) return false;
    // Room: blocks whose last batch is before `next_batch` are done with for this epoch.
    for (auto it = cache_.begin(); it != cache_.end();) {
      if (block_last_batch_[it->first] < next_batch) it = drop_block(it);
      else ++it;
    }
    if (static_cast<long long>(cache_.size() + todo.size()) > cache_capacity_) return false;
    ensure_blocks(todo);
    return true;
  }
  const long long w = p.window_of(next_batch * opt_.batch_size) + 1;
  if (w >= static_cast<long long>(p.windows.size())) return false;
  const size_t block_bytes = static_cast<size_t>(x_->block_rows()) * x_->row_bytes();
  const long long step = std::max<long long>(1, static_cast<long long>((size_t(16) << 20) / std::max<size_t>(1, block_bytes)));
  std::vector<long long> todo;
  for (long long b : p.windows[w])
    if (!cache_.count(b) && static_cast<long long>(todo.size()) < step) todo.push_back(b);
  if (todo.empty()) return false;
  // Room: blocks of windows before w - 1 are done for this epoch; drop them first.
  std::vector<long long> keep(p.windows[w].begin(), p.windows[w].end());
  keep.insert(keep.end(), p.windows[w - 1].begin(), p.windows[w - 1].end());
  std::sort(keep.begin(), keep.end());
  for (auto it = cache_.begin(); it != cache_.end();) {
    if (!std::binary_search(keep.begin(), keep.end(), it->first)) it = drop_block(it);
    else ++it;
  }
  if (static_cast<long long>(cache_.size() + todo.size()) > cache_capacity_) return false;
  ensure_blocks(todo);
  return true;
}

void Loader::fill_batch(long long epoch, long long i, float* x_out, void* y_out, const Shard& shard) {
  fill(epoch, i, x_out, true, y_out, shard);
}

void Loader::fill_batch_stored(long long epoch, long long i, uint8_t* x_out, void* y_out, const Shard& shard) {
  HPCNN_CHECK_ARG(stores_u8(), x_->where(), " is not uint8: only uint8 rows are delivered as stored");
  fill(epoch, i, x_out, false, y_out, shard);
}

void Loader::fill(long long epoch, long long i, void* x_out, bool decode, void* y_out, const Shard& shard) {
  HPCNN_CHECK_ARG(i >= 0 && i < num_batches(), "batch index ", i, " out of range for ", num_batches(),
                  " batches per epoch");
  HPCNN_CHECK_ARG(epoch >= 0, "epoch must be >= 0, got ", epoch);
  long long first = 0, n = 0;
  shard_rows(i, shard, first, n);
  std::lock_guard<std::mutex> lock(mutex_);
  const EpochPlan& p = plan(epoch);
  filled_epoch_ = epoch;
  if (n == 0) return;  // a rank's empty share of a small last batch
  const long long b = opt_.batch_size, p0 = i * b + first;
  const long long br = x_->block_rows();
  std::vector<long long> needed;
  if (shard.ranks > 1 && shuffle_mode() == ShuffleMode::Off) {
    // Rows in file order: only the blocks of this rank's rows.
    for (long long blk = p.order[p0] / br; blk <= p.order[p0 + n - 1] / br; ++blk) needed.push_back(blk);
  } else {
    needed = blocks_for(p, p0, n);  // chunk groups: only the windows of this rank's lanes
  }
  ensure_blocks(needed);

  std::vector<const uint8_t*> src(n);
  const size_t rb = x_->row_bytes();
  for (long long k = 0; k < n; ++k) {
    long long row = p.order[p0 + k];
    src[k] = cache_.at(row / br).data() + static_cast<size_t>(row % br) * rb;
  }
  const long long elems = x_->info().row_elems();
  const float* sc = scale_row_.data();
  const float* sh = shift_row_.data();
  const bool u8 = x_->info().kind == ElemKind::U8;
  auto t0 = std::chrono::steady_clock::now();
  dynamic_for(n, 8, [&](long long k0, long long k1) {
    for (long long k = k0; k < k1; ++k) {
      if (!decode) {  // uint8 rows as stored (the consumer decodes)
        std::memcpy(static_cast<uint8_t*>(x_out) + k * elems, src[k], static_cast<size_t>(elems));
        continue;
      }
      float* __restrict__ y = static_cast<float*>(x_out) + k * elems;
      if (u8) {
        const uint8_t* __restrict__ x = src[k];
        for (long long e = 0; e < elems; ++e) y[e] = pixel::decode_u8(x[e], sc[e], sh[e]);
      } else {
        const float* __restrict__ x = reinterpret_cast<const float*>(src[k]);
        for (long long e = 0; e < elems; ++e) y[e] = x[e] * sc[e] + sh[e];
      }
    }
  });
  decode_seconds_.store(decode_seconds_.load() +
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());

  if (y_ && y_out) {
    if (opt_.one_hot) {
      float* y = static_cast<float*>(y_out);
      std::fill(y, y + n * num_classes_, 0.0f);
      for (long long k = 0; k < n; ++k) y[k * num_classes_ + labels_[p.order[p0 + k]]] = 1.0f;
    } else {
      int32_t* y = static_cast<int32_t*>(y_out);
      for (long long k = 0; k < n; ++k) y[k] = labels_[p.order[p0 + k]];
    }
  }
}

}  // namespace hpcnn::data
