#include "nn/optimizer.h"

#include "ops/ops.h"

namespace hpcnn::nn {

// The elements [r.begin, r.end) of a flat buffer, as a view (the same memory, on any device).
static Tensor part(const Tensor& t, const ParamRange& r) { return t.view(r.begin, {r.end - r.begin}); }

// ------------------------------------------------------------------ the state, for every optimizer
Optimizer::Optimizer(std::vector<std::string> state_names) : state_names_(std::move(state_names)) {
  state_.resize(state_names_.size());
}

Tensor& Optimizer::state_buffer(size_t i, const Tensor& params) {
  Tensor& s = state_.at(i);
  if (!s.defined() || s.shape() != params.shape() || s.device() != params.device())
    s = Tensor::zeros(params.shape(), DType::F32, params.device());
  return s;
}

std::vector<StateBuffer> Optimizer::state() const {
  std::vector<StateBuffer> out;
  for (const Tensor& s : state_)
    if (!s.defined()) return {};  // made together at the first step: all or none
  for (size_t i = 0; i < state_.size(); ++i) out.push_back({state_names_[i], state_[i]});
  return out;
}

void Optimizer::set_state(std::vector<StateBuffer> buffers, long long numel, Device d) {
  if (buffers.empty()) {
    for (Tensor& s : state_) s = Tensor();
    return;
  }
  std::string want;
  for (const std::string& n : state_names_) want += (want.empty() ? "" : ", ") + n;
  HPCNN_CHECK_ARG(buffers.size() == state_names_.size(), name(), " keeps the state buffers [", want, "], got ",
                  buffers.size(), " buffer(s)");
  std::vector<Tensor> next(state_names_.size());
  for (StateBuffer& b : buffers) {
    size_t i = 0;
    while (i < state_names_.size() && state_names_[i] != b.name) ++i;
    HPCNN_CHECK_ARG(i < state_names_.size(), name(), " has no state buffer '", b.name, "' (it keeps [", want, "])");
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

void Optimizer::to(Device d, const ParamLayout& layout) {
  // Every buffer is copied before any is replaced: an OutOfMemory leaves them together on the old
  // device (step() would otherwise restart a buffer that moved without its partners).
  std::vector<Tensor> moved = state_;
  for (Tensor& s : moved)
    if (s.defined() && s.device() != d) s = layout.move(s, d);
  state_ = std::move(moved);
}

// ------------------------------------------------------------------ Adam
Adam::Adam(float lr, float b1, float b2, float eps)
    : Optimizer({"momentum", "velocity"}), beta1(b1), beta2(b2), epsilon(eps) {
  HPCNN_CHECK_ARG(lr > 0, "Adam: learning_rate must be positive, got ", lr);
  HPCNN_CHECK_ARG(b1 >= 0 && b1 < 1 && b2 >= 0 && b2 < 1, "Adam: beta_1 and beta_2 must be in [0, 1)");
  HPCNN_CHECK_ARG(eps > 0, "Adam: epsilon must be positive");
  learning_rate = lr;
}

void Adam::step(Tensor& params, const Tensor& grads, const std::vector<ParamRange>& trainable) {
  Tensor& m_all = state_buffer(0, params);
  Tensor& v_all = state_buffer(1, params);
  ++iterations;
  const AdamParams a{learning_rate, beta1, beta2, epsilon, iterations};
  for (const ParamRange& r : trainable) {
    Tensor p = part(params, r), m = part(m_all, r), v = part(v_all, r);
    ops::adam_step(p, part(grads, r), m, v, a);
  }
}

// ------------------------------------------------------------------ SGD
SGD::SGD(float lr, float mom, bool nest) : Optimizer({"momentum"}), momentum(mom), nesterov(nest) {
  HPCNN_CHECK_ARG(lr > 0, "SGD: learning_rate must be positive, got ", lr);
  HPCNN_CHECK_ARG(mom >= 0 && mom < 1, "SGD: momentum must be in [0, 1), got ", mom);
  learning_rate = lr;
}

void SGD::step(Tensor& params, const Tensor& grads, const std::vector<ParamRange>& trainable) {
  Tensor& velocity = state_buffer(0, params);
  ++iterations;
  const SgdParams s{learning_rate, momentum, nesterov};
  for (const ParamRange& r : trainable) {
    Tensor p = part(params, r), vel = part(velocity, r);
    ops::sgd_step(p, part(grads, r), vel, s);
  }
}

}  // namespace hpcnn::nn
