// (De)compression of raw HDF5 chunks off the HDF5 lock: zlib-format inflate (libdeflate when the
// build found it, else zlib) and the inverse of HDF5's byte-shuffle filter.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hpcnn::data {

// Inflates a zlib stream (HDF5's deflate filter writes zlib format) into exactly `out_size`
// bytes. Returns "" on success, else why it failed ("corrupt data", "size mismatch: ...").
// Thread-safe: each thread keeps its own decompressor.
std::string inflate_zlib(const uint8_t* in, size_t in_size, uint8_t* out, size_t out_size);

// Compresses `in` into zlib format at `level` (0..9), as HDF5's deflate filter does. Returns false
// (and leaves `out` unspecified) when the result would not be smaller than the input: HDF5 then
// stores the chunk unfiltered. Thread-safe.
bool deflate_zlib(const uint8_t* in, size_t size, int level, std::vector<uint8_t>& out);

// H5Z_FILTER_SHUFFLE: all first bytes of the elements, then all second bytes, ...
void shuffle(const uint8_t* in, size_t size, size_t elem_size, uint8_t* out);

// Undoes H5Z_FILTER_SHUFFLE: `in` holds all first bytes of the elements, then all second bytes,
// ...; a trailing remainder (size not a multiple of elem_size) is copied as is.
void unshuffle(const uint8_t* in, size_t size, size_t elem_size, uint8_t* out);

const char* inflate_library();  // "libdeflate" or "zlib"

}  // namespace hpcnn::data
