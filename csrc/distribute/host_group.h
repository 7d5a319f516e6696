// Replicas in one process (MirroredStrategy(["cpu", "cpu"]), or GPUs when NCCL is not built): the
// host transport. Each replica runs on its own thread (distribute/replica_set.h); a collective is a
// rendezvous of those threads. The last replica to arrive combines every replica's buffer in
// replica order (sum = ((b0 + b1) + b2) + ..., the same bits at every step and on every replica)
// and all leave with the result. Buffers on a GPU are copied to the host and back (NCCL does the
// GPU case without the detour when it is built).
//
// A replica that fails aborts the group: every replica waiting in, or later entering, a
// collective throws PeerFailure naming it. A replica that does not arrive within the timeout
// fails the collective the same way. reset() makes the group usable again once every replica has
// left its call (the replica set does it after joining its threads).
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "distribute/communicator.h"

namespace hpcnn::distribute {

class HostGroup {
 public:
  HostGroup(int members, double timeout_s);
  int size() const { return members_; }

  void allreduce_sum(int member, float* data, long long count);
  void allreduce_sum(int member, double* data, long long count);
  void broadcast(int member, void* data, size_t bytes, int root);
  void barrier(int member);
  void abort(int member, const std::string& why) noexcept;
  void reset();
  bool failed() const;
  std::string failure() const;  // why it failed ("" while healthy)

 private:
  // Every member deposits `ptr`; the last to arrive runs combine(pointers of all members, in
  // member order); all return when it is done (or throw when the group failed).
  void rendezvous(int member, void* ptr, const char* what,
                  const std::function<void(const std::vector<void*>&)>& combine);

  const int members_;
  const double timeout_s_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<void*> ptrs_;
  int arrived_ = 0;
  unsigned long long generation_ = 0;
  std::string failure_;  // non-empty: the group failed (why)
};

// One replica's end of a HostGroup.
class HostCommunicator : public Communicator {
 public:
  HostCommunicator(std::shared_ptr<HostGroup> group, int member, Device device);
  std::string transport() const override { return "host"; }
  int rank() const override { return member_; }
  int size() const override { return group_->size(); }
  void allreduce_sum(const Tensor& buf) override;
  void broadcast(const Tensor& buf, int root) override;
  void allreduce_sum_host(double* values, int count) override;
  void barrier() override;
  void abort(const std::string& why) noexcept override;
  bool failed() const override { return group_->failed(); }
  std::string failure() const override { return group_->failure(); }
  bool reset_after_failure() override {
    group_->reset();
    return true;
  }

 private:
  std::shared_ptr<HostGroup> group_;
  int member_;
  Device device_;
};

}  // namespace hpcnn::distribute
