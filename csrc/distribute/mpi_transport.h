// The MPI transport's internals (distribute/mpi.h), shared by the files that implement it with
// MPI: mpi.cpp (the environment: init, allgather, shutdown; and MpiCommunicator's calls) and
// mpi_transport.cpp (the communication thread: its queue, the failure notices, the heartbeat and
// the exit protocol). Built only with HPCNN_MPI; nothing outside those two files includes it.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/errors.h"
#include "core/tensor.h"
#include "distribute/heartbeat.h"
#include "distribute/mpi.h"

namespace hpcnn::distribute::mpi {

inline constexpr int kTagFailure = 4711;    // [int32 lost rank or -1] "rank r failed: why", sent to every other rank
inline constexpr int kTagAck = 4712;        // "my error is printed, I am exiting", sent at exit after a failure
inline constexpr int kTagHeartbeat = 4713;  // one byte: 1 "alive" (every interval), 0 "goodbye" (a normal exit)
inline constexpr char kBeat = 1, kGoodbye = 0;
using Clock = std::chrono::steady_clock;

[[noreturn]] inline void throw_mpi(int code, const char* call) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, msg, &len);
  throw BackendError(cat(call, " failed: ", std::string(msg, static_cast<size_t>(len))));
}
#define HPCNN_MPI_CHECK(call)                       \
  do {                                              \
    const int rc_ = (call);                         \
    if (rc_ != MPI_SUCCESS) throw_mpi(rc_, #call);  \
  } while (0)

// Spins briefly (fast collectives finish in microseconds), then sleeps in growing steps up to
// 50 us, so that a rank waiting for a slow peer leaves the cores to the computation. The cap is
// short because a non-blocking collective only advances inside MPI_Test (Open MPI has no progress
// thread): a megabyte allreduce takes several rounds of tests, and with 1 ms sleeps between them
// the tutorial CNN's two buckets cost 2 ranks 3-30 ms more per step on this machine (bench/RESULTS.md).
class Backoff {
 public:
  void pause() {
    if (++spins_ < 200) return;
    if (spins_ < 2000) {
      std::this_thread::yield();
      return;
    }
    sleep_us_ = std::min(50, std::max(10, sleep_us_ * 2));
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us_));
  }

 private:
  int spins_ = 0, sleep_us_ = 0;
};

// Tests `req` until it completes (true) or `timeout_s` passes (false), calling `between_tests()`
// after each test that finds it still running: the place to watch for failures (it may throw).
template <class BetweenTests>
bool test_until_done(MPI_Request& req, double timeout_s, BetweenTests between_tests) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  Backoff backoff;
  for (;;) {
    int done = 0;
    HPCNN_MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
    if (done) return true;
    between_tests();
    if (Clock::now() > deadline) return false;
    backoff.pause();
  }
}

struct MpiCommunicator::Impl {
  enum class Kind { Allreduce, Broadcast, Barrier, Notify };
  struct Op {
    Kind kind = Kind::Barrier;
    void* data = nullptr;
    int count = 0;
    MPI_Datatype type = MPI_BYTE;
    int root = 0;
    const char* what = "";
    bool done = false;
    std::exception_ptr error;
  };
  // A started sum of a GPU buffer through host memory: copied back by wait_all.
  struct Staged {
    std::shared_ptr<Op> op;
    Tensor device_view, host;
  };

  MPI_Comm data = MPI_COMM_NULL, ctrl = MPI_COMM_NULL;
  int rank = 0, size = 1;
  double timeout_s = 600;
  bool watch_idle = false;  // MPI_THREAD_MULTIPLE: look for notices while idle too
  std::string self;         // "rank 1 (host node01, pid 1234)"

  std::mutex mu;
  std::condition_variable cv, done_cv;
  std::deque<std::shared_ptr<Op>> queue;
  bool stop = false;
  std::thread thread;
  std::vector<std::shared_ptr<Op>> started;  // start_allreduce_sum's, for wait_all
  std::vector<Staged> staged;

