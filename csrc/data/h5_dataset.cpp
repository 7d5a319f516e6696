#include "data/h5_dataset.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <cstring>

#include "core/dynamic_for.h"
#include "core/errors.h"
#include "core/thread_pool.h"
#include "data/inflate.h"

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

std::string type_name(hid_t type) {
  H5T_class_t cls = H5Tget_class(type);
  size_t size = H5Tget_size(type);
  if (cls == H5T_INTEGER) return cat(H5Tget_sign(type) == H5T_SGN_NONE ? "uint" : "int", size * 8);
  if (cls == H5T_FLOAT) return cat("float", size * 8);
  switch (cls) {
    case H5T_STRING: return "string";
    case H5T_COMPOUND: return "compound";
    case H5T_ENUM: return "enum";
    case H5T_ARRAY: return "array";
    case H5T_OPAQUE: return "opaque";
    case H5T_VLEN: return "vlen";
    case H5T_REFERENCE: return "reference";
    case H5T_BITFIELD: return "bitfield";
    default: return "unknown type";
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

H5Dataset::H5Dataset(const std::string& file, const std::string& name) {
  H5Lock lock(h5_mutex());
  info_.file = file;
  info_.name = name;
  file_ = open_file_readonly(file);
  if (name.empty() || !dataset_exists(file_.get(), name))
    throw ValueError(cat("no dataset '", name, "' in HDF5 file '", file, "'; it holds ",
                         top_level_names(file_.get())));
  dset_ = h5_own(H5Dopen2(file_.get(), name.c_str(), H5P_DEFAULT), H5Dclose,
                 cat("cannot open ", where(), " (is it a group, or is the file damaged?)"));

  H5Id type = h5_own(H5Dget_type(dset_.get()), H5Tclose, cat("cannot read the type of ", where()));
  H5T_class_t cls = H5Tget_class(type.get());
  info_.elem_size = H5Tget_size(type.get());
  info_.dtype = type_name(type.get());
  bool native_order = H5Tget_order(type.get()) == H5T_ORDER_LE;
  if (cls == H5T_INTEGER && info_.elem_size == 1 && H5Tget_sign(type.get()) == H5T_SGN_NONE)
    info_.kind = ElemKind::U8;
  else if (cls == H5T_FLOAT && info_.elem_size == 4)
    info_.kind = ElemKind::F32;
  else if (cls == H5T_INTEGER)
    info_.kind = ElemKind::Int;

  H5Id space = h5_own(H5Dget_space(dset_.get()), H5Sclose, cat("cannot read the shape of ", where()));
  int rank = H5Sget_simple_extent_ndims(space.get());
  h5_check(rank, cat("cannot read the shape of ", where()));
  std::vector<hsize_t> dims(rank);
  if (rank > 0) h5_check(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr), cat("shape of ", where()));
  for (auto d : dims) info_.shape.push_back(static_cast<long long>(d));

  H5Id dcpl = h5_own(H5Dget_create_plist(dset_.get()), H5Pclose, cat("cannot read the layout of ", where()));
  info_.chunked = H5Pget_layout(dcpl.get()) == H5D_CHUNKED;
  if (info_.chunked && rank > 0) {
    std::vector<hsize_t> c(rank);
    h5_check(H5Pget_chunk(dcpl.get(), rank, c.data()), cat("cannot read the chunk shape of ", where()));
    for (auto d : c) info_.chunk.push_back(static_cast<long long>(d));
  }
  int nf = H5Pget_nfilters(dcpl.get());
  h5_check(nf, cat("cannot read the filters of ", where()));
  bool only_deflate_shuffle = true;
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
    if (id == H5Z_FILTER_DEFLATE && deflate_index_ < 0) deflate_index_ = i;
    else if (id == H5Z_FILTER_SHUFFLE && shuffle_index_ < 0) shuffle_index_ = i;
    else only_deflate_shuffle = false;
    info_.filters.push_back(f);
  }
  raw_path_ = info_.chunked && only_deflate_shuffle && native_order && rank >= 1 &&
              (info_.kind == ElemKind::U8 || info_.kind == ElemKind::F32);

  if (info_.chunked && !info_.chunk.empty()) {
    block_rows_ = std::max<long long>(1, info_.chunk[0]);
  } else {
    long long rb = static_cast<long long>(std::max<size_t>(1, row_bytes()));
    block_rows_ = std::max<long long>(1, (4LL << 20) / rb);
  }
  if (info_.rows() > 0) block_rows_ = std::min(block_rows_, info_.rows());
  if (raw_path_) init_raw_geometry();
}

