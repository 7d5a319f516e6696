// Undoing HDF5's filter pipeline on one raw chunk, in hpcnn: gzip (deflate), the byte shuffle and
// the Fletcher-32 checksum, any subset in any order, then the byte order.
//
// HDF5 1.10 trusts the size a damaged chunk decodes to (a chunk that inflates short, or whose
// filters a damaged mask skips, is copied out at its full size, reading past its buffer: garbage
// or a crash). Here every step checks its sizes and a failure says which step failed, so the
// loader reads every chunk with these filters itself (H5Dread_chunk + this), never through HDF5's
// own pipeline.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hpcnn::data {

struct ChunkPipeline {
  std::vector<int> filters;  // H5Z filter ids in pipeline (write) order
  size_t elem_size = 1;
  size_t chunk_bytes = 0;    // a decoded chunk: every element of the chunk's full extent
  bool swap_bytes = false;   // stored in the other byte order than this machine's

  // Can hpcnn decode a chunk with this filter?
  static bool supported(int filter_id);

  // Decodes `raw` (`n` bytes as stored, `mask`: bit i set = filter i was skipped for this chunk)
  // into `out` (resized to chunk_bytes; `tmp` is scratch). Returns "" or why it failed (a clause:
  // "corrupt deflate data", "its Fletcher-32 checksum does not match").
  std::string decode(const uint8_t* raw, size_t n, uint32_t mask, std::vector<uint8_t>& out,
                     std::vector<uint8_t>& tmp) const;
};

// HDF5's Fletcher-32 checksum (of 16-bit big-endian words; an odd last byte is the high byte).
uint32_t fletcher32(const uint8_t* data, size_t len);

// Reverses the byte order of each `elem_size`-byte element of data[0, n).
void swap_bytes(uint8_t* data, size_t n, size_t elem_size);

}  // namespace hpcnn::data
