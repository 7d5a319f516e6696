// MPI with hpcnn (see mpi.h): the environment, and the MPI transport on a communication thread.
// Built only with HPCNN_MPI (CMakeLists.txt); mpi_absent.cpp stands in otherwise.
#include "distribute/mpi.h"

#include <mpi.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "core/warnings.h"
#include "distribute/heartbeat.h"

namespace hpcnn::distribute::mpi {

namespace {

constexpr int kTagFailure = 4711;    // [int32 lost rank or -1] "rank r failed: why", sent to every other rank
constexpr int kTagAck = 4712;        // "my error is printed, I am exiting", sent at exit after a failure
constexpr int kTagHeartbeat = 4713;  // one byte: 1 "alive" (every interval), 0 "goodbye" (a normal exit)
constexpr char kBeat = 1, kGoodbye = 0;
using Clock = std::chrono::steady_clock;

[[noreturn]] void throw_mpi(int code, const char* call) {
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

const char* level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "single";
    case MPI_THREAD_FUNNELED: return "funneled";
    case MPI_THREAD_SERIALIZED: return "serialized";
    case MPI_THREAD_MULTIPLE: return "multiple";
    default: return "unknown";
  }
}

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

}  // namespace

// ------------------------------------------------------------------ the transport
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
  void loop() {
    for (;;) {
      std::shared_ptr<Op> op;
      {
        std::unique_lock<std::mutex> lk(mu);
        while (queue.empty() && !stop) {
          if (watch_idle && !broken) {
            cv.wait_for(lk, std::chrono::milliseconds(5));
            if (queue.empty() && !stop) {
              lk.unlock();
              try {
                probe_notice();
                heartbeat_tick();
              } catch (...) {
                // recorded in `failure`: the next call throws it
              }
              lk.lock();
            }
          } else {
            cv.wait(lk);
          }
        }
        if (queue.empty()) return;  // stop
        op = queue.front();
        queue.pop_front();
      }
      try {
        run(*op);
      } catch (...) {
        op->error = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lk(mu);
        op->done = true;
      }
      done_cv.notify_all();
    }
  }

  void run(Op& op) {
    if (op.kind == Kind::Notify) {
      send_notices();
      return;
    }
    if (broken) throw PeerFailure(failure_text());
    MPI_Request req = MPI_REQUEST_NULL;
    switch (op.kind) {
      case Kind::Allreduce:
        HPCNN_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, op.data, op.count, op.type, MPI_SUM, data, &req));
        break;
      case Kind::Broadcast:
        HPCNN_MPI_CHECK(MPI_Ibcast(op.data, op.count, op.type, op.root, data, &req));
        break;
      default:
        HPCNN_MPI_CHECK(MPI_Ibarrier(data, &req));
        break;
    }
    wait(req, op.what);
  }

  // Waits for `req`, watching for failure notices, a local abort and the timeout.
  void wait(MPI_Request& req, const char* what) {
    const bool done = test_until_done(req, timeout_s, [&] {
      if (abort_requested) {
        send_notices();
        throw PeerFailure(failure_text());
      }
      probe_notice();
      heartbeat_tick();
    });
    if (done) return;
    {
      std::lock_guard<std::mutex> lk(mu);
      abort_why = cat(self, ": a ", what, " got no answer from the other ranks within ", timeout_s,
                      " s (a rank was killed or is stuck; timeout_seconds of "
                      "hpcnn.distribute.CommunicationOptions or HPCNN_DIST_TIMEOUT set the limit)");
    }
    send_notices();  // the others may wait in the same collective: stop them too
    throw PeerFailure(failure_text());
  }

  // A failure notice from another rank, if one has arrived: recorded, then thrown.
  void probe_notice() {
    int flag = 0;
    MPI_Status st;
    HPCNN_MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, kTagFailure, ctrl, &flag, &st));
    if (!flag) return;
    int lost_rank = -1;
    const std::string text = receive_notice(st, &lost_rank);
    const bool first_news = !broken;
    set_failure(text);
    const std::string why = cat(self, " stops: ", text);
    // A silent loss: said at once, whatever this rank's main thread does (once: the ranks that
    // noticed it themselves send notices too).
    if (lost_rank >= 0 && first_news) say(why);
    throw PeerFailure(why);
  }

  // Receives the notice `st` announced; `lost_rank`: the rank it reports lost (-1: its sender failed).
  std::string receive_notice(const MPI_Status& st, int* lost_rank) {
    int n = 0;
    MPI_Get_count(&st, MPI_CHAR, &n);
    std::string buf(static_cast<size_t>(std::max(0, n)), '\0');
    HPCNN_MPI_CHECK(MPI_Recv(buf.data(), n, MPI_CHAR, st.MPI_SOURCE, kTagFailure, ctrl, MPI_STATUS_IGNORE));
    std::int32_t lr = -1;
    if (buf.size() >= sizeof(lr)) std::memcpy(&lr, buf.data(), sizeof(lr));
    if (lr >= 0 && lr < size) lost[static_cast<size_t>(lr)] = 1;
    *lost_rank = lr >= 0 && lr < size ? lr : -1;
    return buf.size() >= sizeof(lr) ? buf.substr(sizeof(lr)) : buf;
  }

  // One line on stderr at once (the comm thread's news; the Python error follows at the next call).
  void say(const std::string& line) {
    std::fprintf(stderr, "hpcnn: %s\n", line.c_str());
    std::fflush(stderr);
  }

  // Tells every other rank why this one stops (once): `lost_rank` is the rank found lost (-1: this
  // rank fails). Ranks known to be gone are skipped (a send to a dead rank never completes). Small
  // messages: they leave at once.
  void send_notices(int lost_rank = -1) {
    if (notices_sent) return;
    notices_sent = true;
    {
      std::lock_guard<std::mutex> lk(mu);
      const std::string text = abort_why.empty() ? cat(self, " failed") : abort_why;
      if (failure.empty()) failure = text;
      broken = true;
      const std::int32_t lr = lost_rank;
      notice.assign(reinterpret_cast<const char*>(&lr), sizeof(lr));
      notice += text;
    }
    for (int p = 0; p < size; ++p) {
      if (p == rank || gone(p)) continue;
      MPI_Request r = MPI_REQUEST_NULL;
      if (MPI_Isend(notice.data(), static_cast<int>(notice.size()), MPI_CHAR, p, kTagFailure, ctrl, &r) ==
          MPI_SUCCESS)
        notice_requests.push_back(r);
    }
    const auto deadline = Clock::now() + std::chrono::seconds(2);
    Backoff backoff;
    while (Clock::now() < deadline) {
      int all = 0;
      if (MPI_Testall(static_cast<int>(notice_requests.size()), notice_requests.data(), &all,
                      MPI_STATUSES_IGNORE) != MPI_SUCCESS || all)
        break;
      backoff.pause();
    }
  }

  bool gone(int p) const { return lost[static_cast<size_t>(p)] || left[static_cast<size_t>(p)]; }

  // The heartbeat (heartbeat.h), a few times per interval: beats received, beats due sent, and a
  // neighbour silent for longer than the limit declared lost: every rank is told, then this throws.
  void heartbeat_tick() {
    if (!beat.on()) return;
    const auto now = Clock::now();
    if (now < next_tick) return;
    next_tick = now + std::chrono::duration_cast<Clock::duration>(
                          std::chrono::duration<double>(std::min(0.25, beat.interval_s() / 4)));
    for (;;) {  // every beat that has arrived, from any rank (neighbours only send them)
      int flag = 0;
      MPI_Status st;
      HPCNN_MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, kTagHeartbeat, ctrl, &flag, &st));
      if (!flag) break;
      char b = kBeat;
      HPCNN_MPI_CHECK(MPI_Recv(&b, 1, MPI_CHAR, st.MPI_SOURCE, kTagHeartbeat, ctrl, MPI_STATUS_IGNORE));
      beat.heard(st.MPI_SOURCE, now);
      if (b == kGoodbye) {
        left[static_cast<size_t>(st.MPI_SOURCE)] = 1;
        beat.forget(st.MPI_SOURCE);
      }
    }
    if (beat.send_due(now)) send_beats(kBeat);
    double silent = 0;
    const int p = beat.silent_peer(now, &silent);
    if (p < 0) return;
    lost[static_cast<size_t>(p)] = 1;
    beat.forget(p);
    {
      std::lock_guard<std::mutex> lk(mu);
      abort_why = cat(self, " lost ", names[static_cast<size_t>(p)], ": no heartbeat for ",
                      std::round(silent * 10) / 10, " s (limit ", beat.limit_s(),
                      " s: HPCNN_DIST_HEARTBEAT or heartbeat_seconds of hpcnn.distribute.CommunicationOptions); "
                      "it was killed (out of memory? a node failure?) or cannot be reached");
    }
    say(abort_why);
    send_notices(p);
    throw PeerFailure(failure_text());
  }

  // A beat (or the goodbye) to each neighbour, unless its previous one is still in flight (a dead
  // neighbour's never completes: no pile of requests).
  void send_beats(const char& what) {
    if (beat_requests.size() != beat.peers().size()) beat_requests.assign(beat.peers().size(), MPI_REQUEST_NULL);
    for (size_t i = 0; i < beat.peers().size(); ++i) {
      const int p = beat.peers()[i];
      MPI_Request& r = beat_requests[i];
      if (r != MPI_REQUEST_NULL) {
        int done = 0;
        MPI_Test(&r, &done, MPI_STATUS_IGNORE);
        if (!done) continue;
      }
      if (gone(p)) continue;
      MPI_Isend(&what, 1, MPI_CHAR, p, kTagHeartbeat, ctrl, &r);
    }
  }

  // A normal exit (the thread stopped, the group healthy): the neighbours stop watching this rank,
  // so that one that works on alone (the chief saving a model) is not taken for lost. The beats
  // still in flight are left to MPI (freed, not waited for beyond a second).
  void say_goodbye() noexcept {
    if (said_goodbye || !beat.on() || broken) return;
    said_goodbye = true;
    try {
      std::vector<MPI_Request> pending;
      for (MPI_Request& r : beat_requests)
        if (r != MPI_REQUEST_NULL) pending.push_back(r);
      beat_requests.clear();
      send_beats(kGoodbye);
      for (MPI_Request& r : beat_requests)
        if (r != MPI_REQUEST_NULL) pending.push_back(r);
      beat_requests.clear();
      const auto deadline = Clock::now() + std::chrono::seconds(1);
      Backoff backoff;
      int all = 0;
      while (Clock::now() < deadline && !all) {
        MPI_Testall(static_cast<int>(pending.size()), pending.data(), &all, MPI_STATUSES_IGNORE);
        if (!all) backoff.pause();
      }
      for (MPI_Request& r : pending)
        if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
    } catch (...) {
    }
  }

  void stop_thread() {
    {
      std::lock_guard<std::mutex> lk(mu);
      stop = true;
    }
    cv.notify_all();
    if (thread.joinable()) thread.join();
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) say_goodbye();
  }

  // At exit after a failure, the thread stopped: every rank tells every other live one that its
  // error is printed and it is exiting, and waits (10 s at most) until it has heard the same from
  // all of them; then shutdown() ends the job with MPI_Abort. So no rank's MPI_Abort ends another
  // before that one has printed why it stops. Lost ranks and ranks that left are not waited for.
  void exit_protocol() noexcept {
    try {
      for (;;) {  // notices that arrived after the last wait (they name more lost ranks)
        try {
          probe_notice();
          break;
        } catch (const PeerFailure&) {
        }
      }
    } catch (...) {
    }
    std::vector<MPI_Request> acks;
    char one = 1;
    for (int p = 0; p < size; ++p) {
      if (p == rank || gone(p)) continue;
      MPI_Request r = MPI_REQUEST_NULL;
      if (MPI_Isend(&one, 1, MPI_CHAR, p, kTagAck, ctrl, &r) == MPI_SUCCESS) acks.push_back(r);
    }
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    std::vector<char> heard(static_cast<size_t>(size), 0);
    heard[static_cast<size_t>(rank)] = 1;
    Backoff backoff;
    while (Clock::now() < deadline) {
      int all = 0;
      MPI_Testall(static_cast<int>(acks.size()), acks.data(), &all, MPI_STATUSES_IGNORE);
      for (int tag : {kTagAck, kTagFailure}) {
        int flag = 0;
        MPI_Status st;
        while (MPI_Iprobe(MPI_ANY_SOURCE, tag, ctrl, &flag, &st) == MPI_SUCCESS && flag) {
          if (tag == kTagFailure) {
            int lr = -1;
            receive_notice(st, &lr);  // may name a lost rank: not waited for then
            continue;
          }
          char b = 0;
          MPI_Recv(&b, 1, MPI_CHAR, st.MPI_SOURCE, tag, ctrl, MPI_STATUS_IGNORE);
          heard[static_cast<size_t>(st.MPI_SOURCE)] = 1;
        }
      }
      bool everyone = true;
      for (int p = 0; p < size; ++p) everyone = everyone && (heard[static_cast<size_t>(p)] || gone(p));
      if (all && everyone) break;
      backoff.pause();
    }
  }
};

