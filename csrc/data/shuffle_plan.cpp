#include "data/shuffle_plan.h"

#include <algorithm>
#include <vector>

#include "core/batch_shares.h"
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

struct Piece {
  long long block, lo, hi;  // rows [lo, hi) of `block`
};

// The rows of `pieces` (blocks in the epoch's order, or parts of them), grouped into windows of
// `window_blocks` pieces, each window's rows permuted (stream 1 + the window's index in the
// plan): appended to `out`; the windows and their ends (counted from the rows `out` had before)
// to the plan. Rows mode runs it once over every block; chunk groups once per lane, over the
// pieces of the lane's segment.

void fill_windows(const std::vector<Piece>& pieces, long long window_blocks, bool shuffle, uint64_t key,
                  std::vector<long long>& out, EpochPlan& p) {
  const size_t base = out.size();
  for (size_t w0 = 0; w0 < pieces.size(); w0 += static_cast<size_t>(window_blocks)) {
    const size_t w1 = std::min(pieces.size(), w0 + static_cast<size_t>(window_blocks));
    std::vector<long long> win;
    const size_t start = out.size();
    for (size_t k = w0; k < w1; ++k) {
      win.push_back(pieces[k].block);
      for (long long r = pieces[k].lo; r < pieces[k].hi; ++r) out.push_back(r);
    }
    if (shuffle) {
      std::vector<long long> part(out.begin() + start, out.end());
      permute(part, key, 1 + static_cast<uint64_t>(p.windows.size()));
      std::copy(part.begin(), part.end(), out.begin() + start);
    }
    p.windows.push_back(std::move(win));
    p.window_end.push_back(static_cast<long long>(out.size() - base));
  }
}

}  // namespace

std::string shuffle_mode_name(ShuffleMode m) {
  switch (m) {
    case ShuffleMode::Off: return "off";
    case ShuffleMode::Rows: return "rows";
    case ShuffleMode::ChunkGroups: return "chunk_groups";
  }
  return "?";
}

void EpochPlan::lane_of(long long pos, long long& lane, long long& index) const {
  const long long rows = static_cast<long long>(order.size());
  const long long i = pos / batch_size, off = pos % batch_size;
  const long long n = std::min(batch_size, rows - i * batch_size);
  // The largest k with share_begin(n, lanes, k) = floor(n k / lanes) <= off.
  lane = (lanes * (off + 1) - 1) / n;
  index = i * share_rows(batch_size, lanes, lane) + off - share_begin(n, lanes, lane);
}

long long EpochPlan::window_of(long long pos) const {
  if (lanes == 0) return std::upper_bound(window_end.begin(), window_end.end(), pos) - window_end.begin();
  long long lane = 0, index = 0;
  lane_of(pos, lane, index);
  auto b = window_end.begin() + lane_windows[lane], e = window_end.begin() + lane_windows[lane + 1];
  return std::upper_bound(b, e, index) - window_end.begin();
}

ChunkGroupShape chunk_group_shape(uint64_t budget, uint64_t block_bytes, long long block_rows, long long batch_size,
                                  long long nblocks, bool file_fits_budget) {
  block_bytes = std::max<uint64_t>(1, block_bytes);
  block_rows = std::max(1LL, block_rows);
  nblocks = std::max(1LL, nblocks);
  ChunkGroupShape s;
  auto min_window = [&](long long lanes) {  // blocks holding a lane's widest share of one batch
    const long long width = (batch_size + lanes - 1) / lanes;
    return std::min(nblocks, std::max(1LL, (width + block_rows - 1) / block_rows));
  };
  auto fits = [&](long long lanes, long long window) {
    const long double bytes = static_cast<long double>(lanes) * (2 * window + 1) * block_bytes;
    return bytes <= static_cast<long double>(budget);
  };
  for (s.lanes = kChunkGroupLanes; s.lanes > 1 && !fits(s.lanes, min_window(s.lanes));) s.lanes /= 2;
  s.window_blocks = min_window(s.lanes);
  if (file_fits_budget) {
    s.window_blocks = nblocks;
  } else {
    const uint64_t per_lane = budget / static_cast<uint64_t>(s.lanes) / block_bytes;  // blocks a lane may hold
    const long long most = per_lane >= 1 ? static_cast<long long>((per_lane - 1) / 2) : 0;
    s.window_blocks = std::min(nblocks, std::max(s.window_blocks, most));
  }
  return s;
}

