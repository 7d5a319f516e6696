// Counts host<->device copies so tests and benchmarks can check that copies happen only at
// batch boundaries (DESIGN: "Host<->device copies ... can be counted").
#pragma once

#include <atomic>
#include <cstddef>

namespace hpcnn {

struct TransferStats {
  std::atomic<long long> h2d_count{0}, d2h_count{0}, h2d_bytes{0}, d2h_bytes{0};
  void count_h2d(size_t bytes) { ++h2d_count; h2d_bytes += static_cast<long long>(bytes); }
  void count_d2h(size_t bytes) { ++d2h_count; d2h_bytes += static_cast<long long>(bytes); }
  void reset() { h2d_count = d2h_count = h2d_bytes = d2h_bytes = 0; }
};

inline TransferStats& transfer_stats() {
  static TransferStats stats;
  return stats;
}

}  // namespace hpcnn