namespace {

struct Env {
  std::mutex mu;
  bool initialized_by_hpcnn = false;
  bool have_world = false;
  World world;
  std::vector<std::weak_ptr<MpiCommunicator::Impl>> comms;
};
Env& env() {
  static Env e;
  return e;
}

std::string self_name(int rank) {
  char host[MPI_MAX_PROCESSOR_NAME] = {0};
  int len = 0;
  MPI_Get_processor_name(host, &len);
  return cat("rank ", rank, " (host ", std::string(host, static_cast<size_t>(len)), ", pid ", getpid(), ")");
}

// Waits for an init-time request with the timeout (no failure notices exist yet).
void wait_plain(MPI_Request& req, const char* what, double timeout_s) {
  if (!test_until_done(req, timeout_s, [] {}))
    throw BackendError(cat("MPI: ", what, " got no answer from all ranks within ", timeout_s,
                           " s: a rank did not reach the same point (did every rank create the strategy?)"));
}

}  // namespace

bool compiled() { return true; }

std::string library_version() {
  char v[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int len = 0;
  MPI_Get_library_version(v, &len);
  std::string s(v, static_cast<size_t>(len));
  const size_t nl = s.find_first_of("\r\n");
  if (nl != std::string::npos) s.resize(nl);
  while (!s.empty() && (s.back() == ' ' || s.back() == ',' || s.back() == '\0')) s.pop_back();
  return s;
}

std::string standard_version() { return cat(MPI_VERSION, ".", MPI_SUBVERSION); }

std::string unavailable_reason() { return ""; }

bool initialized() {
  int flag = 0;
  MPI_Initialized(&flag);
  return flag != 0;
}

World init() {
  Env& e = env();
  std::lock_guard<std::mutex> lk(e.mu);
  if (e.have_world) return e.world;
  int fin = 0;
  MPI_Finalized(&fin);
  HPCNN_CHECK_BACKEND(!fin, "MPI was finalized already in this process: create the strategy before MPI_Finalize");
  if (!initialized()) {
    int provided = 0;
    HPCNN_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided));
    e.initialized_by_hpcnn = true;
  }
  int level = 0;
  MPI_Query_thread(&level);
  if (level < MPI_THREAD_SERIALIZED)
    throw BackendError(cat("MPI was initialised with thread level '", level_name(level),
                           "', but hpcnn's MPI transport needs 'serialized' or 'multiple' (it talks to MPI from a "
                           "communication thread). With mpi4py, set mpi4py.rc.thread_level = 'multiple' before "
                           "`from mpi4py import MPI` (it is mpi4py's default), or let hpcnn initialise MPI"));
  World w;
  HPCNN_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &w.rank));
  HPCNN_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &w.size));
  MPI_Comm local = MPI_COMM_NULL;
  HPCNN_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w.rank, MPI_INFO_NULL, &local));
  MPI_Comm_rank(local, &w.local_rank);
  MPI_Comm_size(local, &w.local_size);
  MPI_Comm_free(&local);
  char host[MPI_MAX_PROCESSOR_NAME] = {0};
  int len = 0;
  MPI_Get_processor_name(host, &len);
  w.host.assign(host, static_cast<size_t>(len));
  w.thread_level = level_name(level);
  w.initialized_by_hpcnn = e.initialized_by_hpcnn;
  e.world = w;
  e.have_world = true;
  return w;
}