std::string H5Dataset::where() const { return cat("dataset '", info_.name, "' in file '", info_.file, "'"); }

long long H5Dataset::rows_in_block(long long b) const {
  long long start = b * block_rows_;
  return std::max(0LL, std::min(block_rows_, info_.rows() - start));
}

void H5Dataset::read_blocks(const std::vector<long long>& blocks, const std::vector<uint8_t*>& dst) {
  HPCNN_CHECK_BACKEND(blocks.size() == dst.size(), "read_blocks: ", blocks.size(), " blocks, ", dst.size(), " buffers");
  HPCNN_CHECK_ARG(info_.kind == ElemKind::U8 || info_.kind == ElemKind::F32, where(), " has dtype ", info_.dtype,
                  ": images must be uint8 or float32");
  if (blocks.empty()) return;
  h5_quiet();
  double t0 = now_s();
  if (raw_path_) read_blocks_raw(blocks, dst);
  else read_blocks_hyperslab(blocks, dst);
  if (!raw_path_) add(io_seconds_, now_s() - t0);
}

void H5Dataset::read_blocks_hyperslab(const std::vector<long long>& blocks, const std::vector<uint8_t*>& dst) {
  H5Lock lock(h5_mutex());
  h5_quiet();
  const int rank = static_cast<int>(info_.shape.size());
  hid_t memtype = info_.kind == ElemKind::U8 ? H5T_NATIVE_UINT8 : H5T_NATIVE_FLOAT;
  H5Id fspace = h5_own(H5Dget_space(dset_.get()), H5Sclose, cat("H5Dget_space on ", where()));
  for (size_t i = 0; i < blocks.size(); ++i) {
    long long n = rows_in_block(blocks[i]);
    if (n <= 0) continue;
    std::vector<hsize_t> start(rank, 0), count(info_.shape.begin(), info_.shape.end());
    start[0] = static_cast<hsize_t>(blocks[i] * block_rows_);
    count[0] = static_cast<hsize_t>(n);
    h5_check(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr),
             cat("selecting rows of ", where()));
    H5Id mspace = h5_own(H5Screate_simple(rank, count.data(), nullptr), H5Sclose, "H5Screate_simple");
    h5_check(H5Dread(dset_.get(), memtype, mspace.get(), fspace.get(), H5P_DEFAULT, dst[i]),
             cat("cannot read rows ", start[0], "..", start[0] + count[0], " of ", where(),
                 " (truncated or corrupted file?)"));
  }
}

