// Where write_hdf5 (and so Sequential.save) may write, and its temporary files.
//
// A file is written as `<path>.tmp-<host>-<pid>-<random>` in the same directory and renamed onto
// `path` when complete, so `path` is never half-written. Before that:
//   - check_write_target refuses (ValueError naming the file and why) a `path` that is a symbolic
//     link (never followed, never replaced: the user may not own what it points to), a directory,
//     anything that is not a regular file (FIFO, device, socket), or a read-only file (no write
//     permission bit set, or not writable by this user): each is left untouched.
//   - commit_temporary flushes the complete temporary file to disk (fsync), renames it onto
//     `path` and flushes the directory entry, so that even after a node crash (not only a killed
//     process) `path` holds the old file or the new one, complete.
//   - a write the file system refuses (disk full, quota, the file size limit, an I/O error),
//     whether HDF5 reports it at once or only when the file is flushed or closed, or fsync or the
//     rename fails: OsError (Python's OSError, errno kept) naming `path` and the cause; the
//     temporary file is removed by the caller's guard and `path` is left as it was. The errno of a
//     failure inside HDF5 is read from HDF5's message (its POSIX driver reports "errno = N").
//   - remove_stale_temporaries deletes the temporary files of earlier writes to the same `path`
//     whose writer was killed: same host, process no longer running. A write in progress (its
//     process alive, or on another host of a shared file system) is never touched.
#pragma once

#include <cstddef>
#include <string>
#include <utility>

#include "core/errors.h"
#include "data/h5.h"

namespace hpcnn::data {

void check_write_target(const std::string& path, const char* caller);
std::string temporary_path_for(const std::string& path);
void remove_stale_temporaries(const std::string& path);
void commit_temporary(const std::string& tmp, const std::string& path, const char* caller);

// OsError for a write of `path` that failed with errno `err`.
[[noreturn]] void throw_write_failure(int err, const std::string& path, const char* caller);
// Leaves `file` open for good (its id forgotten) and truncates `tmp` to zero bytes.
void abandon_file(H5Id& file, const std::string& tmp);
// The errno an HDF5 message reports ("..., errno = 28, error message = ..."), when it is one of a
// full or failing disk (ENOSPC, EDQUOT, EFBIG, EIO); else 0 (a refused create, for one, stays the
// ValueError it was).
int errno_in_message(const std::string& text);

// Runs `write`, which writes the temporary file `tmp` of `path` through the HDF5 file `file`
// (created inside it) and flushes it (H5Fflush) before closing it. An error whose message
// carries the errno of a full or failing disk becomes OsError naming `path`; other errors pass. On
// such an error `file` is abandoned, not closed: HDF5 1.10 frees a file whose close failed (its
// flush refused) yet keeps its id, and closes it again at exit, which crashes the process. Its
// temporary file is cut to zero bytes so that the space is free at once (the caller's guard
// removes it); the open descriptor and HDF5's few kilobytes for it stay until the process ends.
template <typename Write>
void with_write_failures(const std::string& path, const std::string& tmp, H5Id& file, const char* caller,
                         Write&& write) {
  try {
    std::forward<Write>(write)();
  } catch (const std::exception& e) {
    const int err = errno_in_message(e.what());
    if (!err) throw;
    if (file.valid()) abandon_file(file, tmp);
    throw_write_failure(err, path, caller);
  }
}

// Writes `size` bytes to `path` atomically: the same target rules, temporary file, fsync and
// rename as the HDF5 writers, every write checked (OsError on a refused one).
void write_bytes_atomically(const std::string& path, const void* data, size_t size, const char* caller);

}  // namespace hpcnn::data
