// A model as its user sees it: built from one config per Keras layer (lowered to core layers by
// nn/lowering.h), and, under a distribution strategy, trained by several replicas of this process.
//
// It owns replica 0 (the model Python reads weights and reports from) and the recipe the others
// are built from: the Keras-level layer configs and their inputs, the seed, and what compile and
// the setters gave (optimizer config, loss, metrics, class weights, trainable flags). Every setter
// that changes what a step computes reaches every replica, so they stay alike; distribute() builds
// the other replicas from the recipe and a ReplicaSet (distribute/replica_set.h) that trains them
// all, undistribute() drops them again. Steps go to the ReplicaSet when there is one, to replica
// 0 otherwise.
//
// Not thread-safe: the caller (the binding) holds one lock around every call.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "distribute/group.h"
#include "distribute/replica_set.h"
#include "nn/config.h"
#include "nn/lowering.h"
#include "nn/model.h"

namespace hpcnn::distribute {

class ReplicatedModel {
 public:
  // layers: one Keras-level config per position; inputs: per position the positions it reads
  // (nn::kModelInput: the model's input), none for a chain. ValueError for a bad config or graph.
  ReplicatedModel(Shape input_shape, std::vector<nn::Config> layers, nn::PositionInputs inputs, uint64_t seed);
  ~ReplicatedModel();  // the ReplicaSet goes before the replicas it drives
  ReplicatedModel(const ReplicatedModel&) = delete;
  ReplicatedModel& operator=(const ReplicatedModel&) = delete;

  nn::Model& model() { return *model_; }  // replica 0
  const nn::Model& model() const { return *model_; }
  const nn::Lowering& lowering() const { return lowering_; }
  // This process's replicas, replica 0 first (just replica 0 without a strategy).
  std::vector<nn::Model*> replicas();

  // ---- per position (Keras layer)
  std::vector<Shape> layer_output_shapes() const { return nn::position_output_shapes(*model_, lowering_); }
  std::vector<std::vector<nn::ParamSpec>> layer_weights() const {
    return nn::position_weights(*model_, lowering_);
  }
  // One position's weights (Keras order and layouts, host copies of replica 0's, wherever the
  // model lives), and their replacement on every replica of this process, so that the replicas
  // stay alike (every rank makes the same call under MPI). ValueError naming the position, its
  // class and the expected shapes on a count or shape mismatch; nothing is changed then.
  std::vector<Tensor> get_layer_weights(int position) const;
  void set_layer_weights(int position, const std::vector<Tensor>& weights);

  // ---- what a step computes: set on every replica and kept for the replicas distribute() makes
  // Compiles replica 0 with a fresh optimizer (a strategy distributes the model again after it).
  void compile(const nn::Config& optimizer, const nn::LossSpec& loss);
  void set_metrics(const std::vector<nn::MetricSpec>& metrics);
  void set_class_weights(const std::vector<float>& weights);
  // One flag per position (Keras layer); its core layers take it.
  void set_trainable(const std::vector<bool>& per_position);
  // ValueError when not compiled.
  double learning_rate() const;
  void set_learning_rate(double lr);
  void set_learning_rate_schedule(const nn::Config& schedule);
  void set_optimizer_state(const std::vector<nn::StateBuffer>& keras, long long iterations);
  void set_weights(const std::vector<Tensor>& weights);
  void set_memory_reuse(bool on);
  void set_inference_chunk_rows(long long rows);
  void set_rng_state(uint64_t seed, uint64_t step);
  // Replica 0 to device d; ValueError under a strategy unless d is where it is already.
  void to(Device d);

  // ---- data parallelism
  // Makes this process's other replicas (the same layers, seed and compile settings, on the
  // group's devices), broadcasts replica 0 of rank 0's weights and sums gradients in buckets of
  // bucket_bytes. ValueError unless compiled and untrained since compile().
  void distribute(std::shared_ptr<Group> group, long long bucket_bytes);
  void undistribute();                         // back to replica 0 alone (it keeps its weights)
  void sync_replicas();                        // replica 0 of rank 0's weights to every replica
  ReplicaSet* replica_set() { return replicas_.get(); }  // null without a strategy

  // ---- steps: on every replica under a strategy, on replica 0 otherwise
  nn::BatchStats train_step(const nn::Batch* current, const nn::Batch* next);
  nn::BatchStats test_step(const nn::Batch* current, const nn::Batch* next);
  Tensor predict_step(const nn::Batch* current, const nn::Batch* next);
  // Keras' model(x, training=True) (nn::Model::call_training) on replica 0; its state (the
  // moving statistics) then copied to this process's other replicas, so they stay alike. Under
  // MPI each rank's call updates its own replicas (every rank calls with the batch it has).
  Tensor call_training(const nn::Batch& batch);
  bool has_staged() const;
  void drop_staged();

 private:
  nn::Model& compiled() const;  // replica 0, ValueError when not compiled
  // A position's weight arrays in get_weights' order: [first, first + count).
  std::pair<size_t, size_t> position_arrays(int position) const;

  Shape input_shape_;
  std::vector<nn::Config> layers_;  // the recipe: Keras-level configs, their inputs, lowered
  nn::PositionInputs inputs_;
  nn::Lowering lowering_;
  std::unique_ptr<nn::Model> model_;
  std::optional<nn::Config> optimizer_;
  nn::LossSpec loss_;
  std::vector<nn::MetricSpec> metrics_;
  std::vector<float> class_weights_;    // [] : none
  std::vector<bool> trainable_;         // per core node
  std::vector<std::unique_ptr<nn::Model>> others_;  // replicas 1..
  std::unique_ptr<ReplicaSet> replicas_;
};

}  // namespace hpcnn::distribute