  // The failure that broke the group: set once (under mu), then every call throws it.
  std::atomic<bool> broken{false};
  std::string failure;
  std::atomic<bool> abort_requested{false};
  std::string abort_why;  // under mu

  // Communication thread only (and shutdown, after the thread has stopped).
  bool notices_sent = false;
  std::string notice;                       // [int32 lost rank] + text, kept alive while the sends complete
  std::vector<MPI_Request> notice_requests;
  std::vector<std::string> names;           // every rank's `self`, for messages about it
  std::vector<char> lost, left;             // per rank: lost (heartbeat), left normally (goodbye)
  Heartbeat beat{0, 1, 0};                  // off until the constructor sets it (heartbeat.h)
  std::vector<MPI_Request> beat_requests;   // per beat.peers(): the beat in flight, one at most
  Clock::time_point next_tick{};
  bool said_goodbye = false;

  void set_failure(const std::string& why) {
    std::lock_guard<std::mutex> lk(mu);
    if (failure.empty()) failure = why;
    broken = true;
  }
  std::string failure_text() {
    std::lock_guard<std::mutex> lk(mu);
    return failure;
  }

  // ---- caller side
  std::shared_ptr<Op> submit(std::shared_ptr<Op> op) {
    {
      std::lock_guard<std::mutex> lk(mu);
      if (broken) throw PeerFailure(failure);
      HPCNN_CHECK_BACKEND(!stop, "the MPI transport was shut down (the process is exiting)");
      queue.push_back(op);
    }
    cv.notify_all();
    return op;
  }
  void await(const std::shared_ptr<Op>& op) {
    std::unique_lock<std::mutex> lk(mu);
    done_cv.wait(lk, [&] { return op->done; });
    if (op->error) std::rethrow_exception(op->error);
  }
  void run_now(std::shared_ptr<Op> op) { await(submit(std::move(op))); }

  // ---- communication thread
  void loop();

  void run(Op& op);

  // Waits for `req`, watching for failure notices, a local abort and the timeout.
  void wait(MPI_Request& req, const char* what);

  // A failure notice from another rank, if one has arrived: recorded, then thrown.
  void probe_notice();

  // Receives the notice `st` announced; `lost_rank`: the rank it reports lost (-1: its sender failed).
  std::string receive_notice(const MPI_Status& st, int* lost_rank);

  // One line on stderr at once (the comm thread's news; the Python error follows at the next call).
  void say(const std::string& line);

  // Tells every other rank why this one stops (once): `lost_rank` is the rank found lost (-1: this
  // rank fails). Ranks known to be gone are skipped (a send to a dead rank never completes). Small
  // messages: they leave at once.
  void send_notices(int lost_rank = -1);

  bool gone(int p) const { return lost[static_cast<size_t>(p)] || left[static_cast<size_t>(p)]; }

  // The heartbeat (heartbeat.h), a few times per interval: beats received, beats due sent, and a
  // neighbour silent for longer than the limit declared lost: every rank is told, then this throws.
  void heartbeat_tick();

  // A beat (or the goodbye) to each neighbour, unless its previous one is still in flight (a dead
  // neighbour's never completes: no pile of requests).
  void send_beats(const char& what);

  // A normal exit (the thread stopped, the group healthy): the neighbours stop watching this rank,
  // so that one that works on alone (the chief saving a model) is not taken for lost. The beats
  // still in flight are left to MPI (freed, not waited for beyond a second).
  void say_goodbye() noexcept;

  void stop_thread();

  // At exit after a failure, the thread stopped: every rank tells every other live one that its
  // error is printed and it is exiting, and waits (10 s at most) until it has heard the same from
  // all of them; then shutdown() ends the job with MPI_Abort. So no rank's MPI_Abort ends another
  // before that one has printed why it stops. Lost ranks and ranks that left are not waited for.
  void exit_protocol() noexcept;
};

}  // namespace hpcnn::distribute::mpi
