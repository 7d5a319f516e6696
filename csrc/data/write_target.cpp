#include "data/write_target.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>

#include "core/errors.h"

namespace hpcnn::data {

namespace {

std::string host_name() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0 || !buf[0]) return "localhost";
  std::string h(buf);
  for (char& c : h)
    if (c == '/') c = '_';
  return h;
}

// "<path>.tmp-<host>-": the part of a temporary name that this host's writers share.
std::string temporary_prefix(const std::string& path) { return cat(path, ".tmp-", host_name(), "-"); }

void split_dir(const std::string& path, std::string& dir, std::string& base) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) {
    dir = ".";
    base = path;
  } else {
    dir = slash == 0 ? "/" : path.substr(0, slash);
    base = path.substr(slash + 1);
  }
}

bool process_gone(long pid) { return pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH; }

}  // namespace

void check_write_target(const std::string& path, const char* caller) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return;  // nothing there (or not reachable: creating it reports that)
  HPCNN_CHECK_ARG(!S_ISLNK(st.st_mode), caller, ": '", path, "' is a symbolic link; hpcnn does not write through or "
                  "replace links: give the path of the file itself");
  HPCNN_CHECK_ARG(!S_ISDIR(st.st_mode), caller, ": '", path, "' is a directory; give a file name");
  HPCNN_CHECK_ARG(S_ISREG(st.st_mode), caller, ": '", path, "' exists and is not a regular file (",
                  S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISSOCK(st.st_mode) ? "a socket" : "a device or special file",
                  "); hpcnn replaces only regular files");
  const bool read_only = (st.st_mode & (S_IWUSR | S_IWGRP | S_IWOTH)) == 0 || ::access(path.c_str(), W_OK) != 0;
  HPCNN_CHECK_ARG(!read_only, caller, ": '", path, "' is read-only; hpcnn does not replace it (make it writable, "
                  "or save under another name)");
}

std::string temporary_path_for(const std::string& path) {
  std::random_device rd;
  return cat(temporary_prefix(path), ::getpid(), "-", std::hex, rd(), rd());
}

void remove_stale_temporaries(const std::string& path) {
  std::string dir, base;
  split_dir(temporary_prefix(path), dir, base);
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
  if (!d) return;  // the write itself will report an unusable directory
  while (const dirent* e = ::readdir(d.get())) {
    const std::string name = e->d_name;
    if (name.compare(0, base.size(), base) != 0) continue;
    // The rest is "<pid>-<random>".
    const std::string rest = name.substr(base.size());
    char* end = nullptr;
    const long pid = std::strtol(rest.c_str(), &end, 10);
    if (end == rest.c_str() || *end != '-' || !process_gone(pid)) continue;
    const std::string full = dir == "/" ? "/" + name : dir + "/" + name;
    struct stat st;
    if (::lstat(full.c_str(), &st) == 0 && S_ISREG(st.st_mode)) std::remove(full.c_str());
  }
}

namespace {

// fsync of a file or directory opened read-only (enough for both on Linux). Returns 0, or the
// errno. File systems that cannot sync a directory (EINVAL) are not an error: they order the
// rename themselves.
int sync_path(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (directory ? O_DIRECTORY : 0));
  if (fd < 0) return errno;
  int err = ::fsync(fd) == 0 || errno == EINVAL || errno == EROFS ? 0 : errno;
  if (::close(fd) != 0 && err == 0 && errno != EINTR) err = errno;
  return err;
}

// What a refused write means for the user, by errno.
std::string write_failure_cause(int err) {
  const std::string os = std::strerror(err);
  switch (err) {
    case ENOSPC: return cat("the disk is full (", os, ")");
#ifdef EDQUOT
    case EDQUOT: return cat("the disk quota is exceeded (", os, ")");
#endif
    case EFBIG: return cat("the file would pass the file size limit (ulimit -f) or the file system's largest file (", os,
                           ")");
    case EIO: return cat("the disk or the file server reported an I/O error (", os, ")");
    default: return cat("the file system refused the write (", os, ")");
  }
}

}  // namespace

void throw_write_failure(int err, const std::string& path, const char* caller) {
  throw OsError(err, path, cat(caller, ": cannot write '", path, "': ", write_failure_cause(err), ". Nothing was "
                               "replaced: the file that was there (if any) is intact, and the temporary file was "
                               "removed"));
}

void abandon_file(H5Id& file, const std::string& tmp) {
  {
    H5Lock lock(h5_mutex());
    H5Iinc_ref(file.get());  // the owner's close below only drops this extra reference
  }
  file.reset();
  if (::truncate(tmp.c_str(), 0) != 0) {
    // Nothing more to do: the guard removes the file; its space is freed when the process ends.
  }
}

int errno_in_message(const std::string& text) {
  static const char kKey[] = "errno = ";
  const size_t at = text.find(kKey);
  if (at == std::string::npos) return 0;
  const long err = std::strtol(text.c_str() + at + sizeof(kKey) - 1, nullptr, 10);
#ifdef EDQUOT
  if (err == EDQUOT) return EDQUOT;
#endif
  return err == ENOSPC || err == EFBIG || err == EIO ? static_cast<int>(err) : 0;
}

void commit_temporary(const std::string& tmp, const std::string& path, const char* caller) {
  // fsync before the rename: on a crash of the node (not only of the process) the rename may
  // reach the disk before the data, leaving `path` empty or short. A write-back failure that
  // only shows here (a full disk of a file server, delayed allocation) is an OsError.
  if (const int err = sync_path(tmp, false)) throw_write_failure(err, path, caller);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    throw OsError(err, path, cat(caller, ": cannot rename '", tmp, "' to '", path, "' (", std::strerror(err),
                                 "); the file that was there (if any) is intact"));
  }
  std::string dir, base;
  split_dir(path, dir, base);
  sync_path(dir, true);  // best effort: the file itself is complete either way
}

void write_bytes_atomically(const std::string& path, const void* data, size_t size, const char* caller) {
  HPCNN_CHECK_ARG(!path.empty(), caller, ": empty path");
  check_write_target(path, caller);
  remove_stale_temporaries(path);
  const std::string tmp = temporary_path_for(path);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) {
    const int err = errno;
#ifdef EDQUOT
    if (err == EDQUOT) throw_write_failure(err, path, caller);
#endif
    if (err == ENOSPC || err == EIO) throw_write_failure(err, path, caller);  // no free inode, a failing disk
    throw ValueError(cat(caller, ": cannot create '", tmp, "' (", std::strerror(err),
                         "; does the directory exist and is it writable?)"));
  }
  // Closes the descriptor and removes the temporary file unless it was renamed into place.
  struct Guard {
    const std::string& name;
    int fd;
    bool keep = false;
    int close() {
      const int r = fd >= 0 ? ::close(fd) : 0;
      fd = -1;
      return r;
    }
    ~Guard() {
      close();
      if (!keep) std::remove(name.c_str());
    }
  } guard{tmp, fd};
  const char* p = static_cast<const char*>(data);
  size_t left = size;
  while (left > 0) {  // a short write (the limit reached mid-way) is followed by one that fails
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw_write_failure(n < 0 ? errno : EIO, path, caller);
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 && errno != EINVAL) throw_write_failure(errno, path, caller);
  if (guard.close() != 0 && errno != EINTR) throw_write_failure(errno, path, caller);
  commit_temporary(tmp, path, caller);
  guard.keep = true;
}

}  // namespace hpcnn::data
