// H5Dataset (data/h5_dataset.h): opening a dataset and checking what the file declares (header,
// sizes, filters, fill value) before it is trusted, and the read paths through HDF5 (any layout,
// hyperslabs of rows, whole datasets). The raw-chunk path, chunks read and decoded by hpcnn
// itself, is in h5_dataset_chunks.cpp.
#include "data/h5_dataset.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <limits>

#include "core/dynamic_for.h"
#include "core/errors.h"
#include "core/thread_pool.h"
#include "data/header_check.h"
#include "data/inflate.h"
#include "data/size_checks.h"

namespace hpcnn::data {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Names of the filters users meet in the wild, so that an error says which one.
std::string filter_name(int id) {
  switch (id) {
    case H5Z_FILTER_DEFLATE: return "gzip";
    case H5Z_FILTER_SHUFFLE: return "shuffle";
    case H5Z_FILTER_FLETCHER32: return "fletcher32";
    case H5Z_FILTER_SZIP: return "szip";
    case H5Z_FILTER_NBIT: return "nbit";
    case H5Z_FILTER_SCALEOFFSET: return "scaleoffset";
    case 32000: return "lzf";
    case 32001: return "blosc";
    case 32004: return "lz4";
    case 32008: return "bitshuffle";
    case 32015: return "zstd";
    default: return cat("filter ", id);
  }
}

}  // namespace

long long DatasetInfo::row_elems() const {
  long long n = 1;
  for (size_t d = 1; d < shape.size(); ++d) n *= shape[d];
  return n;
}

std::string DatasetInfo::compression() const {
  if (filters.empty()) return "none";
  std::string s;
  for (auto& f : filters) {
    if (f.id == H5Z_FILTER_SHUFFLE) continue;
    s += (s.empty() ? "" : "+") + f.name;
  }
  for (auto& f : filters)
    if (f.id == H5Z_FILTER_SHUFFLE) s += s.empty() ? "shuffle" : "+shuffle";
  return s;
}

std::string DatasetInfo::describe() const {
  return cat(name, ": shape=", shape_str(shape), " dtype=", dtype, " chunks=",
             chunked ? shape_str(chunk) : std::string("None (contiguous)"), " compression=", compression());
}

H5Id open_file_readonly(const std::string& file) {
  H5Lock lock(h5_mutex());
  h5_quiet();
  struct stat st;
  if (::stat(file.c_str(), &st) != 0) throw ValueError(cat("HDF5 file not found: '", file, "'"));
  if (S_ISDIR(st.st_mode)) throw ValueError(cat("'", file, "' is a directory, not an HDF5 file"));
  // Only regular files: HDF5's signature check reads a FIFO (or a terminal, a socket) and waits
  // for a writer forever, and a device is no HDF5 file either.
  if (!S_ISREG(st.st_mode)) {
    const char* what = S_ISFIFO(st.st_mode) ? "a FIFO (named pipe)" : S_ISCHR(st.st_mode) ? "a character device"
                       : S_ISBLK(st.st_mode) ? "a block device" : S_ISSOCK(st.st_mode) ? "a socket" : "not a regular file";
    throw ValueError(cat("'", file, "' is ", what, ", not an HDF5 file: hpcnn reads HDF5 data from regular files only"));
  }
  {
    int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw ValueError(cat("cannot read HDF5 file '", file, "': ", std::strerror(errno)));
    ::close(fd);
  }
  htri_t is = H5Fis_hdf5(file.c_str());
  if (is <= 0) {
    std::string why = h5_error_text();
    throw ValueError(cat("'", file, "' is not an HDF5 file (or is truncated/damaged: no valid HDF5 signature)",
                         why.empty() ? "" : cat(" (HDF5: ", why, ")")));
  }
  H5Id fapl = h5_own(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "H5Pcreate(file access)");
#if H5_VERSION_GE(1, 10, 7)
  // Parallel file systems often have no POSIX locks: read anyway rather than fail.
  H5Pset_file_locking(fapl.get(), true, true);
#endif
  return h5_own(H5Fopen(file.c_str(), H5F_ACC_RDONLY, fapl.get()), H5Fclose,
                cat("cannot open HDF5 file '", file, "' (truncated or damaged?)"));
}

