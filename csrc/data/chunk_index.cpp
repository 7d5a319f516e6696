#include "data/chunk_index.h"

#include "core/errors.h"
#include "data/h5.h"
#include "data/size_checks.h"

namespace hpcnn::data {

ChunkIndex::ChunkIndex(hid_t dset, const Shape& shape, const Shape& chunk, uint64_t file_end,
                       uint64_t addr_base, const std::string& where)
    : where_(where), shape_(shape), chunk_(chunk), file_end_(file_end), addr_base_(addr_base) {
  const size_t r = shape.size();
  uint64_t total = 1;
  bool fits = true;
  for (size_t d = 0; d < r; ++d) {
    uint64_t g = chunk[d] > 0 ? (static_cast<uint64_t>(shape[d]) + chunk[d] - 1) / chunk[d] : 0;
    grid_.push_back(g);
    fits = fits && checked_mul(total, g, total);
  }
  H5Id space = h5_own(H5Dget_space(dset), H5Sclose, cat("cannot read the shape of ", where));
  hsize_t n = 0;
  h5_check(H5Dget_num_chunks(dset, space.get(), &n),
           cat("the chunk index of ", where, " is damaged: cannot count its chunks"));
  stored_ = static_cast<uint64_t>(n);
  complete_ = fits && stored_ == total && total > 0;
  if (complete_ || stored_ == 0 || stored_ > kListedChunks) return;

  // A partly written dataset: list its stored chunks. H5Dget_chunk_info walks the index from the
  // start for every call in HDF5 1.10 (quadratic), hence the bound on the count.
  std::vector<hsize_t> off(r + 1);
  for (uint64_t i = 0; i < stored_; ++i) {
    unsigned mask = 0;
    haddr_t addr = HADDR_UNDEF;
    hsize_t size = 0;
    h5_check(H5Dget_chunk_info(dset, space.get(), static_cast<hsize_t>(i), off.data(), &mask, &addr, &size),
             cat("the chunk index of ", where, " is damaged: cannot read entry ", i));
    // HDF5 prunes the chunks outside a dataset's extent when it shrinks, so an entry out there
    // (or off the grid) is a damaged key, and the chunk it hides would read as the fill value.
    for (size_t d = 0; d < r; ++d)
      if (off[d] % static_cast<hsize_t>(chunk[d]) != 0 || off[d] >= static_cast<hsize_t>(shape[d]))
        throw ValueError(cat("the chunk index of ", where, " is damaged: an entry has offset ", describe(off),
                             ", which is not a chunk of shape ", shape_str(chunk), " inside ", shape_str(shape),
                             " (corrupted file?)"));
    if (!listed_chunks_.insert(linear(off)).second)
      throw ValueError(cat("the chunk index of ", where, " is damaged: the chunk at ", describe(off),
                           " appears twice (corrupted file?)"));
  }
  listed_ = true;
}

uint64_t ChunkIndex::linear(const std::vector<hsize_t>& offset) const {
  uint64_t k = 0;
  for (size_t d = 0; d < grid_.size(); ++d) k = k * grid_[d] + offset[d] / static_cast<hsize_t>(chunk_[d]);
  return k;
}

std::string ChunkIndex::describe(const std::vector<hsize_t>& offset) const {
  Shape o(offset.begin(), offset.begin() + static_cast<long>(shape_.size()));
  return shape_str(o);
}

void ChunkIndex::damaged(const std::vector<hsize_t>& offset, const std::string& what) const {
  throw ValueError(cat("the chunk index of ", where_, " is damaged: the chunk at ", describe(offset), " ", what,
                       " (corrupted file?)"));
}

ChunkIndex::Chunk ChunkIndex::locate(hid_t dset, const std::vector<hsize_t>& offset) const {
  Chunk c;
  const bool listed = listed_ && listed_chunks_.count(linear(offset));
  if (listed_ && !listed) return c;  // known never written: no lookup

  // The walk: address, size and filter mask.
  haddr_t addr = HADDR_UNDEF;
  hsize_t walked = 0;
  h5_check(H5Dget_chunk_info_by_coord(dset, offset.data(), &c.filter_mask, &addr, &walked),
           cat("cannot locate the chunk at ", describe(offset), " of ", where_, " (truncated or damaged file?)"));
  // The search (what H5Dread finds). HDF5 1.10 fails it for a chunk never written.
  hsize_t searched = 0;
  bool found = H5Dget_chunk_storage_size(dset, offset.data(), &searched) >= 0 && searched > 0;
  h5_error_text();  // clear
  const bool walk_found = addr != HADDR_UNDEF;
  if (!walk_found && !found) {
    if (complete_) damaged(offset, cat("cannot be found, though all ", stored_, " chunks of the grid are stored"));
    if (listed) damaged(offset, "cannot be found, though the index lists it");
    return c;  // never written: reads as the fill value
  }
  if (walk_found != found)
    damaged(offset, found ? "is found by a search of the index but not by a walk of it"
                          : "is found by a walk of the index but not by a search of it");
  if (walked == 0) damaged(offset, "has size 0");
  if (walked != searched) damaged(offset, cat("has two sizes in the index: ", walked, " and ", searched, " bytes"));
  uint64_t end = 0;
  if (!checked_add(addr, addr_base_, c.addr) || !checked_add(c.addr, walked, end) || (file_end_ > 0 && end > file_end_))
    damaged(offset, cat("claims ", walked, " bytes at byte ", addr, ", past the end of the file (", file_end_, " bytes)"));
  c.stored = true;
  c.size = static_cast<uint64_t>(walked);
  return c;
}

}  // namespace hpcnn::data
