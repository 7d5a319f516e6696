// Stand-alone activations (the Activation/ReLU layers; Conv2D/Dense fuse theirs): ReLU and
// softmax over the last axis. softmax backward: dx = y * (dy - sum(dy * y)).
// CPU: activation_cpu.cpp; CUDA: activation_cuda.cu.
#pragma once

namespace hpcnn {

namespace cpu {
void relu_forward(long long count, const float* x, float* y);
void relu_backward(long long count, const float* y, const float* dy, float* dx);
void softmax_forward(int rows, int cols, const float* x, float* y);
void softmax_backward(int rows, int cols, const float* y, const float* dy, float* dx);
}  // namespace cpu

namespace cuda {
void relu_forward(int device, long long count, const float* x, float* y);
void relu_backward(int device, long long count, const float* y, const float* dy, float* dx);
void softmax_forward(int device, int rows, int cols, const float* x, float* y);
void softmax_backward(int device, int rows, int cols, const float* y, const float* dy, float* dx);
}  // namespace cuda

}  // namespace hpcnn