// "datasets x_train, y_train" (and "groups g/") at the file's top level, for the error that
// names a missing dataset: the user sees what the file does hold.
std::string top_level_names(hid_t file) {
  std::vector<std::string> names;
  auto collect = [](hid_t group, const char* name, const H5L_info_t*, void* out) -> herr_t {
    static_cast<std::vector<std::string>*>(out)->push_back(name);
    return 0;
  };
  H5Literate(file, H5_INDEX_NAME, H5_ITER_INC, nullptr, collect, &names);
  std::string datasets, groups;
  for (const auto& n : names) {
    hid_t obj = H5Oopen(file, n.c_str(), H5P_DEFAULT);
    if (obj < 0) continue;
    H5I_type_t type = H5Iget_type(obj);
    H5Oclose(obj);
    std::string& list = type == H5I_DATASET ? datasets : groups;
    if (type != H5I_DATASET && type != H5I_GROUP) continue;
    list += (list.empty() ? "" : ", ") + n + (type == H5I_GROUP ? "/" : "");
  }
  h5_error_text();  // clear anything the listing left on the error stack
  if (datasets.empty() && groups.empty()) return "no datasets";
  std::string out = datasets.empty() ? "no datasets" : "datasets " + datasets;
  return groups.empty() ? out : out + " and groups " + groups;
}

bool dataset_exists(hid_t file, const std::string& name) {
  // Check each link of the path: H5Lexists fails (rather than says no) past a missing group.
  size_t pos = 0;
  while (true) {
    size_t next = name.find('/', pos + 1);
    std::string prefix = name.substr(0, next);
    if (!prefix.empty() && prefix != "/") {
      htri_t e = H5Lexists(file, prefix.c_str(), H5P_DEFAULT);
      if (e <= 0) {
        h5_error_text();  // clear
        return false;
      }
    }
    if (next == std::string::npos) break;
    pos = next;
  }
  return true;
}

namespace {

// The native memory type that holds one stored element unchanged (integers and floats of 1, 2,
// 4 or 8 bytes); -1 for anything else.
hid_t native_mem_type(const DatasetInfo& i) {
  if (!i.is_number) return -1;
  if (i.is_float) return i.elem_size == 4 ? H5T_NATIVE_FLOAT : i.elem_size == 8 ? H5T_NATIVE_DOUBLE : -1;
  switch (i.elem_size) {
    case 1: return i.is_signed ? H5T_NATIVE_INT8 : H5T_NATIVE_UINT8;
    case 2: return i.is_signed ? H5T_NATIVE_INT16 : H5T_NATIVE_UINT16;
    case 4: return i.is_signed ? H5T_NATIVE_INT32 : H5T_NATIVE_UINT32;
    case 8: return i.is_signed ? H5T_NATIVE_INT64 : H5T_NATIVE_UINT64;
    default: return -1;
  }
}

}  // namespace

