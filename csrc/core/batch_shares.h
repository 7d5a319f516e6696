// How data parallelism splits a global batch among replicas: one rule, used by the replica driver
// (distribute/replica_set), the HDF5 loader when each rank reads only its own rows (data/loader), and
// Python (through the bindings), so that they can never disagree.
//
// Replica r of R takes the rows [share_begin(n, R, r), share_begin(n, R, r + 1)) of a global batch
// of n rows: contiguous, in order, sizes differing by at most one (the larger ones last), and
// empty when n < R for some replicas (a small last batch: those replicas still take part in the
// step's collectives, with nothing to add).
#pragma once

namespace hpcnn {

inline long long share_begin(long long n, long long replicas, long long r) { return n * r / replicas; }
inline long long share_end(long long n, long long replicas, long long r) { return share_begin(n, replicas, r + 1); }
inline long long share_rows(long long n, long long replicas, long long r) {
  return share_end(n, replicas, r) - share_begin(n, replicas, r);
}

}  // namespace hpcnn
