#include "core/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/errors.h"

namespace hpcnn {

namespace {

int positive_env(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return 0;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  return (end && *end == '\0' && n > 0 && n < 100000) ? static_cast<int>(n) : 0;
}

thread_local bool t_in_region = false;

// Persistent workers 1..n-1 wait for a generation number to change, run the job, and count
// down. The caller runs slice 0 itself. Simple, no work stealing: the split is static.
class Pool {
 public:
  static Pool& instance() {
    static Pool pool;
    return pool;
  }

  int size() const { return size_; }

  void resize(int n) {
    std::lock_guard<std::mutex> run_lock(run_mutex_);
    stop_workers();
    size_ = n;
    start_workers();
  }

  void run(const std::function<void(int, int)>& fn, int nthreads) {
    if (nthreads <= 1 || t_in_region) {
      bool was = t_in_region;
      t_in_region = true;
      try {
        fn(0, 1);
      } catch (...) {
        t_in_region = was;
        throw;
      }
      t_in_region = was;
      return;
    }
    std::lock_guard<std::mutex> run_lock(run_mutex_);  // one region at a time
    {
      std::lock_guard<std::mutex> lk(mutex_);
      job_ = &fn;
      job_threads_ = nthreads;
      pending_ = nthreads - 1;
      errors_.assign(nthreads, nullptr);
      ++generation_;
    }
    cv_start_.notify_all();
    t_in_region = true;
    try {
      fn(0, nthreads);
    } catch (...) {
      errors_[0] = std::current_exception();
    }
    t_in_region = false;
    {
      std::unique_lock<std::mutex> lk(mutex_);
      cv_done_.wait(lk, [&] { return pending_ == 0; });
      job_ = nullptr;
    }
    for (auto& e : errors_)
      if (e) std::rethrow_exception(e);
  }

  ~Pool() { stop_workers(); }

 private:
  Pool() : size_(default_num_threads()) { start_workers(); }

  // Called with no region running (constructor, or resize under run_mutex_). Each worker gets
  // the generation current now: reading it later, from the new thread, could miss a job
  // published in between, and that region would then wait forever for the worker.
  void start_workers() {
    unsigned long long gen;
    {
      std::lock_guard<std::mutex> lk(mutex_);
      stopping_ = false;
      gen = generation_;
    }
    for (int t = 1; t < size_; ++t) workers_.emplace_back([this, t, gen] { worker_loop(t, gen); });
  }

  void stop_workers() {
    {
      std::lock_guard<std::mutex> lk(mutex_);
      stopping_ = true;
    }
    cv_start_.notify_all();
    for (auto& w : workers_) w.join();
    workers_.clear();
  }

  void worker_loop(int tid, unsigned long long seen) {
    t_in_region = true;
    for (;;) {
      const std::function<void(int, int)>* job;
      int nthreads;
      {
        std::unique_lock<std::mutex> lk(mutex_);
        cv_start_.wait(lk, [&] { return stopping_ || generation_ != seen; });
        if (stopping_) return;
        seen = generation_;
        job = job_;
        nthreads = job_threads_;
      }
      if (tid < nthreads) {
        try {
          (*job)(tid, nthreads);
        } catch (...) {
          errors_[tid] = std::current_exception();
        }
        std::lock_guard<std::mutex> lk(mutex_);
        if (--pending_ == 0) cv_done_.notify_all();
      }
    }
  }

  int size_;
  std::vector<std::thread> workers_;
  std::mutex run_mutex_, mutex_;
  std::condition_variable cv_start_, cv_done_;
  const std::function<void(int, int)>* job_ = nullptr;
  int job_threads_ = 0;
  int pending_ = 0;
  unsigned long long generation_ = 0;
  bool stopping_ = false;
  std::vector<std::exception_ptr> errors_;
};

}  // namespace

// The rule, first match wins (README "Threads"): HPCNN_NUM_THREADS (hpcnn's own variable),
// SLURM_CPUS_PER_TASK (what the job asked for), the CPUs in the affinity mask (what a Slurm
// cgroup or taskset allows). OMP_NUM_THREADS is deliberately NOT read: hpcnn does not use
// OpenMP, and job scripts set OMP_NUM_THREADS=1 to keep a BLAS single-threaded, which must not
// make hpcnn itself run on one thread.
ThreadDefault default_num_threads_choice() {
  if (int n = positive_env("HPCNN_NUM_THREADS")) return {n, "HPCNN_NUM_THREADS=" + std::to_string(n)};
  if (int n = positive_env("SLURM_CPUS_PER_TASK")) return {n, "SLURM_CPUS_PER_TASK=" + std::to_string(n)};
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return {n, "the affinity mask"};
  }
  return {static_cast<int>(std::max(1u, std::thread::hardware_concurrency())), "the hardware thread count"};
}

int default_num_threads() { return default_num_threads_choice().n; }

int get_num_threads() { return Pool::instance().size(); }

void set_num_threads(int n) {
  HPCNN_CHECK_ARG(n >= 1, "set_num_threads: n must be >= 1, got ", n);
  HPCNN_CHECK_ARG(!t_in_region, "set_num_threads cannot be called from inside a parallel region");
  if (n != Pool::instance().size()) Pool::instance().resize(n);
}

void parallel_region(const std::function<void(int, int)>& fn, int max_threads) {
  int n = std::min(get_num_threads(), std::max(1, max_threads));
  Pool::instance().run(fn, n);
}

void parallel_for(long long n, const std::function<void(long long, long long, int)>& fn, long long min_per_thread) {
  if (n <= 0) return;
  long long by_work = std::max(1LL, n / std::max(1LL, min_per_thread));
  int threads = static_cast<int>(std::min<long long>(get_num_threads(), by_work));
  parallel_region(
      [&](int tid, int nt) {
        long long b, e;
        split_range(n, tid, nt, b, e);
        if (b < e) fn(b, e, tid);
      },
      threads);
}

}  // namespace hpcnn
