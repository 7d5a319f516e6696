#include "nn/sequential.h"

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

Sequential::Sequential(Shape input_shape, std::vector<LayerPtr> layers, uint64_t seed)
    : input_shape_(std::move(input_shape)), layers_(std::move(layers)), seed_(seed), stager_(input_shape_) {
  HPCNN_CHECK_ARG(!input_shape_.empty(), "the model needs an input shape (InputLayer(input_shape=...))");
  for (long long d : input_shape_)
    HPCNN_CHECK_ARG(d > 0, "input shape ", shape_str(input_shape_), " has a non-positive dimension");
  HPCNN_CHECK_ARG(!layers_.empty(), "the model has no layers");
  Shape cur = input_shape_;
  for (size_t i = 0; i < layers_.size(); ++i) {
    in_shapes_.push_back(cur);
    try {
      cur = layers_[i]->output_shape(cur);
    } catch (const ValueError& e) {
      throw ValueError(cat("layer ", i, " (", layers_[i]->kind(), "): ", e.what()));
    }
    out_shapes_.push_back(cur);
    specs_.push_back(layers_[i]->param_specs(in_shapes_.back()));
  }
  layout_ = ParamLayout(specs_);
  std::vector<const Layer*> plain;
  for (const LayerPtr& l : layers_) plain.push_back(l.get());
  regularization_ = Regularization(layout_, regularizers_of(plain, specs_));
  // Augmentation layers: the leading ones are the stager's; others run as ops, before any weights.
  check_augmentation_placement(plain, specs_);
  LeadingAugmentation aug = leading_augmentation(plain, input_shape_);
  staged_layers_ = aug.layers;
  stager_.set_augmentation(std::move(aug));
  params_ = Tensor::empty({layout_.numel()});
  grads_ = Tensor::zeros({layout_.numel()});
  set_trainable(std::vector<bool>(layers_.size(), true));
  // Drawn in Keras' element order, straight into the buffer: a new model is on the CPU, whose
  // layout is Keras' for every parameter.
  static_assert(cpu::kConv2dKernelLayout == KernelLayout::HWIO, "initialization writes Keras' layout");
  for (size_t k = 0; k < layout_.size(); ++k)
    initialize(params_.f32() + layout_.offset(k), shape_numel(layout_.spec(k).shape), layout_.spec(k), seed_, k + 1);
  bind_layers();
}

Sequential::~Sequential() {
  try {
    stager_.drop_ahead();
    wait_device();  // the last step's backward and optimizer kernels may still read our buffers
  } catch (...) {
    // A device error here has nothing left to report to; the buffers are freed regardless.
  }
}

void Sequential::wait_device() const {
  if (device_.is_cuda()) cuda::synchronize_compute(device_.index);
}

// Gives each layer views of its parameters and gradients in the two buffers, shaped in the
// layout of the buffers' device.
void Sequential::bind_layers() {
  size_t k = 0;
  for (size_t i = 0; i < layers_.size(); ++i) {
    std::vector<Tensor> p, g;
    for (size_t j = 0; j < specs_[i].size(); ++j, ++k) {
      const Shape shape = layout_.device_shape(k, params_.device());
      p.push_back(params_.view(layout_.offset(k), shape));
      g.push_back(grads_.view(layout_.offset(k), shape));
    }
    layers_[i]->bind(p, g);
  }
}

// ------------------------------------------------------------------ weights
std::vector<Tensor> Sequential::get_weights() const {
  std::vector<Tensor> out;
  for (size_t k = 0; k < layout_.size(); ++k) out.push_back(layout_.to_keras(params_, k));
  return out;
}

