// Inverted dropout on the GPU: the mask of element i is ew::dropout_scale(seed, stream, offset + i, rate),
// the very function the CPU calls (Philox, counter-based), so the masks are equal bit for bit
// and backward recomputes the mask instead of storing it.
#include "core/cuda_context.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"

namespace hpcnn::cuda {

namespace {
__global__ void dropout_kernel(long long count, const float* in, float* out, float rate, uint64_t seed,
                               uint64_t stream, uint64_t offset) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count; i += (long long)gridDim.x * blockDim.x)
    out[i] = in[i] * ew::dropout_scale(seed, stream, offset + static_cast<uint64_t>(i), rate);
}

// out[i] = in[i] * scale(offset + i) for i in [0, count): forward and backward apply the same mask.
void apply_mask(int device, long long count, const float* in, float* out, float rate, uint64_t seed,
                uint64_t stream, uint64_t offset) {
  ContextLock ctx(device);
  if (count == 0) return;
  dropout_kernel<<<blocks_for(count), 256, 0, ctx.stream()>>>(count, in, out, rate, seed, stream, offset);
  HPCNN_CUDA_CHECK_LAUNCH();
}
}  // namespace

void dropout_forward(int device, long long count, const float* x, float* y, float rate, uint64_t seed,
                     uint64_t stream, uint64_t offset) {
  apply_mask(device, count, x, y, rate, seed, stream, offset);
}

void dropout_backward(int device, long long count, const float* dy, float* dx, float rate, uint64_t seed,
                      uint64_t stream, uint64_t offset) {
  apply_mask(device, count, dy, dx, rate, seed, stream, offset);
}

}  // namespace hpcnn::cuda
