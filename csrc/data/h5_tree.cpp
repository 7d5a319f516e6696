#include "data/h5_tree.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <new>

#include "core/errors.h"
#include "data/write_target.h"

namespace hpcnn::data {

namespace {

// Bounds on what one attribute may hold: a hostile file must not make hpcnn allocate without end.
constexpr long long kMaxAttributeElements = 1LL << 24;
constexpr long long kMaxAttributeBytes = 1LL << 28;
constexpr long long kMaxAttributesPerObject = 1 << 16;

// The shape of a dataspace ({} for a scalar); ValueError for one that is neither simple nor scalar.
Shape space_shape(hid_t space, const std::string& what) {
  const H5S_class_t cls = H5Sget_simple_extent_type(space);
  if (cls == H5S_SCALAR) return {};
  if (cls == H5S_NULL) return {0};
  const int rank = H5Sget_simple_extent_ndims(space);
  HPCNN_CHECK_ARG(rank >= 0 && rank <= 32, what, " has an unreadable dataspace (rank ", rank, ")");
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  if (rank > 0) h5_check(H5Sget_simple_extent_dims(space, dims.data(), nullptr), cat(what, ": dataspace"));
  Shape shape;
  for (hsize_t d : dims) {
    HPCNN_CHECK_ARG(d <= static_cast<hsize_t>(INT64_MAX), what, " has a dimension beyond 2^63");
    shape.push_back(static_cast<long long>(d));
  }
  shape_numel(shape);  // ValueError when the element count overflows
  return shape;
}

std::string strip_fixed(const char* p, size_t size, H5T_str_t pad) {
  size_t n = 0;
  while (n < size && p[n] != '\0') ++n;  // NULLTERM and NULLPAD end at the first NUL
  std::string s(p, n);
  if (pad == H5T_STR_SPACEPAD)
    while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

// One attribute's value, bounded in size. `what` names the attribute for errors.
H5Value read_attribute(hid_t attr, const std::string& what) {
  H5Id type = h5_own(H5Aget_type(attr), H5Tclose, cat(what, ": type"));
  H5Id space = h5_own(H5Aget_space(attr), H5Sclose, cat(what, ": dataspace"));
  H5Value v;
  v.shape = space_shape(space.get(), what);
  const long long n = shape_numel(v.shape);
  HPCNN_CHECK_ARG(n <= kMaxAttributeElements, what, " holds ", n, " elements (more than hpcnn reads in an attribute)");
  const H5T_class_t cls = H5Tget_class(type.get());
  if (cls == H5T_STRING) {
    v.kind = v.shape.empty() ? H5Value::Kind::Text : H5Value::Kind::Texts;
    const size_t count = static_cast<size_t>(n);
    v.texts.reserve(count);
    const htri_t variable = H5Tis_variable_str(type.get());
    h5_check(variable < 0 ? -1 : 0, cat(what, ": string type"));
    if (variable) {
      H5Id mem = h5_own(H5Tcopy(H5T_C_S1), H5Tclose, "H5Tcopy");
      h5_check(H5Tset_size(mem.get(), H5T_VARIABLE), "H5Tset_size");
      h5_check(H5Tset_cset(mem.get(), H5Tget_cset(type.get())), "H5Tset_cset");
      std::vector<char*> ptrs(count, nullptr);
      if (count) {
        h5_check(H5Aread(attr, mem.get(), ptrs.data()), cat("cannot read ", what));
        long long total = 0;
        for (char* p : ptrs) {
          v.texts.emplace_back(p ? p : "");
          total += static_cast<long long>(v.texts.back().size());
          if (total > kMaxAttributeBytes) break;
        }
#if H5_VERSION_GE(1, 12, 0)
        H5Treclaim(mem.get(), space.get(), H5P_DEFAULT, ptrs.data());
#else
        H5Dvlen_reclaim(mem.get(), space.get(), H5P_DEFAULT, ptrs.data());
#endif
        HPCNN_CHECK_ARG(total <= kMaxAttributeBytes, what, " holds more than ", kMaxAttributeBytes, " bytes of text");
      }
    } else {
      const size_t size = H5Tget_size(type.get());
      HPCNN_CHECK_ARG(size > 0 && static_cast<long long>(size) * n <= kMaxAttributeBytes, what, " holds ", n,
                      " strings of ", size, " bytes (more than hpcnn reads in an attribute)");
      std::vector<char> buf(size * count + 1, '\0');
      if (count) h5_check(H5Aread(attr, type.get(), buf.data()), cat("cannot read ", what));
      const H5T_str_t pad = H5Tget_strpad(type.get());
      for (size_t i = 0; i < count; ++i) v.texts.push_back(strip_fixed(buf.data() + i * size, size, pad));
    }
    return v;
  }
  if (cls == H5T_INTEGER || cls == H5T_FLOAT) {
    v.kind = H5Value::Kind::Numbers;
    v.numbers.assign(static_cast<size_t>(n), 0.0);
    if (n) h5_check(H5Aread(attr, H5T_NATIVE_DOUBLE, v.numbers.data()), cat("cannot read ", what));
    return v;
  }
  v.kind = H5Value::Kind::Unsupported;
  v.type = h5_type_name(type.get());
  return v;
}

struct AttributeNames {
  std::vector<std::string> names;
  bool too_many = false;
};

herr_t collect_attribute_name(hid_t, const char* name, const H5A_info_t*, void* out) {
  auto* a = static_cast<AttributeNames*>(out);
  if (static_cast<long long>(a->names.size()) >= kMaxAttributesPerObject) {
    a->too_many = true;
    return 1;  // stop
  }
  a->names.emplace_back(name);
  return 0;
}

H5Attributes read_attributes(hid_t obj, const std::string& where) {
  AttributeNames an;
  hsize_t idx = 0;
  h5_check(H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_INC, &idx, collect_attribute_name, &an),
           cat("cannot list the attributes of ", where));
  HPCNN_CHECK_ARG(!an.too_many, where, " has more than ", kMaxAttributesPerObject, " attributes");
  H5Attributes out;
  for (const auto& name : an.names) {
    const std::string what = cat("attribute '", name, "' of ", where);
    H5Id attr = h5_own(H5Aopen(obj, name.c_str(), H5P_DEFAULT), H5Aclose, cat("cannot open ", what));
    out.emplace_back(name, read_attribute(attr.get(), what));
  }
  return out;
}

std::string child_path(const std::string& parent, const std::string& name) {
  return parent == "/" ? "/" + name : parent + "/" + name;
}

void walk(hid_t group, const std::string& path, int depth, long long max_objects, const std::string& label,
          std::vector<H5Object>& out) {
  const std::string where = cat("group '", path, "' of '", label, "'");
  HPCNN_CHECK_ARG(depth <= H5Reader::kMaxDepth, "'", label, "' nests groups deeper than ", H5Reader::kMaxDepth,
                  " levels (at '", path, "'): a damaged or hostile file?");
  H5G_info_t info;
  h5_check(H5Gget_info(group, &info), cat("cannot read ", where));
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t len = H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    h5_check(len < 0 ? -1 : 0, cat("cannot list ", where));
    HPCNN_CHECK_ARG(len < 65536, where, " has a link name of ", len, " bytes");
    std::string name(static_cast<size_t>(len) + 1, '\0');
    h5_check(H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(), name.size(), H5P_DEFAULT) < 0
                 ? -1 : 0,
             cat("cannot list ", where));
    name.resize(static_cast<size_t>(len));
    H5L_info_t link;
    h5_check(H5Lget_info(group, name.c_str(), &link, H5P_DEFAULT), cat("cannot read link '", name, "' of ", where));
    if (link.type != H5L_TYPE_HARD) continue;  // soft and external links are never followed
    const std::string p = child_path(path, name);
    H5Id obj = h5_own(H5Oopen(group, name.c_str(), H5P_DEFAULT), H5Oclose, cat("cannot open '", p, "' of '", label, "'"));
    const H5I_type_t type = H5Iget_type(obj.get());
    if (type != H5I_GROUP && type != H5I_DATASET) continue;  // a named datatype
    HPCNN_CHECK_ARG(static_cast<long long>(out.size()) < max_objects, "'", label, "' holds more than ", max_objects,
                    " groups and datasets: a damaged or hostile file?");
    H5Object o;
    o.path = p;
    o.is_dataset = type == H5I_DATASET;
    const std::string what = cat(o.is_dataset ? "dataset '" : "group '", p, "' of '", label, "'");
    o.attributes = read_attributes(obj.get(), what);
    if (o.is_dataset) {
      H5Id dtype = h5_own(H5Dget_type(obj.get()), H5Tclose, cat(what, ": type"));
      H5Id space = h5_own(H5Dget_space(obj.get()), H5Sclose, cat(what, ": dataspace"));
      o.dtype = h5_type_name(dtype.get());
      o.shape = space_shape(space.get(), what);
      out.push_back(std::move(o));
    } else {
      out.push_back(std::move(o));
      walk(obj.get(), p, depth + 1, max_objects, label, out);
    }
  }
}

