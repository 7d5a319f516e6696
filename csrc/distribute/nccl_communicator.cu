// The NCCL transport (see nccl.h). Built only with the CUDA backend and HPCNN_NCCL.
//
// Every communicator is non-blocking (ncclConfig_t::blocking = 0): no NCCL call waits inside the
// library for a peer. Initialisation, the connections and each enqueue may return ncclInProgress;
// we then poll ncclCommGetAsyncError, and between polls look at the host partner (a peer's failure
// notice, an abort) and the deadline, so that a peer that never arrives ends the wait within the
// group's timeout and ncclCommAbort frees this GPU. NCCL's rule for such communicators: after
// ncclInProgress, no other NCCL call and no work on NCCL's stream until the state is ncclSuccess.
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <utility>

#include "core/cuda_async.h"
#include "core/cuda_context.h"
#include "core/cuda_runtime.h"
#include "distribute/nccl.h"
#include "distribute/nccl_handles.h"

namespace hpcnn::distribute::nccl {

namespace {

const char* kTimeoutHint =
    "timeout_seconds of hpcnn.distribute.CommunicationOptions or HPCNN_DIST_TIMEOUT set the limit";

std::atomic<int> g_injected_async_error{-1};  // inject_async_error's replica, -1: none
std::atomic<int> g_injected_setup_failure{-1};  // inject_setup_failure's rank, -1: none

// The warm-up sums: one float (NCCL's small-message protocol) and 4 MiB (a gradient bucket's
// size and beyond: its large-message protocol), so that the connections the training steps use
// exist before the first step. Should a later sum still need one, its enqueue is polled too.
constexpr size_t kWarmSmall = 1, kWarmLarge = size_t(1) << 20;

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(int device, int rank, int size, std::unique_ptr<Communicator> host, double timeout_s)
      : device_(device), rank_(rank), size_(size), host_(std::move(host)), timeout_s_(timeout_s), streams_(device),
        comm_(device) {
    // Before this device's workspace or scratch grows mid-backward, the sums in flight finish.
    guard_id_ = cuda::add_growth_guard(device_, [this] { drain(); });
  }

  ~NcclCommunicator() override {
    cuda::remove_growth_guard(device_, guard_id_);  // waits for a running drain
    // Then comm_ (declared last) is aborted first, before the stream its kernels ran on goes.
  }

