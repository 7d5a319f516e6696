// The heartbeat of the MPI transport's ranks, as bookkeeping (no MPI here; distribute/mpi.cpp sends
// and receives the messages on its communication thread).
//
// Why: a rank killed without a word (SIGKILL from the out-of-memory killer, a node that fails)
// sends no failure notice, so the others would wait inside a collective until its timeout (600 s
// by default). A shorter timeout would also end healthy jobs whose steps are slow. So every rank's
// communication thread, which is idle or waiting while the computation runs, sends a one-byte
// message to its two neighbours on a ring (rank r to r-1 and r+1) every `interval_s()` and notes
// when each neighbour's last one arrived; a neighbour silent for longer than the limit is lost,
// however long a step takes (a slow step still heartbeats: the thread does not compute). The ring
// keeps the messages and connections per rank at two for any rank count; the rank that notices a
// loss tells every other one (distribute/mpi.cpp's failure notice names the lost rank). A rank that
// leaves normally says goodbye first, so a neighbour that works on alone is not taken for lost.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace hpcnn::distribute {

class Heartbeat {
 public:
  using Clock = std::chrono::steady_clock;

  // limit_s <= 0 or a single rank: off (nothing is sent or watched).
  Heartbeat(int rank, int size, double limit_s, Clock::time_point now = Clock::now())
      : limit_s_(size > 1 && limit_s > 0 ? limit_s : 0.0),
        last_seen_(static_cast<size_t>(std::max(size, 1)), now),
        gone_(static_cast<size_t>(std::max(size, 1)), 0) {
    if (limit_s_ <= 0) return;
    for (int p : {(rank + size - 1) % size, (rank + 1) % size})
      if (p != rank && std::find(peers_.begin(), peers_.end(), p) == peers_.end()) peers_.push_back(p);
    // Six beats per limit (at most 5 s apart): a late beat or two is no loss.
    interval_ = std::chrono::duration<double>(std::clamp(limit_s_ / 6.0, 0.02, 5.0));
    next_send_ = now;
  }

  bool on() const { return limit_s_ > 0; }
  double limit_s() const { return limit_s_; }
  double interval_s() const { return interval_.count(); }
  const std::vector<int>& peers() const { return peers_; }  // the ranks watched and beaten to

  // True at most once per interval: time to send the beats.
  bool send_due(Clock::time_point now) {
    if (!on() || now < next_send_) return false;
    next_send_ = now + std::chrono::duration_cast<Clock::duration>(interval_);
    return true;
  }
  void heard(int peer, Clock::time_point now) { last_seen_.at(static_cast<size_t>(peer)) = now; }
  // The peer left normally (its goodbye) or was lost: no longer watched.
  void forget(int peer) { gone_.at(static_cast<size_t>(peer)) = 1; }
  bool gone(int peer) const { return gone_.at(static_cast<size_t>(peer)) != 0; }

  // The first watched peer silent for longer than the limit (-1 if none), and for how long.
  int silent_peer(Clock::time_point now, double* silent_s) const {
    for (int p : peers_) {
      if (gone(p)) continue;
      const double s = std::chrono::duration<double>(now - last_seen_[static_cast<size_t>(p)]).count();
      if (s > limit_s_) {
        if (silent_s) *silent_s = s;
        return p;
      }
    }
    return -1;
  }

 private:
  double limit_s_ = 0;
  std::vector<int> peers_;
  std::vector<Clock::time_point> last_seen_;
  std::vector<char> gone_;
  std::chrono::duration<double> interval_{1.0};
  Clock::time_point next_send_{};
};

}  // namespace hpcnn::distribute
