// The order in which one epoch visits the rows: a chunk-aware shuffle.
//
// Rows live in blocks (see h5_dataset.h). An epoch permutes the block order, groups consecutive
// blocks of that order into windows of `window_blocks`, and permutes the rows inside each window.
// With one window holding every block (the data fits the memory budget) this is an exact,
// uniform permutation of all rows; with smaller windows only `window_blocks` blocks need to be
// in memory at a time. Every row appears exactly once per epoch either way. Orders are a pure
// function of (seed, epoch) (Philox, see core/rng.h): the same seed repeats the same epochs.
#pragma once

#include <cstdint>
#include <vector>

namespace hpcnn::data {

struct EpochPlan {
  std::vector<long long> order;               // row indices in delivery order (size = rows)
  std::vector<std::vector<long long>> windows;  // block ids of each window
  std::vector<long long> window_end;          // exclusive end position of each window in `order`
  long long window_of(long long pos) const;   // the window that position `pos` falls in
};

// block_rows: rows per block (the last block may be shorter); shuffle=false gives the file order.
EpochPlan make_epoch_plan(long long rows, long long block_rows, long long window_blocks, bool shuffle,
                          uint64_t seed, long long epoch);

// Checks that a plan covers `rows` rows in blocks of `block_rows` as the loader reads them: every
// row exactly once, window_end increasing to `rows` with one entry per window, and the row at each
// position inside a block of that position's window (the blocks the loader has in memory then).
// The loader checks every plan it makes: a wrong plan (a bug) is a BackendError (RuntimeError in
// Python) naming what is wrong, never a read outside the loaded blocks. O(rows + blocks).
void check_epoch_plan(const EpochPlan& plan, long long rows, long long block_rows);

}  // namespace hpcnn::data
