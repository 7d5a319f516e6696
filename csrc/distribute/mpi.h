// MPI as hpcnn uses it: the process environment (initialisation, ranks, finalisation) and the
// MPI transport of data parallelism. This header has no MPI types: mpi.cpp implements it with MPI
// (HPCNN_MPI built), mpi_absent.cpp without (every call explains how to get a build with MPI).
//
// Initialisation: hpcnn calls MPI_Init_thread itself (MPI_THREAD_MULTIPLE asked), or uses MPI as
// mpi4py (or the application) initialised it. The MPI transport runs every MPI call of hpcnn on
// one communication thread, so it needs MPI_THREAD_SERIALIZED at least; with MPI_THREAD_MULTIPLE
// that thread also watches for failure notices while it is idle.
//
// Failures: a rank that fails (MpiCommunicator::abort) sends a notice, naming itself and why, to
// every other rank; a rank that is waiting for a collective polls for notices and throws
// PeerFailure("rank 1 failed: ...") at once. A rank killed without a word (SIGKILL) is found by
// the heartbeat (distribute/heartbeat.h): the communication threads of ring neighbours exchange a
// byte every limit/6 s, and a neighbour silent for the limit (HPCNN_DIST_HEARTBEAT, default 30 s)
// is lost: the rank that notices prints it on stderr at once and sends every other rank a notice
// naming the lost rank; each rank raises PeerFailure ("... lost rank 2 (host, pid): no heartbeat
// for 30.2 s ...") in its current collective, or at its next one when it is computing (the
// news is on stderr at once). At exit (shutdown(), which hpcnn registers with Python's atexit),
// a rank whose group failed does not call MPI_Finalize (which would wait for the dead
// collective): every live rank tells every other one that it is exiting, once its error is
// printed, waits up to 10 s to hear the same from all of them, then MPI_Abort ends the job.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "distribute/communicator.h"

namespace hpcnn::distribute::mpi {

bool compiled();                  // built with MPI (HPCNN_MPI)?
std::string library_version();    // MPI_Get_library_version, first line ("Open MPI v4.1.4, ...")
std::string standard_version();   // the MPI standard of the headers, "3.1"
// Why a multi-worker run is impossible in this build ("" when it is possible).
std::string unavailable_reason();

struct World {
  int rank = 0, size = 1;            // in MPI_COMM_WORLD
  int local_rank = 0, local_size = 1;  // among the ranks of this node (MPI_COMM_TYPE_SHARED)
  std::string host;                  // MPI_Get_processor_name
  std::string thread_level;          // "multiple", "serialized", ...
  bool initialized_by_hpcnn = false;
};
// Initialises MPI if nobody has (idempotent); RuntimeError when the thread level is below
// MPI_THREAD_SERIALIZED (saying how to ask mpi4py for more) or MPI was finalised already.
World init();
bool initialized();
// Every rank's string, in rank order (an init-time allgather, with a timeout).
std::vector<std::string> allgather(const std::string& mine, double timeout_s);
// At exit: finalises MPI if hpcnn initialised it; after a failure, acknowledges notices and ends
// the job with MPI_Abort instead (see above). Never throws.
void shutdown() noexcept;

// One replica per MPI rank. `device`: where this rank's gradient buffer lives (a GPU's buffer is
// summed through host memory; NCCL does it directly when built, see nccl.h, unless ranks share
// a GPU: distribute/group.h).
class MpiCommunicator : public Communicator {
 public:
  // heartbeat_s: a peer silent that long is lost (0: no heartbeat; needs MPI_THREAD_MULTIPLE).
  // Collective (gathers every rank's name for the messages).
  MpiCommunicator(Device device, double timeout_s, double heartbeat_s);
  ~MpiCommunicator() override;
  std::string transport() const override { return "mpi"; }
  int rank() const override;
  int size() const override;
  void allreduce_sum(const Tensor& buf) override;
  void start_allreduce_sum(const Tensor& buf) override;
  void wait_all() override;
  void broadcast(const Tensor& buf, int root) override;
  void allreduce_sum_host(double* values, int count) override;
  void barrier() override;
  void abort(const std::string& why) noexcept override;
  bool failed() const override;
  // Raw bytes from `root` (the NCCL unique id).
  void broadcast_bytes(void* data, size_t bytes, int root);
  // The failure that broke the group ("" while healthy): for waits outside MPI (NCCL's).
  std::string failure() const override;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace hpcnn::distribute::mpi
