// Transformed convolution kernels kept between calls, on the CPU. The Winograd forward pass
// (ops/conv2d_winograd_cpu.cpp) multiplies by U = G g G^T, four times the kernel's size for
// F(4x4, 3x3), remade from the kernel on every call. In a training step the kernel is new every
// time, but a notebook's predict() after training calls the same weights again and again, and at
// batch 1 remaking U was 55 % of the tutorial CNN's time (perf, bench/RESULTS.md).
//
// Kept by the kernel's address and geometry, and checked by value: each call compares the kernel
// with the copy U was made from (memcmp, a quarter of what reading U costs) and remakes U when
// a single bit differs, so weights changed in place by an optimizer step, set_weights, a load, or
// through a NumPy view never meet a stale U. Bounded: at most kMaxBytes in all (the least recently
// used entries go first, their buffers reused), and a kernel whose entry would take more than
// kMaxEntryBytes is transformed into a per-thread buffer as before. Calls that find their entry
// current share it (a reader lock): the chunks of an inference step that run on several threads
// at once (nn/chunked_inference.cpp) use the same transform side by side; remaking it takes the
// entry alone.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <vector>

namespace hpcnn::cpu {

struct CachedKernel {
  std::shared_mutex lock;       // shared by calls reading `derived`, held alone while one makes it
  std::vector<float> source;    // the kernel `derived` was made from
  std::vector<float> derived;   // its transform
};

// A transformed kernel held for one call: valid, and not remade by another thread, while the
// lease lives (it holds the entry's reader lock, or its writer lock when this call remade it).
class KernelLease {
 public:
  KernelLease(std::shared_ptr<CachedKernel> entry, std::shared_lock<std::shared_mutex> reading,
              std::unique_lock<std::shared_mutex> writing, const float* data);
  const float* data() const { return data_; }

 private:
  std::shared_ptr<CachedKernel> entry_;  // null when the kernel was too large to keep
  std::shared_lock<std::shared_mutex> reading_;
  std::unique_lock<std::shared_mutex> writing_;
  const float* data_;
};

class KernelCache {
 public:
  static constexpr long long kMaxBytes = 64LL << 20;
  static constexpr long long kMaxEntryBytes = kMaxBytes / 8;

  // The transform of kernel w (`count` floats), `derived_count` floats made by make(dst), for
  // the geometry `key` (what besides w's address decides the transform, e.g. c, f and the tile).
  KernelLease get(const float* w, long long count, const std::vector<long long>& key, long long derived_count,
                  const std::function<void(float* dst)>& make);

  // For tests: entries kept, bytes kept, transforms made and calls served from an entry.
  struct Stats {
    long long entries = 0, bytes = 0, made = 0, reused = 0;
  };
  Stats stats();
  void clear();

 private:
  struct Slot {
    const float* address;
    std::vector<long long> key;
    std::shared_ptr<CachedKernel> entry;
    uint64_t last_used;
    long long bytes;
  };
  std::mutex mutex_;
  std::vector<Slot> slots_;
  uint64_t clock_ = 0;
  long long bytes_ = 0;
  Stats counts_;
};

// The process's cache of Winograd kernel transforms.
KernelCache& winograd_kernel_cache();

}  // namespace hpcnn::cpu
