// The MPI transport's communication thread (distribute/mpi_transport.h: MpiCommunicator::Impl):
// every MPI call of a group runs here, taken from a queue; while it waits it watches for failure
// notices, a local abort, the timeout and the heartbeat of its ring neighbours; at exit it says
// goodbye, or after a failure runs the exit protocol. Built only with HPCNN_MPI.
#include "distribute/mpi_transport.h"

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "core/warnings.h"

namespace hpcnn::distribute::mpi {

void MpiCommunicator::Impl::loop() {
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

void MpiCommunicator::Impl::run(Op& op) {
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

void MpiCommunicator::Impl::wait(MPI_Request& req, const char* what) {
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

void MpiCommunicator::Impl::probe_notice() {
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

std::string MpiCommunicator::Impl::receive_notice(const MPI_Status& st, int* lost_rank) {
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

void MpiCommunicator::Impl::say(const std::string& line) {
  std::fprintf(stderr, "hpcnn: %s\n", line.c_str());
  std::fflush(stderr);
}

void MpiCommunicator::Impl::send_notices(int lost_rank) {
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

void MpiCommunicator::Impl::heartbeat_tick() {
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

void MpiCommunicator::Impl::send_beats(const char& what) {
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

void MpiCommunicator::Impl::say_goodbye() noexcept {
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

void MpiCommunicator::Impl::stop_thread() {
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

void MpiCommunicator::Impl::exit_protocol() noexcept {
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

}  // namespace hpcnn::distribute::mpi
