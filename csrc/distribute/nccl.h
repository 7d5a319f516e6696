// NCCL, the GPU transport of data parallelism. This header has no NCCL or CUDA types:
// nccl_communicator.cu implements it (CUDA backend and HPCNN_NCCL built), nccl_absent.cpp stands
// in otherwise (then GPU replicas are summed through host memory, by the host or MPI transport).
//
// A NcclCommunicator sums on a CUDA stream of its own: the compute stream records an event that
// the NCCL stream waits for, so a bucket's sum starts right after the kernels that wrote it and
// runs while later backward kernels run on the compute stream; wait_all records an event after
// the sums, polls it from the host (so that a failed peer, an NCCL error or the timeout stop the
// wait: ncclCommAbort frees the GPU from a collective that can never finish), and makes the
// compute stream wait for it, so the optimizer sees the sums. Host values (statistics, barriers)
// go through the host partner: the HostGroup of the process's replicas, or MPI between ranks.
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

// The GPUs of one process (MirroredStrategy): ncclCommInitAll over `devices`, one endpoint per
// device, each with its host partner (same order).
std::vector<std::unique_ptr<Communicator>> in_process(const std::vector<int>& devices,
                                                      std::vector<std::unique_ptr<Communicator>> host_partners,
                                                      double timeout_s);
// One GPU per MPI rank (MultiWorkerMirroredStrategy): rank 0's unique id broadcast over MPI,
// then ncclCommInitRank on `device`.
std::unique_ptr<Communicator> across_processes(int device, std::unique_ptr<mpi::MpiCommunicator> host,
                                               double timeout_s);

}  // namespace hpcnn::distribute::nccl
