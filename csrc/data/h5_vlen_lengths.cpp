#include "data/h5_vlen_lengths.h"

#include <cstring>
#include <mutex>

#include "data/h5.h"

namespace hpcnn::data {

namespace {

// The opaque type H5Aread converts to: its tag is what the conversion function recognises.
constexpr const char* kTag = "hpcnn: lengths of variable-length strings";
constexpr size_t kLengthBytes = sizeof(std::uint64_t);

bool is_length_type(hid_t type) {
  if (H5Tget_class(type) != H5T_OPAQUE || H5Tget_size(type) != kLengthBytes) return false;
  char* tag = H5Tget_tag(type);
  const bool ours = tag != nullptr && std::strcmp(tag, kTag) == 0;
  H5free_memory(tag);
  return ours;
}

// A soft conversion from a variable-length string to the length type. The source buffer holds the
// attribute's elements as stored in the file (HDF5's file format, "Variable-length data"): a
// 4-byte little-endian element count (bytes, for a string), then the global heap address and
// index of the bytes, which are never followed. The descriptors are wider than the 8-byte result,
// so converting in place from the first element on never overwrites one not yet read.
herr_t keep_length(hid_t src, hid_t dst, H5T_cdata_t* cdata, size_t nelmts, size_t buf_stride, size_t,
                   void* buf, void*, hid_t) {
  switch (cdata->command) {
    case H5T_CONV_INIT:
      // Any other pair (every conversion HDF5 or h5py asks for) is refused: this one only.
      if (!is_length_type(dst) || H5Tis_variable_str(src) <= 0) return -1;
      cdata->need_bkg = H5T_BKG_NO;
      return 0;
    case H5T_CONV_FREE:
      return 0;
    case H5T_CONV_CONV: {
      const size_t src_size = H5Tget_size(src);
      if (src_size < 4 || src_size < kLengthBytes) return -1;
      auto* bytes = static_cast<unsigned char*>(buf);
      const size_t src_step = buf_stride ? buf_stride : src_size;
      const size_t dst_step = buf_stride ? buf_stride : kLengthBytes;
      for (size_t i = 0; i < nelmts; ++i) {
        const unsigned char* d = bytes + i * src_step;
        const std::uint64_t length = std::uint64_t{d[0]} | std::uint64_t{d[1]} << 8 | std::uint64_t{d[2]} << 16 |
                                     std::uint64_t{d[3]} << 24;
        std::memcpy(bytes + i * dst_step, &length, kLengthBytes);
      }
      return 0;
    }
    default:
      return -1;
  }
}

// Whether the conversion gives the right lengths in this HDF5 library: an in-memory file (core
// driver, nothing written to disk) with a two-text attribute of known lengths, closed and opened
// again so that its value is read as from a file. The conversion relies on the file format's
// layout of the descriptors; were a library version to hand the function anything else, the
// lengths would be wrong and valid files refused, so then the shortcut stays off.
bool gives_known_lengths(hid_t length_type, hid_t vstr) {
  H5Id fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (!fapl.valid() || H5Pset_fapl_core(fapl.get(), 1 << 16, 0) < 0) return false;
  H5Id file(H5Fcreate("hpcnn: variable-length length check (in memory)", H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()),
            H5Fclose);
  const hsize_t dims[1] = {2};
  H5Id space(H5Screate_simple(1, dims, nullptr), H5Sclose);
  if (!file.valid() || !space.valid()) return false;
  {
    H5Id attr(H5Acreate2(file.get(), "t", vstr, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    const char* texts[2] = {"abc", "variable-length"};
    if (!attr.valid() || H5Awrite(attr.get(), vstr, texts) < 0) return false;
  }
  H5Id attr(H5Aopen(file.get(), "t", H5P_DEFAULT), H5Aclose);
  std::uint64_t lengths[2] = {0, 0};
  return attr.valid() && H5Aread(attr.get(), length_type, lengths) >= 0 && lengths[0] == 3 && lengths[1] == 15;
}

// The length type, registered once per process with its conversion (kept for the process's life:
// HDF5's conversion table holds the function, and the type id is shared by every call);
// H5I_INVALID_HID where the conversion cannot be registered or gives wrong lengths.
hid_t length_type() {
  static hid_t type = H5I_INVALID_HID;
  static std::once_flag once;
  std::call_once(once, [] {
    hid_t t = H5Tcreate(H5T_OPAQUE, kLengthBytes);
    if (t < 0) return;
    H5Id vstr(H5Tcopy(H5T_C_S1), H5Tclose);
    const bool ok = H5Tset_tag(t, kTag) >= 0 && vstr.valid() && H5Tset_size(vstr.get(), H5T_VARIABLE) >= 0 &&
                    H5Tregister(H5T_PERS_SOFT, "hpcnn_vlen_string_lengths", vstr.get(), t, keep_length) >= 0 &&
                    gives_known_lengths(t, vstr.get());
    h5_error_text();  // clears what a failed step left on the error stack
    if (ok) type = t;
    else H5Tclose(t);
  });
  return type;
}

}  // namespace

std::optional<std::vector<std::uint64_t>> vlen_string_lengths(hid_t attr, size_t count) {
  h5_quiet();
  const hid_t type = length_type();
  if (type < 0) return std::nullopt;
  std::vector<std::uint64_t> lengths(count, 0);
  if (count && H5Aread(attr, type, lengths.data()) < 0) {
    h5_error_text();
    return std::nullopt;
  }
  return lengths;
}

}  // namespace hpcnn::data