std::vector<std::string> allgather(const std::string& mine, double timeout_s) {
  const World w = init();
  HPCNN_CHECK_ARG(mine.size() < static_cast<size_t>(INT_MAX), "allgather: string too long");
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(static_cast<size_t>(w.size));
  MPI_Request req = MPI_REQUEST_NULL;
  HPCNN_MPI_CHECK(MPI_Iallgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD, &req));
  wait_plain(req, "an allgather", timeout_s);
  std::vector<int> offsets(static_cast<size_t>(w.size), 0);
  long long total = 0;
  for (int r = 0; r < w.size; ++r) {
    offsets[static_cast<size_t>(r)] = static_cast<int>(total);
    total += lens[static_cast<size_t>(r)];
  }
  HPCNN_CHECK_BACKEND(total < INT_MAX, "allgather: too much data");
  std::string all(static_cast<size_t>(std::max(1LL, total)), '\0');
  HPCNN_MPI_CHECK(MPI_Iallgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), offsets.data(), MPI_CHAR,
                                  MPI_COMM_WORLD, &req));
  wait_plain(req, "an allgather", timeout_s);
  std::vector<std::string> out;
  for (int r = 0; r < w.size; ++r)
    out.push_back(all.substr(static_cast<size_t>(offsets[static_cast<size_t>(r)]),
                             static_cast<size_t>(lens[static_cast<size_t>(r)])));
  return out;
}

