#include "data/writer.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <set>

#include "core/errors.h"
#include "data/h5.h"

namespace hpcnn::data {

long long default_chunk_rows(long long rows, size_t row_bytes) {
  // About 1 MiB per chunk, whole rows: tens to hundreds of images, few enough chunks for a fast
  // index, and big enough that inflating one is worth a task on the thread pool.
  long long r = static_cast<long long>((size_t(1) << 20) / std::max<size_t>(1, row_bytes));
  r = std::clamp(r, 1LL, 65536LL);
  return std::max(1LL, std::min(r, rows));
}

namespace {

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

void write_one(hid_t file, const ArrayToWrite& a, const WriteOptions& opt, const std::string& path) {
  const int rank = static_cast<int>(a.shape.size());
  std::vector<hsize_t> dims(a.shape.begin(), a.shape.end());
  H5Id space = h5_own(rank == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(rank, dims.data(), nullptr), H5Sclose,
                      cat("write_hdf5: dataspace for '", a.name, "'"));
  H5Id dcpl = h5_own(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, "H5Pcreate(dataset create)");
  const bool compress = opt.compression == "gzip";
  long long n = 1;
  for (auto d : a.shape) n *= d;
  if (rank >= 1 && n > 0 && (compress || opt.chunk_rows > 0)) {
    long long row_elems = 1;
    for (int d = 1; d < rank; ++d) row_elems *= a.shape[d];
    long long cr = opt.chunk_rows > 0 ? std::min(opt.chunk_rows, a.shape[0])
                                      : default_chunk_rows(a.shape[0], static_cast<size_t>(row_elems) * a.elem_size);
    std::vector<hsize_t> chunk(dims);
    chunk[0] = static_cast<hsize_t>(std::max(1LL, cr));
    h5_check(H5Pset_chunk(dcpl.get(), rank, chunk.data()), cat("write_hdf5: chunk shape for '", a.name, "'"));
    if (compress) {
      if (opt.shuffle && a.elem_size > 1) h5_check(H5Pset_shuffle(dcpl.get()), "H5Pset_shuffle");
      h5_check(H5Pset_deflate(dcpl.get(), static_cast<unsigned>(opt.level)), "H5Pset_deflate");
    }
  }
  // Intermediate groups ("train/x") are created as needed.
  H5Id lcpl = h5_own(H5Pcreate(H5P_LINK_CREATE), H5Pclose, "H5Pcreate(link create)");
  h5_check(H5Pset_create_intermediate_group(lcpl.get(), 1), "H5Pset_create_intermediate_group");
  hid_t type = native_type(a);
  H5Id dset = h5_own(H5Dcreate2(file, a.name.c_str(), type, space.get(), lcpl.get(), dcpl.get(), H5P_DEFAULT),
                     H5Dclose, cat("write_hdf5: cannot create dataset '", a.name, "' in '", path, "'"));
  if (n > 0)
    h5_check(H5Dwrite(dset.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, a.data),
             cat("write_hdf5: cannot write dataset '", a.name, "' to '", path, "'"));
  if (!dset.close()) throw BackendError(cat("write_hdf5: closing dataset '", a.name, "' failed: ", h5_error_text()));
}

}  // namespace

void write_hdf5(const std::string& path, const std::vector<ArrayToWrite>& arrays, const WriteOptions& opt) {
  H5Lock lock(h5_mutex());
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

  std::random_device rd;
  const std::string tmp = cat(path, ".tmp-", ::getpid(), "-", std::hex, rd());
  // Removes the temporary file unless the write succeeded and it was renamed.
  struct TmpGuard {
    const std::string& name;
    bool keep = false;
    ~TmpGuard() {
      if (!keep) std::remove(name.c_str());
    }
  } guard{tmp};
  {
    H5Id file = h5_own(H5Fcreate(tmp.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT), H5Fclose,
                       cat("write_hdf5: cannot create '", tmp, "' (does the directory exist and is it writable?)"));
    for (auto& a : arrays) write_one(file.get(), a, opt, path);
    if (!file.close()) throw BackendError(cat("write_hdf5: closing '", tmp, "' failed (disk full?): ", h5_error_text()));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw BackendError(cat("write_hdf5: cannot rename '", tmp, "' to '", path, "'"));
  guard.keep = true;
}

}  // namespace hpcnn::data
