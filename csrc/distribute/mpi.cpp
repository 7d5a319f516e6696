// MPI with hpcnn (see mpi.h): the environment (initialisation, ranks, the init-time allgather,
// shutdown at exit) and MpiCommunicator's calls, which hand every MPI call to the transport's
// communication thread (mpi_transport.h, mpi_transport.cpp). Built only with HPCNN_MPI
// (CMakeLists.txt); mpi_absent.cpp stands in otherwise.
#include "distribute/mpi.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/warnings.h"
#include "distribute/mpi_transport.h"

namespace hpcnn::distribute::mpi {

namespace {

const char* level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "single";
    case MPI_THREAD_FUNNELED: return "funneled";
    case MPI_THREAD_SERIALIZED: return "serialized";
    case MPI_THREAD_MULTIPLE: return "multiple";
    default: return "unknown";
  }
}

}  // namespace

namespace {

struct Env {
  std::mutex mu;
  bool initialized_by_hpcnn = false;
  bool have_world = false;
  World world;
  std::vector<std::weak_ptr<MpiCommunicator::Impl>> comms;
};
Env& env() {
  static Env e;
  return e;
}

std::string self_name(int rank) {
  char host[MPI_MAX_PROCESSOR_NAME] = {0};
  int len = 0;
  MPI_Get_processor_name(host, &len);
  return cat("rank ", rank, " (host ", std::string(host, static_cast<size_t>(len)), ", pid ", getpid(), ")");
}

// Waits for an init-time request with the timeout (no failure notices exist yet).
void wait_plain(MPI_Request& req, const char* what, double timeout_s) {
  if (!test_until_done(req, timeout_s, [] {}))
    throw BackendError(cat("MPI: ", what, " got no answer from all ranks within ", timeout_s,
                           " s: a rank did not reach the same point (did every rank create the strategy?)"));
}

}  // namespace

bool compiled() { return true; }

std::string library_version() {
  char v[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int len = 0;
  MPI_Get_library_version(v, &len);
  std::string s(v, static_cast<size_t>(len));
  const size_t nl = s.find_first_of("\r\n");
  if (nl != std::string::npos) s.resize(nl);
  while (!s.empty() && (s.back() == ' ' || s.back() == ',' || s.back() == '\0')) s.pop_back();
  return s;
}

std::string standard_version() { return cat(MPI_VERSION, ".", MPI_SUBVERSION); }

std::string unavailable_reason() { return ""; }

bool initialized() {
  int flag = 0;
  MPI_Initialized(&flag);
  return flag != 0;
}

World init() {
  Env& e = env();
  std::lock_guard<std::mutex> lk(e.mu);
  if (e.have_world) return e.world;
  int fin = 0;
  MPI_Finalized(&fin);
  HPCNN_CHECK_BACKEND(!fin, "MPI was finalized already in this process: create the strategy before MPI_Finalize");
  if (!initialized()) {
    int provided = 0;
    HPCNN_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided));
    e.initialized_by_hpcnn = true;
  }
  int level = 0;
  MPI_Query_thread(&level);
  if (level < MPI_THREAD_SERIALIZED)
    throw BackendError(cat("MPI was initialised with thread level '", level_name(level),
                           "', but hpcnn's MPI transport needs 'serialized' or 'multiple' (it talks to MPI from a "
                           "communication thread). With mpi4py, set mpi4py.rc.thread_level = 'multiple' before "
                           "`from mpi4py import MPI` (it is mpi4py's default), or let hpcnn initialise MPI"));
  World w;
  HPCNN_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &w.rank));
  HPCNN_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &w.size));
  MPI_Comm local = MPI_COMM_NULL;
  HPCNN_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w.rank, MPI_INFO_NULL, &local));
  MPI_Comm_rank(local, &w.local_rank);
  MPI_Comm_size(local, &w.local_size);
  MPI_Comm_free(&local);
  char host[MPI_MAX_PROCESSOR_NAME] = {0};
  int len = 0;
  MPI_Get_processor_name(host, &len);
  w.host.assign(host, static_cast<size_t>(len));
  w.thread_level = level_name(level);
  w.initialized_by_hpcnn = e.initialized_by_hpcnn;
  e.world = w;
  e.have_world = true;
  return w;
}