std::vector<long long> lane_demands(long long rows, long long batch_size, long long lanes) {
  std::vector<long long> d(lanes, 0);
  if (rows <= 0) return d;
  const long long full = rows / batch_size, last = rows % batch_size;
  for (long long k = 0; k < lanes; ++k)
    d[k] = full * share_rows(batch_size, lanes, k) + share_rows(last, lanes, k);
  return d;
}

EpochPlan make_epoch_plan(long long rows, long long block_rows, long long window_blocks, ShuffleMode shuffle,
                          uint64_t seed, long long epoch, long long batch_size, long long lanes) {
  EpochPlan p;
  long long nblocks = rows > 0 ? (rows + block_rows - 1) / block_rows : 0;
  window_blocks = std::max(1LL, std::min(window_blocks, std::max(1LL, nblocks)));
  std::vector<long long> blocks(nblocks);
  for (long long b = 0; b < nblocks; ++b) blocks[b] = b;
  const uint64_t key = splitmix64(seed ^ splitmix64(static_cast<uint64_t>(epoch)));
  if (shuffle != ShuffleMode::Off) permute(blocks, key, 0);
  auto piece = [&](long long b) { return Piece{b, b * block_rows, std::min(rows, (b + 1) * block_rows)}; };
  if (shuffle != ShuffleMode::ChunkGroups) {
    std::vector<Piece> pieces;
    pieces.reserve(nblocks);
    for (long long b : blocks) pieces.push_back(piece(b));
    p.order.reserve(rows);
    fill_windows(pieces, window_blocks, shuffle == ShuffleMode::Rows, key, p.order, p);
    return p;
  }

  HPCNN_CHECK_ARG(batch_size > 0 && lanes > 0, "the chunk-group shuffle needs a batch size and lanes > 0, got ",
                  batch_size, " and ", lanes);
  p.lanes = lanes;
  p.batch_size = batch_size;
  p.lane_windows.assign(1, 0);
  // Lane k's rows, window by window, then dealt to its positions batch by batch.
  const std::vector<long long> demand = lane_demands(rows, batch_size, lanes);
  std::vector<std::vector<long long>> lane_rows(lanes);
  long long j = 0, used = 0;  // the stream's current block (index into `blocks`) and rows of it taken
  for (long long k = 0; k < lanes; ++k) {
    std::vector<Piece> pieces;
    for (long long need = demand[k]; need > 0;) {
      Piece pc = piece(blocks[j]);
      pc.lo += used;
      const long long take = std::min(need, pc.hi - pc.lo);
      pc.hi = pc.lo + take;
      pieces.push_back(pc);
      need -= take;
      used += take;
      if (pc.hi == piece(blocks[j]).hi) {
        ++j;
        used = 0;
      }
    }
    if (k % 2 == 1) std::reverse(pieces.begin(), pieces.end());
    lane_rows[k].reserve(demand[k]);
    fill_windows(pieces, window_blocks, true, key, lane_rows[k], p);
    p.lane_windows.push_back(static_cast<long long>(p.windows.size()));
  }
  p.order.resize(rows);
  std::vector<long long> next(lanes, 0);
  for (long long b0 = 0; b0 < rows; b0 += batch_size) {
    const long long n = std::min(batch_size, rows - b0);
    for (long long k = 0; k < lanes; ++k)
      for (long long q = share_begin(n, lanes, k); q < share_end(n, lanes, k); ++q)
        p.order[b0 + q] = lane_rows[k][next[k]++];
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
  const long long nblocks = (rows + block_rows - 1) / block_rows;
  const long long nwin = static_cast<long long>(p.windows.size());
  // Each window's end against the one before it, and its blocks: in rows mode a block is in one
  // window; with chunk groups in one window per lane (neighbouring lanes may share a block).
  std::vector<long long> first_end(1, 0);  // per lane (rows mode: one "lane"), where its ends start
  if (p.lanes == 0) {
    if (rows > 0 && (p.window_end.empty() || p.window_end.back() != rows))
      fail(cat("its windows end at ", p.window_end.empty() ? 0 : p.window_end.back(), ", not at ", rows));
    first_end.push_back(nwin);
  } else {
    if (p.batch_size <= 0) fail(cat("its batch size is ", p.batch_size));
    if (static_cast<long long>(p.lane_windows.size()) != p.lanes + 1 || p.lane_windows.front() != 0 ||
        p.lane_windows.back() != nwin)
      fail(cat("its ", p.lane_windows.size(), " lane starts do not cover ", p.lanes, " lanes of ", nwin, " windows"));
    const std::vector<long long> demand = lane_demands(rows, p.batch_size, p.lanes);
    for (long long k = 0; k < p.lanes; ++k) {
      const long long a = p.lane_windows[k], b = p.lane_windows[k + 1];
      if (b < a) fail(cat("lane ", k, " starts at window ", a, " and ends at ", b));
      const long long end = b > a ? p.window_end[b - 1] : 0;
      if (end != demand[k]) fail(cat("lane ", k, "'s windows end at ", end, ", not at its ", demand[k], " rows"));
      first_end.push_back(b);
    }
  }
  std::vector<std::pair<long long, long long>> member;  // (window, block), sorted
  std::vector<long long> lane_of_block(nblocks, -1), window_of_block(nblocks, -1);
  for (size_t lane = 0; lane + 1 < first_end.size(); ++lane) {
    for (long long w = first_end[lane]; w < first_end[lane + 1]; ++w) {
      if (w > first_end[lane] && p.window_end[w] < p.window_end[w - 1])
        fail(cat("window ", w, " ends before window ", w - 1));
      for (long long b : p.windows[w]) {
        if (b < 0 || b >= nblocks) fail(cat("window ", w, " names block ", b, " of ", nblocks));
        if (window_of_block[b] != -1 && (p.lanes == 0 || lane_of_block[b] == static_cast<long long>(lane)))
          fail(cat("block ", b, " is in windows ", window_of_block[b], " and ", w));
        window_of_block[b] = w;
        lane_of_block[b] = static_cast<long long>(lane);
        member.emplace_back(w, b);
      }
    }
  }
  std::sort(member.begin(), member.end());
  std::vector<bool> seen(rows, false);
  long long w = 0;
  for (long long pos = 0; pos < rows; ++pos) {
    if (p.lanes == 0) {
      while (w < nwin && pos >= p.window_end[w]) ++w;
    } else {
      w = p.window_of(pos);
    }
    const long long r = p.order[pos];
    if (r < 0 || r >= rows) fail(cat("position ", pos, " holds row ", r));
    if (seen[r]) fail(cat("row ", r, " comes twice"));
    seen[r] = true;
    // (the block's only window, or with chunk groups one of its lanes' windows: the slow path is
    // only ever taken for blocks neighbouring lanes share, or for a wrong plan)
    if (window_of_block[r / block_rows] != w &&
        !std::binary_search(member.begin(), member.end(), std::make_pair(w, r / block_rows)))
      fail(cat("position ", pos, " (window ", w, ") holds row ", r, " of block ", r / block_rows, ", which window ",
               window_of_block[r / block_rows], " loads"));
  }
}

}  // namespace hpcnn::data
