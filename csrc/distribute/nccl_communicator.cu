// The NCCL transport (see nccl.h). Built only with the CUDA backend and HPCNN_NCCL.
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "core/cuda_context.h"
#include "core/cuda_runtime.h"
#include "distribute/nccl.h"

namespace hpcnn::distribute::nccl {

namespace {

#define HPCNN_NCCL_CHECK(call)                                                                        \
  do {                                                                                                \
    const ncclResult_t hpcnn_nccl_ = (call);                                                          \
    if (hpcnn_nccl_ != ncclSuccess)                                                                   \
      throw ::hpcnn::BackendError(::hpcnn::cat(#call, " failed: ", ncclGetErrorString(hpcnn_nccl_), \
                                               " [", __FILE__, ":", __LINE__, "]"));                \
  } while (0)

using Clock = std::chrono::steady_clock;

// The NCCL stream (non-blocking: the synchronous copies on the legacy default stream must not
// wait for a collective) and the two events that order it with the compute stream.
struct CommStream {
  cudaStream_t stream = nullptr;
  cudaEvent_t ready = nullptr, done = nullptr;
  int device = 0;
  explicit CommStream(int dev) : device(dev) {
    cuda::ContextLock ctx(dev);  // the device current for the calls below
    HPCNN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    HPCNN_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    HPCNN_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  }
  ~CommStream() {
    cudaSetDevice(device);
    if (done) cudaEventDestroy(done);
    if (ready) cudaEventDestroy(ready);
    if (stream) cudaStreamDestroy(stream);
  }
  CommStream(const CommStream&) = delete;
  CommStream& operator=(const CommStream&) = delete;
};

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, int device, int rank, int size, std::unique_ptr<Communicator> host,
                   double timeout_s)
      : comm_(comm), device_(device), rank_(rank), size_(size), host_(std::move(host)), timeout_s_(timeout_s),
        streams_(device) {}

  ~NcclCommunicator() override {
    cudaSetDevice(device_);
    if (aborted_) return;  // ncclCommAbort freed it
    if (in_flight_) ncclCommAbort(comm_);
    else ncclCommDestroy(comm_);
  }

  std::string transport() const override { return "nccl"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void start_allreduce_sum(const Tensor& buf) override {
    check_buffer(buf, "allreduce");
    enqueue_after_compute();
    HPCNN_NCCL_CHECK(ncclAllReduce(buf.raw(), buf.raw(), static_cast<size_t>(buf.numel()), ncclFloat32, ncclSum,
                                   comm_, streams_.stream));
    in_flight_ = true;
  }

  void allreduce_sum(const Tensor& buf) override {
    start_allreduce_sum(buf);
    wait_all();
  }

  void wait_all() override {
    if (!in_flight_) return;
    {
      cuda::ContextLock ctx(device_);  // makes device_ current for this thread, too
      HPCNN_CUDA_CHECK(cudaEventRecord(streams_.done, streams_.stream));
    }
    // Polled without the context's lock: other threads may use the device meanwhile.
    const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s_);
    int spins = 0;
    for (;;) {
      const cudaError_t q = cudaEventQuery(streams_.done);
      if (q == cudaSuccess) break;
      if (q != cudaErrorNotReady) HPCNN_CUDA_CHECK(q);
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm_, &async);
      if (async != ncclSuccess && async != ncclInProgress)
        fail(cat("NCCL reported ", ncclGetErrorString(async), " on gpu:", device_));
      if (abort_requested_ || host_->failed()) fail(cat("the group stopped while gpu:", device_, " waited for NCCL"));
      if (Clock::now() > deadline)
        fail(cat("an NCCL gradient sum on gpu:", device_, " did not finish within ", timeout_s_,
                 " s (a replica was killed or is stuck; timeout_seconds sets the limit)"));
      if (++spins > 200) std::this_thread::sleep_for(std::chrono::microseconds(spins > 2000 ? 200 : 20));
    }
    in_flight_ = false;
    // The optimizer (compute stream) runs after the sums.
    cuda::ContextLock ctx(device_);
    HPCNN_CUDA_CHECK(cudaStreamWaitEvent(ctx.stream(), streams_.done, 0));
  }

  void broadcast(const Tensor& buf, int root) override {
    if (buf.device().is_cpu()) {
      host_->broadcast(buf, root);
      return;
    }
    check_buffer(buf, "broadcast");
    enqueue_after_compute();
    HPCNN_NCCL_CHECK(ncclBroadcast(buf.raw(), buf.raw(), static_cast<size_t>(buf.numel()), ncclFloat32, root, comm_,
                                   streams_.stream));
    in_flight_ = true;
    wait_all();
  }

  void allreduce_sum_host(double* values, int count) override { host_->allreduce_sum_host(values, count); }
  void barrier() override { host_->barrier(); }

  void abort(const std::string& why) noexcept override {
    abort_requested_ = true;  // the thread waiting on the GPU aborts the communicator itself
    host_->abort(why);
  }
  bool failed() const override { return aborted_ || abort_requested_ || host_->failed(); }
  bool reset_after_failure() override {
    if (aborted_ || in_flight_) return false;  // an aborted communicator is gone for good
    abort_requested_ = false;
    return host_->reset_after_failure();
  }

 private:
  void check_buffer(const Tensor& buf, const char* what) {
    if (aborted_) throw PeerFailure(cat("NCCL on gpu:", device_, " was aborted after a failure: create a new strategy"));
    HPCNN_CHECK_ARG(buf.dtype() == DType::F32 && buf.device().is_cuda() && buf.device().index == device_, "NCCL ",
                    what, ": a float32 buffer on gpu:", device_, " is needed, got ", buf.str());
  }

  // The NCCL stream waits for everything enqueued on the compute stream so far.
  void enqueue_after_compute() {
    cuda::ContextLock ctx(device_);
    HPCNN_CUDA_CHECK(cudaEventRecord(streams_.ready, ctx.stream()));
    HPCNN_CUDA_CHECK(cudaStreamWaitEvent(streams_.stream, streams_.ready, 0));
  }

  [[noreturn]] void fail(const std::string& why) {
    ncclCommAbort(comm_);  // frees the GPU from the collective that cannot finish
    aborted_ = true;
    in_flight_ = false;
    host_->abort(cat("rank ", rank_, ": ", why));
    throw PeerFailure(why);
  }

  ncclComm_t comm_;
  int device_, rank_, size_;
  std::unique_ptr<Communicator> host_;
  double timeout_s_;
  CommStream streams_;
  bool in_flight_ = false;
  std::atomic<bool> aborted_{false}, abort_requested_{false};
};

}  // namespace