std::vector<std::string> allgather(const std::string& mine, double timeout_s) {
  const World w = init();
  HPCNN_CHECK_ARG(mine.size() < static_cast<size_t>(INT_MAX), "allgather: string too long");
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(static_cast<size_t>(w.size));
  MPI_Request req = MPI_REQUEST_NULL;
  HPCNN_MPI_CHECK(MPI_Iallgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD, &req));
  wait_plain(req, "an allgather", timeout_s);
  std::vector<int> offsets(static_cast<size_t>(w.size), 0);
  long long total = 0;
  for (int r = 0; r < w.size; ++r) {
    offsets[static_cast<size_t>(r)] = static_cast<int>(total);
    total += lens[static_cast<size_t>(r)];
  }
  HPCNN_CHECK_BACKEND(total < INT_MAX, "allgather: too much data");
  std::string all(static_cast<size_t>(std::max(1LL, total)), '\0');
  HPCNN_MPI_CHECK(MPI_Iallgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), offsets.data(), MPI_CHAR,
                                  MPI_COMM_WORLD, &req));
  wait_plain(req, "an allgather", timeout_s);
  std::vector<std::string> out;
  for (int r = 0; r < w.size; ++r)
    out.push_back(all.substr(static_cast<size_t>(offsets[static_cast<size_t>(r)]),
                             static_cast<size_t>(lens[static_cast<size_t>(r)])));
  return out;
}

void shutdown() noexcept {
  try {
    Env& e = env();
    std::lock_guard<std::mutex> lk(e.mu);
    if (!initialized()) return;
    int fin = 0;
    MPI_Finalized(&fin);
    if (fin) return;
    bool broken = false;
    std::vector<std::shared_ptr<MpiCommunicator::Impl>> live;
    for (auto& w : e.comms)
      if (auto c = w.lock()) live.push_back(c);
    for (auto& c : live) c->stop_thread();
    for (auto& c : live) {
      if (!c->broken) {  // a notice may be waiting that nobody collected
        try {
          c->probe_notice();
        } catch (...) {
        }
      }
      if (c->broken) {
        c->exit_protocol();
        broken = true;
      }
    }
    if (broken) {
      std::fflush(nullptr);
      MPI_Abort(MPI_COMM_WORLD, 1);  // ends every rank: the group cannot finish its collectives
      return;
    }
    for (auto& c : live) {
      if (c->data != MPI_COMM_NULL) MPI_Comm_free(&c->data);
      if (c->ctrl != MPI_COMM_NULL) MPI_Comm_free(&c->ctrl);
    }
    if (e.initialized_by_hpcnn) MPI_Finalize();
  } catch (...) {
  }
}

// ------------------------------------------------------------------ MpiCommunicator
MpiCommunicator::MpiCommunicator(Device device, double timeout_s, double heartbeat_s)
    : impl_(std::make_shared<Impl>()) {
  const World w = init();
  Impl& c = *impl_;
  c.rank = w.rank;
  c.size = w.size;
  c.timeout_s = timeout_s;
  c.self = self_name(w.rank);
  c.names = allgather(c.self, timeout_s);  // collective: every rank makes its communicator here
  c.lost.assign(static_cast<size_t>(w.size), 0);
  c.left.assign(static_cast<size_t>(w.size), 0);
  int level = 0;
  MPI_Query_thread(&level);
  c.watch_idle = level == MPI_THREAD_MULTIPLE;
  // The heartbeat must keep beating while the thread is idle (during a step's computation), which
  // only MPI_THREAD_MULTIPLE allows: with 'serialized' the application may call MPI then.
  if (heartbeat_s > 0 && !c.watch_idle && w.rank == 0 && w.size > 1)
    queue_warning(cat("MultiWorkerMirroredStrategy: MPI was initialised with thread level '", level_name(level),
                      "', so the heartbeat that notices a killed rank within ", heartbeat_s,
                      " s is off (it needs 'multiple'): a killed rank is noticed after the collective timeout (",
                      timeout_s, " s) only"));
  c.beat = Heartbeat(w.rank, w.size, c.watch_idle ? heartbeat_s : 0.0);
  HPCNN_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &c.data));
  HPCNN_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &c.ctrl));
  MPI_Comm_set_errhandler(c.data, MPI_ERRORS_RETURN);  // errors as exceptions, not process exits
  MPI_Comm_set_errhandler(c.ctrl, MPI_ERRORS_RETURN);
  (void)device;
  c.thread = std::thread([p = impl_.get()] { p->loop(); });
  std::lock_guard<std::mutex> lk(env().mu);
  env().comms.push_back(impl_);
}

MpiCommunicator::~MpiCommunicator() {
  try {
    impl_->stop_thread();
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin && !impl_->broken) {  // a broken group's requests are still pending: leave its comms
      if (impl_->data != MPI_COMM_NULL) MPI_Comm_free(&impl_->data);
      if (impl_->ctrl != MPI_COMM_NULL) MPI_Comm_free(&impl_->ctrl);
    }
  } catch (...) {
  }
}