void Sequential::set_weights(const std::vector<Tensor>& ws) {
  size_t expected = 0;
  for (auto& s : specs_) expected += s.size();
  HPCNN_CHECK_ARG(ws.size() == expected, "set_weights: the model has ", expected, " weight arrays, got ", ws.size());
  size_t k = 0;
  for (size_t i = 0; i < layers_.size(); ++i)
    for (size_t j = 0; j < specs_[i].size(); ++j, ++k)
      HPCNN_CHECK_ARG(ws[k].shape() == specs_[i][j].shape, "set_weights: weight ", k, " (layer ", i, " ",
                      layers_[i]->kind(), " ", specs_[i][j].name, ") has shape ", shape_str(ws[k].shape()),
                      ", expected ", shape_str(specs_[i][j].shape));
  for (k = 0; k < layout_.size(); ++k) layout_.from_keras(ws[k], params_, k);
}

// ------------------------------------------------------------------ compile and device
void Sequential::compile(std::unique_ptr<Optimizer> optimizer, Loss loss, bool from_logits) {
  HPCNN_CHECK_ARG(optimizer != nullptr, "compile: an optimizer is required");
  const Shape& out = out_shapes_.back();
  HPCNN_CHECK_ARG(out.size() == 1, "compile: the model output ", shape_str(out),
                  " is not (classes,): add Flatten() and a Dense output layer");
  auto* last = dynamic_cast<const ActivationLayer*>(layers_.back().get());
  bool softmax_last = last && last->is_softmax();
  if (!from_logits)
    HPCNN_CHECK_ARG(softmax_last, "compile: cross-entropy expects probabilities, but the last layer has no "
                    "softmax: use activation='softmax' on the last layer, or a loss with from_logits=True");
  fused_softmax_ = softmax_last && !from_logits;
  HPCNN_CHECK_ARG(!(softmax_last && from_logits), "compile: from_logits=True but the last layer already applies "
                  "softmax; drop one of the two");
  optimizer->to(device_, layout_);
  optimizer_ = std::move(optimizer);
  loss_ = loss;
  stager_.set_targets(loss, out.at(0));
}

void Sequential::set_trainable(const std::vector<bool>& per_layer) {
  HPCNN_CHECK_ARG(per_layer.size() == layers_.size(), "set_trainable: the model has ", layers_.size(),
                  " layers, got ", per_layer.size(), " flags");
  // The optimizer steps the trainable weights (ParamSpec::trainable) of the trainable layers:
  // their [offset, offset + size) runs, sorted and merged where adjacent (nn/param_layout.h packs
  // trainable weights first, so with no frozen layer this is one range).
  std::vector<ParamRange> runs;
  size_t k = 0;  // index of the layer's first weight array in layout_ (the model's order)
  for (size_t i = 0; i < layers_.size(); ++i)
    for (size_t j = 0; j < specs_[i].size(); ++j, ++k)
      if (per_layer[i] && layout_.spec(k).trainable)
        runs.push_back({layout_.offset(k), layout_.offset(k) + shape_numel(layout_.spec(k).shape)});
  std::sort(runs.begin(), runs.end(), [](const ParamRange& a, const ParamRange& b) { return a.begin < b.begin; });
  std::vector<ParamRange> ranges;
  for (const ParamRange& r : runs) {
    if (r.end == r.begin) continue;
    if (!ranges.empty() && ranges.back().end == r.begin) ranges.back().end = r.end;  // adjacent: one range
    else ranges.push_back(r);
  }
  for (size_t i = 0; i < layers_.size(); ++i) layers_[i]->set_trainable(per_layer[i]);
  trainable_ = per_layer;
  trainable_ranges_ = std::move(ranges);
  regularization_.set_trainable(trainable_ranges_);  // frozen weights carry no penalty (Keras)
}

long long Sequential::num_trainable_params() const {
  long long n = 0;
  for (const ParamRange& r : trainable_ranges_) n += r.end - r.begin;
  return n;
}

void Sequential::to(Device d) {
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
  act_.clear();
  acts_now_.clear();
  grad_a_ = grad_b_ = dlogits_ = stats_ = Tensor();
  stager_.to(d);  // staging buffers, too, are made again on the new device
}

