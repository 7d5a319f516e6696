// Optimizer updates over one contiguous parameter buffer (all of a model's weights), with the
// per-element math in ops/elementwise.h. One call updates the whole model.
// CPU: optimizer_step_cpu.cpp; CUDA: optimizer_step_cuda.cu.
#pragma once

namespace hpcnn {

struct AdamParams {
  float lr, beta1, beta2, eps;
  long long t;  // step number, from 1
};

struct SgdParams {
  float lr, momentum;
  bool nesterov;
};

namespace cpu {
void adam_step(long long count, float* p, const float* g, float* m, float* v, const AdamParams& a);
void sgd_step(long long count, float* p, const float* g, float* velocity, const SgdParams& s);
}  // namespace cpu

namespace cuda {
void adam_step(int device, long long count, float* p, const float* g, float* m, float* v, const AdamParams& a);
void sgd_step(int device, long long count, float* p, const float* g, float* velocity, const SgdParams& s);
}  // namespace cuda

}  // namespace hpcnn
