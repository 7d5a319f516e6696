#include "data/writer.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <cstdio>
#include <random>
#include <set>

#include "core/dynamic_for.h"
#include "core/errors.h"
#include "core/thread_pool.h"
#include "data/h5.h"
#include "data/inflate.h"
#include "data/write_target.h"

namespace hpcnn::data {

long long default_chunk_rows(long long rows, size_t row_bytes) {
  // About 1 MiB per chunk, whole rows: tens to hundreds of images, few enough chunks for a fast
  // index, and big enough that inflating one is worth a task on the thread pool.
  long long r = static_cast<long long>((size_t(1) << 20) / std::max<size_t>(1, row_bytes));
  r = std::clamp(r, 1LL, 65536LL);
  return std::max(1LL, std::min(r, rows));
}

hid_t native_type(const ArrayToWrite& a) {
  switch (a.kind) {
    case ScalarKind::Float:
      if (a.elem_size == 4) return H5T_NATIVE_FLOAT;
      if (a.elem_size == 8) return H5T_NATIVE_DOUBLE;
      break;
    case ScalarKind::Int:
      if (a.elem_size == 1) return H5T_NATIVE_INT8;
      if (a.elem_size == 2) return H5T_NATIVE_INT16;
      if (a.elem_size == 4) return H5T_NATIVE_INT32;
      if (a.elem_size == 8) return H5T_NATIVE_INT64;
      break;
    case ScalarKind::UInt:
      if (a.elem_size == 1) return H5T_NATIVE_UINT8;
      if (a.elem_size == 2) return H5T_NATIVE_UINT16;
      if (a.elem_size == 4) return H5T_NATIVE_UINT32;
      if (a.elem_size == 8) return H5T_NATIVE_UINT64;
      break;
  }
  throw ValueError(cat("write_hdf5: array '", a.name, "' has an unsupported element type (", a.elem_size,
                       "-byte)"));
}

namespace {

// Gzip chunks compressed in parallel on hpcnn's pool, written with H5Dwrite_chunk on this thread
// (HDF5's own H5Dwrite would compress them one by one). A chunk is whole rows, so its bytes are
// contiguous in the array; the last one is padded with zeros to the full chunk (HDF5 stores edge
// chunks whole). The pipeline is [shuffle,] deflate, as set on the dataset; a chunk that deflate
// cannot shrink is stored with deflate's bit in the filter mask, as HDF5 does.
// `first_row`: where a's rows go in the dataset (a multiple of chunk_rows: StreamWriter's blocks).
void write_chunks_parallel(hid_t dset, const ArrayToWrite& a, long long chunk_rows, const WriteOptions& opt,
                           const std::string& path, std::unique_lock<std::recursive_mutex>& h5lock,
                           long long first_row = 0) {
  const int rank = static_cast<int>(a.shape.size());
  long long row_elems = 1;
  for (int d = 1; d < rank; ++d) row_elems *= a.shape[d];
  const size_t row_bytes = static_cast<size_t>(row_elems) * a.elem_size;
  const size_t chunk_bytes = static_cast<size_t>(chunk_rows) * row_bytes;
  const long long rows = a.shape[0], nchunks = (rows + chunk_rows - 1) / chunk_rows;
  const bool shuf = opt.shuffle && a.elem_size > 1;
  const uint32_t deflate_bit = shuf ? 2u : 1u;  // filter index 1 after shuffle, else 0
  const long long per_group = std::max<long long>(2 * get_num_threads(),
                                                  static_cast<long long>((size_t(32) << 20) / std::max<size_t>(1, chunk_bytes)));
  const auto* src = static_cast<const uint8_t*>(a.data);
  std::vector<std::vector<uint8_t>> out;
  std::vector<uint32_t> mask;
  for (long long g0 = 0; g0 < nchunks; g0 += per_group) {
    const long long g1 = std::min(nchunks, g0 + per_group);
    out.assign(g1 - g0, {});
    mask.assign(g1 - g0, 0);
    h5lock.unlock();  // the pool compresses; HDF5 stays free for other threads meanwhile
    dynamic_for(g1 - g0, 1, [&](long long k0, long long k1) {
      std::vector<uint8_t> padded, shuffled;
      for (long long k = k0; k < k1; ++k) {
        const long long c = g0 + k, r0 = c * chunk_rows, nr = std::min(chunk_rows, rows - r0);
        const uint8_t* in = src + static_cast<size_t>(r0) * row_bytes;
        if (nr < chunk_rows) {
          padded.assign(chunk_bytes, 0);
          std::memcpy(padded.data(), in, static_cast<size_t>(nr) * row_bytes);
          in = padded.data();
        }
        if (shuf) {
          shuffled.resize(chunk_bytes);
          shuffle(in, chunk_bytes, a.elem_size, shuffled.data());
          in = shuffled.data();
        }
        if (!deflate_zlib(in, chunk_bytes, opt.level, out[k])) {
          out[k].assign(in, in + chunk_bytes);
          mask[k] = deflate_bit;
        }
      }
    });
    h5lock.lock();
    std::vector<hsize_t> off(rank, 0);
    for (long long k = 0; k < g1 - g0; ++k) {
      off[0] = static_cast<hsize_t>(first_row + (g0 + k) * chunk_rows);
      h5_check(H5Dwrite_chunk(dset, H5P_DEFAULT, mask[k], off.data(), out[k].size(), out[k].data()),
               cat("write_hdf5: cannot write a chunk of dataset '", a.name, "' to '", path, "'"));
    }
  }
}

void write_one(hid_t file, const ArrayToWrite& a, const WriteOptions& opt, const std::string& path) {
  std::unique_lock<std::recursive_mutex> h5lock(h5_mutex());
  const int rank = static_cast<int>(a.shape.size());
  std::vector<hsize_t> dims(a.shape.begin(), a.shape.end());
  H5Id space = h5_own(rank == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(rank, dims.data(), nullptr), H5Sclose,
                      cat("write_hdf5: dataspace for '", a.name, "'"));
  H5Id dcpl = h5_own(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, "H5Pcreate(dataset create)");
  const bool compress = opt.compression == "gzip";
  long long n = 1;
  for (auto d : a.shape) n *= d;
  long long chunk_rows = 0;
  bool parallel_chunks = false;
  if (rank >= 1 && n > 0 && (compress || opt.chunk_rows > 0)) {
    long long row_elems = 1;
    for (int d = 1; d < rank; ++d) row_elems *= a.shape[d];
    long long cr = opt.chunk_rows > 0 ? std::min(opt.chunk_rows, a.shape[0])
                                      : default_chunk_rows(a.shape[0], static_cast<size_t>(row_elems) * a.elem_size);
    chunk_rows = std::max(1LL, cr);
    std::vector<hsize_t> chunk(dims);
    chunk[0] = static_cast<hsize_t>(chunk_rows);
    h5_check(H5Pset_chunk(dcpl.get(), rank, chunk.data()), cat("write_hdf5: chunk shape for '", a.name, "'"));
    if (compress) {
      if (opt.shuffle && a.elem_size > 1) h5_check(H5Pset_shuffle(dcpl.get()), "H5Pset_shuffle");
      h5_check(H5Pset_deflate(dcpl.get(), static_cast<unsigned>(opt.level)), "H5Pset_deflate");
      parallel_chunks = true;  // whole-row chunks: compress them on hpcnn's threads
    }
  }
  // Intermediate groups ("train/x") are created as needed.
  H5Id lcpl = h5_own(H5Pcreate(H5P_LINK_CREATE), H5Pclose, "H5Pcreate(link create)");
  h5_check(H5Pset_create_intermediate_group(lcpl.get(), 1), "H5Pset_create_intermediate_group");
  hid_t type = native_type(a);
  H5Id dset = h5_own(H5Dcreate2(file, a.name.c_str(), type, space.get(), lcpl.get(), dcpl.get(), H5P_DEFAULT),
                     H5Dclose, cat("write_hdf5: cannot create dataset '", a.name, "' in '", path, "'"));
  if (n > 0 && parallel_chunks)
    write_chunks_parallel(dset.get(), a, chunk_rows, opt, path, h5lock);
  else if (n > 0)
    h5_check(H5Dwrite(dset.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, a.data),
             cat("write_hdf5: cannot write dataset '", a.name, "' to '", path, "'"));
  // Flushed first (HDF5's sieve buffer holds small writes): a refused write shows here, not
  // in the close.
  h5_check(H5Dflush(dset.get()), cat("write_hdf5: cannot write dataset '", a.name, "' to '", path, "'"));
  if (!dset.close()) throw BackendError(cat("write_hdf5: closing dataset '", a.name, "' failed: ", h5_error_text()));
}

}  // namespace

void write_hdf5(const std::string& path, const std::vector<ArrayToWrite>& arrays, const WriteOptions& opt) {
  h5_quiet();
  HPCNN_CHECK_ARG(!path.empty(), "write_hdf5: empty path");
  HPCNN_CHECK_ARG(!arrays.empty(), "write_hdf5: no arrays to write to '", path, "'");
  HPCNN_CHECK_ARG(opt.compression == "gzip" || opt.compression == "none", "write_hdf5: compression must be 'gzip' or None, got '",
                  opt.compression, "'");
  HPCNN_CHECK_ARG(opt.level >= 0 && opt.level <= 9, "write_hdf5: level must be in 0..9, got ", opt.level);
  HPCNN_CHECK_ARG(opt.chunk_rows >= 0, "write_hdf5: chunk_rows must be positive, got ", opt.chunk_rows);
  std::set<std::string> names;
  for (auto& a : arrays) {
    HPCNN_CHECK_ARG(!a.name.empty(), "write_hdf5: empty dataset name");
    HPCNN_CHECK_ARG(names.insert(a.name).second, "write_hdf5: dataset '", a.name, "' given twice");
  }

  check_write_target(path, "write_hdf5");  // no links, directories, special or read-only files
  remove_stale_temporaries(path);          // left by a killed earlier write to `path`
  const std::string tmp = temporary_path_for(path);
  // Removes the temporary file unless the write succeeded and it was renamed.
  struct TmpGuard {
    const std::string& name;
    bool keep = false;
    ~TmpGuard() {
      if (!keep) std::remove(name.c_str());
    }
  } guard{tmp};
  // A write the file system refuses (disk full, ...) is reported by HDF5 at the write, or only
  // when it flushes its caches: either is an OsError naming `path`, never a short file renamed
  // into place (write_target.h).
  H5Id file;
  with_write_failures(path, tmp, file, "write_hdf5", [&] {
    {
      H5Lock lock(h5_mutex());
      file = h5_own(H5Fcreate(tmp.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT), H5Fclose,
                    cat("write_hdf5: cannot create '", tmp, "' (does the directory exist and is it writable?)"));
    }
    for (auto& a : arrays) write_one(file.get(), a, opt, path);
    {
      H5Lock lock(h5_mutex());
      h5_check(H5Fflush(file.get(), H5F_SCOPE_LOCAL), cat("write_hdf5: cannot flush '", tmp, "'"));
    }
    if (!file.close()) throw BackendError(cat("write_hdf5: closing '", tmp, "' failed (disk full?): ", h5_error_text()));
  });
  commit_temporary(tmp, path, "write_hdf5");  // fsync, rename onto path, fsync the directory
  guard.keep = true;
}

// ---------------------------------------------------------------------- StreamWriter
StreamWriter::StreamWriter(std::string path, WriteOptions opt) : path_(std::move(path)), opt_(std::move(opt)) {
  h5_quiet();
  HPCNN_CHECK_ARG(!path_.empty(), "StreamWriter: empty path");
  HPCNN_CHECK_ARG(opt_.compression == "gzip" || opt_.compression == "none",
                  "StreamWriter: compression must be 'gzip' or None, got '", opt_.compression, "'");
  HPCNN_CHECK_ARG(opt_.level >= 0 && opt_.level <= 9, "StreamWriter: level must be in 0..9, got ", opt_.level);
  check_write_target(path_, "StreamWriter");
  remove_stale_temporaries(path_);
  tmp_ = temporary_path_for(path_);
  H5Lock lock(h5_mutex());
  file_ = h5_own(H5Fcreate(tmp_.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT), H5Fclose,
                 cat("StreamWriter: cannot create '", tmp_, "' (does the directory exist and is it writable?)"));
}

StreamWriter::~StreamWriter() { close(); }

void StreamWriter::close() {
  H5Lock lock(h5_mutex());
  sets_.clear();  // datasets first, then the file
  if (file_.valid()) file_.close();
  if (!committed_ && !tmp_.empty()) std::remove(tmp_.c_str());  // also after a failed write abandoned it
  committed_ = true;
}

StreamWriter::Entry& StreamWriter::entry(const std::string& name) {
  for (auto& [n, e] : sets_)
    if (n == name) return e;
  throw ValueError(cat("StreamWriter: no dataset '", name, "' was created in '", path_, "'"));
}

long long StreamWriter::chunk_rows(const std::string& name) const {
  for (auto& [n, e] : sets_)
    if (n == name) return e.chunk_rows;
  throw ValueError(cat("StreamWriter: no dataset '", name, "' was created in '", path_, "'"));
}

void StreamWriter::create(const std::string& name, const Shape& shape, ScalarKind kind, size_t elem_size,
                          long long chunk_rows) {
  HPCNN_CHECK_ARG(file_.valid(), "StreamWriter: '", path_, "' is closed");
  HPCNN_CHECK_ARG(!name.empty(), "StreamWriter: empty dataset name");
  HPCNN_CHECK_ARG(!shape.empty() && shape[0] >= 1, "StreamWriter: dataset '", name, "' needs at least one row");
  for (auto& [n, e] : sets_) HPCNN_CHECK_ARG(n != name, "StreamWriter: dataset '", name, "' created twice");
  Entry e;
  e.shape = shape;
  e.type.name = name;
  e.type.kind = kind;
  e.type.elem_size = elem_size;
  const hid_t type = native_type(e.type);
  long long row_elems = 1;
  for (size_t d = 1; d < shape.size(); ++d) row_elems *= shape[d];
  e.chunk_rows = chunk_rows > 0 ? std::min(chunk_rows, shape[0])
                                : default_chunk_rows(shape[0], static_cast<size_t>(row_elems) * elem_size);
  std::vector<hsize_t> dims(shape.begin(), shape.end()), chunk(dims);
  chunk[0] = static_cast<hsize_t>(e.chunk_rows);
  H5Lock lock(h5_mutex());
  H5Id space = h5_own(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose,
                      cat("StreamWriter: dataspace for '", name, "'"));
  H5Id dcpl = h5_own(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, "H5Pcreate(dataset create)");
  h5_check(H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data()),
           cat("StreamWriter: chunk shape for '", name, "'"));
  if (opt_.compression == "gzip") {
    if (opt_.shuffle && elem_size > 1) h5_check(H5Pset_shuffle(dcpl.get()), "H5Pset_shuffle");
    h5_check(H5Pset_deflate(dcpl.get(), static_cast<unsigned>(opt_.level)), "H5Pset_deflate");
  }
  H5Id lcpl = h5_own(H5Pcreate(H5P_LINK_CREATE), H5Pclose, "H5Pcreate(link create)");
  h5_check(H5Pset_create_intermediate_group(lcpl.get(), 1), "H5Pset_create_intermediate_group");
  e.dset = h5_own(H5Dcreate2(file_.get(), name.c_str(), type, space.get(), lcpl.get(), dcpl.get(), H5P_DEFAULT),
                  H5Dclose, cat("StreamWriter: cannot create dataset '", name, "' in '", path_, "'"));
  sets_.emplace_back(name, std::move(e));
}