H5Dataset::H5Dataset(const std::string& file, const std::string& name) {
  H5Lock lock(h5_mutex());
  info_.file = file;
  info_.name = name;
  file_ = open_file_readonly(file);
  raw_ = RawFile(file_.get(), file);
  if (name.empty() || !dataset_exists(file_.get(), name))
    throw ValueError(cat("no dataset '", name, "' in HDF5 file '", file, "'; it holds ",
                         top_level_names(file_.get())));
  check_dataset_header(file_.get(), raw_, name, where());  // before HDF5 decodes it (header_check.h)
  dset_ = h5_own(H5Dopen2(file_.get(), name.c_str(), H5P_DEFAULT), H5Dclose,
                 cat("cannot open ", where(), " (is it a group, or is the file damaged?)"));

  H5Id type = h5_own(H5Dget_type(dset_.get()), H5Tclose, cat("cannot read the type of ", where()));
  H5T_class_t cls = H5Tget_class(type.get());
  info_.elem_size = H5Tget_size(type.get());
  HPCNN_CHECK_ARG(cls != H5T_NO_CLASS && info_.elem_size > 0, "cannot read the type of ", where(),
                  " (damaged file?)");
  info_.dtype = h5_type_name(type.get());
  if (cls == H5T_INTEGER || cls == H5T_FLOAT) {
    H5T_order_t order = H5Tget_order(type.get());
    HPCNN_CHECK_ARG(order == H5T_ORDER_LE || order == H5T_ORDER_BE || info_.elem_size == 1, where(),
                    " has a ", info_.dtype, " type of unknown byte order (damaged file?)");
    std::string odd = nonstandard_number(type.get(), cls, info_.elem_size);
    h5_error_text();
    HPCNN_CHECK_ARG(odd.empty(), where(), " has a ", info_.dtype, " type that ", odd,
                    ": hpcnn reads standard integers and IEEE floats only (a damaged file?)");
    info_.big_endian = order == H5T_ORDER_BE && info_.elem_size > 1;
    info_.is_number = true;
    info_.is_float = cls == H5T_FLOAT;
    info_.is_signed = cls == H5T_INTEGER && H5Tget_sign(type.get()) != H5T_SGN_NONE;
  }
  if (cls == H5T_INTEGER && info_.elem_size == 1 && !info_.is_signed)
    info_.kind = ElemKind::U8;
  else if (cls == H5T_FLOAT && info_.elem_size == 4)
    info_.kind = ElemKind::F32;
  else if (cls == H5T_INTEGER)
    info_.kind = ElemKind::Int;
  h5_error_text();  // clear whatever the type queries left

  // The declared shape: every dimension within its maximum (HDF5 1.10 does not check; 2.x does)
  // and a size in bytes that fits 63 bits.
  H5Id space = h5_own(H5Dget_space(dset_.get()), H5Sclose, cat("cannot read the shape of ", where()));
  int rank = H5Sget_simple_extent_ndims(space.get());
  h5_check(rank, cat("cannot read the shape of ", where()));
  std::vector<hsize_t> dims(rank), maxdims(rank);
  if (rank > 0)
    h5_check(H5Sget_simple_extent_dims(space.get(), dims.data(), maxdims.data()), cat("shape of ", where()));
  // A row's size is checked on its own too: a dataset with 0 rows still declares its rows.
  uint64_t row_size = info_.elem_size;
  bool fits = true;
  for (int d = 0; d < rank; ++d) {
    if (maxdims[d] != H5S_UNLIMITED && dims[d] > maxdims[d])
      throw ValueError(cat(where(), " is damaged: dimension ", d, " is ", dims[d], ", above its maximum ",
                           maxdims[d], " (corrupted file?)"));
    fits = fits && dims[d] <= static_cast<hsize_t>(std::numeric_limits<long long>::max());
    if (d >= 1) fits = fits && checked_mul(row_size, dims[d], row_size);
  }
  fits = fits && checked_mul(rank > 0 ? dims[0] : 1, row_size, total_bytes_);
  if (!fits) {
    std::string shape;
    for (int d = 0; d < rank; ++d) shape += cat(d ? ", " : "", dims[d]);
    throw ValueError(cat(where(), " declares shape (", shape, rank == 1 ? ",)" : ")", " of ", info_.dtype,
                         ", whose size does not fit in 64 bits: a damaged or hostile file"));
  }
  for (auto d : dims) info_.shape.push_back(static_cast<long long>(d));

  H5Id dcpl = h5_own(H5Dget_create_plist(dset_.get()), H5Pclose, cat("cannot read the layout of ", where()));
  H5D_layout_t layout = H5Pget_layout(dcpl.get());
  info_.chunked = layout == H5D_CHUNKED;
  if (info_.chunked && rank > 0) {
    std::vector<hsize_t> c(rank);
    h5_check(H5Pget_chunk(dcpl.get(), rank, c.data()), cat("cannot read the chunk shape of ", where()));
    uint64_t cbytes = info_.elem_size;
    for (auto d : c) {
      // HDF5 limits a chunk to 4 GiB; larger comes from a damaged layout message.
      if (d == 0 || !checked_mul(cbytes, d, cbytes) || cbytes > (uint64_t(4) << 30))
        throw ValueError(cat(where(), " is damaged: its chunk shape is invalid (corrupted file?)"));
      info_.chunk.push_back(static_cast<long long>(d));
    }
  }
  int nf = H5Pget_nfilters(dcpl.get());
  h5_check(nf, cat("cannot read the filters of ", where()));
  bool own_pipeline = true;
  for (int i = 0; i < nf; ++i) {
    unsigned flags = 0, cfg = 0;
    size_t nelem = 0;
    char fname[64] = {0};
    H5Z_filter_t id = H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &nelem, nullptr, sizeof fname,
                                     fname, &cfg);
    h5_check(id, cat("cannot read filter ", i, " of ", where()));
    FilterInfo f;
    f.id = static_cast<int>(id);
    f.name = filter_name(f.id);
    f.available = H5Zfilter_avail(id) > 0;
    h5_error_text();
    if (!f.available)
      throw ValueError(cat(where(), " is compressed with the unsupported filter '", f.name, "' (id ", f.id,
                           "), which this HDF5 library cannot decode; rewrite the file with gzip (e.g. "
                           "hpcnn.data.write_hdf5 or `python -m hpcnn.convert`)"));
    bool repeated = std::find(pipeline_.filters.begin(), pipeline_.filters.end(), f.id) != pipeline_.filters.end();
    own_pipeline = own_pipeline && ChunkPipeline::supported(f.id) && !repeated;
    pipeline_.filters.push_back(f.id);
    info_.filters.push_back(f);
  }
  raw_path_ = info_.chunked && own_pipeline && rank >= 1 && native_mem_type(info_) >= 0 && raw_.direct();
  pipeline_.elem_size = info_.elem_size;
  pipeline_.swap_bytes = info_.big_endian;

  check_declared_size(dcpl.get());
  if (raw_path_) read_fill_value(dcpl.get());
  if (info_.chunked && rank > 0)
    index_ = ChunkIndex(dset_.get(), info_.shape, info_.chunk, raw_.expected_size(), raw_.chunk_address_base(), where());

  if (info_.chunked && !info_.chunk.empty()) {
    block_rows_ = std::max<long long>(1, info_.chunk[0]);
  } else {
    long long rb = static_cast<long long>(std::max<size_t>(1, row_bytes()));
    block_rows_ = std::max<long long>(1, (4LL << 20) / rb);
  }
  if (info_.rows() > 0) block_rows_ = std::min(block_rows_, info_.rows());
}

