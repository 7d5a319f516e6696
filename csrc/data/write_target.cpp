#include "data/write_target.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
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

// fsync of a file or directory opened read-only (enough for both on Linux). File systems that
// cannot sync a directory (EINVAL) are not an error: they order the rename themselves.
bool sync_path(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (directory ? O_DIRECTORY : 0));
  if (fd < 0) return false;
  const bool ok = ::fsync(fd) == 0 || errno == EINVAL || errno == EROFS;
  ::close(fd);
  return ok;
}

}  // namespace

void commit_temporary(const std::string& tmp, const std::string& path, const char* caller) {
  if (!sync_path(tmp, false))
    throw BackendError(cat(caller, ": cannot flush '", tmp, "' to disk (disk full or I/O error?)"));
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw BackendError(cat(caller, ": cannot rename '", tmp, "' to '", path, "'"));
  std::string dir, base;
  split_dir(path, dir, base);
  sync_path(dir, true);  // best effort: the file itself is complete either way
}

}  // namespace hpcnn::data