void H5Dataset::init_raw_geometry() {
  RawGeometry& g = geo_;
  const int r = static_cast<int>(info_.shape.size());
  const Shape& c = info_.chunk;
  const size_t esz = info_.elem_size;
  std::vector<long long> grid(r, 1);
  g.per_block = 1;
  for (int d = 1; d < r; ++d) {
    grid[d] = (info_.shape[d] + c[d] - 1) / c[d];
    g.per_block *= grid[d];
  }
  g.chunk_bytes = static_cast<size_t>(shape_numel(c)) * esz;
  g.chunk_row_bytes = g.chunk_bytes / static_cast<size_t>(c[0]);
  // Offsets (dimensions 1..r-1) of the chunks of one block, in row-major grid order.
  g.grid_off.assign(g.per_block, Shape(r, 0));
  for (long long k = 0; k < g.per_block; ++k) {
    long long rem = k;
    for (int d = r - 1; d >= 1; --d) {
      g.grid_off[k][d] = (rem % grid[d]) * c[d];
      rem /= grid[d];
    }
  }
  // One row's copy plan, the same for every row of every block: per chunk a Patch, a contiguous
  // run of the chunk's last dimension inside up to two strided loops (the dimensions before it),
  // runs merged along a dimension where the chunk spans it whole. Dimensions before those three
  // (datasets of rank 5 and more) give one patch per index. The tutorial's chunks (6250, 4, 4, 1)
  // of (N, 32, 32, 3) uint8 are 192 patches of 4 x 4 single bytes per row: a fixed-stride loop
  // each, where a plan entry per byte (3,072 per row) cost more than the bytes it moved.
  std::vector<long long> cs(r, 1), ds(r, 1);
  for (int d = r - 2; d >= 0; --d) {
    cs[d] = cs[d + 1] * c[d + 1];
    ds[d] = ds[d + 1] * info_.shape[d + 1];
  }
  g.patches.clear();
  const int loop_lo = std::max(1, r - 3);  // dims [loop_lo, r-2] are a patch's loops, [1, loop_lo) outer
  for (long long k = 0; k < g.per_block; ++k) {
    Shape ext(r, 1);
    for (int d = 1; d < r; ++d) ext[d] = std::min(c[d], info_.shape[d] - g.grid_off[k][d]);
    std::vector<long long> idx(r, 0);  // odometer over the outer dims
    while (true) {
      long long so = 0, dof = 0;
      for (int d = 1; d < r; ++d) {
        so += idx[d] * cs[d];
        dof += (g.grid_off[k][d] + idx[d]) * ds[d];
      }
      RawGeometry::Patch p;
      p.chunk = k;
      p.src = static_cast<size_t>(so) * esz;
      p.dst = static_cast<size_t>(dof) * esz;
      p.len = r >= 2 ? static_cast<size_t>(ext[r - 1]) * esz : esz;
      bool merge = true;  // still contiguous in both: the next dimension may extend the run
      int loops = 0;
      for (int d = r - 2; d >= loop_lo; --d) {
        const size_t sst = static_cast<size_t>(cs[d]) * esz, dst = static_cast<size_t>(ds[d]) * esz;
        if (ext[d] == 1) continue;
        if (merge && p.len == sst && p.len == dst) {
          p.len *= static_cast<size_t>(ext[d]);
          continue;
        }
        merge = false;
        RawGeometry::Loop& l = loops == 0 ? p.inner : p.outer;
        l = RawGeometry::Loop{ext[d], sst, dst};
        ++loops;
      }
      g.patches.push_back(p);
      int d = loop_lo - 1;
      while (d >= 1 && ++idx[d] == ext[d]) idx[d--] = 0;
      if (d < 1) break;
    }
  }
}

