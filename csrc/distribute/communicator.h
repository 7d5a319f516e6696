// The one small interface every transport of data parallelism implements: one replica's end of
// a group of replicas that sum their gradients.
//
//   HostCommunicator  (distribute/host_group.h)  replicas in one process (MirroredStrategy on
//                                                CPUs, or GPUs without NCCL): a rendezvous of
//                                                threads, summed in replica order
//   MpiCommunicator   (distribute/mpi.h)         one replica per MPI rank: MPI collectives on a
//                                                communication thread
//   NcclCommunicator  (distribute/nccl.h)        one replica per GPU: NCCL on a stream of its own,
//                                                ordered after the compute stream by events; host
//                                                values go through a host or MPI partner
//
// Every call is collective: all replicas make the same calls in the same order. Every
// implementation gives all replicas the same bits, in a reduction order fixed for a given replica
// count (repeated runs repeat bit for bit). A replica that fails calls abort(): the others' pending
// and later calls then throw PeerFailure naming it, within the poll interval of their wait (never
// a hang); a call that waits longer than the group's timeout throws too.
#pragma once

#include <cstddef>
#include <string>

#include "core/errors.h"
#include "core/tensor.h"

namespace hpcnn::distribute {

// Another replica failed, or the group was aborted: RuntimeError in Python, naming the replica.
struct PeerFailure : BackendError {
  using BackendError::BackendError;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual std::string transport() const = 0;  // "host", "mpi", "nccl"
  virtual int rank() const = 0;               // this replica's index among all of them
  virtual int size() const = 0;               // replicas in the group

  // float32 on this replica's device (a view of the gradient buffer), summed in place.
  virtual void allreduce_sum(const Tensor& buf) = 0;
  // The same sum, started now; wait_all() returns when every started one has finished (and, on a
  // GPU, work enqueued on the compute stream afterwards sees the sums). The buffer must not be
  // touched in between. Transports that cannot overlap do the sum here.
  virtual void start_allreduce_sum(const Tensor& buf) { allreduce_sum(buf); }
  virtual void wait_all() {}
  // float32 (on this replica's device) or uint8 (host) from replica `root` to every replica.
  virtual void broadcast(const Tensor& buf, int root) = 0;
  // Host doubles summed in place: statistics and agreement checks.
  virtual void allreduce_sum_host(double* values, int count) = 0;
  virtual void barrier() = 0;
  // Stops the group: this replica's pending calls and every replica's later ones throw
  // PeerFailure carrying `why` (which should name this replica). Never blocks for long, never throws.
  virtual void abort(const std::string& why) noexcept = 0;
  // Whether the group has failed (a notice, a timeout, an abort): for waits outside the
  // transport's own calls (a GPU stream's), which must stop too.
  virtual bool failed() const = 0;
  // Why the group failed, as this replica heard it ("" while healthy, or when it cannot tell): for
  // the errors of waits outside the transport's own calls.
  virtual std::string failure() const { return ""; }
  // After a failure of replicas of this process only (a bad batch on one replica's thread): makes
  // the group usable again once every replica has left its calls. False when it cannot be (an MPI
  // group, whose other ranks were told to stop; an NCCL communicator that had to be aborted).
  virtual bool reset_after_failure() { return false; }
};

}  // namespace hpcnn::distribute
