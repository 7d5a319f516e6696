// One dataset of an HDF5 file, opened read-only through the C API and read in "row blocks":
// a block is the rows [b * block_rows, (b + 1) * block_rows) (the last one possibly shorter),
// where block_rows is the chunk's extent along the first dimension for chunked data (so a block
// is exactly the set of chunks that share a first coordinate, whatever the chunk shape: h5py's
// automatic (6250, 4, 4, 1) included) and about 4 MiB of rows for contiguous data.
//
// Chunked data whose filters are gzip, shuffle and Fletcher-32 (any subset: the files users
// meet), of any integer or float type in either byte order, is located one HDF5 call at a time
// on the calling thread (the thread-safe HDF5 is one global lock anyway), its bytes read by
// hpcnn (raw_file.h) and decoded (chunk_pipeline.h), scattered into row-major blocks on hpcnn's thread pool; chunks never
// written read as the dataset's fill value. Contiguous and compact data, and chunks with any other
// filter HDF5 can decode, are read with hyperslab H5Dread calls.
//
// A file's header is untrusted: the constructor checks the declared shape (no dimension above
// its maximum, a size that fits 63 bits, contiguous data inside the file), counts the chunk index
// (chunk_index.h), and every read checks that the file did not change since it was opened
// (raw_file.h). Every message names the file and the dataset.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "data/chunk_index.h"
#include "data/chunk_pipeline.h"
#include "data/h5.h"
#include "data/raw_file.h"

namespace hpcnn::data {

enum class ElemKind { U8, F32, Int, Other };

struct FilterInfo {
  int id = 0;
  std::string name;
  bool available = true;  // can this HDF5 library decode it?
};

struct DatasetInfo {
  std::string file, name;
  Shape shape;                 // full shape, first dimension = rows
  std::string dtype;           // NumPy-style name: "uint8", "float32", "int64", "float64", ...
  ElemKind kind = ElemKind::Other;
  size_t elem_size = 0;
  bool is_number = false;                   // an integer or float type (in a standard layout)
  bool is_float = false, is_signed = false;
  bool big_endian = false;
  bool chunked = false;
  Shape chunk;                 // empty unless chunked
  std::vector<FilterInfo> filters;
  long long rows() const { return shape.empty() ? 0 : shape[0]; }
  long long row_elems() const;  // product of shape[1:]
  std::string compression() const;  // "gzip+shuffle", "gzip", "none", "lzf", ...
  std::string describe() const;      // shape, dtype, chunks, compression
};

class H5Dataset {
 public:
  // Opens `name` in `file` (ValueError naming both for a missing file, a non-HDF5 file, a missing
  // dataset, an unreadable one, or a declared shape the file cannot hold).
  H5Dataset(const std::string& file, const std::string& name);

  const DatasetInfo& info() const { return info_; }
  long long block_rows() const { return block_rows_; }
  long long num_blocks() const { return (info_.rows() + block_rows_ - 1) / block_rows_; }
  long long rows_in_block(long long b) const;
  size_t row_bytes() const { return static_cast<size_t>(info_.row_elems()) * info_.elem_size; }
  bool raw_chunk_path() const { return raw_path_; }

  // Reads blocks `blocks[i]` into `dst[i]` (each at least rows_in_block * row_bytes bytes), as
  // native values of the stored type (uint8 or float32). Only for U8/F32 data.
  void read_blocks(const std::vector<long long>& blocks, const std::vector<uint8_t*>& dst);

  // The whole dataset (U8/F32, not a scalar) into dst (total_bytes() bytes), as native values of
  // the stored type, through read_blocks (parallel inflate); read in slices of blocks, so that the
  // bookkeeping stays small whatever the block count.
  void read_all(void* dst);

  // The whole dataset as int64 (labels). ValueError unless integer-typed, or for an unsigned
  // 64-bit value above 2^63 - 1 (named, never clipped); MemoryError naming the dataset when the
  // memory for it is not available.
  std::vector<int64_t> read_all_int64();