void StreamWriter::write(const std::string& name, long long first_row, const ArrayToWrite& rows) {
  HPCNN_CHECK_ARG(file_.valid() && !committed_, "StreamWriter: '", path_, "' is closed");
  Entry& e = entry(name);
  HPCNN_CHECK_ARG(rows.kind == e.type.kind && rows.elem_size == e.type.elem_size, "StreamWriter: rows for '", name,
                  "' have another element type than the dataset");
  HPCNN_CHECK_ARG(rows.shape.size() == e.shape.size() && std::equal(rows.shape.begin() + 1, rows.shape.end(),
                                                                    e.shape.begin() + 1),
                  "StreamWriter: rows for '", name, "' have shape ", shape_str(rows.shape), ", the dataset ",
                  shape_str(e.shape));
  const long long n = rows.shape[0], total = e.shape[0];
  HPCNN_CHECK_ARG(n >= 1 && first_row >= 0 && first_row + n <= total, "StreamWriter: rows [", first_row, ", ",
                  first_row + n, ") are outside dataset '", name, "' of ", total, " rows");
  HPCNN_CHECK_ARG(first_row == e.rows_written && !e.ended, "StreamWriter: rows of '", name,
                  "' must be written in order: the next block starts at row ", e.rows_written,
                  e.ended ? " (after a block of part of a chunk, none)" : "", ", not ", first_row);
  // A block of part of a chunk ends the writing of the dataset (its chunk is stored padded).
  e.ended = n % e.chunk_rows != 0;
  ArrayToWrite a = rows;
  a.name = name;
  with_write_failures(path_, tmp_, file_, "StreamWriter", [&] {
    std::unique_lock<std::recursive_mutex> h5lock(h5_mutex());
    if (opt_.compression == "gzip") {
      write_chunks_parallel(e.dset.get(), a, e.chunk_rows, opt_, path_, h5lock, first_row);
    } else {
      std::vector<hsize_t> off(e.shape.size(), 0), count(a.shape.begin(), a.shape.end());
      off[0] = static_cast<hsize_t>(first_row);
      H5Id fspace = h5_own(H5Dget_space(e.dset.get()), H5Sclose, "H5Dget_space");
      h5_check(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, off.data(), nullptr, count.data(), nullptr),
               "H5Sselect_hyperslab");
      H5Id mspace = h5_own(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr), H5Sclose,
                           "H5Screate_simple");
      h5_check(H5Dwrite(e.dset.get(), native_type(a), mspace.get(), fspace.get(), H5P_DEFAULT, a.data),
               cat("StreamWriter: cannot write dataset '", name, "' to '", path_, "'"));
    }
  });
  e.rows_written += n;
}