void H5Dataset::read_blocks_raw(const std::vector<long long>& blocks, const std::vector<uint8_t*>& dst) {
  // Groups of blocks whose decoded chunks take at most ~16 MiB of scratch at a time (and whose
  // pool regions stay short, so a training step running beside the producer is not held up).
  // The raw reads of group g + 1 (HDF5, serial, one helper thread) overlap the inflate and
  // scatter of group g (hpcnn's pool): on a parallel file system the reads are not free.
  const size_t block_scratch = geo_.chunk_bytes * static_cast<size_t>(geo_.per_block);
  const size_t per_group = std::max<size_t>(1, (size_t(16) << 20) / std::max<size_t>(1, block_scratch));
  std::vector<std::pair<size_t, size_t>> groups;
  for (size_t g0 = 0; g0 < blocks.size(); g0 += per_group) groups.emplace_back(g0, std::min(blocks.size(), g0 + per_group));
  auto sub = [&](const auto& v, size_t g) {
    return std::vector<typename std::decay_t<decltype(v)>::value_type>(v.begin() + groups[g].first,
                                                                       v.begin() + groups[g].second);
  };
  double t0 = now_s();
  fetch_group(sub(blocks, 0), sets_[0]);
  add(io_seconds_, now_s() - t0);
  for (size_t g = 0; g < groups.size(); ++g) {
    std::future<double> next;
    if (g + 1 < groups.size()) {
      auto next_blocks = sub(blocks, g + 1);
      RawSet& set = sets_[(g + 1) % 2];
      next = std::async(std::launch::async, [this, next_blocks, &set] {
        double t = now_s();
        fetch_group(next_blocks, set);
        return now_s() - t;
      });
    }
    try {
      decode_group(sub(blocks, g), sub(dst, g), sets_[g % 2]);
    } catch (...) {
      if (next.valid()) next.wait();  // never leave the helper writing into a set we abandon
      throw;
    }
    if (next.valid()) add(io_seconds_, next.get());  // rethrows a failed read
  }
}

void H5Dataset::fetch_group(const std::vector<long long>& blocks, RawSet& set) {
  const int r = static_cast<int>(info_.shape.size());
  const size_t ntasks = blocks.size() * static_cast<size_t>(geo_.per_block);
  if (set.raw.size() < ntasks) set.raw.resize(ntasks);
  set.mask.assign(ntasks, 0);
  set.fill.assign(ntasks, 0);
  std::vector<hsize_t> off(r);
  H5Lock lock(h5_mutex());
  h5_quiet();
  for (size_t bi = 0; bi < blocks.size(); ++bi) {
    for (long long k = 0; k < geo_.per_block; ++k) {
      size_t t = bi * geo_.per_block + k;
      off[0] = static_cast<hsize_t>(blocks[bi] * block_rows_);
      for (int d = 1; d < r; ++d) off[d] = static_cast<hsize_t>(geo_.grid_off[k][d]);
      auto where_chunk = [&] {
        Shape o(off.begin(), off.end());
        return cat("the chunk at ", shape_str(o), " of ", where());
      };
      // By coordinate: an unallocated chunk (never written) reports no address and size 0,
      // where H5Dget_chunk_storage_size fails in HDF5 1.10.
      hsize_t nbytes = 0;
      haddr_t addr = HADDR_UNDEF;
      unsigned fmask = 0;
      h5_check(H5Dget_chunk_info_by_coord(dset_.get(), off.data(), &fmask, &addr, &nbytes),
               cat("cannot locate ", where_chunk(), " (truncated or damaged file?)"));
      if (addr == HADDR_UNDEF || nbytes == 0) {
        set.fill[t] = 1;
        continue;
      }
      set.raw[t].resize(nbytes);
      h5_check(H5Dread_chunk(dset_.get(), H5P_DEFAULT, off.data(), &set.mask[t], set.raw[t].data()),
               cat("cannot read ", where_chunk(), " (truncated or damaged file?)"));
    }
  }
}

