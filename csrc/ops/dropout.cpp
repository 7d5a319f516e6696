// dropout's dispatch (ops.h): checks, then dropout_cpu.cpp or dropout_cuda.cu (dropout.h).
#include "ops/ops.h"

#include <cstdint>

#include "ops/dispatch.h"
#include "ops/dropout.h"

namespace hpcnn::ops {

// Both directions take one tensor `a` to another, `b`, of its shape (forward x -> y, backward
// dy -> dx) with the same arguments: one check and one dispatch for the two.
static void dropout(bool backward, const char* a_name, const Tensor& a, const char* b_name, Tensor& b, float rate,
                    uint64_t seed, uint64_t stream, uint64_t offset) {
  const char* op = backward ? "dropout backward" : "dropout";
  HPCNN_CHECK_ARG(rate >= 0.f && rate < 1.f, "dropout: rate must be in [0, 1), got ", rate);
  expect_f32(op, a_name, a);
  expect_shape(op, b_name, b, a.shape());
  same_device(op, {&a, &b});
  HPCNN_DISPATCH(a.device(),
                 (backward ? cpu::dropout_backward : cpu::dropout_forward)(a.numel(), a.f32(), b.f32(), rate, seed,
                                                                            stream, offset),
                 (backward ? cuda::dropout_backward : cuda::dropout_forward)(device_index, a.numel(), a.f32(),
                                                                              b.f32(), rate, seed, stream, offset));
}

void dropout_forward(const Tensor& x, Tensor& y, float rate, uint64_t seed, uint64_t stream, uint64_t offset) {
  dropout(false, "input", x, "output", y, rate, seed, stream, offset);
}

void dropout_backward(const Tensor& dy, Tensor& dx, float rate, uint64_t seed, uint64_t stream, uint64_t offset) {
  dropout(true, "output gradient", dy, "input gradient", dx, rate, seed, stream, offset);
}

}  // namespace hpcnn::ops
