// The model's training step, top to bottom: train_step takes a staged batch, compute_gradients
// runs forward, the loss and backward into the gradient buffer, apply_gradients steps the
// optimizer; then the test and predict steps, the same forward pass without a backward. Around
// it: the weights, their trainable ranges, the optimizer state and the move to a device in
// nn/model_state.cpp; the step plans and the arena in nn/model_memory.cpp; compile's loss,
// metrics and class weights and the step's loss part (loss_and_stats) in nn/model_loss.cpp.
#include "nn/model.h"

#include <algorithm>
#include <cmath>

#include "core/cuda_async.h"
#include "nn/augmentation.h"
#include "nn/run_kinds.h"
#include "ops/ops.h"

namespace hpcnn::nn {

// ------------------------------------------------------------------ construction
Model::Model(Shape input_shape, std::vector<LayerPtr> layers, uint64_t seed)
    : Model(std::move(input_shape), Graph::chain(std::move(layers)), seed) {}

Model::Model(Shape input_shape, std::vector<Node> nodes, uint64_t seed)
    : graph_(std::move(input_shape), std::move(nodes)), seed_(seed), stager_(graph_.input_shape()) {
  for (int i = 0; i < graph_.size(); ++i) specs_.push_back(graph_.layer(i).param_specs(graph_.input_shapes(i).at(0)));
  layout_ = ParamLayout(specs_);
  std::vector<const Layer*> plain;
  for (int i = 0; i < graph_.size(); ++i) plain.push_back(&graph_.layer(i));
  regularization_ = Regularization(layout_, regularizers_of(plain, specs_));
  set_up_augmentation();
  params_ = Tensor::zeros({layout_.numel()});  // the padding between arrays stays zero (nn/param_layout.h)
  grads_ = Tensor::zeros({layout_.numel()});
  set_trainable(std::vector<bool>(graph_.size(), true));
  initialize_weights();  // glorot_uniform, zeros or ones, keyed by the seed
  bind_layers();
}

void Model::set_up_augmentation() {
  check_augmentation_placement(graph_, specs_);
  LeadingAugmentation aug = leading_augmentation(graph_);
  staged_nodes_ = aug.layers;
  stager_.set_augmentation(std::move(aug));
}

Model::~Model() {
  try {
    stager_.drop_ahead();
    wait_device();  // the last step's backward and optimizer kernels may still read our buffers
  } catch (...) {
    // A device error here has nothing left to report to; the buffers are freed regardless.
  }
}

void Model::wait_device() const {
  if (device_.is_cuda()) cuda::synchronize_compute(device_.index);
}

// Gives each layer views of its parameters and gradients in the two buffers, shaped in the
// layout of the buffers' device.
void Model::bind_layers() {
  size_t k = 0;
  for (int i = 0; i < graph_.size(); ++i) {
    std::vector<Tensor> p, g;
    for (size_t j = 0; j < specs_[i].size(); ++j, ++k) {
      const Shape shape = layout_.device_shape(k, params_.device());
      p.push_back(params_.view(layout_.offset(k), shape));
      g.push_back(grads_.view(layout_.offset(k), shape));
    }
    graph_.layer(i).bind(p, g);
  }
}

void Model::require_compiled(const char* purpose) const {
  HPCNN_CHECK_ARG(compiled(), "the model must be compiled before ", purpose, ": call model.compile(...)");
}

// ------------------------------------------------------------------ the training step
// One batch's way: train_step -> take_batch (staged on the device) -> train_on ->
// compute_gradients (forward, loss_and_stats, backward) -> apply_gradients (the optimizer).
BatchStats Model::train_step(const Batch* current, const Batch* next) {
  require_compiled("training");
  BatchStats st = train_on(take_batch(current, true, true));
  // For the next training step (train_on counted this one); uploads while this step's backward runs.
  if (next) stager_.stage_ahead(*next, true, staging_step(true));
  return st;
}

StepContext Model::staging_step(bool training) const { return StepContext{training, seed_, step_ + 1, 0, 0}; }

StagedBatch Model::take_batch(const Batch* current, bool with_targets, bool training) {
  // The step's buffers first: a batch too big for the memory fails before its rows are gathered.
  if (current && !current->error && current->x.defined() && current->x.rank() >= 1) {
    const long long n = current->rows ? static_cast<long long>(current->rows->size()) : current->x.dim(0);
    if (n > 0) ensure_buffers(n);
  }
  const StepContext step = staging_step(training);
  StagedBatch b = current ? stager_.stage(*current, with_targets, step) : stager_.take_ahead(with_targets, step);
  ensure_buffers(b.x.dim(0));
  return b;
}

BatchStats Model::train_on(const StagedBatch& b) {
  BatchStats st = compute_gradients(b);
  apply_gradients();
  return st;
}

// ------------------------------------------------------------------ the step's two halves
// (data parallelism: nn/gradient_sync.h; on one device sync_ is null and the halves run back to
// back in train_on)
BatchStats Model::compute_gradients(const StagedBatch& b) {
  require_compiled("training");
  const long long n = b.x.defined() && b.x.rank() >= 1 ? b.x.dim(0) : 0;
  const long long global = b.global_rows > 0 ? b.global_rows : n;
  ++step_;
  step_had_rows_ = false;  // set once the loss is finite: nothing to commit before
  step_first_row_ = b.first_row;
  BatchStats st;
  if (n > 0) {
    ensure_buffers(n);
    const StepPlan& plan = plans_[static_cast<int>(StepMode::Train)];
    Tensor logits = forward(b.x, StepMode::Train);
    const int out = plan.end - 1;
    Tensor dlogits;
    if (plan.grad_buffer[out] >= 0) dlogits = arena_view(StepMode::Train, plan.grad_buffer[out], logits.shape());
    st = loss_and_stats(logits, b, dlogits.defined() ? &dlogits : nullptr, true, 1.0f / static_cast<float>(global));
  }
  // Over every replica before the check: all of them see the same sums and stop at the same step.
  st = reduce_stats(st);
  if (!std::isfinite(st.loss_sum))
    throw NonFiniteLoss(cat("the loss is ", std::isnan(st.loss_sum) ? "NaN" : "inf",
                            ": training diverged (try a smaller learning rate); the weights were not updated"),
                        st.loss_sum / static_cast<double>(std::max(1LL, st.n)));
  step_had_rows_ = n > 0;
  if (sync_) sync_->begin_gradients();
  if (n > 0) {
    backward(b.x);
  } else {
    grads_.fill_zero();  // this replica adds nothing, but takes part in every sum
    if (sync_)
      for (int i = loss_end() - 1; i >= 0; --i) sync_->gradients_ready(i);
  }
  if (sync_) sync_->finish_gradients();
  return st;
}

// Runs the plan's forward nodes on x (every node up to the loss in a training step). Inference on
// the CPU takes the batch in chunks of rows whose activations stay in a core's caches, side by
// side on the threads where the batch has enough (nn/chunked_inference.h).
Tensor Model::forward(const Tensor& x, StepMode mode) {
  const long long n = x.dim(0);
  const bool inference = mode == StepMode::Test || mode == StepMode::Predict;
  const InferenceChunks chunks = inference ? inference_chunks(n) : InferenceChunks{n, false, graph_.size()};
  const StepPlan& plan = plans_[static_cast<int>(mode)];
  if (chunks.rows >= n) return forward_rows(x, mode, 0, step_buffers(mode), vals_, xs_, plan.end);
  auto rows = [&](const Tensor& r, long long row0, const BufferPlace& place, std::vector<Tensor>& vals,
                  std::vector<Tensor>& xs, int to) { return forward_rows(r, mode, row0, place, vals, xs, to); };
  auto tail = [&](std::vector<Tensor>& vals, int from, int to) {
    StepContext ctx{false, seed_, step_, 0};  // inference; the tail's folds are made now
    run_nodes(x, mode, ctx, step_buffers(mode), vals, xs_, from, to);
  };
  return chunked_.run(x, graph_, plan, std::min(staged_nodes_, plan.end), chunks, step_buffers(mode), vals_, xs_,
                      device_, rows, tail);
}

Tensor Model::forward_rows(const Tensor& x, StepMode mode, long long row0, const BufferPlace& place,
                           std::vector<Tensor>& vals, std::vector<Tensor>& xs, int to) {
  const StepPlan& plan = plans_[static_cast<int>(mode)];
  StepContext ctx{mode == StepMode::Train, seed_, step_, 0};
  ctx.first_row = (mode == StepMode::Train ? step_first_row_ : 0) + row0;  // the global row of x's row 0
  if (mode == StepMode::Call) ctx = call_context();
  ctx.later_chunk = row0 > 0;
  vals.assign(graph_.size(), Tensor());
  // The leading augmentation nodes ran in the stager: x is the last one's output (each earlier one
  // is read only by the next, nn/augmentation.h; the last one's readers read x).
  const int start = std::min(staged_nodes_, plan.end);
  if (start > 0) vals[start - 1] = x;
  run_nodes(x, mode, ctx, place, vals, xs, start, to);
  return vals[to - 1];
}

void Model::run_nodes(const Tensor& x, StepMode mode, StepContext& ctx, const BufferPlace& place,
                      std::vector<Tensor>& vals, std::vector<Tensor>& xs, int from, int to) {
  const StepPlan& plan = plans_[static_cast<int>(mode)];
  const long long n = x.dim(0);
  const StepValues value{x, vals};
  for (int i = from; i < to; ++i) {
    ctx.layer_index = i;
    const Shape full = with_batch(n, graph_.output_shape(i));
    if (plan.run[i] == RunKind::View) {  // its input reshaped, or what a convolution computed for it
      vals[i] = value(plan.view_source[i]).reshape(full);
      continue;
    }
    Tensor y = place.view(plan.value_buffer[i], full);
    run_forward(graph_, plan, i, value, xs, y, ctx);  // nn/run_kinds.cpp: what each kind runs
    vals[i] = std::move(y);
  }
}

// Between forward and backward: the loss, Model::loss_and_stats (nn/model_loss.cpp), then its
// statistics summed over the replicas, before the finite check.
BatchStats Model::reduce_stats(BatchStats st) {
  if (!sync_) return st;
  // [loss_sum, correct, n, metrics...]: every replica sends the same count (a replica without rows
  // this step has no metric sums yet: zeros).
  st.metrics.resize(metrics_.size(), 0.0);
  std::vector<double> v{st.loss_sum, st.correct, static_cast<double>(st.n)};
  v.insert(v.end(), st.metrics.begin(), st.metrics.end());
  sync_->reduce_stats(v.data(), static_cast<int>(v.size()));
  BatchStats out{v[0], v[1], static_cast<long long>(v[2]), {}};
  out.metrics.assign(v.begin() + 3, v.end());
  return out;
}

// Backward over the training plan, from the gradient of node end - 1 (written by the loss) to the
// first node that needs one; every route of nn/step_plan.h.
void Model::backward(const Tensor& x) {
  const StepPlan& plan = plans_[static_cast<int>(StepMode::Train)];
  const long long n = x.dim(0);
  grads_now_.assign(graph_.size(), Tensor());
  for (int i = 0; i < plan.end; ++i)
    if (plan.grad_buffer[i] >= 0)
      grads_now_[i] = arena_view(StepMode::Train, plan.grad_buffer[i], with_batch(n, graph_.output_shape(i)));
  StepContext ctx{true, seed_, step_, 0};
  ctx.first_row = step_first_row_;
  for (int i = plan.end - 1; i >= 0; --i) {
    if (plan.runs_backward[i]) {
      ctx.layer_index = i;
      backward_node(i, x, ctx);
    }
    // Node i's parameter gradients are written (on a GPU: enqueued): a data-parallel sync may
    // start summing them while the earlier nodes' backward runs. Every node is announced, also
    // one without a backward, so that every replica starts the same sums.
    if (sync_) sync_->gradients_ready(i);
  }
}

void Model::backward_node(int i, const Tensor& x, const StepContext& ctx) {
  const StepPlan& plan = plans_[static_cast<int>(StepMode::Train)];
  const long long n = x.dim(0);
  const std::vector<int>& in = graph_.inputs(i);
  const std::vector<GradRoute>& routes = plan.routes[i];
  Tensor& dy = grads_now_[i];
  if (plan.back[i] == BackKind::PassThrough) {  // dx = dy for every input (a block tail's Add, ReLU too)
    for (size_t s = 0; s < in.size(); ++s) {
      if (routes[s] == GradRoute::Copy) ops::copy(dy, grads_now_[in[s]]);
      else if (routes[s] == GradRoute::Accumulate) ops::accumulate(grads_now_[in[s]], dy);
      // Alias: the input's gradient is dy's buffer already; None: not needed
    }
    return;
  }
  dx_targets_.assign(in.size(), Tensor());
  dx_ptrs_.assign(in.size(), nullptr);
  for (size_t s = 0; s < in.size(); ++s) {
    if (routes[s] == GradRoute::Write) {
      dx_ptrs_[s] = &grads_now_[in[s]];
    } else if (routes[s] == GradRoute::WriteTemp) {
      dx_targets_[s] = arena_view(StepMode::Train, plan.temps[i][s], with_batch(n, graph_.output_shape(in[s])));
      dx_ptrs_[s] = &dx_targets_[s];
    }
  }
  Tensor& gathered = in[0] == kModelInput ? dy : grads_now_[in[0]];  // Adding's target (never the batch)
  run_backward(graph_, plan, i, StepValues{x, vals_}, xs_, dy, dx_ptrs_, gathered, ctx);  // nn/run_kinds.cpp
  for (size_t s = 0; s < in.size(); ++s)
    if (routes[s] == GradRoute::WriteTemp) ops::accumulate(grads_now_[in[s]], dx_targets_[s]);
}

void Model::apply_gradients() {
  require_compiled("training");
  regularization_.add_gradients(params_, grads_);
  // Training-time state (BatchNormalization's moving statistics) commits with the step: only now,
  // after the loss was found finite; a replica that had no rows in this step has none to commit.
  if (step_had_rows_) {
    StepContext ctx{true, seed_, step_, 0};
    ctx.first_row = step_first_row_;
    for (int i = 0; i < loss_end(); ++i) {
      ctx.layer_index = i;
      graph_.layer(i).commit_training_step(ctx);
    }
  }
  // Data parallelism: that state becomes the mean over the replicas (nn/gradient_sync.h), so the
  // replicas stay identical. Every replica calls it, with rows or without (it is collective).
  if (sync_) {
    const ParamRange st = state_range();
    if (st.end > st.begin) sync_->average_state(params_.view(st.begin, {st.end - st.begin}), step_had_rows_);
  }
  optimizer_->step(params_, grads_, trainable_ranges_);
}

// ------------------------------------------------------------------ evaluation and prediction
// The same forward pass over the test and predict plans, without a backward pass.
BatchStats Model::test_step(const Batch* current, const Batch* next) {
  require_compiled("evaluation");
  BatchStats st = test_on(take_batch(current, true, false));
  if (next) stager_.stage_ahead(*next, true, staging_step(false));
  return st;
}

BatchStats Model::test_on(const StagedBatch& b) {
  Tensor logits = forward(b.x, StepMode::Test);
  const long long n = logits.dim(0);
  return reduce_stats(loss_and_stats(logits, b, nullptr, false, 1.0f / static_cast<float>(n)));
}

BatchStats Model::evaluate_staged(const StagedBatch& b) {
  require_compiled("evaluation");
  const long long n = b.x.defined() && b.x.rank() >= 1 ? b.x.dim(0) : 0;
  if (n > 0) {
    ensure_buffers(n);
    return test_on(b);
  }
  return reduce_stats(BatchStats{});
}

Tensor Model::predict_step(const Batch* current, const Batch* next) {
  StagedBatch b = take_batch(current, false, false);
  Tensor out = forward(b.x, StepMode::Predict).to(Device::cpu());  // a copy: buffers are reused
  if (next) stager_.stage_ahead(*next, false, staging_step(false));
  return out;
}

// ------------------------------------------------------------------ the model called in training mode
// A key of its own: the seed mixed with a constant (so no call draws what a training step of the
// same counter draws) and the call counter as the step.
StepContext Model::call_context() const {
  return StepContext{true, seed_ ^ 0x9E3779B97F4A7C15ULL, calls_, 0, 0};
}

Tensor Model::call_training(const Batch& batch) {
  stager_.drop_ahead();
  if (batch.x.defined() && batch.x.rank() >= 1 && !batch.error) {
    const long long n = batch.rows ? static_cast<long long>(batch.rows->size()) : batch.x.dim(0);
    if (n > 0) ensure_buffers(n);
  }
  ++calls_;
  StagedBatch b = stager_.stage(batch, false, call_context());
  ensure_buffers(b.x.dim(0));
  Tensor out = forward(b.x, StepMode::Call).to(Device::cpu());  // a copy: buffers are reused
  // Keras' BatchNormalization updates its moving statistics in a training call.
  const StepContext ctx = call_context();
  for (int i = 0; i < graph_.size(); ++i) graph_.layer(i).commit_training_step(ctx);
  return out;
}

}  // namespace hpcnn::nn
