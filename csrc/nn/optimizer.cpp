#include "nn/optimizer.h"

#include "ops/ops.h"

namespace hpcnn::nn {

static void ensure_state(Tensor& s, const Tensor& like) {
  if (!s.defined() || s.shape() != like.shape() || s.device() != like.device())
    s = Tensor::zeros(like.shape(), DType::F32, like.device());
}

// The state buffers are aligned with the parameters: they move with the parameters' layout.
static void move_state(Tensor& s, Device d, const ParamLayout& layout) {
  if (s.defined() && s.device() != d) s = layout.move(s, d);
}

// The elements [r.begin, r.end) of a flat buffer, as a view (the same memory, on any device).
static Tensor part(const Tensor& t, const ParamRange& r) { return t.view(r.begin, {r.end - r.begin}); }

Adam::Adam(float lr, float b1, float b2, float eps) : beta1(b1), beta2(b2), epsilon(eps) {
  HPCNN_CHECK_ARG(lr > 0, "Adam: learning_rate must be positive, got ", lr);
  HPCNN_CHECK_ARG(b1 >= 0 && b1 < 1 && b2 >= 0 && b2 < 1, "Adam: beta_1 and beta_2 must be in [0, 1)");
  HPCNN_CHECK_ARG(eps > 0, "Adam: epsilon must be positive");
  learning_rate = lr;
}

void Adam::step(Tensor& params, const Tensor& grads, const std::vector<ParamRange>& trainable) {
  ensure_state(m_, params);
  ensure_state(v_, params);
  ++iterations;
  const AdamParams a{learning_rate, beta1, beta2, epsilon, iterations};
  for (const ParamRange& r : trainable) {
    Tensor p = part(params, r), m = part(m_, r), v = part(v_, r);
    ops::adam_step(p, part(grads, r), m, v, a);
  }
}

void Adam::to(Device d, const ParamLayout& layout) {
  // Both moments are copied before either is replaced: an OutOfMemory leaves them together on
  // the old device (step() would otherwise restart a moment that moved without its partner).
  Tensor m = m_, v = v_;
  move_state(m, d, layout);
  move_state(v, d, layout);
  m_ = std::move(m);
  v_ = std::move(v);
}

SGD::SGD(float lr, float mom, bool nest) : momentum(mom), nesterov(nest) {
  HPCNN_CHECK_ARG(lr > 0, "SGD: learning_rate must be positive, got ", lr);
  HPCNN_CHECK_ARG(mom >= 0 && mom < 1, "SGD: momentum must be in [0, 1), got ", mom);
  learning_rate = lr;
}

void SGD::step(Tensor& params, const Tensor& grads, const std::vector<ParamRange>& trainable) {
  ensure_state(velocity_, params);
  ++iterations;
  const SgdParams s{learning_rate, momentum, nesterov};
  for (const ParamRange& r : trainable) {
    Tensor p = part(params, r), vel = part(velocity_, r);
    ops::sgd_step(p, part(grads, r), vel, s);
  }
}

void SGD::to(Device d, const ParamLayout& layout) { move_state(velocity_, d, layout); }

}  // namespace hpcnn::nn