namespace {

// One patch of one row (RawGeometry::Patch): single bytes (a chunk one element of a uint8 last
// dimension wide, as the tutorial's (..., 1) chunks), and runs of any length.
template <typename Patch>
inline void copy_patch_bytes(const Patch& p, const uint8_t* __restrict__ src, uint8_t* __restrict__ dst) {
  if (p.outer.count == 4 && p.inner.count == 4 && p.inner.src == 1 && p.outer.src == 4) {
    // h5py's chunks=True guess for (N, 32, 32, 3) uint8, (6250, 4, 4, 1): one 16-byte load, 16
    // stores at fixed strides (a loop of runtime counts here cost as much as the bytes).
    uint8_t v[16];
    std::memcpy(v, src, 16);
    const size_t di = p.inner.dst, dr = p.outer.dst;
    for (int a = 0; a < 4; ++a) {
      uint8_t* d = dst + static_cast<size_t>(a) * dr;
      d[0] = v[4 * a];
      d[di] = v[4 * a + 1];
      d[2 * di] = v[4 * a + 2];
      d[3 * di] = v[4 * a + 3];
    }
    return;
  }
  for (long long a = 0; a < p.outer.count; ++a) {
    const uint8_t* s = src + static_cast<size_t>(a) * p.outer.src;
    uint8_t* d = dst + static_cast<size_t>(a) * p.outer.dst;
    for (long long b = 0; b < p.inner.count; ++b) d[static_cast<size_t>(b) * p.inner.dst] = s[static_cast<size_t>(b) * p.inner.src];
  }
}

template <typename Patch>
inline void copy_patch_runs(const Patch& p, const uint8_t* src, uint8_t* dst) {
  for (long long a = 0; a < p.outer.count; ++a) {
    const uint8_t* s = src + static_cast<size_t>(a) * p.outer.src;
    uint8_t* d = dst + static_cast<size_t>(a) * p.outer.dst;
    for (long long b = 0; b < p.inner.count; ++b)
      std::memcpy(d + static_cast<size_t>(b) * p.inner.dst, s + static_cast<size_t>(b) * p.inner.src, p.len);
  }
}

}  // namespace

