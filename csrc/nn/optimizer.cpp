#include "nn/optimizer.h"

#include <algorithm>
#include <cmath>

namespace hpcnn::nn {

namespace {

void check_rate(const char* what, double lr) {
  HPCNN_CHECK_ARG(lr > 0 && std::isfinite(lr), what, ": learning_rate must be positive and finite, got ", lr);
}

void check_options(const std::string& name, const OptimizerOptions& o) {
  auto non_negative = [&](const char* key, double v) {
    HPCNN_CHECK_ARG(v >= 0 && std::isfinite(v), name, ": ", key, " must be >= 0 and finite, got ", v);
  };
  non_negative("weight_decay", o.weight_decay);
  non_negative("clipnorm", o.clipnorm);
  non_negative("global_clipnorm", o.global_clipnorm);
  non_negative("clipvalue", o.clipvalue);
  const int clips = (o.clipnorm > 0) + (o.global_clipnorm > 0) + (o.clipvalue > 0);
  HPCNN_CHECK_ARG(clips <= 1, name, ": only one of clipnorm, clipvalue and global_clipnorm can be set");
  for (long long k : o.no_decay) HPCNN_CHECK_ARG(k >= 0, name, ": no_decay holds a negative index ", k);
}

}  // namespace

// ------------------------------------------------------------------ Optimizer
Optimizer::Optimizer(double learning_rate, OptimizerOptions options, std::vector<std::string> state_names)
    : state_names_(std::move(state_names)), state_(state_names_.size()), learning_rate_(learning_rate),
      options_(std::move(options)) {
  check_rate("optimizer", learning_rate);
  check_options("optimizer", options_);
}

double Optimizer::learning_rate() const { return schedule_ ? schedule_->at(iterations) : learning_rate_; }

void Optimizer::set_learning_rate(double lr) {
  HPCNN_CHECK_ARG(!schedule_, name(), ": the learning rate follows a ", schedule_->name(),
                  " schedule and cannot be set; create the optimizer with a float learning_rate to set it");
  check_rate(name().c_str(), lr);
  learning_rate_ = lr;
}

std::vector<StateBuffer> Optimizer::state() const {
  for (const Tensor& s : state_)
    if (!s.defined()) return {};  // made together at the first step: all or none
  std::vector<StateBuffer> out;
  for (size_t i = 0; i < state_.size(); ++i) out.push_back({state_names_[i], state_[i]});
  return out;
}

void Optimizer::set_state(std::vector<StateBuffer> buffers, long long numel, Device d) {
  if (buffers.empty()) {
    for (Tensor& s : state_) s = Tensor();
    return;
  }
  std::string keeps;
  for (const std::string& n : state_names_) keeps += (keeps.empty() ? "" : ", ") + n;
  HPCNN_CHECK_ARG(buffers.size() == state_names_.size(), name(), " keeps the state buffers [", keeps, "], got ",
                  buffers.size(), " buffer(s)");
  std::vector<Tensor> next(state_names_.size());
  for (StateBuffer& b : buffers) {
    const size_t i = std::find(state_names_.begin(), state_names_.end(), b.name) - state_names_.begin();
    HPCNN_CHECK_ARG(i < state_names_.size(), name(), " has no state buffer '", b.name, "' (it keeps [", keeps, "])");
    HPCNN_CHECK_ARG(!next[i].defined(), name(), ": state buffer '", b.name, "' given twice");
    HPCNN_CHECK_ARG(b.value.defined() && b.value.dtype() == DType::F32 && b.value.numel() == numel, name(),
                    ": state buffer '", b.name, "' must be float32 with ", numel, " elements (one per parameter), got ",
                    b.value.defined() ? shape_str(b.value.shape()) : std::string("nothing"));
    HPCNN_CHECK_ARG(b.value.device() == d, name(), ": state buffer '", b.name, "' is on ", b.value.device().str(),
                    ", the parameters on ", d.str());
    next[i] = b.value.reshape({numel});
  }
  state_ = std::move(next);
}

Tensor* Optimizer::state_buffer(const char* wanted) {
  for (size_t i = 0; i < state_names_.size(); ++i)
    if (state_names_[i] == wanted) return &state_[i];
  return nullptr;
}

void Optimizer::to(Device d, const ParamLayout& layout) {
  // Every buffer is copied before any is replaced: an OutOfMemory leaves them together on the old
  // device (a step would otherwise restart a buffer that moved without its partners).
  std::vector<Tensor> moved = state_;
  for (Tensor& s : moved)
    if (s.defined() && s.device() != d) s = layout.move(s, d);
  state_ = std::move(moved);
  layout_ = layout;
  table_valid_ = false;  // made again on d at the next step
}

const SegmentTable& Optimizer::table_for(const std::vector<ParamRange>& trainable, Device d) {
  if (table_valid_ && table_.device() == d && trainable == table_ranges_) return table_;
  std::vector<VariableSpan> vars;
  auto add = [&](long long b, long long e, bool decay) {
    for (const ParamRange& r : trainable) {  // the variable's trainable part (all of it or nothing)
      const long long lo = std::max(b, r.begin), hi = std::min(e, r.end);
      if (lo < hi) vars.push_back({lo, hi, decay});
    }
  };
  if (layout_.size() == 0) {
    for (const ParamRange& r : trainable) vars.push_back({r.begin, r.end, true});
  } else {
    for (size_t k = 0; k < layout_.size(); ++k) {
      const long long b = layout_.offset(k), e = b + shape_numel(layout_.spec(k).shape);
      const bool excluded = std::find(options_.no_decay.begin(), options_.no_decay.end(),
                                      static_cast<long long>(k)) != options_.no_decay.end();
      add(b, e, !excluded);
    }
  }
  SegmentTable table(vars, d);
  Tensor scales;
  if (options_.clipnorm > 0 || options_.global_clipnorm > 0)
    scales = Tensor::empty({static_cast<long long>(table.variables())}, DType::F32, d);
  table_ = std::move(table);
  clip_scales_ = std::move(scales);
  table_ranges_ = trainable;
  table_valid_ = true;
  return table_;
}

void Optimizer::step(Tensor& params, const Tensor& grads, const std::vector<ParamRange>& trainable) {
  const SegmentTable& segs = table_for(trainable, params.device());
  for (Tensor& s : state_)
    if (!s.defined() || s.shape() != params.shape() || s.device() != params.device())
      s = Tensor::zeros(params.shape(), DType::F32, params.device());
  const double lr = learning_rate();
  ops::UpdateOptions o;
  if (options_.clipnorm > 0 || options_.global_clipnorm > 0) {
    const bool per_variable = options_.clipnorm > 0;
    ops::clip_scales(grads, segs, per_variable ? ops::ClipMode::PerVariable : ops::ClipMode::Global,
                     per_variable ? options_.clipnorm : options_.global_clipnorm, clip_scales_);
    o.clip_scales = &clip_scales_;
  }
  o.clipvalue = static_cast<float>(options_.clipvalue);
  o.decay = static_cast<float>(options_.weight_decay * lr);
  ++iterations;
  update(params, grads, segs, lr, o);
}

// ------------------------------------------------------------------ SGD
// Keras keeps SGD's velocity ("momentum") only with momentum.
SGD::SGD(double lr, float mom, bool nest, OptimizerOptions options)
    : Optimizer(lr, std::move(options), mom != 0.f ? std::vector<std::string>{"momentum"} : std::vector<std::string>{}),
      momentum(mom), nesterov(nest) {
  HPCNN_CHECK_ARG(mom >= 0 && mom < 1, "SGD: momentum must be in [0, 1), got ", mom);
}

void SGD::update(Tensor& params, const Tensor& grads, const SegmentTable& segs, double lr,
                 const ops::UpdateOptions& o) {
  ops::sgd_step(params, grads, state_buffer("momentum"), segs, SgdParams{static_cast<float>(lr), momentum, nesterov},
                o);
}

// ------------------------------------------------------------------ Adam, AdamW
// Keras 3's names: "momentum" (the first moment, m) and "velocity" (the second, v).
Adam::Adam(double lr, float b1, float b2, float eps, OptimizerOptions options)
    : Optimizer(lr, std::move(options), {"momentum", "velocity"}), beta1(b1), beta2(b2), epsilon(eps) {
  HPCNN_CHECK_ARG(b1 >= 0 && b1 < 1 && b2 >= 0 && b2 < 1, "Adam: beta_1 and beta_2 must be in [0, 1)");
  HPCNN_CHECK_ARG(eps > 0, "Adam: epsilon must be positive");
}

void Adam::update(Tensor& params, const Tensor& grads, const SegmentTable& segs, double lr,
                  const ops::UpdateOptions& o) {
  ops::adam_step(params, grads, *state_buffer("momentum"), *state_buffer("velocity"), segs,
                 AdamParams{static_cast<float>(lr), beta1, beta2, epsilon, iterations}, o);
}

AdamW::AdamW(double lr, float b1, float b2, float eps, OptimizerOptions options)
    : Adam(lr, b1, b2, eps, std::move(options)) {}

// ------------------------------------------------------------------ RMSprop
namespace {
// Keras 3's RMSprop keeps "velocity", "momentum" only with momentum, "average_gradient" only centered.
std::vector<std::string> rmsprop_state(float momentum, bool centered) {
  std::vector<std::string> names{"velocity"};
  if (momentum > 0) names.push_back("momentum");
  if (centered) names.push_back("average_gradient");
  return names;
}
}  // namespace

RMSprop::RMSprop(double lr, float r, float mom, float eps, bool c, OptimizerOptions options)
    : Optimizer(lr, std::move(options), rmsprop_state(mom, c)), rho(r), momentum(mom), epsilon(eps), centered(c) {
  HPCNN_CHECK_ARG(r >= 0 && r < 1, "RMSprop: rho must be in [0, 1), got ", r);
  HPCNN_CHECK_ARG(mom >= 0 && mom < 1, "RMSprop: momentum must be in [0, 1), got ", mom);
  HPCNN_CHECK_ARG(eps > 0, "RMSprop: epsilon must be positive");
}

void RMSprop::update(Tensor& params, const Tensor& grads, const SegmentTable& segs, double lr,
                     const ops::UpdateOptions& o) {
  ops::rmsprop_step(params, grads, *state_buffer("velocity"), state_buffer("momentum"),
                    state_buffer("average_gradient"), segs,
                    RmspropParams{static_cast<float>(lr), rho, momentum, epsilon, centered}, o);
}

}  // namespace hpcnn::nn
