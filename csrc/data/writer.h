// Writing NumPy arrays to an HDF5 file with the C API (gzip chunks compressed in parallel on
// hpcnn's pool, stored with H5Dwrite_chunk), atomically: everything goes to a temporary
// file next to the target, which is renamed over the target only after HDF5 closed it without an
// error. A failed or interrupted write never leaves a half-written output file.
#pragma once

#include <hdf5.h>

#include <string>
#include <vector>

#include "core/tensor.h"

namespace hpcnn::data {

enum class ScalarKind { Int, UInt, Float };

struct ArrayToWrite {
  std::string name;
  const void* data = nullptr;  // C-contiguous, native byte order
  Shape shape;
  ScalarKind kind = ScalarKind::UInt;
  size_t elem_size = 1;
};

struct WriteOptions {
  long long chunk_rows = 0;       // 0: automatic (whole rows, about 1 MiB per chunk)
  std::string compression = "gzip";  // "gzip" or "none"
  int level = 4;                  // 0..9
  bool shuffle = true;            // byte-shuffle filter for multi-byte types (helps gzip)
};

// The chunk rows write_hdf5 picks for rows of `row_bytes` bytes (at least 1, at most `rows`).
long long default_chunk_rows(long long rows, size_t row_bytes);

// The HDF5 native type of `a`'s elements (ValueError naming the array for an unsupported size).
hid_t native_type(const ArrayToWrite& a);

void write_hdf5(const std::string& path, const std::vector<ArrayToWrite>& arrays, const WriteOptions& opt);

}  // namespace hpcnn::data
