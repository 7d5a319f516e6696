// Reading a whole HDF5 tree (h5_tree.h): the listing walk with the hostile-file checks and the
// limits of H5TreeLimits, and one dataset read on request. Writing is h5_tree_write.cpp's.
#include "data/h5_tree.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <new>

#include "core/errors.h"
#include "data/h5_vlen_lengths.h"

namespace hpcnn::data {

namespace {

using L = H5TreeLimits;

// "(hpcnn's limit NAME = value)": every refusal by a limit names the limit, as Python knows it
// (hpcnn.formats.h5_limits).
std::string limit(const char* name, long long value) { return cat("(hpcnn's limit ", name, " = ", value, ")"); }

// Whether `s` is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
bool is_utf8(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    size_t len;
    unsigned int cp;
    if (c < 0x80) { ++i; continue; }
    if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; }
    else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; }
    else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; }
    else return false;
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += len;
  }
  return true;
}

// `s` for a message: at most 200 bytes, every byte that is not printable ASCII as \xNN (a name from
// a hostile file may hold anything; the message itself must be valid UTF-8).
std::string printable(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < 200; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  if (s.size() > 200) out += cat("... (", s.size(), " bytes)");
  return out;
}

// A name or text from the file, refused unless it is UTF-8: Python's str holds nothing else, and a
// replacement character would make a layer name match nothing (or the wrong layer) without saying why.
void check_utf8(const std::string& s, const std::string& what) {
  HPCNN_CHECK_ARG(is_utf8(s), what, " is not UTF-8 text ('", printable(s),
                  "'): Keras writes names and configs as UTF-8; a damaged or hostile file?");
}

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
  long long n = 1;
  for (long long d : shape)
    HPCNN_CHECK_ARG(!__builtin_mul_overflow(n, d, &n), what, " declares shape ", shape_str(shape),
                    ", more than 2^63-1 elements: a damaged or hostile file?");
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

// One attribute's value, its size checked against the limits before it is read (a variable-length
// text's bytes are known only once read: their count is checked first, their bytes then). `what`
// names the attribute for errors.
H5Value read_attribute(hid_t attr, const std::string& what) {
  H5Id type = h5_own(H5Aget_type(attr), H5Tclose, cat(what, ": type"));
  H5Id space = h5_own(H5Aget_space(attr), H5Sclose, cat(what, ": dataspace"));
  H5Value v;
  v.shape = space_shape(space.get(), what);
  const long long n = shape_numel(v.shape);
  HPCNN_CHECK_ARG(n <= L::kMaxAttributeElements, what, " holds ", n, " elements, more than hpcnn reads in an attribute ",
                  limit("MAX_ATTRIBUTE_ELEMENTS", L::kMaxAttributeElements), ": a damaged or hostile file?");
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
      // The stored lengths first: a text past the limit is refused before its bytes are read.
      if (const auto lengths = vlen_string_lengths(attr, count)) {
        unsigned long long stored = 0;
        for (std::uint64_t len : *lengths) stored += len;  // at most 2^20 counts below 2^32: no overflow
        HPCNN_CHECK_ARG(stored <= static_cast<unsigned long long>(L::kMaxAttributeBytes), what, " holds ", stored,
                        " bytes of text, more than hpcnn reads in an attribute ",
                        limit("MAX_ATTRIBUTE_BYTES", L::kMaxAttributeBytes), ": a damaged or hostile file?");
      }
      std::vector<char*> ptrs(count, nullptr);
      if (count) {
        h5_check(H5Aread(attr, mem.get(), ptrs.data()), cat("cannot read ", what));
        long long total = 0;
        for (char* p : ptrs) {
          const size_t len = p ? std::strlen(p) : 0;
          total += static_cast<long long>(len);
          if (total > L::kMaxAttributeBytes) break;
          v.texts.emplace_back(p ? p : "", len);
        }
#if H5_VERSION_GE(1, 12, 0)
        H5Treclaim(mem.get(), space.get(), H5P_DEFAULT, ptrs.data());
#else
        H5Dvlen_reclaim(mem.get(), space.get(), H5P_DEFAULT, ptrs.data());
#endif
        HPCNN_CHECK_ARG(total <= L::kMaxAttributeBytes, what, " holds more than ", L::kMaxAttributeBytes,
                        " bytes of text ", limit("MAX_ATTRIBUTE_BYTES", L::kMaxAttributeBytes),
                        ": a damaged or hostile file?");
      }
    } else {
      const size_t size = H5Tget_size(type.get());
      HPCNN_CHECK_ARG(size > 0, what, " is a string type of size 0: a damaged file?");
      HPCNN_CHECK_ARG(static_cast<long long>(size) <= L::kMaxAttributeBytes &&
                          static_cast<long long>(size) * n <= L::kMaxAttributeBytes,
                      what, " holds ", n, " string(s) of ", size, " bytes, more than hpcnn reads in an attribute ",
                      limit("MAX_ATTRIBUTE_BYTES", L::kMaxAttributeBytes), ": a damaged or hostile file?");
      std::vector<char> buf(size * count + 1, '\0');
      if (count) h5_check(H5Aread(attr, type.get(), buf.data()), cat("cannot read ", what));
      const H5T_str_t pad = H5Tget_strpad(type.get());
      for (size_t i = 0; i < count; ++i) v.texts.push_back(strip_fixed(buf.data() + i * size, size, pad));
    }
    for (size_t i = 0; i < v.texts.size(); ++i)
      check_utf8(v.texts[i], v.kind == H5Value::Kind::Text ? what : cat(what, " (element ", i, ")"));
    return v;
  }
  if (cls == H5T_INTEGER || cls == H5T_FLOAT) {
    v.kind = H5Value::Kind::Numbers;
    HPCNN_CHECK_ARG(n * static_cast<long long>(sizeof(double)) <= L::kMaxAttributeBytes, what, " holds ", n,
                    " numbers, more than hpcnn reads in an attribute ", limit("MAX_ATTRIBUTE_BYTES", L::kMaxAttributeBytes));
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
  if (static_cast<long long>(a->names.size()) >= L::kMaxAttributesPerObject) {
    a->too_many = true;
    return 1;  // stop
  }
  a->names.emplace_back(name);
  return 0;
}

