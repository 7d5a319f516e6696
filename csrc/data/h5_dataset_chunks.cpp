// The raw-chunk path of H5Dataset (data/h5_dataset.h): the chunk geometry computed once, the
// chunks of a group of blocks fetched from the file (serial HDF5 index lookups and reads), then
// decoded (inflate, shuffle, Fletcher-32: data/chunk_pipeline.h) and scattered into the blocks'
// rows on the thread pool, double-buffered so that one group is read while the other decodes.
// The dataset's opening, checks and the HDF5 read paths are in h5_dataset.cpp.
#include "data/h5_dataset.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <future>
#include <limits>

#include "core/dynamic_for.h"
#include "core/errors.h"
#include "core/thread_pool.h"
#include "data/inflate.h"
#include "data/size_checks.h"

namespace hpcnn::data {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

void H5Dataset::init_raw_geometry() {
  if (geo_ready_) return;
  RawGeometry& g = geo_;
  const int r = static_cast<int>(info_.shape.size());
  const Shape& c = info_.chunk;
  const size_t esz = info_.elem_size;
  std::vector<long long> grid(r, 1);
  g.per_block = 1;
  for (int d = 1; d < r; ++d) {
    grid[d] = (info_.shape[d] + c[d] - 1) / c[d];
    g.per_block *= grid[d];  // <= the elements of a row: fits (checked at open)
  }
  g.chunk_bytes = static_cast<size_t>(shape_numel(c)) * esz;  // <= 4 GiB (checked at open)
  g.chunk_row_bytes = g.chunk_bytes / static_cast<size_t>(c[0]);
  // The plan below, and the decoded chunks of one block: refuse what cannot fit, naming the file.
  // The plan: per chunk its grid offsets and its patches (one per index of the dimensions before a
  // patch's loops: one for ranks up to 4; see below).
  const int loop_lo = std::max(1, r - 3);  // dims [loop_lo, r-2] are a patch's loops, [1, loop_lo) outer
  uint64_t plan = 0, scratch = 0, need = 0, patches_per_chunk = 1, per_chunk = 0;
  bool fits = true;
  for (int d = 1; d < loop_lo && fits; ++d)
    fits = checked_mul(patches_per_chunk, static_cast<uint64_t>(std::min(c[d], info_.shape[d])), patches_per_chunk);
  if (!fits || !checked_mul(patches_per_chunk, sizeof(RawGeometry::Patch), per_chunk) ||
      !checked_add(per_chunk, r * sizeof(long long), per_chunk) ||
      !checked_mul(static_cast<uint64_t>(g.per_block), per_chunk, plan) ||
      !checked_mul(static_cast<uint64_t>(g.per_block), g.chunk_bytes, scratch) || !checked_add(plan, scratch, need))
    need = std::numeric_limits<uint64_t>::max();
  require_memory(need, cat("reading one block of ", block_rows_, " rows of ", where(), " (", g.per_block,
                           " chunks of shape ", shape_str(c), ")"));
  // Offsets (dimensions 1..r-1) of the chunks of one block, in row-major grid order.
  g.grid_off.assign(g.per_block, Shape(r, 0));
  for (long long k = 0; k < g.per_block; ++k) {
    long long rem = k;
    for (int d = r - 1; d >= 1; --d) {
      g.grid_off[k][d] = (rem % grid[d]) * c[d];
      rem /= grid[d];
    }
  }
  // One row's copy plan, the same for every row of every block: per chunk a Patch, a contiguous
  // run of the chunk's last dimension inside up to two strided loops (the dimensions before it),
  // runs merged along a dimension where the chunk spans it whole. Dimensions before those three
  // (datasets of rank 5 and more) give one patch per index. The tutorial's chunks (6250, 4, 4, 1)
  // of (N, 32, 32, 3) uint8 are 192 patches of 4 x 4 single bytes per row: a fixed-stride loop
  // each, where a plan entry per byte (3,072 per row) cost more than the bytes it moved.
  std::vector<long long> cs(r, 1), ds(r, 1);
  for (int d = r - 2; d >= 0; --d) {
    cs[d] = cs[d + 1] * c[d + 1];
    ds[d] = ds[d + 1] * info_.shape[d + 1];
  }
  g.patches.clear();
  for (long long k = 0; k < g.per_block; ++k) {
    Shape ext(r, 1);
    for (int d = 1; d < r; ++d) ext[d] = std::min(c[d], info_.shape[d] - g.grid_off[k][d]);
    std::vector<long long> idx(r, 0);  // odometer over the outer dims
    while (true) {
      long long so = 0, dof = 0;
      for (int d = 1; d < r; ++d) {
        so += idx[d] * cs[d];
        dof += (g.grid_off[k][d] + idx[d]) * ds[d];
      }
      RawGeometry::Patch p;
      p.chunk = k;
      p.src = static_cast<size_t>(so) * esz;
      p.dst = static_cast<size_t>(dof) * esz;
      p.len = r >= 2 ? static_cast<size_t>(ext[r - 1]) * esz : esz;
      bool merge = true;  // still contiguous in both: the next dimension may extend the run
      int loops = 0;
      for (int d = r - 2; d >= loop_lo; --d) {
        const size_t sst = static_cast<size_t>(cs[d]) * esz, dst = static_cast<size_t>(ds[d]) * esz;
        if (ext[d] == 1) continue;
        if (merge && p.len == sst && p.len == dst) {
          p.len *= static_cast<size_t>(ext[d]);
          continue;
        }
        merge = false;
        RawGeometry::Loop& l = loops == 0 ? p.inner : p.outer;
        l = RawGeometry::Loop{ext[d], sst, dst};
        ++loops;
      }
      g.patches.push_back(p);
      int d = loop_lo - 1;
      while (d >= 1 && ++idx[d] == ext[d]) idx[d--] = 0;
      if (d < 1) break;
    }
  }
  pipeline_.chunk_bytes = g.chunk_bytes;
  geo_ready_ = true;
}

void H5Dataset::read_blocks_raw(const std::vector<long long>& blocks, const std::vector<uint8_t*>& dst) {
  init_raw_geometry();
  // Groups of blocks whose decoded chunks take at most ~16 MiB of scratch at a time (and whose
  // pool regions stay short, so a training step running beside the producer is not held up).
  // The raw reads of group g + 1 (HDF5, serial, one helper thread) overlap the inflate and
  // scatter of group g (hpcnn's pool): on a parallel file system the reads are not free.
  const size_t block_scratch = geo_.chunk_bytes * static_cast<size_t>(geo_.per_block);
  const size_t per_group = std::max<size_t>(1, (size_t(16) << 20) / std::max<size_t>(1, block_scratch));
  std::vector<std::pair<size_t, size_t>> groups;
  for (size_t g0 = 0; g0 < blocks.size(); g0 += per_group) groups.emplace_back(g0, std::min(blocks.size(), g0 + per_group));
  auto sub = [&](const auto& v, size_t g) {
    return std::vector<typename std::decay_t<decltype(v)>::value_type>(v.begin() + groups[g].first,
                                                                       v.begin() + groups[g].second);
  };
  double t0 = now_s();
  fetch_group(sub(blocks, 0), sets_[0]);
  add(io_seconds_, now_s() - t0);
  for (size_t g = 0; g < groups.size(); ++g) {
    std::future<double> next;
    if (g + 1 < groups.size()) {
      auto next_blocks = sub(blocks, g + 1);
      RawSet& set = sets_[(g + 1) % 2];
      next = std::async(std::launch::async, [this, next_blocks, &set] {
        double t = now_s();
        fetch_group(next_blocks, set);
        return now_s() - t;
      });
    }
    try {
      decode_group(sub(blocks, g), sub(dst, g), sets_[g % 2]);
    } catch (...) {
      if (next.valid()) next.wait();  // never leave the helper writing into a set we abandon
      throw;
    }
    if (next.valid()) add(io_seconds_, next.get());  // rethrows a failed read
  }
}

void H5Dataset::fetch_group(const std::vector<long long>& blocks, RawSet& set) {
  const int r = static_cast<int>(info_.shape.size());
  const size_t ntasks = blocks.size() * static_cast<size_t>(geo_.per_block);
  if (set.raw.size() < ntasks) set.raw.resize(ntasks);
  set.mask.assign(ntasks, 0);
  set.fill.assign(ntasks, 0);
  std::vector<hsize_t> off(r);
  H5Lock lock(h5_mutex());
  h5_quiet();
  for (size_t bi = 0; bi < blocks.size(); ++bi) {
    for (long long k = 0; k < geo_.per_block; ++k) {
      size_t t = bi * geo_.per_block + k;
      off[0] = static_cast<hsize_t>(blocks[bi] * block_rows_);
      for (int d = 1; d < r; ++d) off[d] = static_cast<hsize_t>(geo_.grid_off[k][d]);
      // The index checks what HDF5 1.10 does not (chunk_index.h).
      ChunkIndex::Chunk c = index_.locate(dset_.get(), off);
      if (!c.stored) {
        set.fill[t] = 1;
        continue;
      }
      // The lookup checked the chunk ends inside the file: its size is bounded by the file's.
      set.raw[t].resize(c.size);
      set.mask[t] = c.filter_mask;
      bytes_read_ += c.size;
      raw_.read(c.addr, c.size, set.raw[t].data(),
                cat("the chunk at ", shape_str(Shape(off.begin(), off.end())), " of ", where()));
    }
  }
  Shape first(off.begin(), off.end());
  first[0] = blocks.front() * block_rows_;
  raw_.check(cat("reading the chunks of rows ", first[0], "... of ", where()));
}

namespace {

// One patch of one row (RawGeometry::Patch): single bytes (a chunk one element of a uint8 last
// dimension wide, as the tutorial's (..., 1) chunks), and runs of any length.
template <typename Patch>
inline void copy_patch_bytes(const Patch& p, const uint8_t* __restrict__ src, uint8_t* __restrict__ dst) {
  if (p.outer.count == 4 && p.inner.count == 4 && p.inner.src == 1 && p.outer.src == 4) {
    // h5py's chunks=True guess for (N, 32, 32, 3) uint8, (6250, 4, 4, 1): one 16-byte load, 16
    // stores at fixed strides (a loop of runtime counts here cost as much as the bytes).
    uint8_t v[16];
    std::memcpy(v, src, 16);
    const size_t di = p.inner.dst, dr = p.outer.dst;
    for (int a = 0; a < 4; ++a) {
      uint8_t* d = dst + static_cast<size_t>(a) * dr;
      d[0] = v[4 * a];
      d[di] = v[4 * a + 1];
      d[2 * di] = v[4 * a + 2];
      d[3 * di] = v[4 * a + 3];
    }
    return;
  }
  for (long long a = 0; a < p.outer.count; ++a) {
    const uint8_t* s = src + static_cast<size_t>(a) * p.outer.src;
    uint8_t* d = dst + static_cast<size_t>(a) * p.outer.dst;
    for (long long b = 0; b < p.inner.count; ++b) d[static_cast<size_t>(b) * p.inner.dst] = s[static_cast<size_t>(b) * p.inner.src];
  }
}

template <typename Patch>
inline void copy_patch_runs(const Patch& p, const uint8_t* src, uint8_t* dst) {
  for (long long a = 0; a < p.outer.count; ++a) {
    const uint8_t* s = src + static_cast<size_t>(a) * p.outer.src;
    uint8_t* d = dst + static_cast<size_t>(a) * p.outer.dst;
    for (long long b = 0; b < p.inner.count; ++b)
      std::memcpy(d + static_cast<size_t>(b) * p.inner.dst, s + static_cast<size_t>(b) * p.inner.src, p.len);
  }
}

}  // namespace

void H5Dataset::decode_group(const std::vector<long long>& blocks, const std::vector<uint8_t*>& dst, RawSet& set) {
  const int r = static_cast<int>(info_.shape.size());
  const long long per_block = geo_.per_block;
  const size_t chunk_bytes = geo_.chunk_bytes;
  const size_t esz = info_.elem_size;
  const size_t ntasks = blocks.size() * static_cast<size_t>(per_block);
  if (decoded_.size() < ntasks) decoded_.resize(ntasks);

  // 1) Decode each chunk in parallel on hpcnn's pool (chunk_pipeline.h): filters undone in
  // reverse pipeline order, skipping those the chunk's mask says were skipped when it was written
  // (HDF5 stores a chunk unfiltered when deflate would not shrink it), then the byte order.
  double t1 = now_s();
  std::vector<const uint8_t*> dec(ntasks);
  dynamic_for(static_cast<long long>(ntasks), 1, [&](long long t0_, long long t1_) {
    std::vector<uint8_t> tmp;
    for (long long t = t0_; t < t1_; ++t) {
      std::vector<uint8_t>& out = decoded_[t];
      if (set.fill[t]) {
        out.resize(chunk_bytes);
        if (std::all_of(fill_elem_.begin(), fill_elem_.end(), [](uint8_t b) { return b == 0; }))
          std::fill(out.begin(), out.end(), uint8_t(0));
        else
          for (size_t o = 0; o + esz <= chunk_bytes; o += esz) std::memcpy(out.data() + o, fill_elem_.data(), esz);
        dec[t] = out.data();
        continue;
      }
      std::string err = pipeline_.decode(set.raw[t].data(), set.raw[t].size(), set.mask[t], out, tmp);
      if (!err.empty()) {
        Shape co(r);
        co[0] = blocks[t / per_block] * block_rows_;
        for (int d = 1; d < r; ++d) co[d] = geo_.grid_off[t % per_block][d];
        throw ValueError(cat("cannot decompress the chunk at ", shape_str(co), " of ", where(), ": ", err,
                             " (corrupted file?)"));
      }
      dec[t] = out.data();
    }
  });
  double t2 = now_s();
  add(inflate_seconds_, t2 - t1);
  for (size_t t = 0; t < ntasks; ++t)
    if (!set.fill[t]) bytes_inflated_ += chunk_bytes;

  // 2) Scatter row by row, in parallel over rows: each output row is written once, sequentially,
  // gathering its pieces from the block's chunks with the precomputed copy plan.
  const size_t rb = row_bytes();
  const size_t chunk_row_bytes = geo_.chunk_row_bytes;
  const std::vector<RawGeometry::Patch>& patches = geo_.patches;
  std::vector<long long> row_start(blocks.size() + 1, 0);
  for (size_t bi = 0; bi < blocks.size(); ++bi) row_start[bi + 1] = row_start[bi] + rows_in_block(blocks[bi]);
  // Narrow chunk rows (the tutorial's: 16 bytes) make a row read a few bytes from each of many
  // chunks (192): more streams than the hardware prefetcher follows, so every cache line was a
  // demand miss. Prefetch each chunk's line about 512 bytes ahead, once per line.
  const long long ahead = chunk_row_bytes < 64 ? static_cast<long long>(512 / std::max<size_t>(1, chunk_row_bytes)) : 0;
  const long long rows_per_line = chunk_row_bytes < 64 ? static_cast<long long>(64 / std::max<size_t>(1, chunk_row_bytes)) : 1;
  const long long chunk_rows = static_cast<long long>(info_.chunk[0]);
  dynamic_for(row_start.back(), 64, [&](long long q0, long long q1) {
    size_t bi = std::upper_bound(row_start.begin(), row_start.end(), q0) - row_start.begin() - 1;
    for (long long q = q0; q < q1; ++q) {
      while (q >= row_start[bi + 1]) ++bi;
      const long long i = q - row_start[bi];  // row within the block (and within its chunks)
      uint8_t* out = dst[bi] + static_cast<size_t>(i) * rb;
      const uint8_t* const* chunks = dec.data() + bi * per_block;
      const size_t src_row = static_cast<size_t>(i) * chunk_row_bytes;
      if (ahead > 0 && i % rows_per_line == 0 && i + ahead < chunk_rows) {
        const size_t at = static_cast<size_t>(i + ahead) * chunk_row_bytes;
        for (long long k = 0; k < per_block; ++k) __builtin_prefetch(chunks[k] + at);
      }
      for (const RawGeometry::Patch& p : patches) {
        const uint8_t* src = chunks[p.chunk] + src_row + p.src;
        uint8_t* d = out + p.dst;
        if (p.len == 1) copy_patch_bytes(p, src, d);
        else copy_patch_runs(p, src, d);
      }
    }
  });
  add(scatter_seconds_, now_s() - t2);
}

}  // namespace hpcnn::data
