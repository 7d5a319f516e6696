// MPI without MPI: the stand-ins of a build without HPCNN_MPI (see mpi.h). Every call that would
// need MPI says how to get a build that has it.
#include "distribute/mpi.h"

namespace hpcnn::distribute::mpi {

namespace {
const char* kWhy =
    "this hpcnn was built without MPI, so MultiWorkerMirroredStrategy cannot run: install an MPI "
    "(Debian: apt-get install libopenmpi-dev openmpi-bin; conda: conda install -c conda-forge openmpi) and "
    "rebuild with `HPCNN_MPI=ON pip install .` (MirroredStrategy, one process, works without MPI)";
[[noreturn]] void no_mpi() { throw BackendError(kWhy); }
}  // namespace

bool compiled() { return false; }
std::string library_version() { return ""; }
std::string standard_version() { return ""; }
std::string unavailable_reason() { return kWhy; }
World init() { no_mpi(); }
bool initialized() { return false; }
std::vector<std::string> allgather(const std::string&, double) { no_mpi(); }
void shutdown() noexcept {}

struct MpiCommunicator::Impl {};
MpiCommunicator::MpiCommunicator(Device, double, double) { no_mpi(); }
MpiCommunicator::~MpiCommunicator() = default;
int MpiCommunicator::rank() const { return 0; }
int MpiCommunicator::size() const { return 1; }
void MpiCommunicator::allreduce_sum(const Tensor&) { no_mpi(); }
void MpiCommunicator::start_allreduce_sum(const Tensor&) { no_mpi(); }
void MpiCommunicator::wait_all() {}
void MpiCommunicator::broadcast(const Tensor&, int) { no_mpi(); }
void MpiCommunicator::broadcast_bytes(void*, size_t, int) { no_mpi(); }
void MpiCommunicator::allreduce_sum_host(double*, int) { no_mpi(); }
void MpiCommunicator::barrier() { no_mpi(); }
void MpiCommunicator::abort(const std::string&) noexcept {}
std::string MpiCommunicator::failure() const { return ""; }
bool MpiCommunicator::failed() const { return false; }

}  // namespace hpcnn::distribute::mpi