int MpiCommunicator::rank() const { return impl_->rank; }
int MpiCommunicator::size() const { return impl_->size; }

namespace {
int checked_count(long long n) {
  HPCNN_CHECK_ARG(n >= 0 && n <= INT_MAX, "MPI: a collective of ", n, " elements is too large (at most ", INT_MAX,
                  "): use a smaller bytes_per_pack");
  return static_cast<int>(n);
}
}  // namespace

void MpiCommunicator::start_allreduce_sum(const Tensor& buf) {
  HPCNN_CHECK_ARG(buf.dtype() == DType::F32, "allreduce: float32 buffers only, got ", dtype_name(buf.dtype()));
  auto op = std::make_shared<Impl::Op>();
  op->kind = Impl::Kind::Allreduce;
  op->count = checked_count(buf.numel());
  op->type = MPI_FLOAT;
  op->what = "gradient sum";
  if (buf.device().is_cpu()) {
    op->data = buf.raw();
    impl_->started.push_back(impl_->submit(op));
    return;
  }
  Tensor host = buf.to(Device::cpu());  // a GPU buffer without NCCL: summed through host memory
  op->data = host.raw();
  impl_->staged.push_back(Impl::Staged{impl_->submit(op), buf, host});
}

void MpiCommunicator::wait_all() {
  std::exception_ptr first;
  for (auto& op : impl_->started) {
    try {
      impl_->await(op);
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  impl_->started.clear();
  for (auto& s : impl_->staged) {
    try {
      impl_->await(s.op);
      if (!first) s.device_view.copy_from(s.host);
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  impl_->staged.clear();
  if (first) std::rethrow_exception(first);
}

void MpiCommunicator::allreduce_sum(const Tensor& buf) {
  start_allreduce_sum(buf);
  wait_all();
}

void MpiCommunicator::broadcast(const Tensor& buf, int root) {
  HPCNN_CHECK_ARG(buf.dtype() == DType::F32 || buf.dtype() == DType::U8, "broadcast: float32 or uint8 buffers only");
  Tensor host = buf.device().is_cpu() ? buf : buf.to(Device::cpu());
  auto op = std::make_shared<Impl::Op>();
  op->kind = Impl::Kind::Broadcast;
  op->data = host.raw();
  op->count = checked_count(host.dtype() == DType::F32 ? host.numel() : static_cast<long long>(host.nbytes()));
  op->type = host.dtype() == DType::F32 ? MPI_FLOAT : MPI_BYTE;
  op->root = root;
  op->what = "broadcast";
  impl_->run_now(op);
  if (!buf.device().is_cpu()) Tensor(buf).copy_from(host);
}

void MpiCommunicator::broadcast_bytes(void* data, size_t bytes, int root) {
  auto op = std::make_shared<Impl::Op>();
  op->kind = Impl::Kind::Broadcast;
  op->data = data;
  op->count = checked_count(static_cast<long long>(bytes));
  op->type = MPI_BYTE;
  op->root = root;
  op->what = "broadcast";
  impl_->run_now(op);
}

void MpiCommunicator::allreduce_sum_host(double* values, int count) {
  auto op = std::make_shared<Impl::Op>();
  op->kind = Impl::Kind::Allreduce;
  op->data = values;
  op->count = count;
  op->type = MPI_DOUBLE;
  op->what = "sum of statistics";
  impl_->run_now(op);
}

void MpiCommunicator::barrier() {
  auto op = std::make_shared<Impl::Op>();
  op->kind = Impl::Kind::Barrier;
  op->what = "barrier";
  impl_->run_now(op);
}

void MpiCommunicator::abort(const std::string& why) noexcept {
  try {
    Impl& c = *impl_;
    {
      std::lock_guard<std::mutex> lk(c.mu);
      // Already stopped by another rank's notice (or a timeout that sent its own): nothing to add.
      if (c.abort_requested || c.stop || c.broken) return;
      c.abort_why = cat(c.self, " failed: ", why);
    }
    c.abort_requested = true;
    // An operation in flight sends the notices from its wait; an idle thread runs this one.
    auto op = std::make_shared<Impl::Op>();
    op->kind = Impl::Kind::Notify;
    {
      std::lock_guard<std::mutex> lk(c.mu);
      c.queue.push_back(op);
    }
    c.cv.notify_all();
    std::unique_lock<std::mutex> lk(c.mu);
    c.done_cv.wait_for(lk, std::chrono::seconds(3), [&] { return op->done; });
  } catch (...) {
  }
}

std::string MpiCommunicator::failure() const { return impl_->failure_text(); }
bool MpiCommunicator::failed() const { return impl_->broken; }

}  // namespace hpcnn::distribute::mpi
