// The replicas of one model in this process, trained data-parallel with a Group (distribute/group.h):
// the split of each global batch, one thread per replica, and the failure handling.
//
//   train_step(batch, next):  `batch` is a global batch, or this process's share of one (rows
//     [first_row, first_row + n) of global_rows: an HDF5 loader that reads only this rank's rows).
//     Replica r (global index) takes rows [share_begin(G, R, r), share_end(G, R, r)) of the G rows
//     (core/batch_shares.h), as row indices or zero-copy views, and runs its model's ordinary
//     train_step on them on its own thread; the model's GradientReducer sums statistics and
//     gradients over every replica between its backward pass and its optimizer step. A replica
//     whose share is empty (a last batch smaller than the replica count) runs the step without
//     rows: it still takes part in every collective, so nobody waits for it.
//   test_step: the same without training; statistics summed over every replica.
//   predict_step: splits the batch among this process's replicas only (no communication) and
//     concatenates their outputs; with one replica per process every rank predicts the whole batch.
//
// `next` is split the same way and staged by each replica's model, as on one device.
//
// Failures: an exception on one replica's thread aborts the group (the others' pending collectives
// throw PeerFailure at once), every thread is joined, and the first real error is raised, naming
// the replica when this process drives several. Replicas of this process then recover (their
// step counters and staged batches are reset to what they were before the step): a bad batch does
// not end a MirroredStrategy. An MPI group stays failed (the other ranks were told to stop).
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <vector>

#include "distribute/gradient_reducer.h"
#include "distribute/group.h"
#include "nn/model.h"

namespace hpcnn::distribute {

// One thread per replica but the first (which runs on the caller's): run(fn) calls fn(i) for
// every replica i at once and returns when all are done, with each one's exception (or null).
class ReplicaThreads {
 public:
  explicit ReplicaThreads(int replicas);
  ~ReplicaThreads();
  ReplicaThreads(const ReplicaThreads&) = delete;
  ReplicaThreads& operator=(const ReplicaThreads&) = delete;
  std::vector<std::exception_ptr> run(const std::function<void(int)>& fn);

 private:
  struct Shared;
  std::unique_ptr<Shared> shared_;
};

class ReplicaSet {
 public:
  // models[i]: local replica i (not owned; all compiled alike, on group->devices()[i]).
  ReplicaSet(std::shared_ptr<Group> group, std::vector<nn::Model*> models, long long bucket_bytes);
  ~ReplicaSet();  // detaches the reducers from the models
  ReplicaSet(const ReplicaSet&) = delete;
  ReplicaSet& operator=(const ReplicaSet&) = delete;

  nn::BatchStats train_step(const nn::Batch* current, const nn::Batch* next);
  nn::BatchStats test_step(const nn::Batch* current, const nn::Batch* next);
  Tensor predict_step(const nn::Batch* current, const nn::Batch* next);
  bool has_staged() const;
  void drop_staged();
  // Replica 0 of rank 0's parameters to every replica (broadcast): the initial weights, and
  // whatever set_weights did on one rank only.
  void broadcast_parameters();

  Group& group() { return *group_; }
  const std::vector<nn::Model*>& models() const { return models_; }
  const GradientReducer& reducer(int i) const { return *reducers_.at(static_cast<size_t>(i)); }
  long long bucket_bytes() const { return bucket_bytes_; }

 private:
  enum class StepKind { Train, Test, Predict };
  // What a replica holds for its next step after a call that passed `next`.
  enum class Ahead { None, Staged, Empty, Deferred };
  struct Share {
    nn::Batch batch;
    bool empty = false;
  };
  std::vector<Share> split(const nn::Batch& b, bool global) const;
  // Runs one step of `kind` on every local replica; outputs[i] gets replica i's predictions.
  nn::BatchStats run(StepKind kind, const nn::Batch* current, const nn::Batch* next, std::vector<Tensor>* outputs);
  [[noreturn]] void fail(const std::vector<std::exception_ptr>& errors, const std::vector<uint64_t>& steps);

  std::shared_ptr<Group> group_;
  std::vector<nn::Model*> models_;
  long long bucket_bytes_;
  std::vector<std::unique_ptr<GradientReducer>> reducers_;
  ReplicaThreads threads_;
  std::vector<Ahead> ahead_;
  std::vector<nn::Batch> deferred_;  // a next batch a replica could not stage (it ran without rows)
};

}  // namespace hpcnn::distribute