// The attributes of `owner` ("group '/a'", "the root group") of the file `label`.
H5Attributes read_attributes(hid_t obj, const std::string& label, const std::string& owner) {
  const std::string where = cat("'", label, "': ", owner);
  AttributeNames an;
  hsize_t idx = 0;
  h5_check(H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_INC, &idx, collect_attribute_name, &an),
           cat("cannot list the attributes of ", where));
  HPCNN_CHECK_ARG(!an.too_many, where, " has more than ", L::kMaxAttributesPerObject, " attributes ",
                  limit("MAX_ATTRIBUTES_PER_OBJECT", L::kMaxAttributesPerObject), ": a damaged or hostile file?");
  H5Attributes out;
  for (const auto& name : an.names) {
    HPCNN_CHECK_ARG(static_cast<long long>(name.size()) <= L::kMaxNameBytes, "'", label, "': an attribute name of ",
                    owner, " is ",
                    name.size(), " bytes long ", limit("MAX_NAME_BYTES", L::kMaxNameBytes));
    check_utf8(name, cat("'", label, "': the name of an attribute of ", owner));
    const std::string what = cat("'", label, "': attribute '", name, "' of ", owner);
    H5Id attr = h5_own(H5Aopen(obj, name.c_str(), H5P_DEFAULT), H5Aclose, cat("cannot open ", what));
    out.emplace_back(name, read_attribute(attr.get(), what));
  }
  return out;
}

std::string child_path(const std::string& parent, const std::string& name) {
  return parent == "/" ? "/" + name : parent + "/" + name;
}

// Where an object is in its file: two links to one group give the same key.
uint64_t object_key(hid_t obj, const std::string& what) {
#if H5_VERSION_GE(1, 12, 0)
  H5O_info2_t info;
  h5_check(H5Oget_info3(obj, &info, H5O_INFO_BASIC), cat("cannot read ", what));
  haddr_t a = HADDR_UNDEF;
  h5_check(H5VLnative_token_to_addr(obj, info.token, &a), cat("cannot read ", what));
#elif H5_VERSION_GE(1, 10, 3)
  H5O_info_t info;
  h5_check(H5Oget_info2(obj, &info, H5O_INFO_BASIC), cat("cannot read ", what));
  const haddr_t a = info.addr;
#else
  H5O_info_t info;
  h5_check(H5Oget_info(obj, &info), cat("cannot read ", what));
  const haddr_t a = info.addr;
#endif
  return static_cast<uint64_t>(a);
}

// What a link that is not a hard link points at, for the message that refuses it.
std::string link_target(hid_t group, const std::string& name, const H5L_info_t& link) {
  if (link.type != H5L_TYPE_SOFT && link.type != H5L_TYPE_EXTERNAL) return "";
  if (link.u.val_size == 0 || link.u.val_size > static_cast<size_t>(L::kMaxNameBytes)) return "";
  std::vector<char> val(link.u.val_size + 1, '\0');
  if (H5Lget_val(group, name.c_str(), val.data(), link.u.val_size, H5P_DEFAULT) < 0) {
    h5_error_text();
    return "";
  }
  if (link.type == H5L_TYPE_SOFT) return cat(" to '", printable(std::string(val.data())), "'");
  unsigned flags = 0;
  const char* file = nullptr;
  const char* object = nullptr;
  if (H5Lunpack_elink_val(val.data(), link.u.val_size, &flags, &file, &object) < 0 || !file || !object) {
    h5_error_text();
    return "";
  }
  return cat(" to object '", printable(object), "' of file '", printable(file), "'");
}

