// The model's state: its weights (drawn at construction, read and written in Keras' order and
// layouts), which of them the optimizer steps (set_trainable and the ranges that follow from it),
// the optimizer's state for checkpoints, and the move of all of it to another device. The random
// state (seed, step) is the two fields model.h sets and reads.
#include "nn/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/cuda_runtime.h"
#include "core/rng.h"
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

void Model::initialize_weights() {
  // Drawn in Keras' element order, straight into the buffer: a new model is on the CPU, whose
  // layout is Keras' for every parameter.
  static_assert(cpu::kConv2dKernelLayout == KernelLayout::HWIO, "initialization writes Keras' layout");
  for (size_t k = 0; k < layout_.size(); ++k)
    initialize(params_.f32() + layout_.offset(k), shape_numel(layout_.spec(k).shape), layout_.spec(k), seed_, k + 1);
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

std::vector<Tensor> Model::get_weights(size_t first, size_t count) const {
  HPCNN_CHECK_ARG(first + count <= layout_.size(), "get_weights: arrays ", first, "..", first + count,
                  " of a model with ", layout_.size());
  std::vector<Tensor> out;
  for (size_t k = first; k < first + count; ++k) out.push_back(layout_.to_keras(params_, k));
  return out;
}

void Model::set_weights(size_t first, const std::vector<Tensor>& ws, const std::string& what) {
  HPCNN_CHECK_ARG(first + ws.size() <= layout_.size(), what, ": arrays ", first, "..", first + ws.size(),
                  " of a model with ", layout_.size());
  for (size_t j = 0; j < ws.size(); ++j)
    HPCNN_CHECK_ARG(ws[j].shape() == layout_.spec(first + j).shape, what, ": weight ", j, " (",
                    layout_.spec(first + j).name, ") has shape ", shape_str(ws[j].shape()), ", expected ",
                    shape_str(layout_.spec(first + j).shape));
  wait_device();  // the last step's optimizer kernels may still write these arrays
  for (size_t j = 0; j < ws.size(); ++j) layout_.from_keras(ws[j], params_, first + j);
}

// ------------------------------------------------------------------ optimizer state
std::vector<StateBuffer> Model::optimizer_state(bool keras_layout) const {
  require_compiled("reading the optimizer state");
  std::vector<StateBuffer> out;
  for (const StateBuffer& s : optimizer_->state()) {
    // pack() makes a new buffer, also on the CPU: the caller keeps it.
    const Tensor host = s.value.device().is_cpu() ? s.value : s.value.to(Device::cpu());
    out.push_back({s.name, layout_.pack(host, device_, keras_layout ? Device::cpu() : device_)});
  }
  return out;
}

void Model::set_optimizer_state(const std::vector<StateBuffer>& keras, long long iterations) {
  require_compiled("restoring the optimizer state");
  HPCNN_CHECK_ARG(iterations >= 0, "optimizer iterations must be >= 0, got ", iterations);
  std::vector<StateBuffer> on_device;
  for (const StateBuffer& s : keras) {
    HPCNN_CHECK_ARG(s.value.defined() && s.value.dtype() == DType::F32 && s.value.numel() == layout_.count(),
                    optimizer_->name(), ": state buffer '", s.name, "' must be float32 with ", layout_.count(),
                    " elements (one per parameter of the model), got ",
                    s.value.defined() ? shape_str(s.value.shape()) : std::string("nothing"));
    const Tensor host = s.value.device().is_cpu() ? s.value : s.value.to(Device::cpu());
    // unpack() makes a new buffer (never an alias of the caller's array) in the device's layout,
    // with the padding between arrays (zero).
    Tensor t = layout_.unpack(host.reshape({layout_.count()}), Device::cpu(), device_, "optimizer state");
    on_device.push_back({s.name, device_.is_cpu() ? t : t.to(device_)});
  }
  wait_device();  // the last step's optimizer kernels may still use the buffers being replaced
  optimizer_->set_state(std::move(on_device), layout_.numel(), device_);
  optimizer_->iterations = iterations;
}

// ------------------------------------------------------------------ trainable weights
void Model::set_trainable(const std::vector<bool>& per_node) {
  HPCNN_CHECK_ARG(per_node.size() == static_cast<size_t>(graph_.size()), "set_trainable: the model has ",
                  graph_.size(), " layers, got ", per_node.size(), " flags");
  // The optimizer steps the trainable weights (ParamSpec::trainable) of the trainable nodes:
  // their [offset, offset + size) runs, sorted and merged where adjacent (nn/param_layout.h: the
  // padding between arrays is in no range, so each array is usually a run of its own).
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

std::vector<ParamRange> Model::layer_gradient_ranges() const {
  // Per node, its trainable weights' span (trainable weights come first, in the model's order,
  // nn/param_layout.h; the span includes the zero padding between its arrays).
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
  // Non-trainable weights come after all trainable ones (nn/param_layout.h): one range (with the
  // zero padding between them, whose mean over replicas stays zero).
  ParamRange r{layout_.numel(), layout_.numel()};
  for (size_t k = 0; k < layout_.size(); ++k)
    if (!layout_.spec(k).trainable) r.begin = std::min(r.begin, layout_.offset(k));
  return r;
}

// ------------------------------------------------------------------ device
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
  release_step_buffers();  // the arena and the loss's buffers: made again on the new device at the next step
  stager_.to(d);  // staging buffers, too, are made again on the new device
  set_class_weights(std::vector<float>(class_weights_host_));  // the class-weight table, on the new device
}

}  // namespace hpcnn::nn