void H5Dataset::decode_group(const std::vector<long long>& blocks, const std::vector<uint8_t*>& dst, RawSet& set) {
  const int r = static_cast<int>(info_.shape.size());
  const size_t esz = info_.elem_size;
  const long long per_block = geo_.per_block;
  const size_t chunk_bytes = geo_.chunk_bytes;
  const size_t ntasks = blocks.size() * static_cast<size_t>(per_block);
  if (decoded_.size() < ntasks) decoded_.resize(ntasks);

  // 1) Decode each chunk in parallel on hpcnn's pool. Filters are undone in reverse pipeline
  // order; a set bit i in the chunk's mask means filter i was skipped for it (HDF5 stores a chunk
  // unfiltered when deflate would not shrink it).
  double t1 = now_s();
  const int di = deflate_index_, si = shuffle_index_;
  std::vector<int> order;
  for (int i : {di, si})
    if (i >= 0) order.push_back(i);
  std::sort(order.rbegin(), order.rend());
  std::vector<const uint8_t*> dec(ntasks);
  dynamic_for(static_cast<long long>(ntasks), 1, [&](long long t0_, long long t1_) {
    std::vector<uint8_t> tmp;
    for (long long t = t0_; t < t1_; ++t) {
      std::vector<uint8_t>& out = decoded_[t];
      if (set.fill[t]) {
        out.assign(chunk_bytes, 0);
        dec[t] = out.data();
        continue;
      }
      const uint8_t* cur = set.raw[t].data();
      size_t cur_size = set.raw[t].size();
      std::vector<int> todo;
      for (int fi : order)
        if (!(set.mask[t] & (1u << fi))) todo.push_back(fi);
      for (size_t s = 0; s < todo.size(); ++s) {
        // The last step writes into `out`, an earlier one into `tmp`.
        std::vector<uint8_t>& o = (s + 1 == todo.size()) ? out : tmp;
        if (todo[s] == di) {
          o.resize(chunk_bytes);
          std::string err = inflate_zlib(cur, cur_size, o.data(), chunk_bytes);
          if (!err.empty()) {
            Shape co(r);
            co[0] = blocks[t / per_block] * block_rows_;
            for (int d = 1; d < r; ++d) co[d] = geo_.grid_off[t % per_block][d];
            throw ValueError(cat("cannot decompress the chunk at ", shape_str(co), " of ", where(), ": ", err,
                                 " (corrupted file?)"));
          }
          cur_size = chunk_bytes;
        } else {
          o.resize(cur_size);
          unshuffle(cur, cur_size, esz, o.data());
        }
        cur = o.data();
      }
      if (cur_size != chunk_bytes)
        throw ValueError(cat("a chunk of ", where(), " holds ", cur_size, " bytes after decoding, expected ",
                             chunk_bytes, " (corrupted file?)"));
      dec[t] = cur;
    }
  });
  double t2 = now_s();
  add(inflate_seconds_, t2 - t1);

  // 2) Scatter row by row, in parallel over rows: each output row is written once, sequentially,
  // gathering its pieces from the block's chunks with the precomputed copy plan.
  const size_t rb = row_bytes();
  const size_t chunk_row_bytes = geo_.chunk_row_bytes;
  const std::vector<RawGeometry::Patch>& patches = geo_.patches;
  std::vector<long long> row_start(blocks.size() + 1, 0);
  for (size_t bi = 0; bi < blocks.size(); ++bi) row_start[bi + 1] = row_start[bi] + rows_in_block(blocks[bi]);
  // Narrow chunk rows (the tutorial's: 16 bytes) make a row read a few bytes from each of many
  // chunks (192): more streams than the hardware prefetcher follows, so every cache line was a
  // demand miss. Prefetch each chunk's line about 512 bytes ahead, once per line.
  const long long ahead = chunk_row_bytes < 64 ? static_cast<long long>(512 / std::max<size_t>(1, chunk_row_bytes)) : 0;
  const long long rows_per_line = chunk_row_bytes < 64 ? static_cast<long long>(64 / std::max<size_t>(1, chunk_row_bytes)) : 1;
  const long long chunk_rows = static_cast<long long>(info_.chunk[0]);
  dynamic_for(row_start.back(), 64, [&](long long q0, long long q1) {
    size_t bi = std::upper_bound(row_start.begin(), row_start.end(), q0) - row_start.begin() - 1;
    for (long long q = q0; q < q1; ++q) {
      while (q >= row_start[bi + 1]) ++bi;
      const long long i = q - row_start[bi];  // row within the block (and within its chunks)
      uint8_t* out = dst[bi] + static_cast<size_t>(i) * rb;
      const uint8_t* const* chunks = dec.data() + bi * per_block;
      const size_t src_row = static_cast<size_t>(i) * chunk_row_bytes;
      if (ahead > 0 && i % rows_per_line == 0 && i + ahead < chunk_rows) {
        const size_t at = static_cast<size_t>(i + ahead) * chunk_row_bytes;
        for (long long k = 0; k < per_block; ++k) __builtin_prefetch(chunks[k] + at);
      }
      for (const RawGeometry::Patch& p : patches) {
        const uint8_t* src = chunks[p.chunk] + src_row + p.src;
        uint8_t* d = out + p.dst;
        if (p.len == 1) copy_patch_bytes(p, src, d);
        else copy_patch_runs(p, src, d);
      }
    }
  });
  add(scatter_seconds_, now_s() - t2);
}

void H5Dataset::read_all(void* dst) {
  HPCNN_CHECK_ARG(!info_.shape.empty(), where(), " is a scalar, expected an array");
  std::vector<long long> blocks;
  std::vector<uint8_t*> dsts;
  for (long long b = 0; b < num_blocks(); ++b) {
    blocks.push_back(b);
    dsts.push_back(static_cast<uint8_t*>(dst) + static_cast<size_t>(b * block_rows()) * row_bytes());
  }
  read_blocks(blocks, dsts);
}

std::vector<int64_t> H5Dataset::read_all_int64() {
  H5Lock lock(h5_mutex());
  h5_quiet();
  HPCNN_CHECK_ARG(info_.kind == ElemKind::U8 || info_.kind == ElemKind::Int, where(), " has dtype ", info_.dtype,
                  ": labels must be integers");
  std::vector<int64_t> out(static_cast<size_t>(shape_numel(info_.shape)));
  if (out.empty()) return out;
  h5_check(H5Dread(dset_.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()),
           cat("cannot read ", where(), " (truncated or corrupted file?)"));
  return out;
}

}  // namespace hpcnn::data
