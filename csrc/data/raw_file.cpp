#include "data/raw_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/errors.h"
#include "data/h5.h"

namespace hpcnn::data {

RawFile::RawFile(hid_t file, const std::string& path) : path_(path) {
  // HDF5's file descriptor when the driver is sec2 (hpcnn opens files with the default, sec2).
  H5Id fapl(H5Fget_access_plist(file), H5Pclose);
  void* handle = nullptr;
  if (fapl.valid() && H5Pget_driver(fapl.get()) == H5FD_SEC2 && H5Fget_vfd_handle(file, fapl.get(), &handle) >= 0 &&
      handle)
    fd_ = *static_cast<int*>(handle);
  haddr_t eoa = 0;
  if (H5Fget_eoa(file, &eoa) < 0 || eoa == HADDR_UNDEF) eoa = 0;  // unknown: only modifications are noticed
  expected_ = static_cast<uint64_t>(eoa);
  unsigned major = 0, minor = 0, release = 0;
  H5get_libversion(&major, &minor, &release);
  bool absolute = major > 1 || (major == 1 && (minor > 14 || (minor == 14 && release >= 4)));
  H5Id fcpl(H5Fget_create_plist(file), H5Pclose);
  hsize_t userblock = 0;
  if (fcpl.valid() && H5Pget_userblock(fcpl.get(), &userblock) >= 0) base_ = userblock;
  chunk_base_ = absolute ? 0 : base_;
  h5_error_text();  // clear whatever the queries above left on the stack
  struct stat st;
  if (!stat_now(st)) return;
  mtime_ = st.st_mtim;
  active_ = true;
  if (static_cast<uint64_t>(st.st_size) < expected_)
    throw ValueError(cat("HDF5 file '", path_, "' is truncated: ", st.st_size, " bytes, but its superblock says ",
                         expected_, " (an interrupted copy or write?)"));
}

bool RawFile::stat_now(struct stat& st) const {
  return fd_ >= 0 ? ::fstat(fd_, &st) == 0 : ::stat(path_.c_str(), &st) == 0;
}

void RawFile::read(uint64_t at, size_t n, uint8_t* dst, const std::string& what) const {
  HPCNN_CHECK_BACKEND(fd_ >= 0, "RawFile::read without a file descriptor");
  size_t done = 0;
  while (done < n) {
    ssize_t got = ::pread(fd_, dst + done, n - done, static_cast<off_t>(at + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw ValueError(cat("cannot read ", what, " from HDF5 file '", path_, "': ", std::strerror(errno)));
    if (got == 0)
      throw ValueError(cat("HDF5 file '", path_, "' ends at byte ", at + done, ", inside ", what,
                           " (truncated while hpcnn was reading it, or damaged)"));
    done += static_cast<size_t>(got);
  }
}

void RawFile::check(const std::string& during) const {
  if (!active_) return;
  struct stat st;
  if (!stat_now(st))
    throw ValueError(cat("HDF5 file '", path_, "' disappeared while hpcnn was reading it (", during, ")"));
  if (static_cast<uint64_t>(st.st_size) < expected_)
    throw ValueError(cat("HDF5 file '", path_, "' was truncated while hpcnn was reading it: now ", st.st_size,
                         " bytes, HDF5 expects ", expected_, "; data read past the new end would be zeros (",
                         during, "). Do not rewrite a file while a job reads it: write a new file and rename it"));
  if (st.st_mtim.tv_sec != mtime_.tv_sec || st.st_mtim.tv_nsec != mtime_.tv_nsec)
    throw ValueError(cat("HDF5 file '", path_, "' was modified while hpcnn was reading it (", during,
                         "): the data read may mix old and new contents. Do not rewrite a file while a job reads "
                         "it: write a new file and rename it"));
}

}  // namespace hpcnn::data
