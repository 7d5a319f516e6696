// Augmentation on the GPU (augment.h): one thread per output element, each computing its sample's
// draw and its taps with augment_body.h's functions (a Philox draw per element costs less than
// the element's memory traffic), so the results equal the CPU's bit for bit. Runs on the compute
// stream after the batch's upload and uint8 decode.
#include "core/cuda_context.h"
#include "ops/augment.h"
#include "ops/augment_body.h"

namespace hpcnn::cuda {

namespace {

__global__ void augment_kernel(body::AugmentArgs a, const float* x, float* y) {
  const long long count = a.g.n * a.g.oh * a.g.ow * a.g.c;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count; i += (long long)gridDim.x * blockDim.x)
    y[i] = body::augment_at(a, x, i);
}

}  // namespace

void augment(int device, const AugmentGeometry& g, const AugmentSpec& s, const AugmentDraw& d, const float* x,
             float* y) {
  ContextLock ctx(device);
  const long long count = g.n * g.oh * g.ow * g.c;
  if (count == 0) return;
  augment_kernel<<<blocks_for(count), 256, 0, ctx.stream()>>>(body::AugmentArgs{g, s, d}, x, y);
  HPCNN_CUDA_CHECK_LAUNCH();
}

}  // namespace hpcnn::cuda
