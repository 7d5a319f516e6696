// The model's training step, top to bottom: train_step takes a staged batch, compute_gradients
// runs forward, the loss and backward into the gradient buffer, apply_gradients steps the
// optimizer; then the test and predict steps, the same forward pass without a backward. Around
// it: the weights, their trainable ranges, the optimizer state and the move to a device in
// nn/model_state.cpp; the step plans and the arena in nn/model_memory.cpp; compile's loss,
// metrics and class weights and the step's loss part (loss_and_stats) in nn/model_loss.cpp.
#include "nn/model.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include "core/cuda_async.h"
#include "core/thread_pool.h"
#include "nn/augmentation.h"
#include "nn/layers.h"
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

// Runs the plan's forward nodes on x (every node up to the loss in a training step).
//
// Inference (evaluate, predict) on the CPU takes the batch in chunks of rows small enough that a
// chunk's activations stay in a core's caches while every layer runs over them: all layers on
// rows [0, 8), then all on [8, 16), ... instead of each layer streaming the whole batch through
// memory to the next. No inference layer mixes rows, so the result is the same. At ResNet-20's
// 32x32x16 activations (64 KiB an image) a chunk of 8 rows is 512 KiB, one core's L2.
//
// Where the batch has enough rows (inference_chunks), the chunks after the first run side by
// side, one per thread, each op of a chunk on its thread alone: no barrier between the ops (a
// chunk's ~25 ops each split over the threads were ~25 barriers, ~10 % of a chunked predict),
// each thread's chunk in its own copy of the step's buffers (ensure_side_arena: rows of the step
// arena's buffers will not do, they share memory over the step and the threads are at different
// layers), so nothing is shared but the weights. The first chunk runs alone, its ops split over the threads: what a step derives
// from the weights (a folded conv+BN kernel, Conv2DLayer::fold) is made there once, and the later
// chunks, all of its size or smaller, only read it (StepContext::later_chunk). The last chunk,
// when shorter, runs alone as well.
//
// Chunks only pay where the weights, read again by every chunk, are small beside a chunk's
// activations (inference_chunks). A training step cannot chunk: its batch normalization reads
// the statistics of the whole batch.
Tensor Model::forward(const Tensor& x, StepMode mode) {
  const long long n = x.dim(0);
  const bool inference = mode == StepMode::Test || mode == StepMode::Predict;
  const InferenceChunks chunks = inference ? inference_chunks(n) : InferenceChunks{n, false, graph_.size()};
  if (chunks.rows >= n) return forward_rows(x, mode, 0, step_buffers(mode), vals_, xs_, plans_[static_cast<int>(mode)].end);
  return forward_in_chunks(x, mode, chunks);
}

