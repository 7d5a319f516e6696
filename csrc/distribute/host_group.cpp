#include "distribute/host_group.h"

#include <chrono>
#include <cstring>

#include "core/thread_pool.h"

namespace hpcnn::distribute {

namespace {

// ((b0 + b1) + b2) + ... for every element, written to every member's buffer: one fixed order.
template <typename T>
void sum_into_all(const std::vector<void*>& ptrs, long long count) {
  parallel_for(count, [&](long long b, long long e, int) {
    T* first = static_cast<T*>(ptrs[0]);
    for (size_t r = 1; r < ptrs.size(); ++r) {
      const T* other = static_cast<const T*>(ptrs[r]);
      for (long long i = b; i < e; ++i) first[i] += other[i];
    }
    for (size_t r = 1; r < ptrs.size(); ++r)
      std::memcpy(static_cast<T*>(ptrs[r]) + b, first + b, sizeof(T) * static_cast<size_t>(e - b));
  }, 1 << 14);
}

}  // namespace

HostGroup::HostGroup(int members, double timeout_s)
    : members_(members), timeout_s_(timeout_s), ptrs_(static_cast<size_t>(members), nullptr) {
  HPCNN_CHECK_ARG(members >= 1, "a group needs at least one replica, got ", members);
}

bool HostGroup::failed() const {
  std::lock_guard<std::mutex> lk(mutex_);
  return !failure_.empty();
}

std::string HostGroup::failure() const {
  std::lock_guard<std::mutex> lk(mutex_);
  return failure_;
}

void HostGroup::rendezvous(int member, void* ptr, const char* what,
                           const std::function<void(const std::vector<void*>&)>& combine) {
  std::unique_lock<std::mutex> lk(mutex_);
  if (!failure_.empty()) throw PeerFailure(failure_);
  const unsigned long long gen = generation_;
  ptrs_[member] = ptr;
  if (++arrived_ == members_) {
    try {
      combine(ptrs_);  // the others wait on the condition variable: the buffers are ours meanwhile
    } catch (const std::exception& e) {
      failure_ = cat("replica ", member, " failed while combining a ", what, ": ", e.what());
    }
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    if (!failure_.empty()) throw PeerFailure(failure_);
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
  while (generation_ == gen && failure_.empty()) {
    if (cv_.wait_until(lk, deadline) == std::cv_status::timeout && generation_ == gen && failure_.empty()) {
      failure_ = cat("a ", what, " timed out after ", timeout_s_, " s: ", members_ - arrived_, " of ", members_,
                     " replicas did not arrive (a replica hangs; see the other errors)");
      cv_.notify_all();
    }
  }
  if (generation_ == gen) throw PeerFailure(failure_);  // failed before the sum was done
}

void HostGroup::allreduce_sum(int member, float* data, long long count) {
  rendezvous(member, data, "gradient sum", [count](const std::vector<void*>& p) { sum_into_all<float>(p, count); });
}

void HostGroup::allreduce_sum(int member, double* data, long long count) {
  rendezvous(member, data, "sum", [count](const std::vector<void*>& p) { sum_into_all<double>(p, count); });
}

void HostGroup::broadcast(int member, void* data, size_t bytes, int root) {
  HPCNN_CHECK_ARG(root >= 0 && root < members_, "broadcast: root ", root, " is not a replica of ", members_);
  rendezvous(member, data, "broadcast", [bytes, root](const std::vector<void*>& p) {
    for (size_t r = 0; r < p.size(); ++r)
      if (static_cast<int>(r) != root) std::memcpy(p[r], p[root], bytes);
  });
}

void HostGroup::barrier(int member) {
  rendezvous(member, nullptr, "barrier", [](const std::vector<void*>&) {});
}

void HostGroup::abort(int member, const std::string& why) noexcept {
  try {
    std::lock_guard<std::mutex> lk(mutex_);
    if (failure_.empty()) failure_ = why.empty() ? cat("replica ", member, " failed") : why;
  } catch (...) {
  }
  cv_.notify_all();
}

void HostGroup::reset() {
  std::lock_guard<std::mutex> lk(mutex_);
  failure_.clear();
  arrived_ = 0;
  ++generation_;
  std::fill(ptrs_.begin(), ptrs_.end(), nullptr);
}

// ------------------------------------------------------------------ one replica's end
HostCommunicator::HostCommunicator(std::shared_ptr<HostGroup> group, int member, Device device)
    : group_(std::move(group)), member_(member), device_(device) {}

void HostCommunicator::allreduce_sum(const Tensor& buf) {
  HPCNN_CHECK_ARG(buf.dtype() == DType::F32, "allreduce: float32 buffers only, got ", dtype_name(buf.dtype()));
  if (buf.device().is_cpu()) {
    group_->allreduce_sum(member_, buf.f32(), buf.numel());
    return;
  }
  Tensor host = buf.to(Device::cpu());  // a GPU buffer without NCCL: summed on the host
  group_->allreduce_sum(member_, host.f32(), host.numel());
  Tensor(buf).copy_from(host);
}

void HostCommunicator::broadcast(const Tensor& buf, int root) {
  if (buf.device().is_cpu()) {
    group_->broadcast(member_, buf.raw(), buf.nbytes(), root);
    return;
  }
  Tensor host = buf.to(Device::cpu());
  group_->broadcast(member_, host.raw(), host.nbytes(), root);
  Tensor(buf).copy_from(host);
}

void HostCommunicator::allreduce_sum_host(double* values, int count) { group_->allreduce_sum(member_, values, count); }

void HostCommunicator::barrier() { group_->barrier(member_); }

void HostCommunicator::abort(const std::string& why) noexcept { group_->abort(member_, why); }

}  // namespace hpcnn::distribute
