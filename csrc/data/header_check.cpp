#include "data/header_check.h"

#include <cstring>
#include <vector>

#include "core/errors.h"
#include "data/h5.h"
#include "data/size_checks.h"

namespace hpcnn::data {

namespace {

// Little-endian unsigned integer of `n` bytes at p.
uint64_t le(const uint8_t* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = n; i-- > 0;) v = (v << 8) | p[i];
  return v;
}

// The messages of one object header that matter here, as raw bodies.
struct HeaderMessages {
  std::vector<uint8_t> dataspace, layout;
  bool complete = false;  // the whole header was walked without surprises
};

class HeaderWalker {
 public:
  HeaderWalker(const RawFile& raw, size_t sizeof_addr, size_t sizeof_size)
      : raw_(raw), sa_(sizeof_addr), ss_(sizeof_size) {}

  // Walks the header at relative address `addr`; false when it does not parse (left to HDF5).
  bool walk(uint64_t addr, HeaderMessages& out) {
    std::vector<uint8_t> b;
    if (!read(addr, 16, b)) return false;
    if (std::memcmp(b.data(), "OHDR", 4) == 0) {
      if (b[4] != 2) return false;
      const uint8_t flags = b[5];
      size_t p = 6 + ((flags & 0x20) ? 16 : 0) + ((flags & 0x10) ? 4 : 0);
      const size_t width = size_t(1) << (flags & 3);
      if (!read(addr, p + width, b)) return false;
      uint64_t size = le(b.data() + p, width);
      v2_order_ = flags & 0x04;
      if (!block(addr + p + width, size, true, out)) return false;
    } else if (b[0] == 1) {
      uint64_t size = le(b.data() + 8, 4);
      if (!block(addr + 16, size, false, out)) return false;
    } else {
      return false;
    }
    // Continuation blocks, found while walking (bounded: a damaged header could loop).
    for (size_t i = 0; i < more_.size(); ++i) {
      if (i >= 64) return false;
      auto [at, len] = more_[i];
      if (v2_) {
        std::vector<uint8_t> sig;
        if (len < 8 || !read(at, 4, sig) || std::memcmp(sig.data(), "OCHK", 4) != 0) return false;
        if (!block(at + 4, len - 8, true, out)) return false;  // minus the signature and the checksum
      } else if (!block(at, len, false, out)) {
        return false;
      }
    }
    out.complete = true;
    return true;
  }

 private:
  bool read(uint64_t rel, uint64_t n, std::vector<uint8_t>& b) {
    uint64_t at = 0, end = 0;
    if (n > (uint64_t(1) << 20) || !checked_add(rel, raw_.base_address(), at) || !checked_add(at, n, end) ||
        (raw_.expected_size() > 0 && end > raw_.expected_size()))
      return false;
    b.resize(static_cast<size_t>(n));
    try {
      raw_.read(at, b.size(), b.data(), "an object header");
    } catch (const ValueError&) {
      return false;
    }
    return true;
  }

  // The messages in [at, at + len) (relative addresses).
  bool block(uint64_t at, uint64_t len, bool v2, HeaderMessages& out) {
    v2_ = v2;
    std::vector<uint8_t> b;
    if (!read(at, len, b)) return false;
    const size_t head = v2 ? (4 + (v2_order_ ? 2 : 0)) : 8;
    size_t p = 0;
    while (p + head <= b.size()) {
      const unsigned type = v2 ? b[p] : static_cast<unsigned>(le(&b[p], 2));
      const size_t size = static_cast<size_t>(le(&b[p + (v2 ? 1 : 2)], 2));
      const size_t body = p + head;
      if (body + size > b.size()) return false;
      const uint8_t* m = b.data() + body;
      if (type == 0x01 && out.dataspace.empty()) out.dataspace.assign(m, m + size);
      if (type == 0x08 && out.layout.empty()) out.layout.assign(m, m + size);
      if (type == 0x10) {
        if (size < sa_ + ss_) return false;
        more_.emplace_back(le(m, sa_), le(m + sa_, ss_));
      }
      p = body + size;
    }
    return true;
  }