// Every link of `path` ("/a/b/c") exists and is a hard link: reading never follows a soft or
// external link (an external link could open any file).
void check_hard_links(hid_t file, const std::string& path, const std::string& what) {
  HPCNN_CHECK_ARG(!path.empty() && path[0] == '/', what, ": HDF5 paths are absolute");
  size_t pos = 0;
  while (pos < path.size()) {
    size_t next = path.find('/', pos + 1);
    if (next == std::string::npos) next = path.size();
    const std::string prefix = path.substr(0, next);
    pos = next;
    if (prefix == "/" || prefix.back() == '/') continue;
    const htri_t exists = H5Lexists(file, prefix.c_str(), H5P_DEFAULT);
    h5_error_text();  // H5Lexists fails (rather than says no) past a missing group
    HPCNN_CHECK_ARG(exists > 0, what, " does not exist");
    H5L_info_t link;
    h5_check(H5Lget_info(file, prefix.c_str(), &link, H5P_DEFAULT), cat("cannot read link '", prefix, "' of ", what));
    HPCNN_CHECK_ARG(link.type == H5L_TYPE_HARD, what, ": '", prefix, "' is a soft or external link, which hpcnn does not follow");
  }
}

void check_regular_file(const std::string& path) {
  struct stat st;
  HPCNN_CHECK_ARG(::stat(path.c_str(), &st) == 0, "'", path, "' does not exist (or cannot be reached)");
  HPCNN_CHECK_ARG(!S_ISDIR(st.st_mode), "'", path, "' is a directory, not a file");
  HPCNN_CHECK_ARG(S_ISREG(st.st_mode), "'", path, "' is not a regular file (",
                  S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISSOCK(st.st_mode) ? "a socket" : "a device or special file",
                  "); hpcnn reads model files from regular files only");
}

