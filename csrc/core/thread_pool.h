// hpcnn's own threads. One process-wide pool whose size hpcnn owns:
//   default = HPCNN_NUM_THREADS, else SLURM_CPUS_PER_TASK, else the CPUs in this process's affinity
//   mask (sched_getaffinity: what a Slurm cgroup or taskset gives), never the node's core count.
//   OMP_NUM_THREADS is not read (hpcnn does not use OpenMP; scripts set it for the BLAS).
// Work is split statically (thread t always gets the same slice for the same n and thread
// count), so results are bitwise reproducible for a given thread count. A parallel region
// started from inside another runs serially on the calling thread: threads never nest, and the
// BLAS is kept single-threaded inside regions (see ops/blas.h).
//
// set_num_threads may be called at any moment from any thread outside a region: it waits for the
// region in progress, and a region takes its thread count from the pool under the same lock, so a
// region never waits for a worker that a resize removed. Per-thread storage sized by an earlier
// get_num_threads() must pass that count as max_threads (the pool may have grown since).
#pragma once

#include <functional>
#include <string>

namespace hpcnn {

// The default thread count and where it came from ("SLURM_CPUS_PER_TASK=4", "the affinity mask").
struct ThreadDefault {
  int n;
  std::string source;
};
ThreadDefault default_num_threads_choice();
constexpr int kMaxThreads = 4096;

int default_num_threads();
int get_num_threads();
// ValueError for n < 1 or n > kMaxThreads; BackendError (the pool keeps its size) when the
// operating system refuses a new thread.
void set_num_threads(int n);

// Runs fn(tid, nthreads) on `nthreads` = min(get_num_threads(), max_threads) threads (the pool's
// size when the region starts), the caller being tid 0; returns when all are done. Exceptions are
// rethrown on the caller.
void parallel_region(const std::function<void(int tid, int nthreads)>& fn, int max_threads = 1 << 30);

// Splits [0, n) into contiguous slices, one per thread (at most max_threads): fn(begin, end, tid).
void parallel_for(long long n, const std::function<void(long long begin, long long end, int tid)>& fn,
                  long long min_per_thread = 1, int max_threads = 1 << 30);

// The slice of [0, n) that thread tid of nthreads owns.
inline void split_range(long long n, int tid, int nthreads, long long& begin, long long& end) {
  long long base = n / nthreads, extra = n % nthreads;
  begin = tid * base + (tid < extra ? tid : extra);
  end = begin + base + (tid < extra ? 1 : 0);
}

}  // namespace hpcnn