  const RawFile& raw_;
  size_t sa_, ss_;
  bool v2_ = false, v2_order_ = false;
  std::vector<std::pair<uint64_t, uint64_t>> more_;
};

// The rank in a dataspace message body; -1 when it does not parse.
int dataspace_rank(const std::vector<uint8_t>& m) {
  if (m.size() < 2 || (m[0] != 1 && m[0] != 2)) return -1;
  return m[1];
}

bool object_address(hid_t file, const std::string& name, uint64_t& addr) {
#if H5_VERSION_GE(1, 12, 0)
  H5O_info2_t info;
  if (H5Oget_info_by_name3(file, name.c_str(), &info, H5O_INFO_BASIC, H5P_DEFAULT) < 0) return false;
  haddr_t a = HADDR_UNDEF;
  if (H5VLnative_token_to_addr(file, info.token, &a) < 0) return false;
#elif H5_VERSION_GE(1, 10, 3)
  H5O_info_t info;
  if (H5Oget_info_by_name2(file, name.c_str(), &info, H5O_INFO_BASIC, H5P_DEFAULT) < 0) return false;
  haddr_t a = info.addr;
#else
  H5O_info_t info;
  if (H5Oget_info_by_name(file, name.c_str(), &info, H5P_DEFAULT) < 0) return false;
  haddr_t a = info.addr;
#endif
  if (a == HADDR_UNDEF) return false;
  addr = static_cast<uint64_t>(a);
  return true;
}

}  // namespace

void check_dataset_header(hid_t file, const RawFile& raw, const std::string& name, const std::string& where) {
  if (!raw.direct()) return;
  uint64_t addr = 0;
  size_t sizeof_addr = 8, sizeof_size = 8;
  H5Id fcpl(H5Fget_create_plist(file), H5Pclose);
  bool ok = fcpl.valid() && H5Pget_sizes(fcpl.get(), &sizeof_addr, &sizeof_size) >= 0 &&
            object_address(file, name, addr) && sizeof_addr >= 2 && sizeof_addr <= 8 && sizeof_size >= 2 &&
            sizeof_size <= 8;
  h5_error_text();  // clear: HDF5 reports whatever it finds when the dataset is opened
  if (!ok) return;
  HeaderMessages m;
  if (!HeaderWalker(raw, sizeof_addr, sizeof_size).walk(addr, m) || m.layout.size() < 2) return;

  const std::vector<uint8_t>& l = m.layout;
  const unsigned version = l[0], cls = l[1];
  auto bad = [&](const std::string& what) {
    throw ValueError(cat(where, " is damaged: its data layout message ", what, " (corrupted file?)"));
  };
  if (version < 3) bad(cat("has version ", version, ", from HDF5 before 1.6.3, which hpcnn does not read"));
  if (version > 4) return;  // newer than this HDF5: it refuses the file itself
  if (cls != 2) {
    if (cls > 3) bad(cat("has layout class ", cls));
    return;
  }
  const int rank = dataspace_rank(m.dataspace);
  if (rank < 0) bad("belongs to a dataset without a readable dataspace");
  size_t ndims = 0, width = 4, p = 0;
  if (version == 3) {
    if (l.size() < 3) bad("is truncated");
    ndims = l[2];
    p = 3 + sizeof_addr;
  } else {
    if (l.size() < 5) bad("is truncated");
    ndims = l[3];
    width = l[4];
    p = 5;
    if (width < 1 || width > 8) bad(cat("encodes chunk dimensions in ", width, " bytes"));
  }
  if (ndims != static_cast<size_t>(rank) + 1 || rank == 0)
    bad(cat("describes ", ndims, "-dimensional chunks (with the element size) for a dataset of rank ", rank));
  if (l.size() < p + ndims * width) bad("is truncated");
  for (size_t d = 0; d < ndims; ++d)
    if (le(l.data() + p + d * width, width) == 0) bad(cat("has chunk dimension ", d, " of 0"));
}

}  // namespace hpcnn::data
