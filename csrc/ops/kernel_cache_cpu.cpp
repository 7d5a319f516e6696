#include "ops/kernel_cache_cpu.h"

#include <algorithm>
#include <cstring>

namespace hpcnn::cpu {

KernelLease::KernelLease(std::shared_ptr<CachedKernel> entry, std::shared_lock<std::shared_mutex> reading,
                         std::unique_lock<std::shared_mutex> writing, const float* data)
    : entry_(std::move(entry)), reading_(std::move(reading)), writing_(std::move(writing)), data_(data) {}

namespace {

// The calling thread's buffer for a transform too large to keep (grows only).
float* thread_buffer(long long count) {
  static thread_local std::vector<float> buf;
  if ((long long)buf.size() < count) buf.resize(count);
  return buf.data();
}

// Whether `entry` was made from the kernel w (count floats); the caller holds its lock.
bool made_from(const CachedKernel& entry, const float* w, long long count) {
  return (long long)entry.source.size() == count && std::memcmp(entry.source.data(), w, sizeof(float) * count) == 0;
}

}  // namespace

KernelLease KernelCache::get(const float* w, long long count, const std::vector<long long>& key,
                             long long derived_count, const std::function<void(float* dst)>& make) {
  const long long bytes = (count + derived_count) * static_cast<long long>(sizeof(float));
  if (bytes > kMaxEntryBytes) {
    float* dst = thread_buffer(derived_count);
    make(dst);
    std::lock_guard<std::mutex> g(mutex_);
    ++counts_.made;
    return KernelLease(nullptr, {}, {}, dst);
  }
  std::shared_ptr<CachedKernel> entry;
  {
    std::lock_guard<std::mutex> g(mutex_);
    ++clock_;
    for (Slot& s : slots_)
      if (s.address == w && s.key == key) {
        s.last_used = clock_;
        entry = s.entry;
        break;
      }
    if (!entry) {
      std::shared_ptr<CachedKernel> recycled;  // an evicted entry nobody holds: its buffers reused
      while (!slots_.empty() && bytes_ + bytes > kMaxBytes) {
        auto oldest = std::min_element(slots_.begin(), slots_.end(),
                                       [](const Slot& a, const Slot& b) { return a.last_used < b.last_used; });
        bytes_ -= oldest->bytes;
        if (oldest->entry.use_count() == 1) recycled = std::move(oldest->entry);
        slots_.erase(oldest);
      }
      entry = recycled ? std::move(recycled) : std::make_shared<CachedKernel>();
      entry->source.clear();  // nothing made from w yet
      slots_.push_back(Slot{w, key, entry, clock_, bytes});
      bytes_ += bytes;
    }
  }
  // Read under the reader lock when current; else remade under the entry's writer lock, which
  // this call then keeps (no second comparison of what it just copied; the readers wait, as they
  // must for a remake anyway).
  std::shared_lock<std::shared_mutex> reading(entry->lock);
  bool made = false;
  std::unique_lock<std::shared_mutex> writing;
  if (!made_from(*entry, w, count)) {
    reading.unlock();
    writing = std::unique_lock<std::shared_mutex>(entry->lock);
    if (!made_from(*entry, w, count)) {  // another call may have remade it meanwhile
      entry->source.assign(w, w + count);
      entry->derived.resize(derived_count);
      make(entry->derived.data());
      made = true;
    }
  }
  {
    std::lock_guard<std::mutex> g(mutex_);
    ++(made ? counts_.made : counts_.reused);
  }
  const float* data = entry->derived.data();
  return KernelLease(entry, std::move(reading), std::move(writing), data);
}

KernelCache::Stats KernelCache::stats() {
  std::lock_guard<std::mutex> g(mutex_);
  Stats s = counts_;
  s.entries = static_cast<long long>(slots_.size());
  s.bytes = bytes_;
  return s;
}

void KernelCache::clear() {
  std::lock_guard<std::mutex> g(mutex_);
  slots_.clear();
  bytes_ = 0;
  counts_ = Stats{};
}

KernelCache& winograd_kernel_cache() {
  static KernelCache cache;
  return cache;
}

}  // namespace hpcnn::cpu