void shutdown() noexcept {
  try {
    Env& e = env();
    std::lock_guard<std::mutex> lk(e.mu);
    if (!initialized()) return;
    int fin = 0;
    MPI_Finalized(&fin);
    if (fin) return;
    bool broken = false;
    std::vector<std::shared_ptr<MpiCommunicator::Impl>> live;
    for (auto& w : e.comms)
      if (auto c = w.lock()) live.push_back(c);
    for (auto& c : live) c->stop_thread();
    for (auto& c : live) {
      if (!c->broken) {  // a notice may be waiting that nobody collected
        try {
          c->probe_notice();
        } catch (...) {
        }
      }
      if (c->broken) {
        c->exit_protocol();
        broken = true;
      }
    }
    if (broken) {
      std::fflush(nullptr);
      MPI_Abort(MPI_COMM_WORLD, 1);  // ends every rank: the group cannot finish its collectives
      return;
    }
    for (auto& c : live) {
      if (c->data != MPI_COMM_NULL) MPI_Comm_free(&c->data);
      if (c->ctrl != MPI_COMM_NULL) MPI_Comm_free(&c->ctrl);
    }
    if (e.initialized_by_hpcnn) MPI_Finalize();
  } catch (...) {
  }
}

// ------------------------------------------------------------------ MpiCommunicator
MpiCommunicator::MpiCommunicator(Device device, double timeout_s, double heartbeat_s)
    : impl_(std::make_shared<Impl>()) {
  const World w = init();
  Impl& c = *impl_;
  c.rank = w.rank;
  c.size = w.size;
  c.timeout_s = timeout_s;
  c.self = self_name(w.rank);
  c.names = allgather(c.self, timeout_s);  // collective: every rank makes its communicator here
  c.lost.assign(static_cast<size_t>(w.size), 0);
  c.left.assign(static_cast<size_t>(w.size), 0);
  int level = 0;
  MPI_Query_thread(&level);
  c.watch_idle = level == MPI_THREAD_MULTIPLE;
  // The heartbeat must keep beating while the thread is idle (during a step's computation), which
  // only MPI_THREAD_MULTIPLE allows: with 'serialized' the application may call MPI then.
  if (heartbeat_s > 0 && !c.watch_idle && w.rank == 0 && w.size > 1)
    queue_warning(cat("MultiWorkerMirroredStrategy: MPI was initialised with thread level '", level_name(level),
                      "', so the heartbeat that notices a killed rank within ", heartbeat_s,
                      " s is off (it needs 'multiple'): a killed rank is noticed after the collective timeout (",
                      timeout_s, " s) only"));
  c.beat = Heartbeat(w.rank, w.size, c.watch_idle ? heartbeat_s : 0.0);
  HPCNN_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &c.data));
  HPCNN_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &c.ctrl));
  MPI_Comm_set_errhandler(c.data, MPI_ERRORS_RETURN);  // errors as exceptions, not process exits
  MPI_Comm_set_errhandler(c.ctrl, MPI_ERRORS_RETURN);
  (void)device;
  c.thread = std::thread([p = impl_.get()] { p->loop(); });
  std::lock_guard<std::mutex> lk(env().mu);
  env().comms.push_back(impl_);
}

