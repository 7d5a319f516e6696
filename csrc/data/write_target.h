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
//   - remove_stale_temporaries deletes the temporary files of earlier writes to the same `path`
//     whose writer was killed: same host, process no longer running. A write in progress (its
//     process alive, or on another host of a shared file system) is never touched.
#pragma once

#include <string>

namespace hpcnn::data {

void check_write_target(const std::string& path, const char* caller);
std::string temporary_path_for(const std::string& path);
void remove_stale_temporaries(const std::string& path);
void commit_temporary(const std::string& tmp, const std::string& path, const char* caller);

}  // namespace hpcnn::data
