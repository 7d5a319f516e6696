#include "data/shuffle_plan.h"

#include <algorithm>
#include <vector>

#include "core/errors.h"
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

void check_epoch_plan(const EpochPlan& p, long long rows, long long block_rows) {
  auto fail = [&](const std::string& what) {
    throw BackendError(cat("internal error in the shuffle plan (", rows, " rows in blocks of ", block_rows,
                           "): ", what, "; this is a bug in hpcnn, please report it"));
  };
  if (block_rows <= 0) fail(cat("block_rows is ", block_rows));
  if (static_cast<long long>(p.order.size()) != rows)
    fail(cat("it orders ", p.order.size(), " rows, not ", rows));
  if (p.windows.size() != p.window_end.size())
    fail(cat(p.windows.size(), " windows but ", p.window_end.size(), " window ends"));
  if (rows > 0 && (p.window_end.empty() || p.window_end.back() != rows))
    fail(cat("its windows end at ", p.window_end.empty() ? 0 : p.window_end.back(), ", not at ", rows));
  const long long nblocks = (rows + block_rows - 1) / block_rows;
  std::vector<long long> window_of_block(nblocks, -1);
  for (size_t w = 0; w < p.windows.size(); ++w) {
    if (w > 0 && p.window_end[w] < p.window_end[w - 1]) fail(cat("window ", w, " ends before window ", w - 1));
    for (long long b : p.windows[w]) {
      if (b < 0 || b >= nblocks) fail(cat("window ", w, " names block ", b, " of ", nblocks));
      if (window_of_block[b] != -1) fail(cat("block ", b, " is in windows ", window_of_block[b], " and ", w));
      window_of_block[b] = static_cast<long long>(w);
    }
  }
  std::vector<bool> seen(rows, false);
  long long w = 0;
  for (long long pos = 0; pos < rows; ++pos) {
    while (w < static_cast<long long>(p.window_end.size()) && pos >= p.window_end[w]) ++w;
    const long long r = p.order[pos];
    if (r < 0 || r >= rows) fail(cat("position ", pos, " holds row ", r));
    if (seen[r]) fail(cat("row ", r, " comes twice"));
    seen[r] = true;
    if (window_of_block[r / block_rows] != w)
      fail(cat("position ", pos, " (window ", w, ") holds row ", r, " of block ", r / block_rows, ", which window ",
               window_of_block[r / block_rows], " loads"));
  }
}

}  // namespace hpcnn::data
