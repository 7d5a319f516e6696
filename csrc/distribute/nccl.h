// NCCL, the GPU transport of data parallelism. This header has no NCCL or CUDA types:
// nccl_communicator.cu implements it (CUDA backend and HPCNN_NCCL built), nccl_absent.cpp stands
// in otherwise (then GPU replicas are summed through host memory, by the host or MPI transport).
//
// Setup: the communicators are non-blocking (ncclCommInitRankConfig with blocking = 0), created in
// one group call per process and connected by warm-up sums (one float and 4 MiB), also in one
// group call, before the strategy exists: NCCL connects lazily, and a replica that failed before
// its first gradient bucket would otherwise leave the others inside a host call that no timeout
// reaches. Each phase is polled (ncclCommGetAsyncError) together with the host partner's failure
// notices and the group's timeout; on a failure every communicator of the process is aborted
// (ncclCommAbort) and the error names the devices, the rank, the phase and the timeout setting.
//
// A NcclCommunicator sums on a CUDA stream of its own: the compute stream records an event that
// the NCCL stream waits for, so a bucket's sum starts right after the kernels that wrote it and
// runs while later backward kernels run on the compute stream. An enqueue that returns
// ncclInProgress is polled the same way until NCCL has launched it. wait_all records an event
// after the sums, polls it from the host (so that a failed peer, an NCCL error or the timeout stop
// the wait: ncclCommAbort frees the GPU from a collective that can never finish), and makes the
// compute stream wait for it, so the optimizer sees the sums. Before the device's workspace or
// scratch grows mid-backward (cudaFree/cudaMalloc may wait for every stream of the device), the
// communicator's growth guard (core/cuda_async.h) waits the same way for the sums in flight.
// Host values (statistics, barriers) go through the host partner: the HostGroup of the process's
// replicas, or MPI between ranks.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "distribute/communicator.h"
#include "distribute/mpi.h"

namespace hpcnn::distribute::nccl {

bool compiled();
std::string version();             // the NCCL library's version ("2.28.3"), "" when not built
std::string unavailable_reason();  // "" when NCCL can be used

// The GPUs of one process (MirroredStrategy): one unique id, ncclCommInitRankConfig per device in
// one group call, connected; one endpoint per device, each with its host partner (same order).
std::vector<std::unique_ptr<Communicator>> in_process(const std::vector<int>& devices,
                                                      std::vector<std::unique_ptr<Communicator>> host_partners,
                                                      double timeout_s);
// One GPU per MPI rank (MultiWorkerMirroredStrategy): rank 0's unique id broadcast over MPI,
// then ncclCommInitRankConfig on `device`, connected. A failure here is told to the other ranks
// (their setup then stops too, within the timeout at worst).
std::unique_ptr<Communicator> across_processes(int device, std::unique_ptr<mpi::MpiCommunicator> host,
                                               double timeout_s);

// Test-only (hpcnn._core.distribute.inject_nccl_async_error): the NCCL communicator of global
// replica `replica` in this process reports ncclSystemError, as ncclCommGetAsyncError would after
// a network failure, at its next wait for a gradient sum (once). BackendError without NCCL.
void inject_async_error(int replica);
// Test-only (hpcnn._core.distribute.inject_nccl_setup_failure): the next across_processes on MPI
// rank `rank` of this process fails after the unique id arrived, before its communicator exists
// (a rank that dies before NCCL's init: the others must stop within the timeout, not hang).
void inject_setup_failure(int rank);

}  // namespace hpcnn::distribute::nccl
