#include "nn/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/cuda_async.h"
#include "core/cuda_runtime.h"
#include "core/rng.h"
#include "nn/augmentation.h"
#include "nn/layers.h"
#include "ops/ops.h"

namespace hpcnn::nn {

namespace {

// glorot_uniform as Keras: U(-limit, limit), limit = sqrt(6 / (fan_in + fan_out)); counter-based
// draws, so the same seed gives the same weights on any machine and thread count.
void initialize(float* p, long long count, const ParamSpec& s, uint64_t seed, uint64_t stream) {
  if (s.init == Init::Zeros) {
    std::memset(p, 0, sizeof(float) * count);
    return;
  }
  if (s.init == Init::Ones) {
    std::fill(p, p + count, 1.0f);
    return;
  }
  double limit = std::sqrt(6.0 / static_cast<double>(s.fan_in + s.fan_out));
  for (long long i = 0; i < count; ++i)
    p[i] = static_cast<float>((2.0 * rng::uniform(seed, stream, static_cast<uint64_t>(i)) - 1.0) * limit);
}

}  // namespace

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
  params_ = Tensor::empty({layout_.numel()});
  grads_ = Tensor::zeros({layout_.numel()});
  set_trainable(std::vector<bool>(graph_.size(), true));
  // Drawn in Keras' element order, straight into the buffer: a new model is on the CPU, whose
  // layout is Keras' for every parameter.
  static_assert(cpu::kConv2dKernelLayout == KernelLayout::HWIO, "initialization writes Keras' layout");
  for (size_t k = 0; k < layout_.size(); ++k)
    initialize(params_.f32() + layout_.offset(k), shape_numel(layout_.spec(k).shape), layout_.spec(k), seed_, k + 1);
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

// ------------------------------------------------------------------ weights
std::vector<Tensor> Model::get_weights() const {
  std::vector<Tensor> out;
  for (size_t k = 0; k < layout_.size(); ++k) out.push_back(layout_.to_keras(params_, k));
  return out;
}

void Model::set_weights(const std::vector<Tensor>& ws) {
  size_t expected = 0;
  for (auto& s : specs_) expected += s.size();
  HPCNN_CHECK_ARG(ws.size() == expected, "set_weights: the model has ", expected, " weight arrays, got ", ws.size());
  size_t k = 0;
  for (int i = 0; i < graph_.size(); ++i)
    for (size_t j = 0; j < specs_[i].size(); ++j, ++k)
      HPCNN_CHECK_ARG(ws[k].shape() == specs_[i][j].shape, "set_weights: weight ", k, " (layer ", i, " ",
                      graph_.layer(i).kind(), " ", specs_[i][j].name, ") has shape ", shape_str(ws[k].shape()),
                      ", expected ", shape_str(specs_[i][j].shape));
  for (k = 0; k < layout_.size(); ++k) layout_.from_keras(ws[k], params_, k);
}

// ------------------------------------------------------------------ compile and device
// ---- compile's loss, metrics and class weights (the loss part of the step)
void Model::compile(std::unique_ptr<Optimizer> optimizer, const LossSpec& loss) {
  HPCNN_CHECK_ARG(optimizer != nullptr, "compile: an optimizer is required");
  const Shape& out = graph_.output_shapes().back();
  HPCNN_CHECK_ARG(out.size() == 1, "compile: the model output ", shape_str(out),
                  " is not (units,): add Flatten() and a Dense output layer");
  HPCNN_CHECK_ARG(loss.label_smoothing >= 0.f && loss.label_smoothing <= 1.f,
                  "compile: label_smoothing must be in [0, 1], got ", loss.label_smoothing);
  auto* last = dynamic_cast<const ActivationLayer*>(&graph_.layer(graph_.size() - 1));
  const bool softmax_last = last && last->is_softmax();
  const bool sigmoid_last = last && !last->is_softmax() && last->spec().act == Act::Sigmoid;
  const bool categorical = loss.kind == Loss::CategoricalCrossentropy || loss.kind == Loss::SparseCategoricalCrossentropy;
  bool fused = false;
  if (categorical) {
    if (!loss.from_logits)
      HPCNN_CHECK_ARG(softmax_last, "compile: cross-entropy expects probabilities, but the last layer has no "
                      "softmax: use activation='softmax' on the last layer, or a loss with from_logits=True");
    HPCNN_CHECK_ARG(!(softmax_last && loss.from_logits), "compile: from_logits=True but the last layer already "
                    "applies softmax; drop one of the two");
    fused = softmax_last && !loss.from_logits;
  } else if (loss.kind == Loss::BinaryCrossentropy) {
    HPCNN_CHECK_ARG(!(sigmoid_last && loss.from_logits), "compile: from_logits=True but the last layer already "
                    "applies sigmoid; drop one of the two");
    fused = sigmoid_last;  // from the logits: exact where the probabilities round to 0 or 1
  }
  optimizer->to(device_, layout_);
  optimizer_ = std::move(optimizer);
  loss_ = loss;
  fused_output_ = fused;
  metrics_.clear();
  stager_.set_targets(loss.kind, out.at(0));
  plans_current_ = false;  // the fused softmax / sigmoid changes what runs
}

void Model::set_metrics(const std::vector<MetricSpec>& metrics) {
  require_compiled("setting its metrics");
  const long long units = graph_.output_shapes().back().at(0);
  for (const MetricSpec& m : metrics) {
    const bool accuracy = m.kind == RowMetric::CategoricalAccuracy || m.kind == RowMetric::SparseCategoricalAccuracy ||
                          m.kind == RowMetric::TopKCategoricalAccuracy;
    HPCNN_CHECK_ARG(accuracy || !takes_class_indices(loss_.kind), "compile: this metric compares the outputs with "
                    "float targets, but sparse_categorical_crossentropy takes class indices");
    HPCNN_CHECK_ARG(m.kind != RowMetric::SparseCategoricalAccuracy || takes_class_indices(loss_.kind) || units == 1,
                    "compile: sparse_categorical_accuracy needs class indices (loss='sparse_categorical_crossentropy')");
    HPCNN_CHECK_ARG(m.k >= 1, "compile: top-k accuracy needs k >= 1, got ", m.k);
  }
  wait_device();  // a queued step may still write the old stats buffer
  metrics_ = metrics;
  stats_ = metric_out_ = Tensor();  // re-made for the new count at the next step
  capacity_ = 0;
}

void Model::set_class_weights(const std::vector<float>& weights) {
  for (size_t c = 0; c < weights.size(); ++c)
    HPCNN_CHECK_ARG(std::isfinite(weights[c]) && weights[c] >= 0.f, "class_weight: the weight of class ", c,
                    " must be a finite number >= 0, got ", weights[c]);
  wait_device();  // a queued step may still read the old table
  class_weights_host_ = weights;
  class_weights_ = Tensor();
  if (weights.empty()) return;
  Tensor host = Tensor::empty({static_cast<long long>(weights.size())});
  std::copy(weights.begin(), weights.end(), host.f32());
  class_weights_ = device_.is_cpu() ? host : host.to(device_);
}

void Model::set_trainable(const std::vector<bool>& per_node) {
  HPCNN_CHECK_ARG(per_node.size() == static_cast<size_t>(graph_.size()), "set_trainable: the model has ",
                  graph_.size(), " layers, got ", per_node.size(), " flags");
  // The optimizer steps the trainable weights (ParamSpec::trainable) of the trainable nodes:
  // their [offset, offset + size) runs, sorted and merged where adjacent (nn/param_layout.h packs
  // trainable weights first, so with no frozen layer this is one range).
  std::vector<ParamRange> runs;
  size_t k = 0;  // index of the node's first weight array in layout_ (the model's order)
  for (int i = 0; i < graph_.size(); ++i)
    for (size_t j = 0; j < specs_[i].size(); ++j, ++k)
      if (per_node[i] && layout_.spec(k).trainable)
        runs.push_back({layout_.offset(k), layout_.offset(k) + shape_numel(layout_.spec(k).shape)});
  std::sort(runs.begin(), runs.end(), [](const ParamRange& a, const ParamRange& b) { return a.begin < b.begin; });
  std::vector<ParamRange> ranges;
  for (const ParamRange& r : runs) {
    if (r.end == r.begin) continue;
    if (!ranges.empty() && ranges.back().end == r.begin) ranges.back().end = r.end;  // adjacent: one range
    else ranges.push_back(r);
  }
  for (int i = 0; i < graph_.size(); ++i) graph_.layer(i).set_trainable(per_node[i]);
  trainable_ = per_node;
  trainable_ranges_ = std::move(ranges);
  regularization_.set_trainable(trainable_ranges_);  // frozen weights carry no penalty (Keras)
  plans_current_ = false;  // the backward pass covers other nodes
}

long long Model::num_trainable_params() const {
  long long n = 0;
  for (const ParamRange& r : trainable_ranges_) n += r.end - r.begin;
  return n;
}

void Model::to(Device d) {
  if (d == device_) return;
  stager_.drop_ahead();
  if (d.is_cuda()) cuda::require_device(d.index);
  wait_device();  // queued work may still read the buffers about to be replaced
  // Both buffers are made on `d` before either replaces the old one: an OutOfMemory here leaves
  // the model whole on its old device (not parameters on one device and gradients on the other).
  // The parameters and the optimizer's state are converted to d's layout on the way.
  Tensor params = layout_.move(params_, d);
  Tensor grads = Tensor::zeros(params_.shape(), DType::F32, d);
  if (optimizer_) optimizer_->to(d, layout_);
  params_ = std::move(params);
  grads_ = std::move(grads);
  bind_layers();
  device_ = d;
  capacity_ = 0;  // buffers are re-made on the new device at the next step
  vals_.clear();
  grads_now_.clear();
  xs_.clear();
  dx_targets_.clear();
  arena_ = stats_ = row_w_ = metric_out_ = Tensor();
  stager_.to(d);  // staging buffers, too, are made again on the new device
  set_class_weights(std::vector<float>(class_weights_host_));  // the class-weight table, on the new device
}

// ------------------------------------------------------------------ optimizer state
std::vector<StateBuffer> Model::optimizer_state(bool keras_layout) const {
  require_compiled("reading the optimizer state");
  std::vector<StateBuffer> out;
  for (const StateBuffer& s : optimizer_->state()) {
    Tensor host = s.value.to(Device::cpu());  // a copy, also on the CPU: the caller keeps it
    if (keras_layout && !layout_.same_layout(device_, Device::cpu())) host = layout_.convert(host, device_, Device::cpu());
    out.push_back({s.name, host});
  }
  return out;
}

void Model::set_optimizer_state(const std::vector<StateBuffer>& keras, long long iterations) {
  require_compiled("restoring the optimizer state");
  HPCNN_CHECK_ARG(iterations >= 0, "optimizer iterations must be >= 0, got ", iterations);
  std::vector<StateBuffer> on_device;
  for (const StateBuffer& s : keras) {
    HPCNN_CHECK_ARG(s.value.defined() && s.value.dtype() == DType::F32 && s.value.numel() == layout_.numel(),
                    optimizer_->name(), ": state buffer '", s.name, "' must be float32 with ", layout_.numel(),
                    " elements (one per parameter of the model), got ",
                    s.value.defined() ? shape_str(s.value.shape()) : std::string("nothing"));
    const Tensor host = s.value.device().is_cpu() ? s.value : s.value.to(Device::cpu());
    // convert() makes a new buffer (never an alias of the caller's array) in the device's layout.
    Tensor t = layout_.convert(host.reshape({layout_.numel()}), Device::cpu(), device_);
    on_device.push_back({s.name, device_.is_cpu() ? t : t.to(device_)});
  }
  wait_device();  // the last step's optimizer kernels may still use the buffers being replaced
  optimizer_->set_state(std::move(on_device), layout_.numel(), device_);
  optimizer_->iterations = iterations;
}

// ------------------------------------------------------------------ plans and buffers
int Model::loss_end() const { return graph_.size() - (fused_output_ ? 1 : 0); }

namespace {

constexpr long long kArenaAlignment = 256;  // bytes: cuDNN's and the widest vector loads' alignment

std::vector<BufferLife> lives(const StepPlan& plan, long long n) {
  std::vector<BufferLife> out;
  for (const StepPlan::Buffer& b : plan.buffers)
    out.push_back({checked_mul(checked_mul(b.per_sample, n, "a step buffer"), 4, "a step buffer"), b.first, b.last});
  return out;
}

// Every buffer alive for the whole step: none shares memory with another (memory_reuse off).
void keep_apart(StepPlan& plan, int nodes) {
  for (StepPlan::Buffer& b : plan.buffers) {
    b.first = 0;
    b.last = 2 * nodes + 1;
  }
}

}  // namespace

std::vector<bool> Model::nodes_with_trainable_weights() const {
  std::vector<bool> trains(graph_.size(), false);
  for (int i = 0; i < graph_.size(); ++i)
    for (const ParamSpec& s : specs_[i]) trains[i] = trains[i] || (trainable_[i] && s.trainable);
  return trains;
}

void Model::make_plans() {
  const std::vector<bool> trains = nodes_with_trainable_weights();
  plans_[static_cast<int>(StepMode::Train)] = plan_step(graph_, StepMode::Train, loss_end(), trains);
  plans_[static_cast<int>(StepMode::Test)] = plan_step(graph_, StepMode::Test, loss_end(), trains);
  plans_[static_cast<int>(StepMode::Predict)] = plan_step(graph_, StepMode::Predict, graph_.size(), trains);
  if (!memory_reuse_)
    for (StepPlan& plan : plans_) keep_apart(plan, graph_.size());
  plans_current_ = true;
}

void Model::set_memory_reuse(bool on) {
  memory_reuse_ = on;
  plans_current_ = false;
}

MemoryReport Model::memory_report(long long n) const {
  HPCNN_CHECK_ARG(n > 0, "memory_report: the batch size must be positive, got ", n);
  const std::vector<bool> trains = nodes_with_trainable_weights();
  MemoryReport r;
  r.batch = n;
  StepPlan train = plan_step(graph_, StepMode::Train, loss_end(), trains);
  r.train = pack_buffers(lives(train, n), kArenaAlignment).bytes;
  keep_apart(train, graph_.size());
  r.train_keep_all = pack_buffers(lives(train, n), kArenaAlignment).bytes;
  r.test = pack_buffers(lives(plan_step(graph_, StepMode::Test, loss_end(), trains), n), kArenaAlignment).bytes;
  r.predict = pack_buffers(lives(plan_step(graph_, StepMode::Predict, graph_.size(), trains), n), kArenaAlignment).bytes;
  long long acts = 0, biggest = shape_numel(graph_.input_shape());
  for (int i = 0; i < graph_.size(); ++i) {
    const long long sz = shape_numel(graph_.output_shape(i));
    biggest = std::max(biggest, sz);
    const Layer& l = graph_.layer(i);
    if (l.is_merge() || !(l.forward_is_view(true) && l.forward_is_view(false))) acts += sz;
  }
  r.one_buffer_per_activation = 4 * n * (acts + 2 * biggest + shape_numel(graph_.output_shapes().back()));
  return r;
}

Tensor Model::arena_view(StepMode mode, int buffer, const Shape& shape) const {
  const int m = static_cast<int>(mode);
  return arena_.view(arena_layouts_[m].offsets.at(buffer) / 4, shape);
}

void Model::ensure_buffers(long long n) {
  if (n <= capacity_ && plans_current_ && stats_.defined()) return;
  const long long cap = std::max(n, capacity_);
  if (!plans_current_) make_plans();
  std::array<ArenaLayout, kModes> layouts;
  long long need = 0;
  for (int m = 0; m < kModes; ++m) {
    layouts[m] = pack_buffers(lives(plans_[m], cap), kArenaAlignment);
    need = std::max(need, layouts[m].bytes);
  }
  if (arena_.defined() && stats_.defined() && need <= arena_bytes()) {
    // The arena is big enough: only the layouts change. Work still queued on the GPU uses the
    // old layout's offsets, and every later op runs after it on the same stream.
    arena_layouts_ = std::move(layouts);
    ensure_loss_buffers(cap);
    capacity_ = cap;
    return;
  }
  wait_device();  // the last step's backward may still read the buffers about to be replaced
  // Release the old arena first (also the step's views of it: on a GPU the new one needs that
  // memory) and mark the set incomplete: capacity_ 0 and stats_ undefined until every buffer
  // exists. After an OutOfMemory ("try a smaller batch_size") the next call then allocates afresh
  // for its own size instead of reusing a half-made set of the failed size.
  capacity_ = 0;
  stats_ = arena_ = row_w_ = metric_out_ = Tensor();
  vals_.clear();
  grads_now_.clear();
  xs_.clear();
  dx_targets_.clear();
  arena_ = Tensor::empty({need / 4}, DType::F32, device_);
  // doubles: loss sum, correct, penalty, then one per metric
  stats_ = Tensor::zeros({2 * (3 + static_cast<long long>(metrics_.size()))}, DType::F32, device_);
  ensure_loss_buffers(cap);
  arena_layouts_ = std::move(layouts);
  capacity_ = cap;
}

// The loss's own buffers next to the arena: the per-row weights and (with a fused activation and
// metrics) the outputs the metrics read, for `cap` rows.
void Model::ensure_loss_buffers(long long cap) {
  const long long units = graph_.output_shapes().back().at(0);
  const bool need_out = fused_output_ && !metrics_.empty();
  const bool rows_ok = row_w_.defined() && row_w_.numel() >= cap;
  const bool out_ok = !need_out || (metric_out_.defined() && metric_out_.numel() >= cap * units);
  if (rows_ok && out_ok) return;
  wait_device();  // queued work may still read the buffers about to be replaced
  row_w_ = metric_out_ = Tensor();
  row_w_ = Tensor::empty({cap}, DType::F32, device_);
  if (need_out) metric_out_ = Tensor::empty({cap * units}, DType::F32, device_);
}

// ------------------------------------------------------------------ the step
Tensor Model::forward(const Tensor& x, StepMode mode) {
  const StepPlan& plan = plans_[static_cast<int>(mode)];
  StepContext ctx{mode == StepMode::Train, seed_, step_, 0};
  ctx.first_row = mode == StepMode::Train ? step_first_row_ : 0;  // the global row of x's row 0
  const long long n = x.dim(0);
  vals_.assign(graph_.size(), Tensor());
  // The leading augmentation nodes ran in the stager: x is the last one's output (each earlier one
  // is read only by the next, nn/augmentation.h; the last one's readers read x).
  const int start = std::min(staged_nodes_, plan.end);
  if (start > 0) vals_[start - 1] = x;
  for (int i = start; i < plan.end; ++i) {
    ctx.layer_index = i;
    Layer& l = graph_.layer(i);
    const std::vector<int>& in = graph_.inputs(i);
    const Shape full = with_batch(n, graph_.output_shape(i));
    if (plan.forward_view[i]) {
      vals_[i] = value(in[0], x).reshape(full);
      continue;
    }
    Tensor y = arena_view(mode, plan.value_buffer[i], full);
    if (l.is_merge()) {
      xs_.clear();
      for (int p : in) xs_.push_back(value(p, x));
      static_cast<MergeLayer&>(l).forward_merge(xs_, y, ctx);
    } else {
      l.forward(value(in[0], x), y, ctx);
    }
    vals_[i] = std::move(y);
  }
  return vals_[plan.end - 1];
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
  if (l.backward_is_view()) {  // dx = dy for every input
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
  } else {
    l.backward(value(in[0], x), vals_[i], dy, dx_ptrs_[0], ctx);
  }
  for (size_t s = 0; s < in.size(); ++s)
    if (routes[s] == GradRoute::WriteTemp) ops::accumulate(grads_now_[in[s]], dx_targets_[s]);
}

// ---- the loss part of the step: loss, its gradient, sample/class weights and metrics
Tensor Model::row_weights(const StagedBatch& b, bool training) {
  // Per-row weights only when the batch has sample weights or class weights apply: the default
  // path passes none. Class weights weigh training steps only (fit's class_weight; Keras leaves
  // validation and evaluate unweighted).
  const bool class_weighted = class_weights_.defined() && training;
  if (!b.w.defined() && !class_weighted) return Tensor();
  Tensor w = row_w_.view(0, {b.y.dim(0)});
  ops::row_weights(b.y, b.w.defined() ? &b.w : nullptr, class_weighted ? &class_weights_ : nullptr, w);
  return w;
}

Tensor Model::metric_outputs(const Tensor& logits, bool training) {
  if (!fused_output_) return logits;
  // Metrics see the model's outputs: the fused softmax / sigmoid (the last node) runs here for them.
  const int last = graph_.size() - 1;
  Tensor out = metric_out_.view(0, logits.shape());
  graph_.layer(last).forward(logits, out, StepContext{training, seed_, step_, last});
  return out;
}

// grad_scale: the factor of dlogits, 1 / rows of the global batch (the mean over every replica's rows).
BatchStats Model::loss_and_stats(const Tensor& logits, const StagedBatch& b, Tensor* dlogits, bool training,
                                 float grad_scale) {
  stats_.fill_zero();
  double* s = reinterpret_cast<double*>(stats_.raw());
  const long long n = logits.dim(0);
  const Tensor w = row_weights(b, training);
  const Tensor* wp = w.defined() ? &w : nullptr;
  switch (loss_.kind) {
    case Loss::CategoricalCrossentropy:
    case Loss::SparseCategoricalCrossentropy:
      ops::softmax_xent(logits, b.y, dlogits, grad_scale, s, wp, loss_.label_smoothing);
      break;
    case Loss::BinaryCrossentropy:
      ops::row_loss({RowLoss::BinaryCrossentropy, loss_.from_logits || fused_output_, loss_.label_smoothing}, logits,
                    b.y, wp, dlogits, grad_scale, s);
      break;
    case Loss::MeanSquaredError:
      ops::row_loss({RowLoss::MeanSquaredError, false, 0.f}, logits, b.y, wp, dlogits, grad_scale, s);
      break;
    case Loss::MeanAbsoluteError:
      ops::row_loss({RowLoss::MeanAbsoluteError, false, 0.f}, logits, b.y, wp, dlogits, grad_scale, s);
      break;
  }
  if (!metrics_.empty()) {
    const Tensor out = metric_outputs(logits, training);
    for (size_t i = 0; i < metrics_.size(); ++i) ops::metric_rows(metrics_[i], out, b.y, s + 3 + i);
  }
  regularization_.add_penalty(params_, s + 2);
  Tensor host = device_.is_cpu() ? stats_ : stats_.to(Device::cpu());
  const double* h = reinterpret_cast<const double*>(host.raw());
  // Keras' loss: the batch mean plus the penalty; loss_sum is per sample, so the penalty counts n times.
  BatchStats st{h[0] + static_cast<double>(n) * h[2], h[1], n, {}};
  st.metrics.assign(h + 3, h + 3 + metrics_.size());
  return st;
}

void Model::require_compiled(const char* purpose) const {
  HPCNN_CHECK_ARG(compiled(), "the model must be compiled before ", purpose, ": call model.compile(...)");
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

BatchStats Model::train_step(const Batch* current, const Batch* next) {
  require_compiled("training");
  BatchStats st = train_on(take_batch(current, true, true));
  // For the next training step (train_on counted this one); uploads while this step's backward runs.
  if (next) stager_.stage_ahead(*next, true, staging_step(true));
  return st;
}

BatchStats Model::test_step(const Batch* current, const Batch* next) {
  require_compiled("evaluation");
  BatchStats st = test_on(take_batch(current, true, false));
  if (next) stager_.stage_ahead(*next, true, staging_step(false));
  return st;
}

Tensor Model::predict_step(const Batch* current, const Batch* next) {
  StagedBatch b = take_batch(current, false, false);
  Tensor out = forward(b.x, StepMode::Predict).to(Device::cpu());  // a copy: buffers are reused
  if (next) stager_.stage_ahead(*next, false, staging_step(false));
  return out;
}

// ------------------------------------------------------------------ the step's two halves
// (data parallelism: nn/gradient_sync.h; on one device sync_ is null and the halves run back to
// back in train_on)
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

BatchStats Model::train_on(const StagedBatch& b) {
  BatchStats st = compute_gradients(b);
  apply_gradients();
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

std::vector<ParamRange> Model::layer_gradient_ranges() const {
  // Per node, its trainable weights' span (adjacent: trainable weights are packed first, in the
  // model's order, nn/param_layout.h).
  std::vector<ParamRange> out(static_cast<size_t>(graph_.size()));
  size_t k = 0;
  for (int i = 0; i < graph_.size(); ++i)
    for (size_t j = 0; j < specs_[i].size(); ++j, ++k)
      if (trainable_[i] && layout_.spec(k).trainable) {
        const ParamRange w{layout_.offset(k), layout_.offset(k) + shape_numel(layout_.spec(k).shape)};
        ParamRange& l = out[static_cast<size_t>(i)];
        if (l.end == l.begin) l = w;
        else l = {std::min(l.begin, w.begin), std::max(l.end, w.end)};
      }
  return out;
}

ParamRange Model::state_range() const {
  // Non-trainable weights are packed after all trainable ones (nn/param_layout.h): one range.
  ParamRange r{layout_.numel(), layout_.numel()};
  for (size_t k = 0; k < layout_.size(); ++k)
    if (!layout_.spec(k).trainable) r.begin = std::min(r.begin, layout_.offset(k));
  return r;
}

}  // namespace hpcnn::nn