Tensor Model::forward_in_chunks(const Tensor& x, StepMode mode, const InferenceChunks& chunks) {
  const StepPlan& plan = plans_[static_cast<int>(mode)];
  const long long n = x.dim(0), chunk = chunks.rows;
  const int start = std::min(staged_nodes_, plan.end);
  const int split = std::max(start + 1, std::min(chunks.split, plan.end));
  const bool whole_tail = split < plan.end;
  const Shape row_shape(x.shape().begin() + 1, x.shape().end());
  const long long x_row = shape_numel(row_shape);
  auto rows_of = [&](long long r0) { return x.view(r0 * x_row, with_batch(std::min(chunk, n - r0), row_shape)); };
  // What leaves a chunk. Every node: its output, copied into out. Nodes [0, split) only: the values
  // the later nodes read (`kept`: their own buffers, not views), copied into their buffers of the
  // step arena, which no chunk uses then (the chunks all run in the side arena: the step arena's
  // buffers share memory over the step, and a chunk's nodes would overwrite what an earlier chunk
  // kept there).
  std::vector<char> needed(graph_.size(), 0);
  if (whole_tail) {
    auto need = [&](int p) {
      if (p != kModelInput && p < split) needed[p] = 1;
    };
    for (int i = split; i < plan.end; ++i) {
      for (int p : graph_.inputs(i)) need(p);
      if (plan.residual[i] != kNoResidual) need(plan.residual[i]);
      if (plan.view_source[i] != kNotAView) need(plan.view_source[i]);
    }
    for (int p = split - 1; p >= start; --p)  // a view's value is its source's
      if (needed[p] && plan.forward_view[p]) need(plan.view_source[p]);
  }
  auto kept = [&](int p) { return needed[p] && p >= start && !plan.forward_view[p]; };
  Tensor out;
  long long out_row = 0;
  auto keep = [&](long long r0, const std::vector<Tensor>& vals, const Tensor& y) {
    if (!whole_tail) {
      out.view(r0 * out_row, y.shape()).copy_from(y);
      return;
    }
    for (int p = start; p < split; ++p)
      if (kept(p)) {
        const Tensor& v = vals[p];
        const long long row = v.numel() / v.dim(0);
        arena_view(mode, plan.value_buffer[p], with_batch(n, graph_.output_shape(p))).view(r0 * row, v.shape())
            .copy_from(v);
      }
  };
  const long long whole = (n - chunk) / chunk;  // chunks of full size after the first
  const int threads =
      chunks.side_by_side && whole >= 2 ? static_cast<int>(std::min<long long>(whole, get_num_threads())) : 1;
  // In the step arena when every node runs in chunks and the output is all that leaves them; in
  // the side arena when a whole-batch tail follows (see `kept`).
  if (whole_tail || threads > 1) ensure_side_arena(mode, chunk, threads);
  auto place = [&](int tid) { return whole_tail || tid > 0 ? side_buffers(tid) : step_buffers(mode); };
  const Tensor first = forward_rows(rows_of(0), mode, 0, place(0), vals_, xs_, split);
  if (!whole_tail) {
    out_row = first.numel() / std::min(chunk, n);
    out = Tensor::empty(with_batch(n, Shape(first.shape().begin() + 1, first.shape().end())), first.dtype(), device_);
  }
  keep(0, vals_, first);
  long long r0 = chunk;
  if (threads > 1) {
    // Each thread takes the next chunk when it is done with one, so a core slowed by other work
    // (a shared node, a noisy virtual machine) takes fewer: a chunk's rows do not depend on the
    // thread that runs them.
    std::atomic<long long> next{0};
    parallel_region([&](int tid, int) {
      std::vector<Tensor> vals, xs;
      for (long long k = next++; k < whole; k = next++) {
        const long long c0 = r0 + k * chunk;
        const Tensor y = forward_rows(rows_of(c0), mode, c0, place(tid), vals, xs, split);
        keep(c0, vals, y);
      }
    }, threads);
    r0 += whole * chunk;
  }
  for (; r0 < n; r0 += chunk) {
    const Tensor y = forward_rows(rows_of(r0), mode, r0, place(0), vals_, xs_, split);
    keep(r0, vals_, y);
  }
  if (!whole_tail) return out;
  // The tail on the whole batch, from the kept values (and views of them).
  vals_.assign(graph_.size(), Tensor());
  if (start > 0) vals_[start - 1] = x;
  for (int p = start; p < split; ++p) {
    if (!needed[p]) continue;
    const Shape full = with_batch(n, graph_.output_shape(p));
    vals_[p] = plan.forward_view[p] ? value(plan.view_source[p], x).reshape(full)
                                    : arena_view(mode, plan.value_buffer[p], full);
  }
  StepContext ctx{false, seed_, step_, 0};  // inference; the tail's folds are made now
  run_nodes(x, mode, ctx, step_buffers(mode), vals_, xs_, split, plan.end);
  return vals_[plan.end - 1];
}

