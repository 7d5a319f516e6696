// A group of replicas that train one model data-parallel: what a strategy creates
// (hpcnn.distribute). It picks the transport, makes one communicator (distribute/communicator.h) per
// replica of this process, and checks the devices before anything trains.
//
//   in_process(devices)        MirroredStrategy: one replica per device of this process, each
//                              driven by its own thread (distribute/replica_set.h). CPUs: the host
//                              transport; GPUs: NCCL (one communicator per device, connected
//                              before this returns), or the host transport when NCCL is not
//                              built or transport='host'.
//   across_processes(device)   MultiWorkerMirroredStrategy: one replica per MPI rank. CPU ranks:
//                              MPI_Allreduce in place on the gradient buffer; GPU ranks: NCCL
//                              bootstrapped over MPI (or MPI through host memory without NCCL).
//                              Every rank must be on the same kind of device (the parameter
//                              buffer's layout differs between CPUs and GPUs): checked here,
//                              ValueError naming the ranks. Ranks of a node that share a GPU
//                              (same PCI bus id) cannot use NCCL: with transport 'auto' every rank
//                              then sums through host memory with MPI (rank 0 warns once, naming
//                              the ranks and the GPU); with 'nccl' it is a ValueError saying so.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/device.h"
#include "distribute/communicator.h"
#include "distribute/host_group.h"

namespace hpcnn::distribute {

enum class Transport { Auto, Host, Mpi, Nccl };
Transport parse_transport(const std::string& s);  // "auto", "host", "mpi", "nccl"; ValueError otherwise

// The default timeout of a collective: HPCNN_DIST_TIMEOUT (seconds) when set, else 600.
double default_timeout_seconds();
// The default heartbeat limit of MPI ranks (distribute/heartbeat.h): a rank silent that long is
// lost. HPCNN_DIST_HEARTBEAT (seconds; 0 turns the heartbeat off) when set, else 30.
double default_heartbeat_seconds();

class Group {
 public:
  static std::shared_ptr<Group> in_process(const std::vector<Device>& devices, Transport transport, double timeout_s);
  static std::shared_ptr<Group> across_processes(Device device, Transport transport, double timeout_s,
                                                 double heartbeat_s);

  int size() const { return size_; }                      // replicas in sync, over all processes
  int local_size() const { return static_cast<int>(endpoints_.size()); }
  int first_replica() const { return first_; }            // the global index of local replica 0
  bool multi_process() const { return multi_process_; }
  const std::vector<Device>& devices() const { return devices_; }  // of the local replicas
  std::string transport() const { return endpoints_.at(0)->transport(); }
  double timeout_seconds() const { return timeout_s_; }
  double heartbeat_seconds() const { return heartbeat_s_; }  // 0: none (one process, or off)
  Communicator& endpoint(int i) { return *endpoints_.at(static_cast<size_t>(i)); }

  // One step at a time: models trained with the same group take turns.
  std::mutex& step_mutex() { return step_mutex_; }
  void abort(const std::string& why) noexcept;
  bool failed() const;
  // After a failure on this process's replicas only: usable again when every transport can be
  // reset; otherwise the group stays failed and the next call says why.
  void recover();
  std::string failure() const { return failure_; }

 private:
  Group() = default;
  std::vector<std::unique_ptr<Communicator>> endpoints_;
  std::vector<Device> devices_;
  int size_ = 1, first_ = 0;
  bool multi_process_ = false;
  double timeout_s_ = 600;
  double heartbeat_s_ = 0;
  std::mutex step_mutex_;
  std::string failure_;  // why the group cannot be used any more ("" while usable)
};

}  // namespace hpcnn::distribute