void H5Dataset::check_declared_size(hid_t dcpl) {
  H5D_layout_t layout = H5Pget_layout(dcpl);
  if (layout != H5D_CONTIGUOUS && layout != H5D_COMPACT) return;
  // Contiguous data not yet written (no address) and empty datasets read as the fill value.
  haddr_t offset = layout == H5D_CONTIGUOUS ? H5Dget_offset(dset_.get()) : 0;
  h5_error_text();
  if (offset == HADDR_UNDEF) return;
  // HDF5 allocates exactly the declared size (2.x checks it; 1.10 does not, and reads a damaged
  // shape's data from past the stored bytes).
  uint64_t stored = H5Dget_storage_size(dset_.get());
  h5_error_text();
  if (stored != total_bytes_ || (layout == H5D_CONTIGUOUS && total_bytes_ == 0))  // empty: no address either
    throw ValueError(cat(where(), " declares shape ", shape_str(info_.shape), " of ", info_.dtype, " (",
                         bytes_str(total_bytes_), ") but stores ", stored, " bytes (corrupted file?)"));
  uint64_t end = 0;
  if (layout == H5D_CONTIGUOUS && raw_.expected_size() > 0 &&
      (!checked_add(offset, total_bytes_, end) || end > raw_.expected_size()))
    throw ValueError(cat(where(), " declares shape ", shape_str(info_.shape), " of ", info_.dtype, " (",
                         bytes_str(total_bytes_), ") starting at byte ", offset, ", past the end of the file (",
                         raw_.expected_size(), " bytes): truncated or corrupted file?"));
}

void H5Dataset::read_fill_value(hid_t dcpl) {
  // What HDF5 reads for a chunk never written: the user's fill value when one was set, unless
  // the fill time is "never" (then HDF5 leaves the buffer alone and h5py's reads hold zeros);
  // otherwise zeros.
  fill_elem_.assign(info_.elem_size, 0);
  H5D_fill_value_t status = H5D_FILL_VALUE_ERROR;
  H5D_fill_time_t when = H5D_FILL_TIME_ERROR;
  if (H5Pfill_value_defined(dcpl, &status) < 0 || H5Pget_fill_time(dcpl, &when) < 0) {
    h5_error_text();
    throw ValueError(cat("cannot read the fill value of ", where(), " (damaged file?)"));
  }
  if (status != H5D_FILL_VALUE_USER_DEFINED || when == H5D_FILL_TIME_NEVER) return;
  h5_check(H5Pget_fill_value(dcpl, native_mem_type(info_), fill_elem_.data()),
           cat("cannot read the fill value of ", where(), " (damaged file?)"));
}