  std::string transport() const override { return "nccl"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void start_allreduce_sum(const Tensor& buf) override {
    check_buffer(buf, "allreduce");
    // Under the context's lock: the stream, the enqueue and a growth guard's drain are ordered.
    cuda::ContextLock ctx(device_);
    after_compute(ctx.stream());
    in_flight_ = true;
    enqueued(ncclAllReduce(buf.raw(), buf.raw(), static_cast<size_t>(buf.numel()), ncclFloat32, ncclSum,
                           comm_.get(), streams_.stream),
             "a gradient sum");
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
    wait_event(streams_.done, "an NCCL gradient sum");
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
    {
      cuda::ContextLock ctx(device_);
      after_compute(ctx.stream());
      in_flight_ = true;
      enqueued(ncclBroadcast(buf.raw(), buf.raw(), static_cast<size_t>(buf.numel()), ncclFloat32, root, comm_.get(),
                             streams_.stream),
               "a broadcast");
    }
    wait_all();
  }

  void allreduce_sum_host(double* values, int count) override { host_->allreduce_sum_host(values, count); }
  void barrier() override { host_->barrier(); }

  void abort(const std::string& why) noexcept override {
    try {
      std::lock_guard<std::mutex> lk(why_mu_);
      if (abort_why_.empty()) abort_why_ = why;
    } catch (...) {
    }
    abort_requested_ = true;  // the thread waiting on the GPU aborts the communicator itself
    host_->abort(why);
  }
  bool failed() const override { return aborted_ || abort_requested_ || host_->failed(); }
  std::string failure() const override {
    {
      std::lock_guard<std::mutex> lk(why_mu_);
      if (!abort_why_.empty()) return abort_why_;
    }
    return host_->failure();
  }
  bool reset_after_failure() override {
    if (in_flight_ && !aborted_) {
      // A sum this replica started but never waited for (it failed first) may wait on the GPU
      // for ever: free the GPU from it.
      comm_.abort();
      aborted_ = true;
      in_flight_ = false;
    }
    if (aborted_) return false;  // an aborted communicator is gone for good
    abort_requested_ = false;
    std::lock_guard<std::mutex> lk(why_mu_);
    abort_why_.clear();
    return host_->reset_after_failure();
  }

  // ---- initialisation (in_process, across_processes)
  ncclComm_t* comm_slot() { return comm_.slot(); }
  ncclComm_t comm() const { return comm_.get(); }
  cudaStream_t stream() const { return streams_.stream; }
  int device() const { return device_; }
  // Why this replica's group stopped ("" while it has not): a peer's notice, an abort.
  std::string stop_reason() const {
    if (!abort_requested_ && !host_->failed()) return "";
    const std::string why = failure();
    return why.empty() ? "the group of replicas stopped (a replica failed or was aborted)" : why;
  }
  // After a failed initialisation: the communicator is aborted, the host partner told.
  void fail_init(const std::string& why) noexcept {
    comm_.abort();
    aborted_ = true;
    host_->abort(cat("rank ", rank_, ": ", why));
  }

 private:
  void check_buffer(const Tensor& buf, const char* what) {
    if (aborted_) throw PeerFailure(cat("NCCL on gpu:", device_, " was aborted after a failure: create a new strategy"));
    // The group failed already: no collective that nobody would join (the communicator stays
    // usable, so a MirroredStrategy whose replicas all stop here can train on).
    if (abort_requested_ || host_->failed()) {
      const std::string why = failure();
      throw PeerFailure(why.empty() ? "the group of replicas stopped after a failure" : why);
    }
    HPCNN_CHECK_ARG(buf.dtype() == DType::F32 && buf.device().is_cuda() && buf.device().index == device_, "NCCL ",
                    what, ": a float32 buffer on gpu:", device_, " is needed, got ", buf.str());
  }

  // The NCCL stream waits for everything enqueued on the compute stream so far.
  void after_compute(cudaStream_t compute) {
    HPCNN_CUDA_CHECK(cudaEventRecord(streams_.ready, compute));
    HPCNN_CUDA_CHECK(cudaStreamWaitEvent(streams_.stream, streams_.ready, 0));
  }

  // The result of an enqueue: ncclInProgress is no error (the communicator is still launching it);
  // nothing else may touch the communicator or its stream until the state is ncclSuccess.
  void enqueued(ncclResult_t r, const char* what) {
    if (r == ncclSuccess) return;
    if (r != ncclInProgress) fail(cat("NCCL could not start ", what, " on gpu:", device_, ": ", ncclGetErrorString(r)));
    const Deadline deadline(timeout_s_);
    Backoff backoff;
    for (;;) {
      const ncclResult_t s = state_of(comm_.get());
      if (s == ncclSuccess) return;
      if (s != ncclInProgress) fail(cat("NCCL reported ", ncclGetErrorString(s), " on gpu:", device_, " (rank ", rank_,
                                        ") while it started ", what));
      check_stop(deadline, cat("NCCL to start ", what));
      backoff.pause();
    }
  }

  // Polls `event` (recorded on the NCCL stream) until it has happened, watching NCCL's state, the
  // group and the deadline.
  void wait_event(cudaEvent_t event, const std::string& what) {
    const Deadline deadline(timeout_s_);
    Backoff backoff;
    // A test's injected error (inject_async_error) fires at this wait even when the sums have
    // finished already, as nccl.h promises ("at its next wait"): checked before the event.
    int armed = rank_;
    const bool injected = g_injected_async_error.compare_exchange_strong(armed, -1);
    for (;;) {
      const cudaError_t q = injected ? cudaErrorNotReady : cudaEventQuery(event);
      if (q == cudaSuccess) return;
      if (q != cudaErrorNotReady) {
        (void)cudaGetLastError();
        fail(cat("CUDA reported ", cudaGetErrorString(q), " on gpu:", device_, " while it waited for ", what));
      }
      const ncclResult_t s = injected ? ncclSystemError : state_of(comm_.get());
      if (s != ncclSuccess && s != ncclInProgress)
        fail(cat("NCCL reported ", ncclGetErrorString(s), " on gpu:", device_, " (rank ", rank_, ") during ", what));
      check_stop(deadline, what);
      backoff.pause();
    }
  }

  void check_stop(const Deadline& deadline, const std::string& what) {
    if (abort_requested_ || host_->failed()) {
      const std::string why = failure();
      fail(cat("the group stopped while gpu:", device_, " waited for ", what, why.empty() ? "" : ": " + why), true);
    }
    if (deadline.passed())
      fail(cat(what, " on gpu:", device_, " (rank ", rank_, ") did not finish within ", timeout_s_,
               " s (a replica was killed or is stuck; ", kTimeoutHint, ")"));
  }

  // The growth guard (core/cuda_async.h): called with the context's lock held, on the thread about
  // to grow the workspace or scratch. Waits until every collective enqueued so far has finished.
  void drain() {
    if (!in_flight_ || aborted_) return;
    HPCNN_CUDA_CHECK(cudaEventRecord(streams_.drained, streams_.stream));
    wait_event(streams_.drained, "the NCCL gradient sums in flight (before a workspace could grow)");
  }

  // Aborts the communicator (frees the GPU from a collective that cannot finish), tells the
  // group unless the failure came from it, and throws.
  [[noreturn]] void fail(const std::string& why, bool from_group = false) {
    comm_.abort();
    aborted_ = true;
    in_flight_ = false;
    if (!from_group) host_->abort(cat("rank ", rank_, ": ", why));
    throw PeerFailure(why);
  }

  int device_, rank_, size_;
  std::unique_ptr<Communicator> host_;
  double timeout_s_;
  CommStream streams_;
  int guard_id_ = 0;
  std::atomic<bool> in_flight_{false};  // read by a growth guard on another thread
  std::atomic<bool> aborted_{false}, abort_requested_{false};
  mutable std::mutex why_mu_;
  std::string abort_why_;  // the first abort()'s reason
  CommHandle comm_;  // last: aborted first, while its stream and events still exist
};

std::string device_names(const std::vector<NcclCommunicator*>& cs) {
  std::string s;
  for (const NcclCommunicator* c : cs) s += (s.empty() ? "gpu:" : ", gpu:") + std::to_string(c->device());
  return s;
}

// Polls every communicator of this process until `done()` holds, each communicator's NCCL state
// is ncclSuccess and none is failing; `what` names the wait in errors. On a failure or the
// timeout: every communicator is aborted (so that no peer waits for them), the host partners
// told, and BackendError (PeerFailure when the group stopped elsewhere) thrown.
template <class Done>
void poll_all(const std::vector<NcclCommunicator*>& cs, const std::string& what, const Deadline& deadline,
              double timeout_s, Done done) {
  Backoff backoff;
  auto give_up = [&](const std::string& why, bool peer) {
    for (NcclCommunicator* c : cs) c->fail_init(why);
    if (peer) throw PeerFailure(why);
    throw BackendError(why);
  };
  for (;;) {
    bool all = true;
    for (NcclCommunicator* c : cs) {
      const ncclResult_t s = c->comm() ? state_of(c->comm()) : ncclInvalidUsage;
      if (s == ncclInProgress) all = false;
      else if (s != ncclSuccess)
        give_up(cat("NCCL reported ", ncclGetErrorString(s), " on gpu:", c->device(), " (rank ", c->rank(),
                    ") during ", what, (ncclGetLastError(c->comm()) ? cat(": ", ncclGetLastError(c->comm())) : "")),
                false);
    }
    if (all && done()) return;
    for (NcclCommunicator* c : cs) {
      const std::string stop = c->stop_reason();
      if (!stop.empty()) give_up(cat(stop, " while ", device_names(cs), " waited for ", what), true);
    }
    if (deadline.passed())
      give_up(cat(what, " on ", device_names(cs), " (rank ", cs[0]->rank(), cs.size() > 1 ? "..." : "",
                  ") did not finish within ", timeout_s, " s: a rank or replica did not arrive (it failed or is "
                  "stuck; ", kTimeoutHint, ")"),
              false);
    backoff.pause();
  }
}

// Throws `why` after aborting every communicator, when an NCCL call of the group setup failed
// outright (not ncclInProgress).
void check_setup(ncclResult_t r, const char* call, const std::vector<NcclCommunicator*>& cs) {
  if (r == ncclSuccess || r == ncclInProgress) return;
  const std::string why = cat(call, " failed on ", device_names(cs), ": ", ncclGetErrorString(r));
  for (NcclCommunicator* c : cs) c->fail_init(why);
  throw BackendError(why);
}

// Creates the communicators of this process (one group call: several devices of one process
// must join together) and connects them: warm-up sums over every rank (kWarmSmall, kWarmLarge),
// also in one group call, so that the connections exist before the first training step (NCCL
// connects lazily, at the collectives that need them). Both phases are polled by poll_all.
void connect(const std::vector<NcclCommunicator*>& cs, const ncclUniqueId& id, int nranks, double timeout_s) {
  const Deadline deadline(timeout_s);  // for the whole setup
  std::vector<ncclConfig_t> configs(cs.size());
  for (ncclConfig_t& c : configs) {
    c = NCCL_CONFIG_INITIALIZER;
    c.blocking = 0;
  }
  check_setup(ncclGroupStart(), "ncclGroupStart", cs);
  ncclResult_t first_error = ncclSuccess;
  for (size_t i = 0; i < cs.size(); ++i) {
    HPCNN_CUDA_CHECK(cudaSetDevice(cs[i]->device()));
    const ncclResult_t r = ncclCommInitRankConfig(cs[i]->comm_slot(), nranks, id, cs[i]->rank(), &configs[i]);
    if (r != ncclSuccess && r != ncclInProgress && first_error == ncclSuccess) first_error = r;
  }
  const ncclResult_t end = ncclGroupEnd();
  check_setup(first_error, "ncclCommInitRankConfig", cs);
  check_setup(end, "ncclGroupEnd (communicator creation)", cs);
  poll_all(cs, "the NCCL communicators' initialisation", deadline, timeout_s, [] { return true; });

  std::vector<std::unique_ptr<DeviceFloats>> bufs;
  for (NcclCommunicator* c : cs)
    bufs.push_back(std::make_unique<DeviceFloats>(c->device(), kWarmSmall + kWarmLarge, c->stream()));
  check_setup(ncclGroupStart(), "ncclGroupStart", cs);
  first_error = ncclSuccess;
  for (size_t i = 0; i < cs.size(); ++i) {
    HPCNN_CUDA_CHECK(cudaSetDevice(cs[i]->device()));
    float* small = bufs[i]->p;
    float* large = small + kWarmSmall;
    for (auto [p, n] : {std::pair<float*, size_t>{small, kWarmSmall}, std::pair<float*, size_t>{large, kWarmLarge}}) {
      const ncclResult_t r = ncclAllReduce(p, p, n, ncclFloat32, ncclSum, cs[i]->comm(), cs[i]->stream());
      if (r != ncclSuccess && r != ncclInProgress && first_error == ncclSuccess) first_error = r;
    }
  }
  const ncclResult_t end2 = ncclGroupEnd();
  check_setup(first_error, "ncclAllReduce (warm-up)", cs);
  check_setup(end2, "ncclGroupEnd (warm-up)", cs);
  // Enqueued once every state is ncclSuccess; then the warm-up kernels must finish.
  poll_all(cs, "the NCCL connections (warm-up sums)", deadline, timeout_s, [] { return true; });
  std::vector<cudaEvent_t> events;
  struct Events {
    std::vector<cudaEvent_t>& v;
    ~Events() {
      for (cudaEvent_t e : v) cudaEventDestroy(e);
    }
  } owner{events};
  for (NcclCommunicator* c : cs) {
    HPCNN_CUDA_CHECK(cudaSetDevice(c->device()));
    cudaEvent_t e = nullptr;
    HPCNN_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    events.push_back(e);
    HPCNN_CUDA_CHECK(cudaEventRecord(e, c->stream()));
  }
  poll_all(cs, "the NCCL connections (warm-up sums)", deadline, timeout_s, [&] {
    for (cudaEvent_t e : events) {
      const cudaError_t q = cudaEventQuery(e);
      if (q == cudaErrorNotReady) return false;
      HPCNN_CUDA_CHECK(q);
    }
    return true;
  });
}

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

void inject_async_error(int replica) { g_injected_async_error = replica; }
void inject_setup_failure(int rank) { g_injected_setup_failure = rank; }

std::vector<std::unique_ptr<Communicator>> in_process(const std::vector<int>& devices,
                                                      std::vector<std::unique_ptr<Communicator>> host_partners,
                                                      double timeout_s) {
  const int n = static_cast<int>(devices.size());
  HPCNN_CHECK_ARG(n >= 1 && host_partners.size() == devices.size(), "NCCL: one host partner per device is needed");
  for (int d : devices) cuda::require_device(d);
  std::vector<std::unique_ptr<NcclCommunicator>> comms;
  std::vector<NcclCommunicator*> raw;
  for (int i = 0; i < n; ++i) {
    comms.push_back(std::make_unique<NcclCommunicator>(devices[static_cast<size_t>(i)], i, n,
                                                       std::move(host_partners[static_cast<size_t>(i)]), timeout_s));
    raw.push_back(comms.back().get());
  }
  ncclUniqueId id;
  check_setup(ncclGetUniqueId(&id), "ncclGetUniqueId", raw);
  connect(raw, id, n, timeout_s);
  std::vector<std::unique_ptr<Communicator>> out;
  for (auto& c : comms) out.push_back(std::move(c));
  return out;
}

std::unique_ptr<Communicator> across_processes(int device, std::unique_ptr<mpi::MpiCommunicator> host,
                                               double timeout_s) {
  mpi::MpiCommunicator* mpi = host.get();  // owned by `c` from its creation on
  const int rank = host->rank(), size = host->size();
  std::unique_ptr<NcclCommunicator> c;
  try {
    cuda::require_device(device);
    cuda::ContextLock{device};  // the device's context made here, where a failure can still be told
  } catch (const std::exception& e) {
    // Tell the other ranks, which are about to wait for this one in the barrier below.
    host->abort(cat("NCCL setup on gpu:", device, ": ", e.what()));
    throw;
  }
  // (Should this throw, `host` went with it: the others' barrier ends at the timeout.)
  c = std::make_unique<NcclCommunicator>(device, rank, size, std::move(host), timeout_s);
  try {
    mpi->barrier();  // every rank is here (with the timeout and failure notices): none will miss the init
    ncclUniqueId id;
    if (rank == 0) check_setup(ncclGetUniqueId(&id), "ncclGetUniqueId", {c.get()});
    mpi->broadcast_bytes(&id, sizeof(id), 0);
    int armed = rank;
    if (g_injected_setup_failure.compare_exchange_strong(armed, -1))
      throw BackendError(cat("injected failure (a test) in the NCCL setup of rank ", rank));
    connect({c.get()}, id, size, timeout_s);
  } catch (const PeerFailure&) {
    c->fail_init("NCCL setup stopped");  // the notice came from another rank: nothing new to tell
    throw;
  } catch (const std::exception& e) {
    c->fail_init(cat("NCCL setup on gpu:", device, ": ", e.what()));
    throw;
  }
  return c;
}

}  // namespace hpcnn::distribute::nccl