// ---------------------------------------------------------------- writing
H5Id text_type() {
  H5Id t = h5_own(H5Tcopy(H5T_C_S1), H5Tclose, "H5Tcopy");
  h5_check(H5Tset_size(t.get(), H5T_VARIABLE), "H5Tset_size");
  h5_check(H5Tset_cset(t.get(), H5T_CSET_UTF8), "H5Tset_cset");
  return t;
}

H5Id simple_space(const Shape& shape, const std::string& what) {
  if (shape.empty()) return h5_own(H5Screate(H5S_SCALAR), H5Sclose, cat(what, ": dataspace"));
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  return h5_own(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose,
                cat(what, ": dataspace"));
}

void write_attribute(hid_t obj, const std::string& name, const H5Value& v, const std::string& where) {
  const std::string what = cat("attribute '", name, "' of ", where);
  if (v.kind == H5Value::Kind::Text || v.kind == H5Value::Kind::Texts) {
    const Shape shape = v.kind == H5Value::Kind::Text ? Shape{} : Shape{static_cast<long long>(v.texts.size())};
    HPCNN_CHECK_ARG(v.kind == H5Value::Kind::Texts || v.texts.size() == 1, what, ": a text attribute has one value");
    H5Id type = text_type();
    H5Id space = simple_space(shape, what);
    H5Id attr = h5_own(H5Acreate2(obj, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
                       cat("cannot create ", what));
    std::vector<const char*> ptrs;
    for (const auto& s : v.texts) ptrs.push_back(s.c_str());
    if (!ptrs.empty()) h5_check(H5Awrite(attr.get(), type.get(), ptrs.data()), cat("cannot write ", what));
    return;
  }
  HPCNN_CHECK_ARG(v.kind == H5Value::Kind::Numbers, what, ": hpcnn writes texts and numbers only");
  HPCNN_CHECK_ARG(shape_numel(v.shape) == static_cast<long long>(v.numbers.size()), what, ": shape ",
                  shape_str(v.shape), " does not match its ", v.numbers.size(), " numbers");
  H5Id space = simple_space(v.shape, what);
  H5Id attr = h5_own(H5Acreate2(obj, name.c_str(), H5T_NATIVE_DOUBLE, space.get(), H5P_DEFAULT, H5P_DEFAULT),
                     H5Aclose, cat("cannot create ", what));
  if (!v.numbers.empty()) h5_check(H5Awrite(attr.get(), H5T_NATIVE_DOUBLE, v.numbers.data()), cat("cannot write ", what));
}

void write_items(hid_t file, const std::vector<H5Item>& items, const std::string& caller) {
  H5Lock lock(h5_mutex());
  H5Id lcpl = h5_own(H5Pcreate(H5P_LINK_CREATE), H5Pclose, "H5Pcreate(link create)");
  h5_check(H5Pset_create_intermediate_group(lcpl.get(), 1), "H5Pset_create_intermediate_group");
  for (const H5Item& item : items) {
    HPCNN_CHECK_ARG(!item.path.empty() && item.path[0] == '/', caller, ": HDF5 paths are absolute, got '", item.path, "'");
    const std::string where = cat(item.is_dataset ? "dataset '" : "group '", item.path, "'");
    H5Id obj;
    if (item.is_dataset) {
      H5Id space = simple_space(item.data.shape, where);
      const hid_t type = native_type(item.data);
      obj = h5_own(H5Dcreate2(file, item.path.c_str(), type, space.get(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT),
                   H5Dclose, cat(caller, ": cannot create ", where));
      if (shape_numel(item.data.shape) > 0)
        h5_check(H5Dwrite(obj.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, item.data.data),
                 cat(caller, ": cannot write ", where));
    } else if (item.path == "/") {
      obj = h5_own(H5Gopen2(file, "/", H5P_DEFAULT), H5Gclose, cat(caller, ": cannot open the root group"));
    } else {
      const htri_t exists = H5Lexists(file, item.path.c_str(), H5P_DEFAULT);
      h5_error_text();  // H5Lexists fails (rather than says no) past a missing intermediate group
      obj = exists > 0 ? h5_own(H5Gopen2(file, item.path.c_str(), H5P_DEFAULT), H5Gclose, cat(caller, ": cannot open ", where))
                       : h5_own(H5Gcreate2(file, item.path.c_str(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT), H5Gclose,
                                cat(caller, ": cannot create ", where));
    }
    for (const auto& [name, value] : item.attributes) write_attribute(obj.get(), name, value, where);
  }
}

}  // namespace

// ---------------------------------------------------------------- H5Reader
std::unique_ptr<H5Reader> H5Reader::open_file(const std::string& path) {
  h5_quiet();
  check_regular_file(path);
  H5Lock lock(h5_mutex());
  const htri_t is = H5Fis_hdf5(path.c_str());
  if (is <= 0) {
    h5_error_text();
    throw ValueError(cat("'", path, "' is not an HDF5 file (no HDF5 signature: another format, or truncated)"));
  }
  H5Id fapl = h5_own(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "H5Pcreate(file access)");
#if H5_VERSION_GE(1, 10, 7)
  H5Pset_file_locking(fapl.get(), true, true);  // parallel file systems often have no POSIX locks
#endif
  H5Id file = h5_own(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()), H5Fclose,
                     cat("cannot open '", path, "' (a damaged or truncated HDF5 file?)"));
  return std::unique_ptr<H5Reader>(new H5Reader(std::move(file), path));
}

std::unique_ptr<H5Reader> H5Reader::open_image(const std::vector<uint8_t>& bytes, const std::string& label) {
  h5_quiet();
  static const uint8_t kSignature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  HPCNN_CHECK_ARG(bytes.size() >= 8 && std::memcmp(bytes.data(), kSignature, 8) == 0, "'", label,
                  "' is not an HDF5 file (no HDF5 signature)");
  H5Lock lock(h5_mutex());
  H5Id fapl = h5_own(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "H5Pcreate(file access)");
  h5_check(H5Pset_fapl_core(fapl.get(), 1 << 16, 0), "H5Pset_fapl_core");
  h5_check(H5Pset_file_image(fapl.get(), const_cast<uint8_t*>(bytes.data()), bytes.size()),
           cat("'", label, "': H5Pset_file_image"));
  H5Id file = h5_own(H5Fopen(label.c_str(), H5F_ACC_RDONLY, fapl.get()), H5Fclose,
                     cat("cannot open '", label, "' (a damaged or truncated HDF5 file?)"));
  return std::unique_ptr<H5Reader>(new H5Reader(std::move(file), label));
}

std::vector<H5Object> H5Reader::list(long long max_objects) const {
  HPCNN_CHECK_ARG(file_.valid(), "'", label_, "' is closed");
  H5Lock lock(h5_mutex());
  std::vector<H5Object> out;
  H5Id root = h5_own(H5Gopen2(file_.get(), "/", H5P_DEFAULT), H5Gclose, cat("cannot open the root group of '", label_, "'"));
  H5Object r;
  r.path = "/";
  r.attributes = read_attributes(root.get(), cat("the root group of '", label_, "'"));
  out.push_back(std::move(r));
  walk(root.get(), "/", 1, max_objects, label_, out);
  return out;
}

H5Array H5Reader::read(const std::string& path) const {
  HPCNN_CHECK_ARG(file_.valid(), "'", label_, "' is closed");
  H5Lock lock(h5_mutex());
  const std::string what = cat("dataset '", path, "' of '", label_, "'");
  check_hard_links(file_.get(), path, what);
  H5Id obj = h5_own(H5Oopen(file_.get(), path.c_str(), H5P_DEFAULT), H5Oclose, cat("cannot open ", what));
  HPCNN_CHECK_ARG(H5Iget_type(obj.get()) == H5I_DATASET, "'", path, "' of '", label_, "' is not a dataset");
  H5Id type = h5_own(H5Dget_type(obj.get()), H5Tclose, cat(what, ": type"));
  H5Id space = h5_own(H5Dget_space(obj.get()), H5Sclose, cat(what, ": dataspace"));
  H5Array a;
  a.shape = space_shape(space.get(), what);
  const H5T_class_t cls = H5Tget_class(type.get());
  HPCNN_CHECK_ARG(cls == H5T_FLOAT || cls == H5T_INTEGER, what, " holds ", h5_type_name(type.get()),
                  " values, not numbers");
  const size_t n = static_cast<size_t>(shape_numel(a.shape));
  a.is_float = cls == H5T_FLOAT;
  try {
    if (a.is_float)
      a.f32.assign(n, 0.0f);
    else
      a.i64.assign(n, 0);
  } catch (const std::bad_alloc&) {
    throw OutOfMemory(cat("cannot allocate ", n, " values for ", what));
  }
  if (n)
    h5_check(H5Dread(obj.get(), a.is_float ? H5T_NATIVE_FLOAT : H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                     a.is_float ? static_cast<void*>(a.f32.data()) : static_cast<void*>(a.i64.data())),
             cat("cannot read ", what, " (a damaged file?)"));
  return a;
}

void H5Reader::close() {
  if (!file_.close()) h5_error_text();  // read-only: nothing to lose
}

// ---------------------------------------------------------------- writing
void write_h5_tree(const std::string& path, const std::vector<H5Item>& items, const std::string& caller) {
  h5_quiet();
  HPCNN_CHECK_ARG(!path.empty(), caller, ": empty path");
  check_write_target(path, caller.c_str());  // no links, directories, special or read-only files
  // Built in memory (a model's size), then written with checked plain writes, fsync and rename
  // (write_target.h): a disk that fills up is an OsError naming `path`, and HDF5 never holds a
  // file whose flush failed (HDF5 1.10 then crashes the process at exit).
  const std::vector<uint8_t> image = h5_tree_image(items, caller);
  write_bytes_atomically(path, image.data(), image.size(), caller.c_str());
}

std::vector<uint8_t> h5_tree_image(const std::vector<H5Item>& items, const std::string& caller) {
  h5_quiet();
  H5Lock lock(h5_mutex());
  H5Id fapl = h5_own(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "H5Pcreate(file access)");
  h5_check(H5Pset_fapl_core(fapl.get(), 1 << 20, 0), "H5Pset_fapl_core");  // in memory, no file behind it
  H5Id file = h5_own(H5Fcreate("hpcnn-in-memory.h5", H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), H5Fclose,
                     cat(caller, ": cannot create an HDF5 file in memory"));
  write_items(file.get(), items, caller);
  h5_check(H5Fflush(file.get(), H5F_SCOPE_GLOBAL), cat(caller, ": flushing the HDF5 file in memory"));
  const ssize_t size = H5Fget_file_image(file.get(), nullptr, 0);
  h5_check(size < 0 ? -1 : 0, cat(caller, ": the HDF5 file's size in memory"));
  std::vector<uint8_t> out(static_cast<size_t>(size));
  h5_check(H5Fget_file_image(file.get(), out.data(), out.size()) < 0 ? -1 : 0,
           cat(caller, ": copying the HDF5 file out of memory"));
  return out;
}

void write_file_atomically(const std::string& path, const std::vector<uint8_t>& bytes, const std::string& caller) {
  write_bytes_atomically(path, bytes.data(), bytes.size(), caller.c_str());
}

}  // namespace hpcnn::data
