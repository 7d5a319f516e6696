// Inverted dropout with a counter-based mask: element i of step `stream` is kept with
// probability 1 - rate (ew::dropout_scale), so forward and backward recompute the same mask
// without storing it, and the CPU and GPU masks are identical.
// CPU: dropout_cpu.cpp; CUDA: dropout_cuda.cu.
#pragma once

#include <cstdint>

namespace hpcnn {

namespace cpu {
void dropout_forward(long long count, const float* x, float* y, float rate, uint64_t seed, uint64_t stream);
void dropout_backward(long long count, const float* dy, float* dx, float rate, uint64_t seed, uint64_t stream);
}  // namespace cpu

namespace cuda {
void dropout_forward(int device, long long count, const float* x, float* y, float rate, uint64_t seed,
                     uint64_t stream);
void dropout_backward(int device, long long count, const float* dy, float* dx, float rate, uint64_t seed,
                      uint64_t stream);
}  // namespace cuda

}  // namespace hpcnn