MpiCommunicator::~MpiCommunicator() {
  try {
    impl_->stop_thread();
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin && !impl_->broken) {  // a broken group's requests are still pending: leave its comms
      if (impl_->data != MPI_COMM_NULL) MPI_Comm_free(&impl_->data);
      if (impl_->ctrl != MPI_COMM_NULL) MPI_Comm_free(&impl_->ctrl);
    }
  } catch (...) {
  }
}

int MpiCommunicator::rank() const { return impl_->rank; }
int MpiCommunicator::size() const { return impl_->size; }

namespace {
int checked_count(long long n) {
  HPCNN_CHECK_ARG(n >= 0 && n <= INT_MAX, "MPI: a collective of ", n, " elements is too large (at most ", INT_MAX,
                  "): use a smaller bytes_per_pack");
  return static_cast<int>(n);
}
}  // namespace

void MpiCommunicator::start_allreduce_sum(const Tensor& buf) {
  HPCNN_CHECK_ARG(buf.dtype() == DType::F32, "allreduce: float32 buffers only, got ", dtype_name(buf.dtype()));
  auto op = std::make_shared<Impl::Op>();
  op->kind = Impl::Kind::Allreduce;
  op->count = checked_count(buf.numel());
  op->type = MPI_FLOAT;
  op->what = "gradient sum";
  if (buf.device().is_cpu()) {
    op->data = buf.raw();
    impl_->started.push_back(impl_->submit(op));
    return;
  }
  Tensor host = buf.to(Device::cpu());  // a GPU buffer without NCCL: summed through host memory
  op->data = host.raw();
  impl_->staged.push_back(Impl::Staged{impl_->submit(op), buf, host});
}