std::string H5Dataset::where() const { return cat("dataset '", info_.name, "' in file '", info_.file, "'"); }

long long H5Dataset::rows_in_block(long long b) const {
  long long start = b * block_rows_;
  return std::max(0LL, std::min(block_rows_, info_.rows() - start));
}

void H5Dataset::read_blocks(const std::vector<long long>& blocks, const std::vector<uint8_t*>& dst) {
  HPCNN_CHECK_ARG(info_.kind == ElemKind::U8 || info_.kind == ElemKind::F32, where(), " has dtype ", info_.dtype,
                  ": images must be uint8 or float32");
  read_blocks_any(blocks, dst);
}

void H5Dataset::read_blocks_any(const std::vector<long long>& blocks, const std::vector<uint8_t*>& dst) {
  HPCNN_CHECK_BACKEND(blocks.size() == dst.size(), "read_blocks: ", blocks.size(), " blocks, ", dst.size(), " buffers");
  if (blocks.empty()) return;
  h5_quiet();
  double t0 = now_s();
  if (raw_path_) read_blocks_raw(blocks, dst);
  else read_blocks_hyperslab(blocks, dst);
  if (!raw_path_) {
    add(io_seconds_, now_s() - t0);
    uint64_t rows = 0;  // HDF5 decodes inside its reads: what it delivered counts as both
    for (long long b : blocks) rows += static_cast<uint64_t>(rows_in_block(b));
    bytes_read_ += rows * row_bytes();
    bytes_inflated_ += rows * row_bytes();
  }
}

void H5Dataset::read_blocks_hyperslab(const std::vector<long long>& blocks, const std::vector<uint8_t*>& dst) {
  H5Lock lock(h5_mutex());
  h5_quiet();
  const int rank = static_cast<int>(info_.shape.size());
  hid_t memtype = native_mem_type(info_);
  HPCNN_CHECK_ARG(memtype >= 0, where(), " has dtype ", info_.dtype, ", which hpcnn does not read");
  H5Id fspace = h5_own(H5Dget_space(dset_.get()), H5Sclose, cat("H5Dget_space on ", where()));
  for (size_t i = 0; i < blocks.size(); ++i) {
    long long n = rows_in_block(blocks[i]);
    if (n <= 0) continue;
    std::vector<hsize_t> start(rank, 0), count(info_.shape.begin(), info_.shape.end());
    start[0] = static_cast<hsize_t>(blocks[i] * block_rows_);
    count[0] = static_cast<hsize_t>(n);
    if (info_.chunked) {
      // Chunks HDF5 decodes itself (filters hpcnn does not): check the index finds each of them.
      std::vector<hsize_t> off(rank, 0);
      off[0] = start[0];
      while (true) {
        index_.locate(dset_.get(), off);
        int d = rank - 1;
        while (d >= 1 && (off[d] += static_cast<hsize_t>(info_.chunk[d])) >= static_cast<hsize_t>(info_.shape[d]))
          off[d--] = 0;
        if (d < 1) break;
      }
    }
    h5_check(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr),
             cat("selecting rows of ", where()));
    H5Id mspace = h5_own(H5Screate_simple(rank, count.data(), nullptr), H5Sclose, "H5Screate_simple");
    h5_check(H5Dread(dset_.get(), memtype, mspace.get(), fspace.get(), H5P_DEFAULT, dst[i]),
             cat("cannot read rows ", start[0], "..", start[0] + count[0], " of ", where(),
                 " (truncated or corrupted file?)"));
    raw_.check(cat("reading rows ", start[0], "..", start[0] + count[0], " of ", where()));
  }
}

