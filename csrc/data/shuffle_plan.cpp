#include "data/shuffle_plan.h"

#include <algorithm>

#include "core/rng.h"

namespace hpcnn::data {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Fisher-Yates with Philox draws: 64 random bits per swap, so the bias of the multiply-shift
// range reduction is below 2^-32 even for billions of rows.
template <typename T>
void permute(std::vector<T>& v, uint64_t key, uint64_t stream) {
  for (size_t i = v.size(); i > 1; --i) {
    rng::U32x4 r = rng::bits4(key, stream, i);
    uint64_t bits = (static_cast<uint64_t>(r.v[0]) << 32) | r.v[1];
    size_t j = static_cast<size_t>((static_cast<unsigned __int128>(bits) * i) >> 64);
    std::swap(v[i - 1], v[j]);
  }
}

}  // namespace

long long EpochPlan::window_of(long long pos) const {
  return std::upper_bound(window_end.begin(), window_end.end(), pos) - window_end.begin();
}

EpochPlan make_epoch_plan(long long rows, long long block_rows, long long window_blocks, bool shuffle, uint64_t seed,
                          long long epoch) {
  EpochPlan p;
  long long nblocks = rows > 0 ? (rows + block_rows - 1) / block_rows : 0;
  window_blocks = std::max(1LL, std::min(window_blocks, std::max(1LL, nblocks)));
  std::vector<long long> blocks(nblocks);
  for (long long b = 0; b < nblocks; ++b) blocks[b] = b;
  const uint64_t key = splitmix64(seed ^ splitmix64(static_cast<uint64_t>(epoch)));
  if (shuffle) permute(blocks, key, 0);
  p.order.reserve(rows);
  for (long long w0 = 0; w0 < nblocks; w0 += window_blocks) {
    std::vector<long long> win(blocks.begin() + w0, blocks.begin() + std::min(nblocks, w0 + window_blocks));
    size_t start = p.order.size();
    for (long long b : win)
      for (long long r = b * block_rows; r < std::min(rows, (b + 1) * block_rows); ++r) p.order.push_back(r);
    if (shuffle) {
      std::vector<long long> part(p.order.begin() + start, p.order.end());
      permute(part, key, 1 + static_cast<uint64_t>(p.windows.size()));
      std::copy(part.begin(), part.end(), p.order.begin() + start);
    }
    p.windows.push_back(std::move(win));
    p.window_end.push_back(static_cast<long long>(p.order.size()));
  }
  return p;
}

}  // namespace hpcnn::data
