#include "nn/memory_plan.h"

#include <algorithm>
#include <numeric>

#include "core/errors.h"

namespace hpcnn::nn {

namespace {

long long align_up(long long v, long long a) { return (v + a - 1) / a * a; }

bool overlap(const BufferLife& a, const BufferLife& b) { return a.first <= b.last && b.first <= a.last; }

}  // namespace

ArenaLayout pack_buffers(const std::vector<BufferLife>& buffers, long long alignment) {
  HPCNN_CHECK_BACKEND(alignment > 0, "pack_buffers: alignment must be positive");
  const size_t n = buffers.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return buffers[a].bytes > buffers[b].bytes; });
  ArenaLayout out;
  out.offsets.assign(n, 0);
  std::vector<size_t> placed;
  std::vector<std::pair<long long, long long>> busy;  // [begin, end) of the overlapping placed buffers
  for (size_t b : order) {
    const long long size = align_up(std::max(buffers[b].bytes, 1LL), alignment);
    busy.clear();
    for (size_t p : placed)
      if (overlap(buffers[b], buffers[p]))
        busy.push_back({out.offsets[p], out.offsets[p] + align_up(std::max(buffers[p].bytes, 1LL), alignment)});
    std::sort(busy.begin(), busy.end());
    long long best = -1, best_gap = 0, cursor = 0;
    for (const auto& [begin, end] : busy) {
      const long long gap = begin - cursor;
      if (gap >= size && (best < 0 || gap < best_gap)) {
        best = cursor;
        best_gap = gap;
      }
      cursor = std::max(cursor, end);
    }
    out.offsets[b] = best >= 0 ? best : cursor;
    out.bytes = std::max(out.bytes, out.offsets[b] + size);
    placed.push_back(b);
  }
  return out;
}

}  // namespace hpcnn::nn