void H5Dataset::read_all(void* dst_bytes) {
  HPCNN_CHECK_ARG(!info_.shape.empty(), where(), " is a scalar, expected an array");
  auto* dst = static_cast<uint8_t*>(dst_bytes);
  const long long slice = 4096;
  std::vector<long long> blocks;
  std::vector<uint8_t*> out;
  for (long long b0 = 0; b0 < num_blocks(); b0 += slice) {
    blocks.clear();
    out.clear();
    for (long long b = b0; b < std::min(num_blocks(), b0 + slice); ++b) {
      blocks.push_back(b);
      out.push_back(dst + static_cast<size_t>(b * block_rows_) * row_bytes());
    }
    read_blocks_any(blocks, out);
  }
}

namespace {

template <typename T>
void widen(const uint8_t* src, size_t n, int64_t* out) {
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, src + i * sizeof(T), sizeof(T));
    out[i] = static_cast<int64_t>(v);  // uint64: the caller checks the values above 2^63 - 1 first
  }
}

// Unsigned 64-bit values above 2^63 - 1 have no int64 value: a clipped or wrapped value would be
// a silently wrong label (issue 12, item 7), so the first one is named.
void check_fits_int64(const uint8_t* src, size_t n, const std::string& where) {
  for (size_t i = 0; i < n; ++i) {
    uint64_t v;
    std::memcpy(&v, src + i * sizeof(v), sizeof(v));
    HPCNN_CHECK_ARG(v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), where, " holds ", v,
                    " at element ", i, ": larger than 2^63-1, the largest integer hpcnn reads");
  }
}

}  // namespace

std::vector<int64_t> H5Dataset::read_all_int64() {
  HPCNN_CHECK_ARG(info_.kind == ElemKind::U8 || info_.kind == ElemKind::Int, where(), " has dtype ", info_.dtype,
                  ": labels must be integers");
  const uint64_t n = total_bytes_ / info_.elem_size;
  // The int64 result, and the stored values when hpcnn decodes the chunks itself.
  uint64_t need = 0, stored = raw_path_ ? total_bytes_ : 0;
  if (!checked_mul(n, sizeof(int64_t), need) || !checked_add(need, stored, need))
    need = std::numeric_limits<uint64_t>::max();
  require_memory(need, cat("reading ", where(), " (", n, " labels)"));
  std::vector<int64_t> out(static_cast<size_t>(n));
  if (out.empty()) return out;
  if (raw_path_) {
    std::vector<uint8_t> buf(static_cast<size_t>(total_bytes_));
    read_all(buf.data());
    const bool s = info_.is_signed;
    switch (info_.elem_size) {
      case 1: s ? widen<int8_t>(buf.data(), n, out.data()) : widen<uint8_t>(buf.data(), n, out.data()); break;
      case 2: s ? widen<int16_t>(buf.data(), n, out.data()) : widen<uint16_t>(buf.data(), n, out.data()); break;
      case 4: s ? widen<int32_t>(buf.data(), n, out.data()) : widen<uint32_t>(buf.data(), n, out.data()); break;
      default:
        if (!s) check_fits_int64(buf.data(), n, where());
        s ? widen<int64_t>(buf.data(), n, out.data()) : widen<uint64_t>(buf.data(), n, out.data());
        break;
    }
    return out;
  }
  H5Lock lock(h5_mutex());
  h5_quiet();
  if (info_.chunked && !info_.shape.empty()) {
    // Chunks HDF5 decodes itself: check the index finds each of them.
    const int rank = static_cast<int>(info_.shape.size());
    std::vector<hsize_t> off(rank, 0);
    while (true) {
      index_.locate(dset_.get(), off);
      int d = rank - 1;
      while (d >= 0 && (off[d] += static_cast<hsize_t>(info_.chunk[d])) >= static_cast<hsize_t>(info_.shape[d]))
        off[d--] = 0;
      if (d < 0) break;
    }
  }
  // Unsigned 64-bit values are read as they are (HDF5's conversion to int64 would clip them) and
  // checked; every other integer type converts to int64 exactly.
  const bool u64 = !info_.is_signed && info_.elem_size == 8;
  h5_check(H5Dread(dset_.get(), u64 ? H5T_NATIVE_UINT64 : H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()),
           cat("cannot read ", where(), " (truncated or corrupted file?)"));
  raw_.check(cat("reading ", where()));
  if (u64) check_fits_int64(reinterpret_cast<const uint8_t*>(out.data()), n, where());
  return out;
}

}  // namespace hpcnn::data
