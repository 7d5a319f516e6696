// dropout's dispatch (ops.h): checks, then dropout_cpu.cpp or dropout_cuda.cu (dropout.h).
#include "ops/ops.h"

#include <cstdint>

#include "ops/dispatch.h"
#include "ops/dropout.h"

namespace hpcnn::ops {

static void check_rate(float rate) {
  HPCNN_CHECK_ARG(rate >= 0.f && rate < 1.f, "dropout: rate must be in [0, 1), got ", rate);
}

void dropout_forward(const Tensor& x, Tensor& y, float rate, uint64_t seed, uint64_t stream, uint64_t offset) {
  check_rate(rate);
  expect_f32("dropout", "input", x);
  expect_shape("dropout", "output", y, x.shape());
  same_device("dropout", {&x, &y});
  HPCNN_DISPATCH(x.device(), cpu::dropout_forward(x.numel(), x.f32(), y.f32(), rate, seed, stream, offset),
                 cuda::dropout_forward(device_index, x.numel(), x.f32(), y.f32(), rate, seed, stream, offset));
}

void dropout_backward(const Tensor& dy, Tensor& dx, float rate, uint64_t seed, uint64_t stream, uint64_t offset) {
  check_rate(rate);
  expect_f32("dropout backward", "output gradient", dy);
  expect_shape("dropout backward", "input gradient", dx, dy.shape());
  same_device("dropout backward", {&dy, &dx});
  HPCNN_DISPATCH(dy.device(), cpu::dropout_backward(dy.numel(), dy.f32(), dx.f32(), rate, seed, stream, offset),
                 cuda::dropout_backward(device_index, dy.numel(), dy.f32(), dx.f32(), rate, seed, stream, offset));
}

}  // namespace hpcnn::ops