void StreamWriter::set_rows(const std::string& name, long long rows) {
  HPCNN_CHECK_ARG(file_.valid() && !committed_, "StreamWriter: '", path_, "' is closed");
  Entry& e = entry(name);
  HPCNN_CHECK_ARG(rows >= 1 && rows <= e.shape[0] && rows >= e.rows_written, "StreamWriter: dataset '", name,
                  "' cannot have ", rows, " rows (", e.shape[0], " created, ", e.rows_written, " written)");
  std::vector<hsize_t> dims(e.shape.begin(), e.shape.end());
  dims[0] = static_cast<hsize_t>(rows);
  H5Lock lock(h5_mutex());
  h5_check(H5Dset_extent(e.dset.get(), dims.data()), cat("StreamWriter: cannot shrink dataset '", name, "'"));
  e.shape[0] = rows;
}

void StreamWriter::commit() {
  HPCNN_CHECK_ARG(file_.valid() && !committed_, "StreamWriter: '", path_, "' is closed");
  for (auto& [n, e] : sets_)
    HPCNN_CHECK_ARG(e.rows_written == e.shape[0], "StreamWriter: dataset '", n, "' has ", e.rows_written, " of its ",
                    e.shape[0], " rows written; '", path_, "' is not complete");
  with_write_failures(path_, tmp_, file_, "StreamWriter", [&] {
    H5Lock lock(h5_mutex());
    for (auto& [n, e] : sets_) {
      h5_check(H5Dflush(e.dset.get()), cat("StreamWriter: cannot write dataset '", n, "' to '", path_, "'"));
      if (!e.dset.close()) throw BackendError(cat("StreamWriter: closing dataset '", n, "' failed: ", h5_error_text()));
    }
    h5_check(H5Fflush(file_.get(), H5F_SCOPE_LOCAL), cat("StreamWriter: cannot flush '", tmp_, "'"));
    if (!file_.close()) throw BackendError(cat("StreamWriter: closing '", tmp_, "' failed (disk full?): ", h5_error_text()));
  });
  sets_.clear();
  commit_temporary(tmp_, path_, "StreamWriter");
  committed_ = true;
}

}  // namespace hpcnn::data