bool compiled() { return true; }

std::string version() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess || v <= 0) return cat(NCCL_MAJOR, ".", NCCL_MINOR, ".", NCCL_PATCH);
  // NCCL_VERSION(X, Y, Z) = X * 10000 + Y * 100 + Z since 2.9 (X * 1000 + Y * 100 + Z before)
  if (v >= 10000) return cat(v / 10000, ".", (v / 100) % 100, ".", v % 100);
  return cat(v / 1000, ".", (v / 100) % 10, ".", v % 100);
}

std::string unavailable_reason() { return ""; }

std::vector<std::unique_ptr<Communicator>> in_process(const std::vector<int>& devices,
                                                      std::vector<std::unique_ptr<Communicator>> host_partners,
                                                      double timeout_s) {
  const int n = static_cast<int>(devices.size());
  HPCNN_CHECK_ARG(n >= 1 && host_partners.size() == devices.size(), "NCCL: one host partner per device is needed");
  for (int d : devices) cuda::require_device(d);
  std::vector<ncclComm_t> comms(static_cast<size_t>(n), nullptr);
  HPCNN_NCCL_CHECK(ncclCommInitAll(comms.data(), n, devices.data()));
  std::vector<std::unique_ptr<Communicator>> out;
  for (int i = 0; i < n; ++i)
    out.push_back(std::make_unique<NcclCommunicator>(comms[static_cast<size_t>(i)], devices[static_cast<size_t>(i)],
                                                     i, n, std::move(host_partners[static_cast<size_t>(i)]), timeout_s));
  return out;
}

std::unique_ptr<Communicator> across_processes(int device, std::unique_ptr<mpi::MpiCommunicator> host,
                                               double timeout_s) {
  cuda::require_device(device);
  const int rank = host->rank(), size = host->size();
  host->barrier();  // every rank is here (with the timeout and failure notices): none will miss the init
  ncclUniqueId id;
  if (rank == 0) HPCNN_NCCL_CHECK(ncclGetUniqueId(&id));
  host->broadcast_bytes(&id, sizeof(id), 0);
  ncclComm_t comm = nullptr;
  {
    cuda::ContextLock ctx(device);
    HPCNN_NCCL_CHECK(ncclCommInitRank(&comm, size, id, rank));
  }
  return std::make_unique<NcclCommunicator>(comm, device, rank, size, std::move(host), timeout_s);
}

}  // namespace hpcnn::distribute::nccl
