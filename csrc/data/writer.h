// Writing NumPy arrays to an HDF5 file with the C API (gzip chunks compressed in parallel on
// hpcnn's pool, stored with H5Dwrite_chunk), atomically: everything goes to a temporary
// file next to the target, which is renamed over the target only after HDF5 closed it without an
// error. A failed or interrupted write never leaves a half-written output file.
#pragma once

#include <hdf5.h>

#include <string>
#include <vector>

#include "core/tensor.h"
#include "data/h5.h"

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

// A new HDF5 file written block of rows by block of rows (a folder of images decoded a chunk at a
// time: the whole never in memory), atomically as write_hdf5: to a temporary file next to `path`,
// renamed onto it by commit(). Destroyed (or close()d) before commit(): the temporary file is
// removed and `path` is left as it was.
//   create(name, shape, ...)  a dataset of shape[0] rows, chunks of chunk_rows whole rows (0: as
//                             write_hdf5 picks), gzip-compressed on hpcnn's threads unless opt says none
//   write(name, first_row, a) a's rows at first_row: blocks in order (first_row = the rows written
//                             so far), each a whole number of chunks but the last (ValueError else)
//   set_rows(name, rows)      shrinks the dataset to `rows` (>= those written): a dataset created for
//                             the most rows it may get (a folder's files, some of them refused)
//   commit()                  every dataset must have had all its rows written (ValueError naming it)
class StreamWriter {
 public:
  StreamWriter(std::string path, WriteOptions opt);
  ~StreamWriter();
  StreamWriter(const StreamWriter&) = delete;
  StreamWriter& operator=(const StreamWriter&) = delete;

  void create(const std::string& name, const Shape& shape, ScalarKind kind, size_t elem_size, long long chunk_rows);
  long long chunk_rows(const std::string& name) const;
  void set_rows(const std::string& name, long long rows);
  void write(const std::string& name, long long first_row, const ArrayToWrite& rows);
  void commit();
  void close();  // abandons the file (the temporary removed)
  bool open() const { return file_.valid() && !committed_; }

 private:
  struct Entry {
    H5Id dset;
    Shape shape;
    ArrayToWrite type;  // kind and element size
    long long chunk_rows = 0;
    long long rows_written = 0;
    bool ended = false;  // a block of part of a chunk was written: the last one
  };
  Entry& entry(const std::string& name);
  std::string path_, tmp_;
  WriteOptions opt_;
  H5Id file_;
  bool committed_ = false;  // renamed onto path_ (or given up by close()): nothing left to remove
  std::vector<std::pair<std::string, Entry>> sets_;
};

}  // namespace hpcnn::data
