// Writing a whole HDF5 tree (h5_tree.h): groups, attributes and datasets from a list of items,
// built as an image in memory and then written atomically to a file (write_target.h), or handed
// back as the image itself. The reader and its hostile-file checks are h5_tree.cpp's.
#include "data/h5_tree.h"

#include "core/errors.h"
#include "data/write_target.h"

namespace hpcnn::data {

namespace {

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
