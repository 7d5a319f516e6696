// The optimizer updates' dispatch (ops.h: SGD, Adam, RMSprop): checks, then optimizer_step_cpu.cpp
// or optimizer_step_cuda.cu (optimizer_step.h).
#include "ops/ops.h"

#include <cmath>

#include "ops/dispatch.h"
#include "ops/optimizer_step.h"
#include "ops/param_segments.h"

namespace hpcnn::ops {

namespace {

// A state buffer of an update: the parameters' shape, on their device.
void expect_state(const char* op, const char* name, const Tensor* t, const Tensor& params, bool required) {
  if (!t || !t->defined()) {
    HPCNN_CHECK_ARG(!required, op, ": ", name, " is missing");
    return;
  }
  expect_shape(op, name, *t, params.shape());
  same_device(op, {&params, t});
}

UpdateCommon common_of(const char* op, const UpdateOptions& o, const SegmentTable& segs) {
  UpdateCommon c;
  if (o.clip_scales) {
    expect_shape(op, "clip scales", *o.clip_scales, {static_cast<long long>(segs.variables())});
    HPCNN_CHECK_ARG(o.clip_scales->device() == segs.device(), op, ": clip scales are on ",
                    o.clip_scales->device().str(), " but the segment table on ", segs.device().str());
    c.clip_scales = o.clip_scales->f32();
  }
  HPCNN_CHECK_ARG(o.clipvalue >= 0.f && std::isfinite(o.clipvalue), op, ": clipvalue must be >= 0, got ",
                  o.clipvalue);
  HPCNN_CHECK_ARG(std::isfinite(o.decay), op, ": weight decay must be finite, got ", o.decay);
  c.clipvalue = o.clipvalue;
  c.decay = o.decay;
  return c;
}

void expect_update(const char* op, const Tensor& params, const Tensor& grads, const SegmentTable& segs) {
  expect_covered(op, "parameters", params, segs);
  expect_shape(op, "gradients", grads, params.shape());
  same_device(op, {&params, &grads});
}

}  // namespace

void sgd_step(Tensor& params, const Tensor& grads, Tensor* velocity, const SegmentTable& segs, const SgdParams& s,
              const UpdateOptions& o) {
  expect_update("sgd", params, grads, segs);
  expect_state("sgd", "velocity", velocity, params, s.momentum != 0.f);
  const UpdateCommon c = common_of("sgd", o, segs);
  float* vel = data_or_null(velocity);
  HPCNN_DISPATCH(params.device(), cpu::sgd_step(segs.data(), segs.size(), params.f32(), grads.f32(), vel, s, c),
                 cuda::sgd_step(device_index, segs.data(), segs.size(), params.f32(), grads.f32(), vel, s, c));
}

void adam_step(Tensor& params, const Tensor& grads, Tensor& m, Tensor& v, const SegmentTable& segs,
               const AdamParams& a, const UpdateOptions& o) {
  expect_update("adam", params, grads, segs);
  expect_state("adam", "first moments", &m, params, true);
  expect_state("adam", "second moments", &v, params, true);
  HPCNN_CHECK_ARG(a.t >= 1, "adam: step number must start at 1");
  const UpdateCommon c = common_of("adam", o, segs);
  HPCNN_DISPATCH(params.device(),
                 cpu::adam_step(segs.data(), segs.size(), params.f32(), grads.f32(), m.f32(), v.f32(), a, c),
                 cuda::adam_step(device_index, segs.data(), segs.size(), params.f32(), grads.f32(), m.f32(), v.f32(),
                                 a, c));
}

void rmsprop_step(Tensor& params, const Tensor& grads, Tensor& velocity, Tensor* momentum, Tensor* average_gradient,
                  const SegmentTable& segs, const RmspropParams& r, const UpdateOptions& o) {
  expect_update("rmsprop", params, grads, segs);
  expect_state("rmsprop", "velocity", &velocity, params, true);
  expect_state("rmsprop", "momentum", momentum, params, r.momentum > 0.f);
  expect_state("rmsprop", "average gradient", average_gradient, params, r.centered);
  const UpdateCommon c = common_of("rmsprop", o, segs);
  float* mom = data_or_null(momentum);
  float* avg = data_or_null(average_gradient);
  HPCNN_DISPATCH(params.device(),
                 cpu::rmsprop_step(segs.data(), segs.size(), params.f32(), grads.f32(), velocity.f32(), mom, avg, r,
                                   c),
                 cuda::rmsprop_step(device_index, segs.data(), segs.size(), params.f32(), grads.f32(), velocity.f32(),
                                    mom, avg, r, c));
}

}  // namespace hpcnn::ops