// A dataset whose values are not all in this file (external raw data storage, a virtual dataset)
// is refused before anything else is asked of it: reading it would open whatever file it names.
void check_storage(hid_t dataset, const std::string& what) {
  H5Id dcpl = h5_own(H5Dget_create_plist(dataset), H5Pclose, cat(what, ": creation properties"));
  const H5D_layout_t layout = H5Pget_layout(dcpl.get());
  h5_check(layout < 0 ? -1 : 0, cat(what, ": layout"));
  HPCNN_CHECK_ARG(layout != H5D_VIRTUAL, what, " is a virtual dataset (its values are read from other datasets, "
                  "in any file): hpcnn reads only values stored in the file itself; a damaged or hostile file?");
  const int external = H5Pget_external_count(dcpl.get());
  h5_check(external < 0 ? -1 : 0, cat(what, ": external storage"));
  if (external > 0) {
    char name[256] = {0};
    off_t offset = 0;
    hsize_t size = 0;
    if (H5Pget_external(dcpl.get(), 0, sizeof name - 1, name, &offset, &size) < 0) h5_error_text();
    throw ValueError(cat(what, " stores its values in ", external, " external file(s) ('", printable(name),
                         "'...): HDF5 external storage can name any file, and hpcnn never reads another file "
                         "than the one it opened; a damaged or hostile file?"));
  }
}

struct Walk {
  long long max_objects;
  const std::string& label;
  std::vector<H5Object>& out;
  std::map<uint64_t, std::string> groups;  // every group met: where it is in the file -> its path
  long long links = 0;
};

void walk(hid_t group, const std::string& path, int depth, Walk& w) {
  const std::string& label = w.label;
  const std::string where = cat("'", label, "': group '", printable(path), "'");
  HPCNN_CHECK_ARG(depth <= L::kMaxDepth, "'", label, "': groups nest deeper than ", L::kMaxDepth, " levels (at '",
                  printable(path), "') ", limit("MAX_DEPTH", L::kMaxDepth), ": a damaged or hostile file?");
  H5G_info_t info;
  h5_check(H5Gget_info(group, &info), cat("cannot read ", where));
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    HPCNN_CHECK_ARG(++w.links <= w.max_objects, "'", label, "': more than ", w.max_objects,
                    " links (hpcnn's limit MAX_OBJECTS): a damaged or hostile file?");
    const ssize_t len = H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    h5_check(len < 0 ? -1 : 0, cat("cannot list ", where));
    HPCNN_CHECK_ARG(len <= L::kMaxNameBytes, where, " has a link name of ", len, " bytes ",
                    limit("MAX_NAME_BYTES", L::kMaxNameBytes), ": a damaged or hostile file?");
    std::string name(static_cast<size_t>(len) + 1, '\0');
    h5_check(H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(), name.size(), H5P_DEFAULT) < 0
                 ? -1 : 0,
             cat("cannot list ", where));
    name.resize(static_cast<size_t>(len));
    check_utf8(name, cat("'", label, "': a link name in group '", printable(path), "'"));
    const std::string p = child_path(path, name);
    H5L_info_t link;
    h5_check(H5Lget_info(group, name.c_str(), &link, H5P_DEFAULT), cat("'", label, "': cannot read link '", printable(p), "'"));
    // Keras and hpcnn write hard links only. An external link can name any file (opening it would
    // read another file than the one given), a soft link can loop or point anywhere in the file:
    // either is damage or an attack, refused rather than silently skipped (a skipped weight would
    // read as "another architecture").
    HPCNN_CHECK_ARG(link.type == H5L_TYPE_HARD, "'", label, "': '", printable(p), "' is ",
                    link.type == H5L_TYPE_EXTERNAL ? "an external link" : link.type == H5L_TYPE_SOFT ? "a soft link"
                                                                                                   : "a user-defined link",
                    link_target(group, name, link),
                    ": hpcnn follows hard links only (an external link could open any file); a damaged or hostile file?");
    H5Id obj = h5_own(H5Oopen(group, name.c_str(), H5P_DEFAULT), H5Oclose, cat("'", label, "': cannot open '", printable(p), "'"));
    const H5I_type_t type = H5Iget_type(obj.get());
    if (type != H5I_GROUP && type != H5I_DATASET) continue;  // a named datatype
    HPCNN_CHECK_ARG(static_cast<long long>(w.out.size()) < w.max_objects, "'", label, "': more than ",
                    w.max_objects, " groups and datasets (hpcnn's limit MAX_OBJECTS): a damaged or hostile file?");
    H5Object o;
    o.path = p;
    o.is_dataset = type == H5I_DATASET;
    const std::string owner = cat(o.is_dataset ? "dataset '" : "group '", p, "'");
    const std::string what = cat("'", label, "': ", owner);
    if (o.is_dataset) {
      check_storage(obj.get(), what);  // first: nothing below may open another file
      o.attributes = read_attributes(obj.get(), label, owner);
      H5Id dtype = h5_own(H5Dget_type(obj.get()), H5Tclose, cat(what, ": type"));
      H5Id space = h5_own(H5Dget_space(obj.get()), H5Sclose, cat(what, ": dataspace"));
      o.dtype = h5_type_name(dtype.get());
      o.shape = space_shape(space.get(), what);
      w.out.push_back(std::move(o));
    } else {
      // A group met twice (linked into itself, or into two places) would be walked again and again.
      const auto [seen, fresh] = w.groups.emplace(object_key(obj.get(), what), p);
      HPCNN_CHECK_ARG(fresh, what, " is group '", printable(seen->second),
                      "' again (a group linked into itself or into two places): hpcnn reads a tree of groups; "
                      "a damaged or hostile file?");
      o.attributes = read_attributes(obj.get(), label, owner);
      w.out.push_back(std::move(o));
      walk(obj.get(), p, depth + 1, w);
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
  H5Id root = h5_own(H5Gopen2(file_.get(), "/", H5P_DEFAULT), H5Gclose, cat("'", label_, "': cannot open the root group"));
  H5Object r;
  r.path = "/";
  r.attributes = read_attributes(root.get(), label_, "the root group");
  out.push_back(std::move(r));
  Walk w{max_objects, label_, out, {}, 0};
  w.groups.emplace(object_key(root.get(), "the root group"), "/");
  walk(root.get(), "/", 0, w);  // the root is level 0: "/a" is one level deep
  return out;
}

