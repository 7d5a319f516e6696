// The chunk index of one chunked dataset, looked up with the checks HDF5 1.10 does not make.
//
// HDF5 finds a chunk by its coordinates in the dataset's chunk index (a B-tree, or a fixed or
// extensible array), and HDF5 1.10 trusts the keys it finds there: a key whose offset or size
// was damaged makes a stored chunk look "never written", and reading it yields the fill value,
// silently (HDF5 2.x refuses such keys). HDF5 1.10 also has two views of the index that a damaged
// key can make disagree: the search that H5Dread and H5Dget_chunk_storage_size share, and the
// walk behind H5Dget_chunk_info(_by_coord), which gives the chunk's address. hpcnn asks both and
// reads a chunk only where they agree (found by both, the same size). It also counts the stored
// chunks when it opens the dataset (one walk, which fails early on a damaged index node):
//   - every chunk of the grid stored (a dataset written whole: the usual case): a chunk that
//     cannot be found proves damage;
//   - some chunks never written (a partly written dataset, read as its fill value): up to
//     kListedChunks stored chunks are listed once, checked (offsets on the chunk grid and inside
//     the dataset, no duplicates); a listed chunk that cannot be found proves damage, and a chunk
//     not listed is known to be unwritten without a lookup (a huge declared shape with a few
//     chunks reads fast). With more stored chunks than that, the two views must agree.
// A found chunk must have a size (a key of size 0 is damage too) and end inside the file (a
// damaged size would have hpcnn allocate and read gigabytes first).
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/tensor.h"

namespace hpcnn::data {

class ChunkIndex {
 public:
  static constexpr uint64_t kListedChunks = 2048;

  struct Chunk {
    bool stored = false;
    uint64_t addr = 0;  // in the file (absolute), when stored
    uint64_t size = 0;  // bytes as stored
    unsigned filter_mask = 0;
  };

  ChunkIndex() = default;
  // Counts (and maybe lists) the stored chunks of `dset`, of shape `shape` in chunks of `chunk`.
  // `file_end`: the bytes HDF5 expects in the file (0: unknown); `addr_base`: added to the
  // addresses HDF5 reports (RawFile::chunk_address_base). `where` names the dataset and file in
  // messages. The caller holds h5_mutex(). Throws ValueError for a damaged index.
  ChunkIndex(hid_t dset, const Shape& shape, const Shape& chunk, uint64_t file_end, uint64_t addr_base,
             const std::string& where);

  // The chunk whose first element is at `offset` (a point of the chunk grid). Throws ValueError
  // when the index is damaged there. The caller holds h5_mutex().
  Chunk locate(hid_t dset, const std::vector<hsize_t>& offset) const;

  uint64_t stored_chunks() const { return stored_; }
  bool complete() const { return complete_; }

 private:
  uint64_t linear(const std::vector<hsize_t>& offset) const;  // row-major index in the chunk grid
  std::string describe(const std::vector<hsize_t>& offset) const;
  [[noreturn]] void damaged(const std::vector<hsize_t>& offset, const std::string& what) const;

  std::string where_;
  Shape shape_, chunk_;
  uint64_t file_end_ = 0, addr_base_ = 0;
  std::vector<uint64_t> grid_;  // chunks along each dimension
  uint64_t stored_ = 0;
  bool complete_ = false;       // every chunk of the grid is stored
  bool listed_ = false;         // listed_chunks_ holds every stored chunk
  std::unordered_set<uint64_t> listed_chunks_;
};

}  // namespace hpcnn::data