void MpiCommunicator::wait_all() {
  std::exception_ptr first;
  for (auto& op : impl_->started) {
    try {
      impl_->await(op);
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  impl_->started.clear();
  for (auto& s : impl_->staged) {
    try {
      impl_->await(s.op);
      if (!first) s.device_view.copy_from(s.host);
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  impl_->staged.clear();
  if (first) std::rethrow_exception(first);
}

void MpiCommunicator::allreduce_sum(const Tensor& buf) {
  start_allreduce_sum(buf);
  wait_all();
}

void MpiCommunicator::broadcast(const Tensor& buf, int root) {
  HPCNN_CHECK_ARG(buf.dtype() == DType::F32 || buf.dtype() == DType::U8, "broadcast: float32 or uint8 buffers only");
  Tensor host = buf.device().is_cpu() ? buf : buf.to(Device::cpu());
  auto op = std::make_shared<Impl::Op>();
  op->kind = Impl::Kind::Broadcast;
  op->data = host.raw();
  op->count = checked_count(host.dtype() == DType::F32 ? host.numel() : static_cast<long long>(host.nbytes()));
  op->type = host.dtype() == DType::F32 ? MPI_FLOAT : MPI_BYTE;
  op->root = root;
  op->what = "broadcast";
  impl_->run_now(op);
  if (!buf.device().is_cpu()) Tensor(buf).copy_from(host);
}

void MpiCommunicator::broadcast_bytes(void* data, size_t bytes, int root) {
  auto op = std::make_shared<Impl::Op>();
  op->kind = Impl::Kind::Broadcast;
  op->data = data;
  op->count = checked_count(static_cast<long long>(bytes));
  op->type = MPI_BYTE;
  op->root = root;
  op->what = "broadcast";
  impl_->run_now(op);
}

void MpiCommunicator::allreduce_sum_host(double* values, int count) {
  auto op = std::make_shared<Impl::Op>();
  op->kind = Impl::Kind::Allreduce;
  op->data = values;
  op->count = count;
  op->type = MPI_DOUBLE;
  op->what = "sum of statistics";
  impl_->run_now(op);
}

void MpiCommunicator::barrier() {
  auto op = std::make_shared<Impl::Op>();
  op->kind = Impl::Kind::Barrier;
  op->what = "barrier";
  impl_->run_now(op);
}

void MpiCommunicator::abort(const std::string& why) noexcept {
  try {
    Impl& c = *impl_;
    {
      std::lock_guard<std::mutex> lk(c.mu);
      // Already stopped by another rank's notice (or a timeout that sent its own): nothing to add.
      if (c.abort_requested || c.stop || c.broken) return;
      c.abort_why = cat(c.self, " failed: ", why);
    }
    c.abort_requested = true;
    // An operation in flight sends the notices from its wait; an idle thread runs this one.
    auto op = std::make_shared<Impl::Op>();
    op->kind = Impl::Kind::Notify;
    {
      std::lock_guard<std::mutex> lk(c.mu);
      c.queue.push_back(op);
    }
    c.cv.notify_all();
    std::unique_lock<std::mutex> lk(c.mu);
    c.done_cv.wait_for(lk, std::chrono::seconds(3), [&] { return op->done; });
  } catch (...) {
  }
}

std::string MpiCommunicator::failure() const { return impl_->failure_text(); }
bool MpiCommunicator::failed() const { return impl_->broken; }

}  // namespace hpcnn::distribute::mpi
