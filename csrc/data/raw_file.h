// hpcnn's own view of an HDF5 file that HDF5 has open: the bytes of its chunks, read directly,
// and the check that the file did not change underneath.
//
// Direct reads: H5Dread_chunk (HDF5 1.10) takes no buffer size, and the size to allocate cannot
// be had from the same lookup it makes (H5Dget_chunk_storage_size reports the nominal chunk size
// of an unfiltered dataset, H5Dread_chunk reads the size in the damaged key: HDF5 then writes
// past the buffer). hpcnn reads a chunk's bytes itself instead, with pread on HDF5's own
// descriptor, at the address and size the chunk index gave (chunk_index.h), into a buffer of
// that size.
//
// Changes: HDF5's default (sec2) driver reads past the end of a file as zeros, without an error,
// so an HDF5 file truncated in place while an epoch streams it (a job rewriting it, a quota, a
// full disk) would silently train on zeros. RawFile records, at open, the size HDF5 expects (its
// end of allocated space, which HDF5 itself checks against the file at open) and the file's
// modification time; check() compares both after every read, and a direct read that comes back
// short raises. Both name the file. A file replaced by a rename is no change: the open
// descriptor still reads the old, complete file.
#pragma once

#include <hdf5.h>
#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace hpcnn::data {

class RawFile {
 public:
  RawFile() = default;
  // Right after H5Fopen of `path` (the caller holds h5_mutex()). Throws ValueError when the file
  // is already shorter than HDF5 expects.
  RawFile(hid_t file, const std::string& path);

  // Whether direct reads are possible (the file uses HDF5's sec2 driver: hpcnn opens it so).
  bool direct() const { return fd_ >= 0; }
  // Bytes HDF5 expects in the file (userblock included); 0 when unknown.
  uint64_t expected_size() const { return expected_; }
  // The userblock's size: HDF5's own addresses (object headers) are relative to the superblock.
  uint64_t base_address() const { return base_; }
  // What to add to a chunk address from H5Dget_chunk_info*: HDF5 before 1.14.4 reports chunk
  // addresses relative to the superblock too, later ones absolute (HDFGroup/hdf5#3003).
  uint64_t chunk_address_base() const { return chunk_base_; }

  // Reads n bytes at absolute file offset `at` into dst; ValueError naming the file and `what`
  // when the file ends first (truncated) or the read fails.
  void read(uint64_t at, size_t n, uint8_t* dst, const std::string& what) const;

  // Throws ValueError("HDF5 file '<path>' was truncated / modified while hpcnn was reading it
  // (<during>) ...") when the file is now shorter than HDF5 expects or was modified since it was
  // opened. Cheap (one fstat).
  void check(const std::string& during) const;

 private:
  bool stat_now(struct stat& st) const;

  std::string path_;
  int fd_ = -1;            // HDF5's own descriptor (sec2 driver); -1: stat the path instead
  uint64_t expected_ = 0;
  uint64_t base_ = 0, chunk_base_ = 0;
  struct timespec mtime_ = {0, 0};
  bool active_ = false;
};

}  // namespace hpcnn::data
