#include "distribute/replicated_model.h"

#include <utility>

#include "core/errors.h"
#include "nn/factory.h"

namespace hpcnn::distribute {

ReplicatedModel::ReplicatedModel(Shape input_shape, std::vector<nn::Config> layers, nn::PositionInputs inputs,
                                 uint64_t seed)
    : input_shape_(std::move(input_shape)), layers_(std::move(layers)), inputs_(std::move(inputs)),
      lowering_(nn::lower(layers_, inputs_)), model_(nn::build_model(input_shape_, lowering_, seed)),
      trainable_(lowering_.core.size(), true) {}

ReplicatedModel::~ReplicatedModel() { undistribute(); }

std::vector<nn::Model*> ReplicatedModel::replicas() {
  std::vector<nn::Model*> v{model_.get()};
  for (auto& o : others_) v.push_back(o.get());
  return v;
}

nn::Model& ReplicatedModel::compiled() const {
  if (!model_->optimizer()) throw ValueError("the model is not compiled");
  return *model_;
}

void ReplicatedModel::compile(const nn::Config& optimizer, const nn::LossSpec& loss) {
  std::unique_ptr<nn::Optimizer> o = nn::make_optimizer(optimizer);
  undistribute();
  model_->compile(std::move(o), loss);
  optimizer_ = optimizer;
  loss_ = loss;
  metrics_.clear();  // compile clears the model's metrics (set_metrics follows)
}

void ReplicatedModel::set_metrics(const std::vector<nn::MetricSpec>& metrics) {
  for (nn::Model* m : replicas()) m->set_metrics(metrics);  // every replica: reduce_stats sums the same count
  metrics_ = metrics;
}

void ReplicatedModel::set_class_weights(const std::vector<float>& weights) {
  for (nn::Model* m : replicas()) m->set_class_weights(weights);
  class_weights_ = weights;
}

void ReplicatedModel::set_trainable(const std::vector<bool>& per_position) {
  std::vector<bool> per_node = nn::core_trainable(per_position, lowering_);
  for (nn::Model* m : replicas()) m->set_trainable(per_node);
  trainable_ = std::move(per_node);
}

double ReplicatedModel::learning_rate() const { return compiled().optimizer()->learning_rate(); }

void ReplicatedModel::set_learning_rate(double lr) {
  compiled();
  for (nn::Model* m : replicas()) m->optimizer()->set_learning_rate(lr);
}

void ReplicatedModel::set_learning_rate_schedule(const nn::Config& schedule) {
  compiled();
  for (nn::Model* m : replicas()) m->optimizer()->set_schedule(nn::make_learning_rate_schedule(schedule));
}

void ReplicatedModel::set_optimizer_state(const std::vector<nn::StateBuffer>& keras, long long iterations) {
  // Every replica of this process (each rank restores the same file: a resumed data-parallel run).
  for (nn::Model* m : replicas()) m->set_optimizer_state(keras, iterations);
}

void ReplicatedModel::set_weights(const std::vector<Tensor>& weights) {
  for (nn::Model* m : replicas()) m->set_weights(weights);
}

std::pair<size_t, size_t> ReplicatedModel::position_arrays(int position) const {
  HPCNN_CHECK_ARG(position >= 0 && position < lowering_.positions(), "layer weights: position ", position,
                  " of a model with ", lowering_.positions(), " layers");
  const std::vector<std::vector<nn::ParamSpec>> specs = model_->weight_specs();
  size_t first = 0, count = 0;
  for (int k = 0; k < lowering_.end(position); ++k)
    (k < lowering_.begin[static_cast<size_t>(position)] ? first : count) += specs[static_cast<size_t>(k)].size();
  return {first, count};
}

std::vector<Tensor> ReplicatedModel::get_layer_weights(int position) const {
  const auto [first, count] = position_arrays(position);
  return model_->get_weights(first, count);
}

void ReplicatedModel::set_layer_weights(int position, const std::vector<Tensor>& weights) {
  const auto [first, count] = position_arrays(position);
  const std::vector<nn::ParamSpec> specs = nn::position_weights(*model_, lowering_).at(static_cast<size_t>(position));
  std::string expected = "[";
  for (size_t j = 0; j < specs.size(); ++j)
    expected += (j ? ", " : "") + specs[j].name + " " + shape_str(specs[j].shape);
  expected += "]";
  const std::string kind = layers_.at(static_cast<size_t>(position)).get_string_or("class_name", "?");
  const std::string what = cat("layer ", position, " (", kind, ") expects ", count, " weight(s) ", expected);
  HPCNN_CHECK_ARG(weights.size() == count, what, ", got ", weights.size());
  for (size_t j = 0; j < count; ++j)
    HPCNN_CHECK_ARG(weights[j].shape() == specs[j].shape, what, "; weight ", j, " has shape ",
                    shape_str(weights[j].shape()));
  for (nn::Model* m : replicas()) m->set_weights(first, weights, what);
}

void ReplicatedModel::set_memory_reuse(bool on) {
  for (nn::Model* m : replicas()) m->set_memory_reuse(on);
}

void ReplicatedModel::set_inference_chunk_rows(long long rows) {
  for (nn::Model* m : replicas()) m->set_inference_chunk_rows(rows);
}

void ReplicatedModel::set_rng_state(uint64_t seed, uint64_t step) {
  for (nn::Model* m : replicas()) m->set_rng_state(seed, step);
}

void ReplicatedModel::to(Device d) {
  if (replicas_ && d != model_->device())
    throw ValueError(cat("the model trains with a distribution strategy on ", replicas_->group().devices().size(),
                         " replica(s) starting at ", model_->device().str(), ": its devices are the strategy's "
                         "(create the model in another strategy's scope to use other devices)"));
  model_->to(d);
}

void ReplicatedModel::distribute(std::shared_ptr<Group> group, long long bucket_bytes) {
  if (!model_->compiled() || !optimizer_) throw ValueError("distribute: the model must be compiled first");
  if (model_->optimizer()->iterations != 0)
    throw ValueError("distribute: the model has trained since compile(); a strategy takes a model at "
                     "compile() (build and compile it inside strategy.scope())");
  undistribute();
  model_->drop_staged();
  const std::vector<Device>& devices = group->devices();
  model_->to(devices[0]);
  for (size_t i = 1; i < devices.size(); ++i) {
    std::unique_ptr<nn::Model> m = nn::build_model(input_shape_, lowering_, model_->seed());
    m->set_memory_reuse(model_->memory_reuse());
    m->set_inference_chunk_rows(model_->inference_chunk_rows_override());
    m->set_rng_state(model_->seed(), model_->step());
    m->to(devices[i]);
    m->compile(nn::make_optimizer(*optimizer_), loss_);
    m->set_metrics(metrics_);
    m->set_class_weights(class_weights_);
    m->set_trainable(trainable_);
    others_.push_back(std::move(m));
  }
  replicas_ = std::make_unique<ReplicaSet>(std::move(group), replicas(), bucket_bytes);
  replicas_->broadcast_parameters();  // the same initial weights everywhere: replica 0 of rank 0's
}

void ReplicatedModel::undistribute() {
  replicas_.reset();  // detaches the reducers before the replicas go
  others_.clear();
}

void ReplicatedModel::sync_replicas() {
  if (replicas_) replicas_->broadcast_parameters();
}

nn::BatchStats ReplicatedModel::train_step(const nn::Batch* current, const nn::Batch* next) {
  return replicas_ ? replicas_->train_step(current, next) : model_->train_step(current, next);
}

nn::BatchStats ReplicatedModel::test_step(const nn::Batch* current, const nn::Batch* next) {
  return replicas_ ? replicas_->test_step(current, next) : model_->test_step(current, next);
}

Tensor ReplicatedModel::predict_step(const nn::Batch* current, const nn::Batch* next) {
  return replicas_ ? replicas_->predict_step(current, next) : model_->predict_step(current, next);
}

Tensor ReplicatedModel::call_training(const nn::Batch& batch) {
  for (auto& o : others_) o->drop_staged();
  Tensor out = model_->call_training(batch);
  if (!others_.empty()) {
    const std::vector<Tensor> weights = model_->get_weights();
    for (auto& o : others_) o->set_weights(weights);
  }
  return out;
}

bool ReplicatedModel::has_staged() const { return replicas_ ? replicas_->has_staged() : model_->has_staged(); }

void ReplicatedModel::drop_staged() {
  if (replicas_) replicas_->drop_staged();
  else model_->drop_staged();
}

}  // namespace hpcnn::distribute
