// NCCL's stand-ins in a build without it (see nccl.h): GPU replicas are then summed through host
// memory by the host or MPI transport.
#include "distribute/nccl.h"

namespace hpcnn::distribute::nccl {

namespace {
const char* kWhy =
    "this hpcnn was built without NCCL (it needs the CUDA backend and nccl.h/libnccl, which CUDA toolkits and "
    "conda-forge's `nccl` provide; rebuild with `HPCNN_NCCL=ON pip install .`)";
}  // namespace

bool compiled() { return false; }
std::string version() { return ""; }
std::string unavailable_reason() { return kWhy; }

std::vector<std::unique_ptr<Communicator>> in_process(const std::vector<int>&, std::vector<std::unique_ptr<Communicator>>,
                                                      double) {
  throw BackendError(kWhy);
}

std::unique_ptr<Communicator> across_processes(int, std::unique_ptr<mpi::MpiCommunicator>, double) {
  throw BackendError(kWhy);
}

void inject_async_error(int) { throw BackendError(kWhy); }
void inject_setup_failure(int) { throw BackendError(kWhy); }

}  // namespace hpcnn::distribute::nccl