H5Array H5Reader::read(const std::string& path) const {
  HPCNN_CHECK_ARG(file_.valid(), "'", label_, "' is closed");
  H5Lock lock(h5_mutex());
  const std::string what = cat("'", label_, "': dataset '", printable(path), "'");
  check_hard_links(file_.get(), path, what);
  H5Id obj = h5_own(H5Oopen(file_.get(), path.c_str(), H5P_DEFAULT), H5Oclose, cat("cannot open ", what));
  HPCNN_CHECK_ARG(H5Iget_type(obj.get()) == H5I_DATASET, "'", path, "' of '", label_, "' is not a dataset");
  check_storage(obj.get(), what);
  H5Id type = h5_own(H5Dget_type(obj.get()), H5Tclose, cat(what, ": type"));
  H5Id space = h5_own(H5Dget_space(obj.get()), H5Sclose, cat(what, ": dataspace"));
  H5Array a;
  a.shape = space_shape(space.get(), what);
  const H5T_class_t cls = H5Tget_class(type.get());
  HPCNN_CHECK_ARG(cls == H5T_FLOAT || cls == H5T_INTEGER, what, " holds ", h5_type_name(type.get()),
                  " values, not numbers");
  const std::string odd = nonstandard_number(type.get(), cls, H5Tget_size(type.get()));
  HPCNN_CHECK_ARG(odd.empty(), what, " holds numbers whose type ", odd,
                  ": HDF5 would convert them to garbage or zeros without an error; a damaged or hostile file?");
  const long long count = shape_numel(a.shape);
  a.is_float = cls == H5T_FLOAT;
  // Before anything is allocated: a small file may declare any shape (its chunks never written,
  // or compressed a millionfold).
  HPCNN_CHECK_ARG(count <= L::kMaxWeightElements, what, " declares shape ", shape_str(a.shape), " (", count,
                  " values), more than hpcnn reads in one array ", limit("MAX_WEIGHT_ELEMENTS", L::kMaxWeightElements),
                  ": a damaged or hostile file?");
  const long long bytes = count * (a.is_float ? 4 : 8);
  HPCNN_CHECK_ARG(bytes <= L::kMaxWeightBytes, what, " declares shape ", shape_str(a.shape), " (", bytes,
                  " bytes as read), more than hpcnn reads in one array ", limit("MAX_WEIGHT_BYTES", L::kMaxWeightBytes),
                  ": a damaged or hostile file?");
  const size_t n = static_cast<size_t>(count);
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

}  // namespace hpcnn::data
