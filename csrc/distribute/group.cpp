#include "distribute/group.h"

#include <cstdlib>
#include <map>
#include <set>

#include "core/cuda_runtime.h"
#include "core/warnings.h"
#include "distribute/mpi.h"
#include "distribute/nccl.h"

namespace hpcnn::distribute {

Transport parse_transport(const std::string& s) {
  if (s == "auto") return Transport::Auto;
  if (s == "host") return Transport::Host;
  if (s == "mpi") return Transport::Mpi;
  if (s == "nccl") return Transport::Nccl;
  throw ValueError(cat("implementation must be 'auto', 'nccl', 'mpi' or 'host', got '", s, "'"));
}

double default_timeout_seconds() {
  if (const char* v = std::getenv("HPCNN_DIST_TIMEOUT")) {
    char* end = nullptr;
    const double t = std::strtod(v, &end);
    if (end != v && *end == '\0' && t > 0) return t;
  }
  return 600.0;
}

double default_heartbeat_seconds() {
  if (const char* v = std::getenv("HPCNN_DIST_HEARTBEAT")) {
    char* end = nullptr;
    const double t = std::strtod(v, &end);
    if (end != v && *end == '\0' && t >= 0) return t;
  }
  return 30.0;
}

namespace {

std::string device_list(const std::vector<Device>& ds) {
  std::string s = "[";
  for (size_t i = 0; i < ds.size(); ++i) s += (i ? ", '" : "'") + ds[i].str() + "'";
  return s + "]";
}

}  // namespace

std::shared_ptr<Group> Group::in_process(const std::vector<Device>& devices, Transport transport, double timeout_s) {
  HPCNN_CHECK_ARG(!devices.empty(), "MirroredStrategy: no devices (give at least one, e.g. ['cpu'] or ['gpu:0'])");
  HPCNN_CHECK_ARG(timeout_s > 0, "timeout_seconds must be > 0, got ", timeout_s);
  const bool gpus = devices[0].is_cuda();
  std::set<int> seen;
  for (const Device& d : devices) {
    HPCNN_CHECK_ARG(d.is_cuda() == gpus, "MirroredStrategy: devices ", device_list(devices),
                    " mix CPUs and GPUs; the replicas of one model must all be CPUs or all GPUs");
    if (d.is_cuda()) {
      HPCNN_CHECK_ARG(seen.insert(d.index).second, "MirroredStrategy: ", d.str(), " is listed twice in ",
                      device_list(devices), "; one replica per GPU");
      cuda::require_device(d.index);
    }
  }
  HPCNN_CHECK_ARG(transport != Transport::Mpi, "MirroredStrategy runs its replicas in one process: "
                  "implementation='mpi' is for MultiWorkerMirroredStrategy");
  HPCNN_CHECK_ARG(!(transport == Transport::Nccl && !gpus), "implementation='nccl' needs GPU replicas, got ",
                  device_list(devices));
  if (transport == Transport::Nccl && !nccl::compiled()) throw BackendError(nccl::unavailable_reason());

  std::shared_ptr<Group> g(new Group());
  g->devices_ = devices;
  g->size_ = static_cast<int>(devices.size());
  g->timeout_s_ = timeout_s;
  auto host = std::make_shared<HostGroup>(g->size_, timeout_s);
  const bool use_nccl = gpus && (transport == Transport::Nccl || (transport == Transport::Auto && nccl::compiled()));
  if (use_nccl) {
    std::vector<int> ids;
    std::vector<std::unique_ptr<Communicator>> partners;
    for (int i = 0; i < g->size_; ++i) {
      ids.push_back(devices[static_cast<size_t>(i)].index);
      partners.push_back(std::make_unique<HostCommunicator>(host, i, Device::cpu()));
    }
    g->endpoints_ = nccl::in_process(ids, std::move(partners), timeout_s);
  } else {
    for (int i = 0; i < g->size_; ++i)
      g->endpoints_.push_back(std::make_unique<HostCommunicator>(host, i, devices[static_cast<size_t>(i)]));
  }
  return g;
}

std::shared_ptr<Group> Group::across_processes(Device device, Transport transport, double timeout_s,
                                               double heartbeat_s) {
  HPCNN_CHECK_ARG(timeout_s > 0, "timeout_seconds must be > 0, got ", timeout_s);
  HPCNN_CHECK_ARG(heartbeat_s >= 0, "heartbeat_seconds must be >= 0 (0: no heartbeat), got ", heartbeat_s);
  HPCNN_CHECK_ARG(transport != Transport::Host, "MultiWorkerMirroredStrategy runs one replica per MPI rank: "
                  "implementation='host' is for MirroredStrategy");
  const mpi::World w = mpi::init();
  // Every rank's device, checked together so that every rank raises the same error.
  std::string mine = device.str() + "|" + w.host + "|";
  std::string problem;
  if (device.is_cuda()) {
    try {
      cuda::require_device(device.index);
      for (const cuda::DeviceInfo& d : cuda::list_devices(false))
        if (d.index == device.index) mine += d.pci_bus_id;
    } catch (const std::exception& e) {
      problem = e.what();
    }
  }
  if (transport == Transport::Nccl && !device.is_cuda()) problem = "implementation='nccl' needs a GPU on every rank";
  if (transport == Transport::Nccl && device.is_cuda() && !nccl::compiled()) problem = nccl::unavailable_reason();
  for (char& c : problem)
    if (c == '|') c = '/';
  mine += "|" + problem;
  const std::vector<std::string> all = mpi::allgather(mine, timeout_s);
  std::vector<std::string> errors, shared;
  std::map<std::string, int> bus_owner;
  int gpu_ranks = 0;
  for (int r = 0; r < static_cast<int>(all.size()); ++r) {
    const std::string& s = all[static_cast<size_t>(r)];
    const size_t a = s.find('|'), b = s.find('|', a + 1), c = s.find('|', b + 1);
    const std::string dev = s.substr(0, a), host = s.substr(a + 1, b - a - 1), bus = s.substr(b + 1, c - b - 1),
                      err = s.substr(c + 1);
    if (!err.empty()) errors.push_back(cat("rank ", r, " (", host, ", ", dev, "): ", err));
    if (dev.rfind("gpu", 0) == 0) {
      ++gpu_ranks;
      const std::string key = host + "/" + (bus.empty() ? dev : bus);
      auto it = bus_owner.find(key);
      if (it != bus_owner.end())
        shared.push_back(cat("ranks ", it->second, " and ", r, " on ", host, " both use ", dev,
                             bus.empty() ? "" : " (PCI " + bus + ")"));
      else
        bus_owner[key] = r;
    }
  }
  if (gpu_ranks != 0 && gpu_ranks != static_cast<int>(all.size())) {
    std::string cpus;
    for (int r = 0; r < static_cast<int>(all.size()); ++r)
      if (all[static_cast<size_t>(r)].rfind("cpu", 0) == 0) cpus += (cpus.empty() ? "" : ", ") + std::to_string(r);
    errors.push_back(cat(gpu_ranks, " of ", all.size(), " ranks have a GPU but rank(s) ", cpus,
                         " would train on the CPU: every rank needs a GPU (check --gres and CUDA_VISIBLE_DEVICES "
                         "on every node), or train every rank on the CPU"));
  }
  // NCCL refuses two ranks on one GPU; the MPI transport sums their buffers through host memory.
  std::string sharing;
  for (const std::string& s : shared) sharing += (sharing.empty() ? "" : "; ") + s;
  if (!shared.empty() && transport == Transport::Nccl)
    errors.push_back(cat(sharing, ": implementation='nccl' cannot put two ranks on one GPU (NCCL refuses a "
                         "device shared by ranks). Start one rank per GPU (as many ranks per node as GPUs, e.g. "
                         "srun --ntasks-per-node=4 with --gres=gpu:4), or leave implementation='auto' (or 'mpi') "
                         "to sum through host memory"));
  if (!errors.empty()) {
    std::string msg = "MultiWorkerMirroredStrategy cannot start:";
    for (const std::string& e : errors) msg += "\n  " + e;
    throw ValueError(msg);
  }

  std::shared_ptr<Group> g(new Group());
  g->devices_ = {device};
  g->size_ = w.size;
  g->first_ = w.rank;
  g->multi_process_ = true;
  g->timeout_s_ = timeout_s;
  g->heartbeat_s_ = w.size > 1 ? heartbeat_s : 0.0;
  auto host = std::make_unique<mpi::MpiCommunicator>(device, timeout_s, heartbeat_s);
  // Every rank decides from the same gathered facts: all take NCCL, or none does.
  const bool use_nccl = device.is_cuda() && shared.empty() &&
                        (transport == Transport::Nccl || (transport == Transport::Auto && nccl::compiled()));
  if (device.is_cuda() && !shared.empty() && transport == Transport::Auto && nccl::compiled() && w.rank == 0)
    queue_warning(cat("MultiWorkerMirroredStrategy: ", sharing, "; NCCL cannot put two ranks on one GPU, so every "
                      "rank sums its gradients with MPI through host memory (slower). Start one rank per GPU to use "
                      "NCCL"));
  if (use_nccl) g->endpoints_.push_back(nccl::across_processes(device.index, std::move(host), timeout_s));
  else g->endpoints_.push_back(std::move(host));
  return g;
}

void Group::abort(const std::string& why) noexcept {
  for (auto& e : endpoints_) e->abort(why);
}

bool Group::failed() const {
  if (!failure_.empty()) return true;
  for (const auto& e : endpoints_)
    if (e->failed()) return true;
  return false;
}

void Group::recover() {
  bool ok = true;
  for (auto& e : endpoints_) ok = e->reset_after_failure() && ok;
  if (!ok && failure_.empty())
    failure_ = multi_process_ ? "the ranks were told to stop after a failure; this group cannot train any more"
                              : "a GPU communicator had to be aborted after a failure: create a new "
                                "MirroredStrategy (and build the model in its scope) to train again";
}

}  // namespace hpcnn::distribute
