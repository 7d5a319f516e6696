#include "core/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
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

// How long a thread polls, before it sleeps on the condition variable, for what it waits for (a
// worker for the next region, the caller for the workers to finish): a step runs a few hundred
// short regions back to back, and a worker put to sleep after each took a futex wake-up (a
// context switch, tens of microseconds on a virtual machine) to start the next one (perf: the
// kernel's scheduler functions 3.5 % of a ResNet-20 training step; at batch 1 the wake-ups were
// a large share of a prediction's ~60 regions). Bounded, so that an idle pool sleeps.
constexpr auto kPollFor = std::chrono::microseconds(50);

// Polls `ready` until it holds or kPollFor has passed; whether it holds.
template <class Ready>
bool poll_briefly(Ready ready) {
  const auto until = std::chrono::steady_clock::now() + kPollFor;
  for (int i = 0;; ++i) {
    if (ready()) return true;
    if ((i & 63) == 63) {
      if (std::chrono::steady_clock::now() >= until) return false;
      sched_yield();  // an oversubscribed machine (ranks x threads > cores) runs the others meanwhile
    }
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
}

// Persistent workers 1..n-1 wait for a generation number to change, run the job, and count
// down. The caller runs slice 0 itself. Simple, no work stealing: the split is static.
//
// Resizing and running are ordered by run_mutex_: a resize waits for the region in progress, and
// a region reads the number of live workers only under that lock. Nothing outside the lock (the
// caller's earlier get_num_threads(), say) can make a region wait for a worker that does not exist:
// that was a deadlock when set_num_threads shrank the pool between a caller's read of the size and
// its region (a loader thread warming up, the user's thread calling set_num_threads), or after a
// resize that failed half-way.
class Pool {
 public:
  static Pool& instance() {
    static Pool pool;
    return pool;
  }

  int size() const { return size_.load(); }

  // Grows or shrinks to n threads (the caller counts as one). Workers below min(old, new) keep
  // running. If a new thread cannot be started, the ones started by this call are stopped again,
  // the pool keeps its old size, and BackendError says why.
  void resize(int n) {
    std::lock_guard<std::mutex> run_lock(run_mutex_);
    const int old = live_threads();
    if (n < old) {
      stop_workers_from(n);
    } else if (n > old) {
      try {
        start_workers(n);
      } catch (const std::exception& e) {
        const int failed = live_threads();  // the thread that could not be started
        stop_workers_from(old);
        throw BackendError(cat("set_num_threads(", n, "): could not start thread ", failed + 1, " of ", n, " (", e.what(),
                               "); hpcnn keeps its ", old, " thread", old == 1 ? "" : "s"));
      }
    }
    size_ = live_threads();
  }

  // Runs fn on min(max_threads, live threads) threads.
  void run(const std::function<void(int, int)>& fn, int max_threads) {
    if (max_threads <= 1 || t_in_region) {
      run_serially(fn);
      return;
    }
    std::lock_guard<std::mutex> run_lock(run_mutex_);  // one region at a time; no resize meanwhile
    const int nthreads = std::min(max_threads, live_threads());
    if (nthreads <= 1) {
      run_serially(fn);
      return;
    }
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
    poll_briefly([&] { return pending_.load(std::memory_order_acquire) == 0; });
    {
      std::unique_lock<std::mutex> lk(mutex_);
      cv_done_.wait(lk, [&] { return pending_ == 0; });
      job_ = nullptr;
    }
    for (auto& e : errors_)
      if (e) std::rethrow_exception(e);
  }

  ~Pool() { stop_workers_from(1); }

 private:
  Pool() {
    try {
      start_workers(std::min(default_num_threads(), kMaxThreads));
    } catch (const std::exception&) {
      // Fewer threads than the default could be started: run with those (at least the caller).
    }
    size_ = live_threads();
  }

  // The caller plus the workers. Read under run_mutex_ (or in the constructor).
  int live_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Starts workers live_threads()..n-1; called with no region running (constructor, or resize
  // under run_mutex_). Each worker gets the generation current now: reading it later, from the
  // new thread, could miss a job published in between, and that region would then wait forever.
  void start_workers(int n) {
    unsigned long long gen;
    {
      std::lock_guard<std::mutex> lk(mutex_);
      keep_ = n;
      gen = generation_;
    }
    for (int t = live_threads(); t < n; ++t) workers_.emplace_back([this, t, gen] { worker_loop(t, gen); });
  }

  // Stops workers n.. (n >= 1) and waits for them; called with no region running.
  void stop_workers_from(int n) {
    {
      std::lock_guard<std::mutex> lk(mutex_);
      keep_ = n;
    }
    cv_start_.notify_all();
    while (live_threads() > n) {
      workers_.back().join();
      workers_.pop_back();
    }
  }

  void run_serially(const std::function<void(int, int)>& fn) {
    bool was = t_in_region;
    t_in_region = true;
    try {
      fn(0, 1);
    } catch (...) {
      t_in_region = was;
      throw;
    }
    t_in_region = was;
  }

  void worker_loop(int tid, unsigned long long seen) {
    t_in_region = true;
    for (;;) {
      const std::function<void(int, int)>* job;
      int nthreads;
      poll_briefly([&] { return generation_.load(std::memory_order_acquire) != seen || tid >= keep_.load(); });
      {
        std::unique_lock<std::mutex> lk(mutex_);
        cv_start_.wait(lk, [&] { return tid >= keep_ || generation_ != seen; });
        if (tid >= keep_) return;
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

  std::atomic<int> size_{1};  // live threads, for get_num_threads() without a lock
  std::vector<std::thread> workers_;  // worker t is workers_[t - 1]
  std::mutex run_mutex_, mutex_;
  std::condition_variable cv_start_, cv_done_;
  const std::function<void(int, int)>* job_ = nullptr;
  int job_threads_ = 0;
  // Written under mutex_; atomic so that poll_briefly may read them without it.
  std::atomic<int> pending_{0};
  std::atomic<unsigned long long> generation_{0};
  std::atomic<int> keep_{1};  // workers with tid >= keep_ exit
  std::vector<std::exception_ptr> errors_;
};

}  // namespace

// The rule, first match wins (docs/install.md, "Threads"): HPCNN_NUM_THREADS (hpcnn's own variable),
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
  HPCNN_CHECK_ARG(n <= kMaxThreads, "set_num_threads: n must be <= ", kMaxThreads, ", got ", n);
  HPCNN_CHECK_ARG(!t_in_region, "set_num_threads cannot be called from inside a parallel region");
  Pool::instance().resize(n);  // waits for a region in progress (another thread's) to finish
}

void parallel_region(const std::function<void(int, int)>& fn, int max_threads) {
  Pool::instance().run(fn, std::max(1, max_threads));  // clamped to the live threads under the pool's lock
}

void parallel_for(long long n, const std::function<void(long long, long long, int)>& fn, long long min_per_thread,
                  int max_threads) {
  if (n <= 0) return;
  long long by_work = std::max(1LL, n / std::max(1LL, min_per_thread));
  int threads = static_cast<int>(std::min<long long>(max_threads, by_work));
  parallel_region(
      [&](int tid, int nt) {
        long long b, e;
        split_range(n, tid, nt, b, e);
        if (b < e) fn(b, e, tid);
      },
      threads);
}

}  // namespace hpcnn
