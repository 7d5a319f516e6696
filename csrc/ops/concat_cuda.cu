// Row copies between pitches on the GPU: one grid-stride kernel over rows x width on the compute
// stream (a device-to-device cudaMemcpy would run on the legacy default stream and wait for
// everything).
#include "core/cuda_context.h"
#include "ops/concat.h"
#include "ops/concat_body.h"

namespace hpcnn::cuda {

namespace {

__global__ void copy_rows_kernel(long long rows, long long width, const float* src, long long src_pitch,
                                 float* dst, long long dst_pitch) {
  const long long count = rows * width;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count; i += (long long)gridDim.x * blockDim.x)
    body::copy_rows_element(i, width, src, src_pitch, dst, dst_pitch);
}

}  // namespace

void copy_rows(int device, long long rows, long long width, const float* src, long long src_pitch, float* dst,
               long long dst_pitch) {
  ContextLock ctx(device);
  if (rows <= 0 || width <= 0) return;
  copy_rows_kernel<<<blocks_for(rows * width), 256, 0, ctx.stream()>>>(rows, width, src, src_pitch, dst, dst_pitch);
  HPCNN_CUDA_CHECK_LAUNCH();
}

}  // namespace hpcnn::cuda