Model::InferenceChunks Model::inference_chunks(long long n) const {
  const int nodes = graph_.size();
  if (!device_.is_cpu()) return {n, false, nodes};  // a GPU wants the whole batch at once
  const long long threads = get_num_threads();
  // Side by side: the first chunk alone, then one for every thread.
  auto side_by_side = [&](long long rows) { return threads > 1 && n >= (threads + 1) * rows; };
  if (chunk_rows_override_ > 0) {
    const long long rows = std::min(n, chunk_rows_override_);
    return {rows, side_by_side(rows), nodes};
  }
  long long largest = shape_numel(graph_.input_shape());  // floats per row
  long long all = largest;                                 // every layer's output, floats per row
  for (int i = 0; i < nodes; ++i) {
    largest = std::max(largest, shape_numel(graph_.output_shape(i)));
    all += shape_numel(graph_.output_shape(i));
  }
  const long long per_thread = std::max(kMinChunkRowsPerThread, kChunkBytesPerThread / (4 * std::max(1LL, largest)));
  // Every chunk reads the weights of its layers again: chunks pay only where a chunk's activations
  // outweigh them (ResNet-20: 8 rows of 1.8 MiB of activations against 1.1 MiB of weights). The
  // tutorial CNN's 8.4 MiB Dense kernel read per chunk of 8 rows made its predict 1.9x slower: its
  // dense layers and deep convolutions take the whole batch, its first layers chunks. The longest
  // prefix of the graph that passes, if it holds at least half of the activations; 0: none.
  auto chunked_prefix = [&](long long rows) {
    long long acts = shape_numel(graph_.input_shape()), weights = 0;
    int best = 0;
    long long best_acts = 0;
    for (int i = 0; i < nodes; ++i) {
      acts += shape_numel(graph_.output_shape(i));
      for (const ParamSpec& s : specs_[i]) weights += shape_numel(s.shape);
      if (rows * acts >= kChunkActivationsPerWeight * weights) {
        best = i + 1;
        best_acts = acts;
      }
    }
    return 2 * best_acts >= all ? best : 0;
  };
  if (side_by_side(per_thread))
    if (const int split = chunked_prefix(per_thread)) return {per_thread, true, split};
  const long long shared = per_thread * threads;  // one chunk at a time, its ops over the threads
  if (shared < n)
    if (const int split = chunked_prefix(shared)) return {shared, false, split};
  return {n, false, nodes};
}

void Model::set_inference_chunk_rows(long long rows) {
  HPCNN_CHECK_ARG(rows >= 0, "inference chunk rows must be >= 0 (0: chosen from the caches), got ", rows);
  chunk_rows_override_ = rows;
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
  auto value = [&](int p) -> const Tensor& { return p == kModelInput ? x : vals[p]; };
  for (int i = from; i < to; ++i) {
    ctx.layer_index = i;
    Layer& l = graph_.layer(i);
    const std::vector<int>& in = graph_.inputs(i);
    const Shape full = with_batch(n, graph_.output_shape(i));
    if (plan.forward_view[i]) {  // its input reshaped, or what a convolution computed for it
      vals[i] = value(plan.view_source[i]).reshape(full);
      continue;
    }
    Tensor y = buffer_view(place, plan.value_buffer[i], full);
    if (l.is_merge()) {
      xs.clear();
      for (int p : in) xs.push_back(value(p));
      static_cast<MergeLayer&>(l).forward_merge(xs, y, ctx);
    } else if (plan.residual[i] != kNoResidual) {  // a residual block's tail: its Add and ReLU too
      if (auto* norm = dynamic_cast<BatchNormLayer*>(&l)) {  // a training step: the last normalization
        norm->forward_residual(value(in[0]), value(plan.residual[i]), y, ctx);
      } else {  // an inference step: the last convolution (and the normalization folded into it)
        BatchNormLayer* bn =
            plan.folds[i] >= 0 ? &static_cast<BatchNormLayer&>(graph_.layer(plan.folds[i])) : nullptr;
        static_cast<Conv2DLayer&>(l).forward_residual(value(in[0]), value(plan.residual[i]), y, ctx, bn);
      }
    } else if (plan.folds[i] >= 0) {  // an inference step: the BatchNormalization after it folded in
      static_cast<Conv2DLayer&>(l).forward_folded(value(in[0]), y, ctx,
                                                  static_cast<BatchNormLayer&>(graph_.layer(plan.folds[i])));
    } else {
      l.forward(value(in[0]), y, ctx);
    }
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
  Layer& l = graph_.layer(i);
  const std::vector<int>& in = graph_.inputs(i);
  const std::vector<GradRoute>& routes = plan.routes[i];
  Tensor& dy = grads_now_[i];
  if (l.backward_is_view() || plan.tail[i] >= 0) {  // dx = dy for every input (a block tail's Add, ReLU too)
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
  if (l.is_merge()) {
    xs_.clear();
    for (int p : in) xs_.push_back(value(p, x));
    static_cast<MergeLayer&>(l).backward_merge(xs_, vals_[i], dy, dx_ptrs_, ctx);
  } else if (routes[0] == GradRoute::AddInto) {
    l.backward_adding(value(in[0], x), vals_[i], dy, grads_now_[in[0]], ctx);
  } else if (plan.residual[i] != kNoResidual) {  // a block tail's normalization: the ReLU's mask first
    static_cast<BatchNormLayer&>(l).backward_residual(value(in[0], x), vals_[i], dy, dx_ptrs_[0], ctx);
  } else {
    l.backward(value(in[0], x), vals_[i], dy, dx_ptrs_[0], ctx);
  }
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