  // Bytes of the whole dataset as stored (rows * row_bytes; fits 63 bits: checked at open).
  uint64_t total_bytes() const { return total_bytes_; }

  std::string where() const;  // "dataset 'x_train' in file 'path'"

  // Seconds spent so far in HDF5 calls (serial), inflating and scattering (parallel), for benchmarks.
  double io_seconds() const { return io_seconds_; }
  double inflate_seconds() const { return inflate_seconds_; }
  double scatter_seconds() const { return scatter_seconds_; }
  // Bytes read from the file so far (as stored: compressed chunks; the raw rows for data HDF5
  // reads itself) and bytes those reads decoded to (the rows' bytes), for benchmarks and tests.
  uint64_t bytes_read() const { return bytes_read_; }
  uint64_t bytes_inflated() const { return bytes_inflated_; }

 private:
  // What the raw-chunk path precomputes once: the chunks of a block and one row's copy plan.
  struct RawGeometry {
    // A strided loop of a patch: `count` steps of `src` bytes in the chunk's row and `dst` bytes
    // in the output row (count 1: no loop).
    struct Loop {
      long long count = 1;
      size_t src = 0, dst = 0;
    };
    // What one chunk contributes to one row: `len` contiguous bytes at byte offsets src (in the
    // chunk's row) and dst (in the output row), repeated by the inner loop within the outer one.
    struct Patch {
      long long chunk = 0;  // index of the chunk within its block
      size_t src = 0, dst = 0, len = 0;
      Loop inner, outer;
    };
    long long per_block = 1;   // chunks per block
    size_t chunk_bytes = 0, chunk_row_bytes = 0;
    std::vector<Shape> grid_off;  // offsets of a block's chunks in dims 1..r-1
    std::vector<Patch> patches;
  };
  // Compressed chunks of one group of blocks, as read from the file.
  struct RawSet {
    std::vector<std::vector<uint8_t>> raw;
    std::vector<uint32_t> mask;  // filters skipped per chunk
    std::vector<char> fill;      // chunk never written: reads as the fill value
  };

  void check_declared_size(hid_t dcpl);
  void read_fill_value(hid_t dcpl);
  void init_raw_geometry();  // once, at the first raw read (with a memory check)
  void read_blocks_any(const std::vector<long long>& blocks, const std::vector<uint8_t*>& dst);
  void read_blocks_raw(const std::vector<long long>& blocks, const std::vector<uint8_t*>& dst);
  void fetch_group(const std::vector<long long>& blocks, RawSet& set);  // HDF5 reads, serial
  void decode_group(const std::vector<long long>& blocks, const std::vector<uint8_t*>& dst, RawSet& set);
  void read_blocks_hyperslab(const std::vector<long long>& blocks, const std::vector<uint8_t*>& dst);

  DatasetInfo info_;
  H5Id file_, dset_;
  RawFile raw_;
  ChunkIndex index_;        // chunked data only
  long long block_rows_ = 1;
  uint64_t total_bytes_ = 0;
  bool raw_path_ = false;   // chunked data with gzip/shuffle/Fletcher-32 filters only
  ChunkPipeline pipeline_;
  std::vector<uint8_t> fill_elem_;  // one element of the fill value, native byte order
  bool geo_ready_ = false;
  RawGeometry geo_;
  RawSet sets_[2];                               // double-buffered: reading one, decoding the other
  std::vector<std::vector<uint8_t>> decoded_;   // decoded chunks, reused between calls
  // Written by the reading thread, read by anyone (stats): atomics, updated with add().
  std::atomic<double> io_seconds_{0}, inflate_seconds_{0}, scatter_seconds_{0};
  std::atomic<uint64_t> bytes_read_{0}, bytes_inflated_{0};
  static void add(std::atomic<double>& a, double v) { a.store(a.load() + v); }
};

// Opening helpers shared with the writer and the inspector.
H5Id open_file_readonly(const std::string& file);
bool dataset_exists(hid_t file, const std::string& name);

}  // namespace hpcnn::data
