// The activations' dispatch (ops.h: relu, softmax and the element-wise kinds): checks, then
// activation_cpu.cpp or activation_cuda.cu (activation.h).
#include "ops/ops.h"

#include <string>

#include "ops/activation.h"
#include "ops/dispatch.h"

namespace hpcnn::ops {

void relu_forward(const Tensor& x, Tensor& y) {
  expect_f32("relu", "input", x);
  expect_shape("relu", "output", y, x.shape());
  same_device("relu", {&x, &y});
  HPCNN_DISPATCH(x.device(), cpu::relu_forward(x.numel(), x.f32(), y.f32()),
                 cuda::relu_forward(device_index, x.numel(), x.f32(), y.f32()));
}

void relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  expect_f32("relu backward", "output", y);
  expect_shape("relu backward", "output gradient", dy, y.shape());
  expect_shape("relu backward", "input gradient", dx, y.shape());
  same_device("relu backward", {&y, &dy, &dx});
  HPCNN_DISPATCH(y.device(), cpu::relu_backward(y.numel(), y.f32(), dy.f32(), dx.f32()),
                 cuda::relu_backward(device_index, y.numel(), y.f32(), dy.f32(), dx.f32()));
}

void softmax_forward(const Tensor& x, Tensor& y) {
  int rows, cols;
  rows_cols("softmax", x, rows, cols);
  expect_shape("softmax", "output", y, x.shape());
  same_device("softmax", {&x, &y});
  HPCNN_DISPATCH(x.device(), cpu::softmax_forward(rows, cols, x.f32(), y.f32()),
                 cuda::softmax_forward(device_index, rows, cols, x.f32(), y.f32()));
}

void softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  int rows, cols;
  rows_cols("softmax backward", y, rows, cols);
  expect_shape("softmax backward", "output gradient", dy, y.shape());
  expect_shape("softmax backward", "input gradient", dx, y.shape());
  same_device("softmax backward", {&y, &dy, &dx});
  HPCNN_DISPATCH(y.device(), cpu::softmax_backward(rows, cols, y.f32(), dy.f32(), dx.f32()),
                 cuda::softmax_backward(device_index, rows, cols, y.f32(), dy.f32(), dx.f32()));
}

void activation_forward(Act a, float alpha, const Tensor& x, Tensor& y) {
  const std::string op = std::string(act_name(a));
  expect_f32(op.c_str(), "input", x);
  expect_shape(op.c_str(), "output", y, x.shape());
  same_device(op.c_str(), {&x, &y});
  HPCNN_DISPATCH(x.device(), cpu::act_forward(a, alpha, x.numel(), x.f32(), y.f32()),
                 cuda::act_forward(device_index, a, alpha, x.numel(), x.f32(), y.f32()));
}

void activation_backward(Act a, float alpha, const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dx) {
  const std::string op = std::string(act_name(a)) + " backward";
  expect_f32(op.c_str(), "input", x);
  expect_shape(op.c_str(), "output", y, x.shape());
  expect_shape(op.c_str(), "output gradient", dy, x.shape());
  expect_shape(op.c_str(), "input gradient", dx, x.shape());
  same_device(op.c_str(), {&x, &y, &dy, &dx});
  HPCNN_DISPATCH(x.device(), cpu::act_backward(a, alpha, x.numel(), x.f32(), y.f32(), dy.f32(), dx.f32()),
                 cuda::act_backward(device_index, a, alpha, x.numel(), x.f32(), y.f32(), dy.f32(), dx.f32()));
}

}  // namespace hpcnn::ops
