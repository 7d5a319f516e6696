// Element-wise sums of same-shaped tensors: the Add layer's forward (y = x0 + x1 + ..., summed
// left to right on both backends, so the CPU and the GPU round alike) and the accumulation of a
// gradient where one activation feeds several layers (dst += src). Either may alias its output
// with an input (each element is read before it is written).
// CPU: add_cpu.cpp; CUDA: add_cuda.cu.
#pragma once

namespace hpcnn {

namespace cpu {
void add(long long count, const float* a, const float* b, float* y);
void accumulate(long long count, float* dst, const float* src);
}  // namespace cpu

namespace cuda {
void add(int device, long long count, const float* a, const float* b, float* y);
void accumulate(int device, long long count, float* dst, const float* src);
}  // namespace cuda

}  // namespace hpcnn
