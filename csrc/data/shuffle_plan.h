// The order in which one epoch visits the rows: two chunk-aware shuffles.
//
// Rows live in blocks (see h5_dataset.h). Both shuffles first permute the block order.
//
// Rows (ShuffleMode::Rows): the permuted blocks are grouped, consecutively, into windows of
// `window_blocks`, and the rows inside each window are permuted. With one window holding every
// block (the data fits the memory budget) this is an exact, uniform permutation of all rows; with
// smaller windows only `window_blocks` blocks need to be in memory at a time. A global batch then
// holds rows of a whole window, so every rank of a data-parallel run needs every window.
//
// Chunk groups (ShuffleMode::ChunkGroups): every global batch is cut into S "lanes" (S = 64,
// kChunkGroupLanes, or a smaller power of two when the memory budget cannot hold two windows per
// lane: chunk_group_shape), lane k taking the positions [share_begin(n, S, k), share_end(n, S, k))
// of a batch of n rows (core/batch_shares.h, the rule that splits a batch among ranks). Lane k's
// demand over the epoch is the sum of its widths. The rows of the permuted blocks, as one stream,
// are cut into S consecutive segments of exactly the lanes' demands: lane k's rows come from ~1/S
// of the blocks (a group of chunks), plus the blocks its segment shares with its neighbours. Within a
// lane, the segment's blocks are grouped into windows of `window_blocks` and the rows of each
// window permuted; the lane's positions of batch after batch take its next rows. Odd lanes walk
// their segment backwards, so that a block two neighbouring lanes share is in both lanes' first
// windows, or in both lanes' last ones: one process holding both reads it once.
// Because S is a power of two, for R ranks dividing S the share of rank r is exactly the lanes
// [S r / R, S (r + 1) / R): each rank needs only its lanes' blocks, ~1/R of the file; for other R
// a rank's share cuts at most two lanes, whose windows it reads too (and with more ranks than
// lanes, ranks share their lane's blocks). The plan is a function of (seed, epoch, rows,
// block_rows, window_blocks, batch_size, lanes), never of the rank count: the global batches are
// the same for any number of ranks.
//
// Every row appears exactly once per epoch either way. Orders are a pure function of their
// arguments (Philox, see core/rng.h): the same seed repeats the same epochs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hpcnn::data {

enum class ShuffleMode { Off, Rows, ChunkGroups };
std::string shuffle_mode_name(ShuffleMode m);  // "off", "rows", "chunk_groups"

// Lanes of the chunk-group shuffle: a multiple of every power of two up to 64, so that rank
// boundaries of 2, 4, ..., 64 ranks fall on lane boundaries.
constexpr long long kChunkGroupLanes = 64;
// The lanes and the window (in blocks) of the chunk-group shuffle for a memory budget, a function
// of the options and the file only (never of the ranks, nor of the memory this machine has). A
// window must hold a lane's rows of one batch (then a batch reads at most two windows a lane);
// one process holds each lane's window, the next one (read ahead) and a block more (a lane's
// first and last windows can be short: pieces of blocks), S (2 L + 1) blocks. Lanes: the largest
// power of two up to 64 for which that fits `budget` (1 when none does). Window: the whole lane
// when the file fits the budget (then one window per lane: rows shuffled across the whole group),
// else the largest that fits (at least the minimum).
struct ChunkGroupShape {
  long long lanes = 1, window_blocks = 1;
  long long cache_blocks() const { return lanes * (2 * window_blocks + 1); }
};
ChunkGroupShape chunk_group_shape(uint64_t budget, uint64_t block_bytes, long long block_rows, long long batch_size,
                                  long long nblocks, bool file_fits_budget);

struct EpochPlan {
  std::vector<long long> order;               // row indices in delivery order (size = rows)
  std::vector<std::vector<long long>> windows;  // block ids of each window
  // Rows mode: the exclusive end position of each window in `order`. Chunk groups: the exclusive
  // end of each window in its lane's own count of rows (the lane's i-th row, i = 0, 1, ...).
  std::vector<long long> window_end;
  // Chunk groups only (lanes == 0 in rows mode): the batch size the lanes split, and lane k's
  // windows, [lane_windows[k], lane_windows[k + 1]) of `windows` (lanes + 1 entries).
  long long lanes = 0, batch_size = 0;
  std::vector<long long> lane_windows;

  long long window_of(long long pos) const;   // the window that position `pos` falls in
  // Chunk groups: the lane of position `pos`, and its index in that lane's count of rows.
  void lane_of(long long pos, long long& lane, long long& index) const;
};

// block_rows: rows per block (the last block may be shorter); shuffle Off gives the file order.
// batch_size: the global batch (chunk groups only; the lanes split it).
EpochPlan make_epoch_plan(long long rows, long long block_rows, long long window_blocks, ShuffleMode shuffle,
                          uint64_t seed, long long epoch, long long batch_size = 0,
                          long long lanes = kChunkGroupLanes);

// Rows each lane takes over an epoch of `rows` rows in batches of `batch_size` (the last batch
// possibly smaller: a plan covers every row, drop_remainder only stops delivering early).
std::vector<long long> lane_demands(long long rows, long long batch_size, long long lanes);

// Checks that a plan covers `rows` rows in blocks of `block_rows` as the loader reads them: every
// row exactly once, the windows' ends increasing to the rows they cover (per lane for chunk
// groups) with one entry per window, and the row at each position inside a block of that
// position's window (the blocks the loader has in memory then). The loader checks every plan it
// makes: a wrong plan (a bug) is a BackendError (RuntimeError in Python) naming what is wrong,
// never a read outside the loaded blocks. O(rows log(blocks) + blocks).
void check_epoch_plan(const EpochPlan& plan, long long rows, long long block_rows);

}  // namespace hpcnn::data