// ------------------------------------------------------------------ optimizer state
std::vector<StateBuffer> Sequential::optimizer_state(bool keras_layout) const {
  require_compiled("reading the optimizer state");
  std::vector<StateBuffer> out;
  for (const StateBuffer& s : optimizer_->state()) {
    Tensor host = s.value.to(Device::cpu());  // a copy, also on the CPU: the caller keeps it
    if (keras_layout && !layout_.same_layout(device_, Device::cpu())) host = layout_.convert(host, device_, Device::cpu());
    out.push_back({s.name, host});
  }
  return out;
}

void Sequential::set_optimizer_state(const std::vector<StateBuffer>& keras, long long iterations) {
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

// ------------------------------------------------------------------ buffers and staging
void Sequential::ensure_buffers(long long n) {
  if (n <= capacity_ && stats_.defined()) return;
  wait_device();  // the last step's backward may still read the buffers about to be replaced
  const long long cap = std::max(n, capacity_);
  // Release the old set first (also the step's views of it: on a GPU the new set needs that
  // memory) and mark it incomplete: capacity_ 0 and stats_ undefined until every buffer exists.
  // After an OutOfMemory ("try a smaller batch_size") the next call then allocates afresh for its
  // own size instead of reusing a half-made set of the failed size.
  capacity_ = 0;
  stats_ = Tensor();
  acts_now_.clear();
  act_.assign(layers_.size(), Tensor());
  grad_a_ = grad_b_ = dlogits_ = Tensor();
  long long biggest = shape_numel(input_shape_);
  for (size_t i = 0; i < layers_.size(); ++i) {
    long long sz = shape_numel(out_shapes_[i]);
    biggest = std::max(biggest, sz);
    if (static_cast<int>(i) < staged_layers_) continue;  // the stager's (its buffers hold their output)
    if (!(layers_[i]->forward_is_view(true) && layers_[i]->forward_is_view(false)))
      act_[i] = Tensor::empty(with_batch(cap, out_shapes_[i]), DType::F32, device_);
  }
  const long long grad_elems = checked_mul(cap, biggest, "the gradient buffer of a batch");
  grad_a_ = Tensor::empty({grad_elems}, DType::F32, device_);
  grad_b_ = Tensor::empty({grad_elems}, DType::F32, device_);
  dlogits_ = Tensor::empty(with_batch(cap, out_shapes_.back()), DType::F32, device_);
  stats_ = Tensor::zeros({6}, DType::F32, device_);  // three doubles: loss sum, correct, penalty
  capacity_ = cap;
}

// ------------------------------------------------------------------ the step
Tensor Sequential::forward(const Tensor& x, int end, bool training, long long first_row) {
  StepContext ctx{training, seed_, step_, 0, first_row};
  const long long n = x.dim(0);
  acts_now_.assign(layers_.size(), Tensor());
  Tensor cur = x;
  // The leading augmentation layers ran in the stager: x is their output.
  const int start = std::min(staged_layers_, end);
  if (start > 0) acts_now_[start - 1] = x;
  for (int i = start; i < end; ++i) {
    ctx.layer_index = i;
    Layer& l = *layers_[i];
    const Shape full = with_batch(n, out_shapes_[i]);
    Tensor y;
    if (l.forward_is_view(training)) {
      y = cur.reshape(full);
    } else {
      y = act_[i].view(0, full);
      l.forward(cur, y, ctx);
    }
    acts_now_[i] = y;
    cur = y;
  }
  return cur;
}

int Sequential::loss_end() const { return num_layers() - (fused_softmax_ ? 1 : 0); }

BatchStats Sequential::loss_and_stats(const Tensor& logits, const Tensor& target, Tensor* dlogits) {
  stats_.fill_zero();
  double* s = reinterpret_cast<double*>(stats_.raw());
  const long long n = logits.dim(0);
  ops::softmax_xent(logits, target, dlogits, 1.0f / static_cast<float>(n), s);
  regularization_.add_penalty(params_, s + 2);
  Tensor host = device_.is_cpu() ? stats_ : stats_.to(Device::cpu());
  const double* h = reinterpret_cast<const double*>(host.raw());
  // Keras' loss: the batch mean plus the penalty; loss_sum is per sample, so the penalty counts n times.
  return BatchStats{h[0] + static_cast<double>(n) * h[2], h[1], n};
}

void Sequential::require_compiled(const char* purpose) const {
  HPCNN_CHECK_ARG(compiled(), "the model must be compiled before ", purpose, ": call model.compile(...)");
}

StepContext Sequential::staging_step(bool training) const {
  return StepContext{training, seed_, step_ + 1, 0, 0};
}

StagedBatch Sequential::take_batch(const Batch* current, bool with_targets, bool training) {
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

BatchStats Sequential::train_step(const Batch* current, const Batch* next) {
  require_compiled("training");
  BatchStats st = train_on(take_batch(current, true, true));
  // For the next training step (train_on counted this one); uploads while this step's backward runs.
  if (next) stager_.stage_ahead(*next, true, staging_step(true));
  return st;
}

BatchStats Sequential::test_step(const Batch* current, const Batch* next) {
  require_compiled("evaluation");
  BatchStats st = test_on(take_batch(current, true, false));
  if (next) stager_.stage_ahead(*next, true, staging_step(false));
  return st;
}

Tensor Sequential::predict_step(const Batch* current, const Batch* next) {
  StagedBatch b = take_batch(current, false, false);
  Tensor out = forward(b.x, num_layers(), false, b.first_row).to(Device::cpu());  // a copy: buffers are reused
  if (next) stager_.stage_ahead(*next, false, staging_step(false));
  return out;
}

BatchStats Sequential::train_on(const StagedBatch& b) {
  ++step_;
  const int end = loss_end();
  Tensor logits = forward(b.x, end, true, b.first_row);
  Tensor dl = dlogits_.view(0, logits.shape());
  BatchStats st = loss_and_stats(logits, b.y, &dl);
  if (!std::isfinite(st.loss_sum))
    throw NonFiniteLoss(cat("the loss is ", std::isnan(st.loss_sum) ? "NaN" : "inf",
                            ": training diverged (try a smaller learning rate); the weights were not updated"),
                        st.loss_sum / static_cast<double>(st.n));

  // Backward, from the loss to the first layer that has trainable parameters (frozen layers
  // before it need neither their parameter gradients nor the gradient of their input).
  int first_param = end;
  for (int i = 0; i < end && first_param == end; ++i)
    if (trainable_[i])
      for (const ParamSpec& s : specs_[i])
        if (s.trainable) {
          first_param = i;
          break;
        }
  StepContext ctx{true, seed_, step_, 0, b.first_row};
  Tensor g = dl;
  bool g_in_a = false;
  for (int i = end - 1; i >= first_param; --i) {
    ctx.layer_index = i;
    Layer& l = *layers_[i];
    const Tensor& xi = i ? acts_now_[i - 1] : b.x;
    if (l.backward_is_view()) {
      g = g.reshape(xi.shape());
      continue;
    }
    const bool need_dx = i > first_param;
    Tensor dx;
    if (need_dx) dx = (g_in_a ? grad_b_ : grad_a_).view(0, xi.shape());
    l.backward(xi, acts_now_[i], g, need_dx ? &dx : nullptr, ctx);
    if (need_dx) {
      g = dx;
      g_in_a = !g_in_a;
    }
  }
  regularization_.add_gradients(params_, grads_);
  // Training-time state (BatchNormalization's moving statistics) commits with the step.
  for (int i = 0; i < end; ++i) {
    ctx.layer_index = i;
    layers_[i]->commit_training_step(ctx);
  }
  optimizer_->step(params_, grads_, trainable_ranges_);
  return st;
}

BatchStats Sequential::test_on(const StagedBatch& b) {
  Tensor logits = forward(b.x, loss_end(), false, b.first_row);
  return loss_and_stats(logits, b.y, nullptr);
}

}  // namespace hpcnn::nn
