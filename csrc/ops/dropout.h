// Inverted dropout with a counter-based mask: element i of the tensor is the draw of counter
// `offset + i` of step `stream`, kept with probability 1 - rate (ew::dropout_scale), so forward
// and backward recompute the same mask without storing it, and the CPU and GPU masks are
// identical. `offset` places the tensor in a larger one: a data-parallel replica holding rows
// [r0, r0 + n) of a global batch passes r0 * (elements per row), so that every sample gets the
// mask it would get on one device (the mask depends on the sample's global row, not on the
// replica).
// CPU: dropout_cpu.cpp; CUDA: dropout_cuda.cu.
#pragma once

#include <cstdint>

namespace hpcnn {

namespace cpu {
void dropout_forward(long long count, const float* x, float* y, float rate, uint64_t seed, uint64_t stream,
                     uint64_t offset);
void dropout_backward(long long count, const float* dy, float* dx, float rate, uint64_t seed, uint64_t stream,
                      uint64_t offset);
}  // namespace cpu

namespace cuda {
void dropout_forward(int device, long long count, const float* x, float* y, float rate, uint64_t seed,
                     uint64_t stream, uint64_t offset);
void dropout_backward(int device, long long count, const float* dy, float* dx, float rate, uint64_t seed,
                      uint64_t stream, uint64_t offset);
}  // namespace cuda

}  // namespace hpcnn
